//! Small builders and predicates over the generated messages, shared by both sides of
//! `Harness.Connect`.

use agentsessions_api::{ToolResult, ToolResultCode};
use agentsessions_wire::pb;
use agentsessions_wire::pb::controller_frame::Frame;
use agentsessions_wire::pb::event::Body;

/// The END state of a completed execution.
pub(crate) const END_COMPLETED: &str = "COMPLETED";
/// The END state of a failed execution.
pub(crate) const END_FAILED: &str = "FAILED";
/// The END state of an execution the host cancelled.
pub(crate) const END_CANCELED: &str = "CANCELED";

/// Largest frame either side encodes or decodes. A Start frame carries the whole history, so
/// tonic's 4 MiB default would cap sessions far too early.
pub(crate) const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// An event of `kind` for `execution_id` with `body`; no timestamp (the host stamps what it
/// records) and no actor.
pub(crate) fn event(execution_id: &str, kind: pb::EventKind, body: Body) -> pb::Event {
    pb::Event {
        execution_id: execution_id.to_owned(),
        kind: kind.into(),
        body: Some(body),
        ..pb::Event::default()
    }
}

/// A host frame for the stream's session and execution.
pub(crate) fn controller_frame(
    session: &str,
    execution_id: &str,
    frame: Frame,
) -> pb::ControllerFrame {
    pb::ControllerFrame {
        session: session.to_owned(),
        execution_id: execution_id.to_owned(),
        frame: Some(frame),
    }
}

/// The proto name of a frame member, for errors.
pub(crate) fn frame_name(frame: Option<&Frame>) -> &'static str {
    match frame {
        None => "empty",
        Some(Frame::Start(_)) => "start",
        Some(Frame::Cancel(_)) => "cancel",
        Some(Frame::Approval(_)) => "approval",
        Some(Frame::Tool(_)) => "tool",
        Some(Frame::Model(_)) => "model",
        Some(Frame::Park(_)) => "park",
        Some(Frame::MintResult(_)) => "mint_result",
    }
}

/// The proto name of an event kind without its `EVENT_` prefix, as the v0.3.0 API spells kinds.
pub(crate) fn kind_name(kind: pb::EventKind) -> &'static str {
    match kind {
        pb::EventKind::Unspecified => "UNSPECIFIED",
        other => {
            let name = other.as_str_name();
            name.strip_prefix("EVENT_").unwrap_or(name)
        }
    }
}

/// Whether a result carries approval fields: a request or decision seq, a denial code, or a
/// decision. Only the receipt of an approval-gated call may.
pub(crate) fn is_approval_shaped(result: &ToolResult) -> bool {
    result.approval_request_seq != 0
        || result.approval_decision_seq != 0
        || result.code == ToolResultCode::ApprovalDenied
        || result.approval.is_some()
}

#[cfg(test)]
mod tests {
    use agentsessions_api::ApprovalResult;

    use super::*;

    #[test]
    fn approval_fields_make_a_result_approval_shaped() {
        assert!(!is_approval_shaped(&ToolResult::default()));
        let executor_failed = ToolResult {
            is_error: true,
            code: ToolResultCode::ExecutorError,
            ..ToolResult::default()
        };
        assert!(!is_approval_shaped(&executor_failed));
        for shaped in [
            ToolResult {
                approval_request_seq: 3,
                ..ToolResult::default()
            },
            ToolResult {
                approval_decision_seq: 4,
                ..ToolResult::default()
            },
            ToolResult {
                code: ToolResultCode::ApprovalDenied,
                ..ToolResult::default()
            },
            ToolResult {
                approval: Some(ApprovalResult::default()),
                ..ToolResult::default()
            },
        ] {
            assert!(is_approval_shaped(&shaped));
        }
    }

    #[test]
    fn kind_names_drop_the_prefix() {
        assert_eq!(kind_name(pb::EventKind::EventToolCall), "TOOL_CALL");
        assert_eq!(kind_name(pb::EventKind::Unspecified), "UNSPECIFIED");
        assert_eq!(frame_name(None), "empty");
    }
}
