//! Pending tool calls: list those waiting for a decision, approve or deny one, then resume its
//! session.

use agentsessions_cli::output::{RecordJson, compute_name, record_json, session_json, time_text};
use agentsessions_client::{Client, Decision};
use agentsessions_wire::pb;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::args::Decide;
use crate::error::{CliError, parked};
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
    // An ApproveRequest names the request whole (execution, tool call, request seq); what the
    // command line leaves out comes from the session's pending approval, for approve and deny
    // alike.
    let (execution_id, tool_call_id, request_seq) =
        match (args.execution, args.tool_call, args.request_seq) {
            (Some(e), Some(t), Some(r)) => (e, t, r),
            (execution, tool_call, request_seq) => {
                let session = client.get(&uid).await?;
                let Some(p) = session.pending_approval else {
                    return Err(CliError::NoPendingApproval { session: uid });
                };
                let named = execution.is_none_or(|e| e == p.execution_id)
                    && tool_call.is_none_or(|t| t == p.tool_call_id)
                    && request_seq.is_none_or(|r| r == p.request_seq);
                if !named {
                    return Err(CliError::Usage(format!(
                        "session {uid} waits on tool call {:?} (request seq {}, execution {}); \
                         to decide another request, give all of --execution, --tool-call and \
                         --request-seq",
                        p.tool_call_id, p.request_seq, p.execution_id
                    )));
                }
                (p.execution_id, p.tool_call_id, p.request_seq)
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
    })?;
    // The resumed turn may park again, on its next gated call.
    parked(Some(&session))
}

/// `approvals --json`: one pending request per line.
#[derive(Serialize)]
struct Pending<'a> {
    session_uid: &'a str,
    execution_id: &'a str,
    tool_call_id: &'a str,
    request_seq: i64,
    tool: &'a str,
    args: Box<RawValue>,
    reason: &'a str,
    requested_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
}

/// Lists every approval request waiting for a decision that the caller may see, oldest first:
/// the session, the tool and its arguments, and since when it waits.
pub(crate) async fn list(
    client: &mut Client,
    out: &mut Out,
    page_size: i32,
) -> Result<(), CliError> {
    for approval in client.list_approvals(page_size).await? {
        let args = args_json(&approval);
        let since = time_text(approval.requested_at.as_ref());
        let owner = approval
            .owner
            .as_ref()
            .map(|o| o.subject.as_str())
            .filter(|s| !s.is_empty());
        let pending = Pending {
            session_uid: &approval.session_uid,
            execution_id: &approval.execution_id,
            tool_call_id: &approval.tool_call_id,
            request_seq: approval.request_seq,
            tool: &approval.tool,
            args,
            reason: &approval.reason,
            requested_at: since.clone(),
            owner,
        };
        out.either(&pending, || {
            let mut line = format!(
                "{} session={} tool={} args={} tool_call={} request_seq={}",
                since.as_deref().unwrap_or("-"),
                approval.session_uid,
                if approval.tool.is_empty() {
                    "?"
                } else {
                    &approval.tool
                },
                pending.args.get(),
                approval.tool_call_id,
                approval.request_seq
            );
            if !approval.reason.is_empty() {
                line.push_str(&format!(" reason={:?}", approval.reason));
            }
            if let Some(owner) = owner {
                line.push_str(&format!(" owner={owner}"));
            }
            line
        })?;
    }
    Ok(())
}

/// The call's arguments as canonical JSON (`{}` when it has none).
fn args_json(approval: &pb::PendingApproval) -> Box<RawValue> {
    approval
        .args
        .as_ref()
        .and_then(|args| agentsessions_wire::canonical::canonical_message(args).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| RawValue::from_string(text).ok())
        .or_else(|| RawValue::from_string("{}".to_owned()).ok())
        .unwrap_or_default()
}
