//! Deciding a pending tool call: approve or deny it, then resume the session.

use agentsessions_cli::output::{RecordJson, compute_name, record_json, session_json};
use agentsessions_client::{Client, Decision};
use agentsessions_wire::pb;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::args::Decide;
use crate::error::CliError;
use crate::out::Out;

/// `approve --json` / `deny --json`.
#[derive(Serialize)]
struct Decided {
    decision: Option<RecordJson>,
    session: Box<RawValue>,
}

pub(crate) async fn decide(
    client: &mut Client,
    out: &mut Out,
    args: Decide,
    approved: bool,
) -> Result<(), CliError> {
    let uid = args.session;
    let (execution_id, tool_call_id, request_seq) =
        match (args.execution, args.tool_call, args.request_seq) {
            (Some(e), Some(t), Some(r)) => (e, t, r),
            (None, None, None) => {
                let session = client.get(&uid).await?;
                let Some(p) = session.pending_approval else {
                    return Err(CliError::Usage(format!(
                        "session {uid} has no pending approval; if a decision is already \
                         recorded, run `agentctl resume --session {uid}`, or name the request \
                         with --execution --tool-call --request-seq"
                    )));
                };
                (p.execution_id, p.tool_call_id, p.request_seq)
            }
            _ => {
                return Err(CliError::Usage(
                    "--execution, --tool-call and --request-seq go together: give all or none"
                        .into(),
                ));
            }
        };
    let identity = (!args.actor.is_empty()
        || !args.identity_issuer.is_empty()
        || !args.identity_subject.is_empty())
    .then_some(pb::IdentityRef {
        principal: args.actor,
        issuer: args.identity_issuer,
        subject: args.identity_subject,
    });
    let response = client
        .approve(
            &uid,
            Decision {
                execution_id,
                tool_call_id,
                request_seq,
                approved,
                reason: args.reason,
                identity,
            },
        )
        .await?;
    let decision_seq = response.decision.as_ref().map_or(0, |d| d.seq);
    let verb = if approved { "approved" } else { "denied" };
    let session = client
        .resume(&uid)
        .await
        .map_err(|error| CliError::ResumeAfterDecision {
            verb,
            seq: decision_seq,
            error,
        })?;
    let decided = Decided {
        decision: response.decision.as_ref().map(record_json),
        session: session_json(&session),
    };
    out.either(&decided, || {
        format!(
            "session {uid} {verb} seq={decision_seq} resumed compute={} last_seq={}",
            compute_name(&session),
            session.last_seq
        )
    })
}
