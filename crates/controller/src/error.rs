//! [`ControllerError`]: everything a turn, a replay, a resume or a decision can fail with.

use agentsessions_api::{ApiError, ApprovalRef, StatusCode};
use agentsessions_journal::JournalError;

/// The controller's result type.
pub type Result<T, E = ControllerError> = std::result::Result<T, E>;

/// Why a controller operation failed. Variants mirror the named errors of semantics §8 so the
/// server's one mapping table can match on them; [`ControllerError::status_code`] gives the code
/// the Exec/Resume column of that table assigns.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The journal refused or failed (CAS conflict and stale fence among them).
    #[error(transparent)]
    Journal(#[from] JournalError),

    /// The journal holds events that cannot be grouped into executions as semantics §3.2 and
    /// §3.6 require.
    #[error("invalid execution log: {0}")]
    InvalidExecutionLog(String),

    /// The unfinished execution lost some of its inputs (a crash between EXECUTION_START and the
    /// last INPUT).
    #[error(
        "incomplete invocation: execution {execution_id} recorded {recorded} of {expected} inputs"
    )]
    IncompleteInvocation {
        /// The execution.
        execution_id: String,
        /// INPUT records present.
        recorded: i64,
        /// `input_count` of its EXECUTION_START.
        expected: i64,
    },

    /// An unresolved tool intent was inherited through a fork; the child cannot re-drive it under
    /// its own idempotency namespace.
    #[error(
        "tool call {tool_call_id:?} was recorded before the fork and never resolved; fork at or \
         after its TOOL_RESULT, or Exec a new turn"
    )]
    InheritedToolIntent {
        /// The unresolved call.
        tool_call_id: String,
    },

    /// The harness could not describe itself; nothing was journaled.
    #[error("harness describe failed: {0}")]
    HarnessDescribeFailed(#[source] ApiError),

    /// The recorded harness name differs from the one serving this replay or resume.
    #[error("harness mismatch: journal recorded {recorded:?}, serving {served:?}")]
    HarnessMismatch {
        /// Name in EXECUTION_START.
        recorded: String,
        /// Name of the serving harness.
        served: String,
    },

    /// The recorded harness version differs from the served one (exact comparison).
    #[error("harness version mismatch: journal recorded {recorded:?}, serving {served:?}")]
    HarnessVersionMismatch {
        /// Version in EXECUTION_START.
        recorded: String,
        /// Version the harness describes.
        served: String,
    },

    /// An owned approval request has no receipt yet; new input would continue past it.
    #[error(
        "execution {execution_id} is waiting on approval of tool call {tool_call_id:?}; decide it \
         and resume before sending new input"
    )]
    ApprovalBlocked {
        /// The parked execution.
        execution_id: String,
        /// The gated call.
        tool_call_id: String,
    },

    /// Approvals need a harness that can be replayed statelessly.
    #[error("approval requires a STATELESS_REPLAY harness")]
    ApprovalUnavailable,

    /// An approved call must run on the host but no tool executor is configured.
    #[error("approved tool call needs a tool executor and none is configured")]
    MissingToolExecutor,

    /// A gated tool call that cannot be parked (empty or reused id, legacy recovery).
    #[error("invalid approval call: {0}")]
    InvalidApprovalCall(String),

    /// A harness tried to report a result carrying host-owned approval fields.
    #[error("a reported tool result may not carry approval receipt fields")]
    ApprovalReceiptReport,

    /// An approval decision that does not match an open request.
    #[error("invalid approval decision: {0}")]
    InvalidApprovalDecision(String),

    /// The harness did something other than what the journal recorded.
    #[error("replay diverged: {0}")]
    ReplayDiverged(String),

    /// Replay reached a model (never allowed, I1).
    #[error("replay invoked the model {calls} time(s)")]
    ReplayInvokedModel {
        /// Live calls made.
        calls: u64,
    },

    /// A controller-mediated tool call without an idempotency key.
    #[error("tool call {tool_call_id:?} is controller-mediated but has no idempotency key")]
    MissingIdempotencyKey {
        /// The call.
        tool_call_id: String,
    },

    /// A tool call the host was asked to run without host mediation.
    #[error(
        "tool call {tool_call_id:?} is not controller-mediated; report in-harness results with \
         report()"
    )]
    UnmediatedToolCall {
        /// The call.
        tool_call_id: String,
    },

    /// Tool arguments that cannot be represented losslessly on the wire.
    #[error("invalid tool arguments for call {tool_call_id:?}: {reason}")]
    InvalidToolArgs {
        /// The call.
        tool_call_id: String,
        /// What cannot be represented.
        reason: String,
    },

    /// An operation that needs the session envelope has none.
    #[error("missing session uid")]
    MissingSessionUid,

    /// A model outside the host's policy (fatal for the execution).
    #[error("model is not allowed by the host policy: {model:?}")]
    ModelNotAllowed {
        /// The requested model.
        model: String,
    },

    /// The configured model policy is malformed.
    #[error("invalid model policy: {0}")]
    InvalidModelPolicy(String),

    /// The harness run failed (including a provider failure it returned).
    #[error("harness run failed: {0}")]
    Harness(#[source] ApiError),

    /// The run parked for an approval decision; nothing more was written.
    #[error(
        "parked for approval: execution {} tool call {:?} request seq {}",
        .0.execution_id,
        .0.tool_call_id,
        .0.request_seq
    )]
    Parked(ApprovalRef),

    /// The turn was cancelled through [`crate::Cancellations::cancel`].
    #[error("execution cancelled: {reason}")]
    Cancelled {
        /// The caller's reason.
        reason: String,
    },

    /// The turn's deadline passed.
    #[error("execution deadline exceeded")]
    DeadlineExceeded,

    /// A sink call after the run returned.
    #[error("sink closed")]
    SinkClosed,
}

impl ControllerError {
    /// The gRPC code of the Exec/Resume column of semantics §8 (plus extensions §5).
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::Journal(JournalError::Conflict { .. } | JournalError::Fenced { .. }) => {
                StatusCode::Aborted
            }
            Self::Journal(JournalError::SessionNotFound(_)) => StatusCode::NotFound,
            Self::Journal(_) => StatusCode::Internal,
            Self::InvalidExecutionLog(_)
            | Self::IncompleteInvocation { .. }
            | Self::InheritedToolIntent { .. }
            | Self::HarnessMismatch { .. }
            | Self::HarnessVersionMismatch { .. }
            | Self::ApprovalBlocked { .. }
            | Self::ApprovalUnavailable
            | Self::MissingToolExecutor
            | Self::InvalidApprovalCall(_)
            | Self::ApprovalReceiptReport
            | Self::InvalidApprovalDecision(_)
            | Self::ModelNotAllowed { .. }
            | Self::InvalidModelPolicy(_) => StatusCode::FailedPrecondition,
            Self::HarnessDescribeFailed(ApiError::Status {
                code: StatusCode::Unavailable | StatusCode::DeadlineExceeded,
                ..
            }) => StatusCode::Unavailable,
            Self::HarnessDescribeFailed(_) => StatusCode::Internal,
            Self::Cancelled { .. } => StatusCode::Cancelled,
            Self::DeadlineExceeded => StatusCode::DeadlineExceeded,
            Self::Parked(_) => StatusCode::Ok,
            Self::ReplayDiverged(_)
            | Self::ReplayInvokedModel { .. }
            | Self::MissingIdempotencyKey { .. }
            | Self::UnmediatedToolCall { .. }
            | Self::InvalidToolArgs { .. }
            | Self::MissingSessionUid
            | Self::Harness(_)
            | Self::SinkClosed => StatusCode::Internal,
        }
    }

    /// How a sink hands this error to the harness: parks and cancellation keep their typed
    /// [`ApiError`] so harnesses and transports can match on them; the rest travel as a status
    /// with this error's text.
    pub fn to_api(&self) -> ApiError {
        match self {
            Self::Parked(r) => ApiError::ApprovalParked(r.clone()),
            Self::Cancelled { .. } => ApiError::Cancelled,
            Self::ModelNotAllowed { model } => ApiError::ModelNotAllowed {
                model: model.clone(),
            },
            Self::Harness(e) => e.clone(),
            other => ApiError::status(other.status_code(), other.to_string()),
        }
    }

    /// A short stable name for structured logs (semantics §8 `error_kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Journal(JournalError::Conflict { .. }) => "conflict",
            Self::Journal(JournalError::Fenced { .. }) => "fenced",
            Self::ReplayInvokedModel { .. } => "replay_invoked_model",
            Self::ReplayDiverged(_) => "replay_diverged",
            Self::InvalidExecutionLog(_) | Self::IncompleteInvocation { .. } => {
                "invalid_execution_log"
            }
            Self::HarnessMismatch { .. } => "harness_mismatch",
            Self::HarnessVersionMismatch { .. } => "harness_version_mismatch",
            Self::MissingIdempotencyKey { .. } => "missing_idempotency_key",
            Self::UnmediatedToolCall { .. } => "unmediated_tool_call",
            Self::Cancelled { .. } => "canceled",
            Self::DeadlineExceeded => "deadline_exceeded",
            _ => "operation_failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // semantics §8: CAS conflicts and stale fences are ABORTED; log refusals FAILED_PRECONDITION.
    #[test]
    fn exec_column_codes() {
        let conflict = ControllerError::Journal(JournalError::Conflict {
            session: "s".into(),
            expected: 0,
            actual: 3,
        });
        assert_eq!(conflict.status_code(), StatusCode::Aborted);
        assert_eq!(conflict.kind(), "conflict");
        assert_eq!(
            ControllerError::InvalidExecutionLog("x".into()).status_code(),
            StatusCode::FailedPrecondition
        );
        assert_eq!(
            ControllerError::ReplayDiverged("x".into()).status_code(),
            StatusCode::Internal
        );
        assert_eq!(
            ControllerError::HarnessDescribeFailed(ApiError::status(
                StatusCode::Unavailable,
                "down"
            ))
            .status_code(),
            StatusCode::Unavailable
        );
    }

    // extensions §6: a park keeps its typed value when handed to a harness.
    #[test]
    fn park_travels_typed() {
        let r = ApprovalRef {
            execution_id: "e".into(),
            tool_call_id: "t".into(),
            request_seq: 4,
        };
        let api = ControllerError::Parked(r.clone()).to_api();
        assert!(agentsessions_api::is_park_unwind(&api, &r));
    }
}
