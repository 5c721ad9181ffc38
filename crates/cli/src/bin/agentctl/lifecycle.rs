//! A session's compute: suspend, resume and cancel.

use agentsessions_cli::output::{compute_name, session_json};
use agentsessions_client::{Client, uid_of};
use agentsessions_wire::pb;

use crate::error::{CliError, parked};
use crate::out::Out;

/// `session <uid> <op> compute=… last_seq=…`: the text after a state change.
pub(crate) fn transition(session: &pb::Session, op: &str) -> String {
    format!(
        "session {} {op} compute={} last_seq={}",
        uid_of(session),
        compute_name(session),
        session.last_seq
    )
}

pub(crate) async fn suspend(client: &mut Client, out: &mut Out, uid: &str) -> Result<(), CliError> {
    let session = client.suspend(uid).await?;
    out.either(&session_json(&session), || transition(&session, "suspend"))
}

pub(crate) async fn resume(client: &mut Client, out: &mut Out, uid: &str) -> Result<(), CliError> {
    let session = client.resume(uid).await?;
    out.either(&session_json(&session), || transition(&session, "resume"))?;
    parked(Some(&session))
}

pub(crate) async fn cancel(
    client: &mut Client,
    out: &mut Out,
    uid: &str,
    execution: &str,
    reason: &str,
) -> Result<(), CliError> {
    let session = client.cancel(uid, execution, reason).await?;
    out.either(&session_json(&session), || transition(&session, "cancel"))
}
