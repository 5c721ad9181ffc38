//! The JSON the API answers with. Sessions and events are their canonical proto3-JSON (proto
//! field names, enum names, `int64` as strings: the form the chain's hashes are defined on), so
//! what a script reads here is what `agentctl --json` prints and what an auditor hashes.

use agentsessions_api::Action;
use agentsessions_wire::canonical::{Canonical, canonical_event, canonical_message};
use agentsessions_wire::pb;
use serde::Serialize;
use serde_json::value::RawValue;

/// A message as canonical JSON, `fallback` when it cannot be represented.
pub(crate) fn canonical<T: Canonical>(message: &T, fallback: &str) -> Box<RawValue> {
    raw(canonical_message(message).ok(), fallback)
}

fn raw(bytes: Option<Vec<u8>>, fallback: &str) -> Box<RawValue> {
    bytes
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| RawValue::from_string(text).ok())
        .or_else(|| RawValue::from_string(fallback.to_owned()).ok())
        .unwrap_or_default()
}

/// A wire time as RFC 3339 UTC text; `None` when unset or out of range.
pub(crate) fn time_text(time: Option<&prost_types::Timestamp>) -> Option<String> {
    let quoted = canonical_message(time?).ok()?;
    let text = String::from_utf8(quoted).ok()?;
    Some(text.trim_matches('"').to_owned())
}

/// One record: its envelope around the canonical JSON of its event.
#[derive(Debug, Serialize)]
pub(crate) struct RecordJson {
    pub(crate) seq: i64,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
    /// When it was committed (RFC 3339 UTC); absent for a record stored without a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) commit_time: Option<String>,
    pub(crate) event: Box<RawValue>,
}

impl From<&pb::LogRecord> for RecordJson {
    fn from(record: &pb::LogRecord) -> Self {
        let event = record
            .event
            .as_ref()
            .and_then(|event| canonical_event(event).ok());
        Self {
            seq: record.seq,
            prev_hash: record.prev_hash.clone(),
            hash: record.content_hash.clone(),
            commit_time: time_text(record.commit_time.as_ref()),
            event: raw(event, "null"),
        }
    }
}

/// A session and what the caller may do to it.
#[derive(Debug, Serialize)]
pub(crate) struct SessionView {
    pub(crate) session: Box<RawValue>,
    /// The actions the caller may take (`read`, `approve`, `cancel` …), by their policy names.
    pub(crate) permissions: Vec<&'static str>,
    /// For a turn that has not ended, what state it is in and what moves it on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_step: Option<NextStep>,
}

impl SessionView {
    pub(crate) fn new(session: &pb::Session, permissions: &[Action]) -> Self {
        Self {
            session: canonical(session, "{}"),
            permissions: permissions.iter().map(|action| action.as_str()).collect(),
            next_step: NextStep::of(session),
        }
    }
}

/// What a session whose turn has not ended is waiting for, and the one action that moves it on
/// (extensions §9). The console draws it above the session's records.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub(crate) struct NextStep {
    /// `RUNNING`, `AWAITING` or `INTERRUPTED`.
    pub(crate) state: &'static str,
    /// What the state means, in a sentence.
    pub(crate) says: &'static str,
    /// The action that moves the turn on: `cancel`, `decide` or `resume`.
    pub(crate) action: &'static str,
    /// The way to drop the turn instead, when there is one: `abandon` (a Cancel: its open tool
    /// calls are recorded as outcome unknown, or not run, and it ends CANCELED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) instead: Option<&'static str>,
}

impl NextStep {
    /// The next step of `session`; `None` when its last turn has ended (or none began).
    pub(crate) fn of(session: &pb::Session) -> Option<Self> {
        match pb::ExecState::try_from(session.exec_state).ok()? {
            pb::ExecState::ExecRunning => Some(Self {
                state: "RUNNING",
                says: "A turn is running on the host.",
                action: "cancel",
                instead: None,
            }),
            pb::ExecState::ExecAwaiting => Some(Self {
                state: "AWAITING",
                says: "The turn waits for a decision on a tool call: approve or deny it (the turn \
                       then runs on), or abandon the turn (the call does not run).",
                action: "decide",
                instead: Some("abandon"),
            }),
            pb::ExecState::ExecInterrupted => Some(Self {
                state: "INTERRUPTED",
                says: "The turn stopped before it ended (its host went away, it failed, or its \
                       approval was decided and it was not run on yet): resume runs it on, \
                       calling no recorded effect twice; abandon closes it, recording its open \
                       tool calls as outcome unknown.",
                action: "resume",
                instead: Some("abandon"),
            }),
            pb::ExecState::Unspecified
            | pb::ExecState::ExecPending
            | pb::ExecState::ExecCompleted
            | pb::ExecState::ExecFailed
            | pb::ExecState::ExecCanceled => None,
        }
    }
}

/// A pending approval, and whether the caller may decide it.
#[derive(Debug, Serialize)]
pub(crate) struct ApprovalJson {
    pub(crate) session_uid: String,
    pub(crate) execution_id: String,
    pub(crate) tool_call_id: String,
    pub(crate) request_seq: i64,
    pub(crate) tool: String,
    /// The tool call's arguments as JSON.
    pub(crate) args: Box<RawValue>,
    pub(crate) reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) requested_at: Option<String>,
    pub(crate) project: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<Box<RawValue>>,
    pub(crate) can_decide: bool,
}

impl ApprovalJson {
    pub(crate) fn new(approval: pb::PendingApproval, can_decide: bool) -> Self {
        let args = approval
            .args
            .as_ref()
            .map_or_else(|| raw(None, "{}"), |args| canonical(args, "{}"));
        Self {
            args,
            requested_at: time_text(approval.requested_at.as_ref()),
            owner: approval
                .owner
                .as_ref()
                .filter(|owner| !owner.subject.is_empty())
                .map(|owner| canonical(owner, "null")),
            session_uid: approval.session_uid,
            execution_id: approval.execution_id,
            tool_call_id: approval.tool_call_id,
            request_seq: approval.request_seq,
            tool: approval.tool,
            reason: approval.reason,
            project: approval.project,
            can_decide,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_carry_their_commit_time_and_canonical_event() {
        let record = pb::LogRecord {
            seq: 3,
            prev_hash: "aa".into(),
            content_hash: "bb".into(),
            event: Some(pb::Event {
                kind: pb::EventKind::EventOutput as i32,
                ..pb::Event::default()
            }),
            commit_time: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 5_000_000,
            }),
            ..pb::LogRecord::default()
        };
        let json = serde_json::to_value(RecordJson::from(&record)).unwrap();
        assert_eq!(json["seq"], 3);
        assert_eq!(json["commit_time"], "2023-11-14T22:13:20.005Z");
        assert_eq!(json["event"]["kind"], "EVENT_OUTPUT");
    }

    // extensions §9: a session whose turn has not ended says what it
    // waits for and the action that moves it on; one whose turn ended says nothing.
    #[test]
    fn unfinished_turns_name_their_next_step() {
        let step = |state: pb::ExecState| {
            NextStep::of(&pb::Session {
                exec_state: state as i32,
                ..pb::Session::default()
            })
            .map(|step| (step.state, step.action, step.instead))
        };
        assert_eq!(
            step(pb::ExecState::ExecAwaiting),
            Some(("AWAITING", "decide", Some("abandon")))
        );
        assert_eq!(
            step(pb::ExecState::ExecInterrupted),
            Some(("INTERRUPTED", "resume", Some("abandon")))
        );
        assert_eq!(
            step(pb::ExecState::ExecRunning),
            Some(("RUNNING", "cancel", None))
        );
        for ended in [
            pb::ExecState::ExecCompleted,
            pb::ExecState::ExecCanceled,
            pb::ExecState::ExecFailed,
            pb::ExecState::ExecPending,
        ] {
            assert_eq!(step(ended), None);
        }
        let view = SessionView::new(
            &pb::Session {
                exec_state: pb::ExecState::ExecInterrupted as i32,
                ..pb::Session::default()
            },
            &[Action::Resume],
        );
        let json = serde_json::to_value(view).unwrap();
        assert_eq!(json["next_step"]["action"], "resume");
    }
}
