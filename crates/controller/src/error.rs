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
        "execution {execution_id} stopped at the approval of tool call {tool_call_id:?}: decide \
         it (`agentctl approve` or `agentctl deny`; once decided, `agentctl resume`), cancel the \
         turn (`agentctl cancel`), or send the new input with abandon_unfinished (`agentctl exec \
         --abandon`), which closes the turn first"
    )]
    ApprovalBlocked {
        /// The parked execution.
        execution_id: String,
        /// The gated call.
        tool_call_id: String,
    },

    /// The last execution stopped before its END (extensions §9): new
    /// input would leave it behind, its open tool calls unanswered.
    #[error(
        "the last turn (execution {execution_id}) stopped before it ended: resume it \
         (`agentctl resume`), cancel it (`agentctl cancel`), or send the new input with \
         abandon_unfinished (`agentctl exec --abandon`), which closes it first and records its \
         open tool calls as outcome unknown"
    )]
    UnfinishedTurn {
        /// The unfinished execution.
        execution_id: String,
    },

    /// Approvals need a harness that can be replayed statelessly.
    #[error("approval requires a STATELESS_REPLAY harness")]
    ApprovalUnavailable,

    /// An approved call must run on the host but no tool executor is configured.
    #[error(
        "approved tool call needs a tool executor and none is configured on this host; resume \
         on a host that runs it, or cancel the turn (`agentctl cancel`)"
    )]
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

    /// The model provider failed and the harness returned that failure: the caller sees the
    /// provider's code (a 429 is `RESOURCE_EXHAUSTED`, a timeout `DEADLINE_EXCEEDED`), not the
    /// `INTERNAL` of any other harness failure.
    #[error("model call failed: {0}")]
    ModelFailed(#[source] ApiError),

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

    /// The host began shutting down while the turn ran
    /// ([`crate::Cancellations::interrupt_all`]): it stopped where it was, its ERROR note says
    /// so, and a Resume (on this host once it is back, or on another) continues it.
    #[error("host shutting down; resume to continue")]
    HostShuttingDown,

    /// A sink call after the run returned.
    #[error("sink closed")]
    SinkClosed,
}

impl ControllerError {
    /// The gRPC code of the Exec/Resume column of semantics §8 (plus extensions §4–§6). Every
    /// variant has its row here, with no catch-all, so a new variant forces a decision; wrapped
    /// journal and SPI errors take the rows of [`JournalError::status_code`] and
    /// [`ApiError::status_code`].
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::Journal(e) => e.status_code(),
            Self::InvalidExecutionLog(_)
            | Self::IncompleteInvocation { .. }
            | Self::InheritedToolIntent { .. }
            | Self::HarnessMismatch { .. }
            | Self::HarnessVersionMismatch { .. }
            | Self::ApprovalBlocked { .. }
            | Self::UnfinishedTurn { .. }
            | Self::ApprovalUnavailable
            | Self::MissingToolExecutor
            | Self::InvalidApprovalCall(_)
            | Self::ApprovalReceiptReport
            | Self::InvalidApprovalDecision(_)
            | Self::ModelNotAllowed { .. }
            | Self::InvalidModelPolicy(_) => StatusCode::FailedPrecondition,
            // semantics §2.3 step 4: a peer that is down or timed out is unavailable; anything else
            // is the harness failing.
            Self::HarnessDescribeFailed(e) => {
                if matches!(
                    e.status_code(),
                    StatusCode::Unavailable | StatusCode::DeadlineExceeded
                ) {
                    StatusCode::Unavailable
                } else {
                    StatusCode::Internal
                }
            }
            Self::Cancelled { .. } => StatusCode::Cancelled,
            Self::DeadlineExceeded => StatusCode::DeadlineExceeded,
            // Retryable: a Resume once a host serves again continues the turn.
            Self::HostShuttingDown => StatusCode::Unavailable,
            Self::Parked(_) => StatusCode::Ok,
            Self::ModelFailed(e) => e.status_code(),
            // semantics §2.8: a harness Run error (a provider error among them) is INTERNAL
            // whatever code the harness gave it.
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

    /// How a sink hands this error to the harness: parks, cancellation and a refused model keep
    /// their typed [`ApiError`] so harnesses and transports can match on them; the harness's own
    /// error goes back as it came; the rest travel as a status with [`Self::status_code`] and
    /// this error's text. Either way the harness sees the code the Sessions side reports.
    pub fn to_api(&self) -> ApiError {
        match self {
            Self::Parked(r) => ApiError::ApprovalParked(r.clone()),
            Self::Cancelled { .. } => ApiError::Cancelled,
            Self::ModelNotAllowed { model } => ApiError::ModelNotAllowed {
                model: model.clone(),
            },
            Self::Harness(e) | Self::ModelFailed(e) => e.clone(),
            Self::Journal(_)
            | Self::InvalidExecutionLog(_)
            | Self::IncompleteInvocation { .. }
            | Self::InheritedToolIntent { .. }
            | Self::HarnessDescribeFailed(_)
            | Self::HarnessMismatch { .. }
            | Self::HarnessVersionMismatch { .. }
            | Self::ApprovalBlocked { .. }
            | Self::UnfinishedTurn { .. }
            | Self::ApprovalUnavailable
            | Self::MissingToolExecutor
            | Self::InvalidApprovalCall(_)
            | Self::ApprovalReceiptReport
            | Self::InvalidApprovalDecision(_)
            | Self::ReplayDiverged(_)
            | Self::ReplayInvokedModel { .. }
            | Self::MissingIdempotencyKey { .. }
            | Self::UnmediatedToolCall { .. }
            | Self::InvalidToolArgs { .. }
            | Self::MissingSessionUid
            | Self::InvalidModelPolicy(_)
            | Self::DeadlineExceeded
            | Self::HostShuttingDown
            | Self::SinkClosed => ApiError::status(self.status_code(), self.to_string()),
        }
    }

    /// A short stable name for structured logs (semantics §8 controller-level `error_kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Journal(e) => journal_kind(e),
            Self::ReplayInvokedModel { .. } => "replay_invoked_model",
            Self::ReplayDiverged(_) => "replay_diverged",
            Self::InvalidExecutionLog(_)
            | Self::IncompleteInvocation { .. }
            | Self::InheritedToolIntent { .. } => "invalid_execution_log",
            Self::HarnessMismatch { .. } => "harness_mismatch",
            Self::HarnessVersionMismatch { .. } => "harness_version_mismatch",
            Self::MissingIdempotencyKey { .. } => "missing_idempotency_key",
            Self::UnmediatedToolCall { .. } => "unmediated_tool_call",
            Self::Cancelled { .. } => "canceled",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::HostShuttingDown => code_kind(StatusCode::Unavailable),
            Self::HarnessDescribeFailed(_)
            | Self::ApprovalBlocked { .. }
            | Self::UnfinishedTurn { .. }
            | Self::ApprovalUnavailable
            | Self::MissingToolExecutor
            | Self::InvalidApprovalCall(_)
            | Self::ApprovalReceiptReport
            | Self::InvalidApprovalDecision(_)
            | Self::InvalidToolArgs { .. }
            | Self::MissingSessionUid
            | Self::ModelNotAllowed { .. }
            | Self::InvalidModelPolicy(_)
            | Self::Harness(_)
            | Self::ModelFailed(_)
            | Self::Parked(_)
            | Self::SinkClosed => "operation_failed",
        }
    }
}

/// The `error_kind` of a journal error: `conflict` and `fenced` by name (controller-level
/// kinds), the rest by their code (service-level kinds, semantics §8).
pub fn journal_kind(err: &JournalError) -> &'static str {
    match err {
        JournalError::Conflict { .. } => "conflict",
        JournalError::Fenced { .. } => "fenced",
        JournalError::SessionNotFound(_)
        | JournalError::HarnessNotFound(_)
        | JournalError::InvalidPageToken(_)
        | JournalError::InvalidArgument(_)
        | JournalError::InvalidEvent(_)
        | JournalError::NotJournalable(_)
        | JournalError::SessionExists(_)
        | JournalError::HarnessExists(_)
        | JournalError::HarnessNameReserved(_)
        | JournalError::UnsupportedSchema { .. }
        | JournalError::Closed
        | JournalError::CommitFailed { .. }
        | JournalError::Storage(_)
        | JournalError::Undecodable { .. }
        | JournalError::Io(_)
        | JournalError::ImportMismatch { .. } => code_kind(err.status_code()),
    }
}

/// The service-level `error_kind` of a code (semantics §8): `conflict` for ABORTED, else the
/// code's own name.
pub fn code_kind(code: StatusCode) -> &'static str {
    match code {
        StatusCode::Aborted => "conflict",
        StatusCode::FailedPrecondition => "failed_precondition",
        StatusCode::InvalidArgument => "invalid_argument",
        StatusCode::Cancelled => "canceled",
        StatusCode::DeadlineExceeded => "deadline_exceeded",
        StatusCode::Unavailable => "unavailable",
        StatusCode::NotFound => "not_found",
        StatusCode::AlreadyExists => "already_exists",
        StatusCode::PermissionDenied => "permission_denied",
        StatusCode::Unauthenticated => "unauthenticated",
        StatusCode::Ok => "ok",
        StatusCode::Unknown
        | StatusCode::ResourceExhausted
        | StatusCode::OutOfRange
        | StatusCode::Unimplemented
        | StatusCode::Internal
        | StatusCode::DataLoss => "internal",
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_wire::WireError;

    use super::*;

    fn park() -> ApprovalRef {
        ApprovalRef {
            execution_id: "e".into(),
            tool_call_id: "t".into(),
            request_seq: 4,
        }
    }

    /// Every variant with the code semantics §8 (Exec/Resume column, extensions §4–§6) gives it.
    fn rows() -> Vec<(ControllerError, StatusCode, &'static str)> {
        use ControllerError as E;
        use StatusCode as C;
        let s = String::new;
        vec![
            // semantics §8: eventlog ErrConflict / ErrFenced are ABORTED.
            (
                E::Journal(JournalError::Conflict {
                    session: s(),
                    expected: 0,
                    actual: 3,
                }),
                C::Aborted,
                "conflict",
            ),
            (
                E::Journal(JournalError::Fenced {
                    session: s(),
                    fence: 1,
                    current: 2,
                }),
                C::Aborted,
                "fenced",
            ),
            // A retryable commit failure is UNAVAILABLE however it reaches the client.
            (
                E::Journal(JournalError::CommitFailed {
                    reason: s(),
                    retryable: true,
                }),
                C::Unavailable,
                "unavailable",
            ),
            (
                E::InvalidExecutionLog(s()),
                C::FailedPrecondition,
                "invalid_execution_log",
            ),
            (
                E::IncompleteInvocation {
                    execution_id: s(),
                    recorded: 1,
                    expected: 2,
                },
                C::FailedPrecondition,
                "invalid_execution_log",
            ),
            (
                E::InheritedToolIntent { tool_call_id: s() },
                C::FailedPrecondition,
                "invalid_execution_log",
            ),
            // semantics §2.3 step 4: an unavailable or timed-out peer is UNAVAILABLE, else
            // INTERNAL.
            (
                E::HarnessDescribeFailed(ApiError::status(C::Unavailable, "down")),
                C::Unavailable,
                "operation_failed",
            ),
            (
                E::HarnessDescribeFailed(ApiError::status(C::DeadlineExceeded, "slow").wrap("d")),
                C::Unavailable,
                "operation_failed",
            ),
            (
                E::HarnessDescribeFailed(ApiError::status(C::Internal, "boom")),
                C::Internal,
                "operation_failed",
            ),
            (
                E::HarnessMismatch {
                    recorded: s(),
                    served: s(),
                },
                C::FailedPrecondition,
                "harness_mismatch",
            ),
            (
                E::HarnessVersionMismatch {
                    recorded: s(),
                    served: s(),
                },
                C::FailedPrecondition,
                "harness_version_mismatch",
            ),
            (
                E::ApprovalBlocked {
                    execution_id: s(),
                    tool_call_id: s(),
                },
                C::FailedPrecondition,
                "operation_failed",
            ),
            // extensions §9: new input is refused until the turn is
            // resumed, cancelled or abandoned.
            (
                E::UnfinishedTurn { execution_id: s() },
                C::FailedPrecondition,
                "operation_failed",
            ),
            (
                E::ApprovalUnavailable,
                C::FailedPrecondition,
                "operation_failed",
            ),
            (
                E::MissingToolExecutor,
                C::FailedPrecondition,
                "operation_failed",
            ),
            (
                E::InvalidApprovalCall(s()),
                C::FailedPrecondition,
                "operation_failed",
            ),
            (
                E::ApprovalReceiptReport,
                C::FailedPrecondition,
                "operation_failed",
            ),
            (
                E::InvalidApprovalDecision(s()),
                C::FailedPrecondition,
                "operation_failed",
            ),
            (E::ReplayDiverged(s()), C::Internal, "replay_diverged"),
            (
                E::ReplayInvokedModel { calls: 1 },
                C::Internal,
                "replay_invoked_model",
            ),
            (
                E::MissingIdempotencyKey { tool_call_id: s() },
                C::Internal,
                "missing_idempotency_key",
            ),
            (
                E::UnmediatedToolCall { tool_call_id: s() },
                C::Internal,
                "unmediated_tool_call",
            ),
            (
                E::InvalidToolArgs {
                    tool_call_id: s(),
                    reason: s(),
                },
                C::Internal,
                "operation_failed",
            ),
            (E::MissingSessionUid, C::Internal, "operation_failed"),
            // extensions §4: the host's policy, not the caller's argument.
            (
                E::ModelNotAllowed { model: "m".into() },
                C::FailedPrecondition,
                "operation_failed",
            ),
            (
                E::InvalidModelPolicy(s()),
                C::FailedPrecondition,
                "operation_failed",
            ),
            // semantics §2.8: harness Run errors are INTERNAL whatever code the harness chose.
            (
                E::Harness(ApiError::status(C::Unavailable, "provider down")),
                C::Internal,
                "operation_failed",
            ),
            // Provider errors: a provider failure the harness returned keeps the provider's code.
            (
                E::ModelFailed(ApiError::status(C::ResourceExhausted, "http 429")),
                C::ResourceExhausted,
                "operation_failed",
            ),
            (
                E::ModelFailed(ApiError::status(C::DeadlineExceeded, "timeout")),
                C::DeadlineExceeded,
                "operation_failed",
            ),
            // semantics §8: api.ErrApprovalParked is OK for Exec and Resume.
            (E::Parked(park()), C::Ok, "operation_failed"),
            (E::Cancelled { reason: s() }, C::Cancelled, "canceled"),
            (
                E::DeadlineExceeded,
                C::DeadlineExceeded,
                "deadline_exceeded",
            ),
            (E::SinkClosed, C::Internal, "operation_failed"),
            // A turn the host's shutdown stopped is resumable: retry (Resume) later.
            (E::HostShuttingDown, C::Unavailable, "unavailable"),
        ]
    }

    #[test]
    fn every_variant_has_its_code_and_kind() {
        for (err, code, kind) in rows() {
            assert_eq!(err.status_code(), code, "{err}");
            assert_eq!(err.kind(), kind, "{err}");
        }
    }

    // The harness side and the Sessions side agree: what a sink hands the harness carries the
    // code the Sessions API reports. The one exception is the harness's own error, which goes
    // back to it unchanged while the client sees INTERNAL (semantics §2.8).
    #[test]
    fn the_harness_sees_the_code_the_client_sees() {
        for (err, code, _) in rows() {
            if matches!(err, ControllerError::Harness(_)) {
                continue;
            }
            assert_eq!(err.to_api().status_code(), code, "{err}");
        }
    }

    // semantics §8: "store/read/decode failures" are INTERNAL; the rest of the journal's rows.
    #[test]
    fn journal_rows() {
        use StatusCode as C;
        let rows = [
            (JournalError::SessionNotFound("s".into()), C::NotFound),
            (JournalError::HarnessNotFound("h".into()), C::NotFound),
            (JournalError::SessionExists("s".into()), C::AlreadyExists),
            (
                JournalError::InvalidPageToken("t".into()),
                C::InvalidArgument,
            ),
            (
                JournalError::InvalidArgument("x".into()),
                C::InvalidArgument,
            ),
            (
                JournalError::InvalidEvent(WireError::MissingField { field: "x".into() }),
                C::InvalidArgument,
            ),
            (JournalError::NotJournalable("PARKED"), C::InvalidArgument),
            (
                JournalError::UnsupportedSchema {
                    found: 9,
                    supported: 1,
                },
                C::FailedPrecondition,
            ),
            (
                JournalError::Undecodable {
                    session: "s".into(),
                    seq: 1,
                    reason: "x".into(),
                },
                C::Internal,
            ),
            (JournalError::HarnessExists("h".into()), C::AlreadyExists),
            (
                JournalError::HarnessNameReserved("h".into()),
                C::AlreadyExists,
            ),
            (JournalError::Io(std::io::Error::other("disk")), C::Internal),
            (
                JournalError::CommitFailed {
                    reason: "disk I/O error".into(),
                    retryable: false,
                },
                C::Internal,
            ),
            // Disk faults: a full disk wrote nothing and clears once space is freed; retry later.
            (
                JournalError::CommitFailed {
                    reason: "database or disk is full".into(),
                    retryable: true,
                },
                C::Unavailable,
            ),
            (
                JournalError::ImportMismatch {
                    seq: 1,
                    reason: "x".into(),
                },
                C::Internal,
            ),
            (JournalError::Closed, C::Unavailable),
        ];
        for (err, code) in rows {
            assert_eq!(err.status_code(), code, "{err}");
            assert!(!journal_kind(&err).is_empty());
        }
    }

    // extensions §6: a park keeps its typed value when handed to a harness.
    #[test]
    fn park_travels_typed() {
        let api = ControllerError::Parked(park()).to_api();
        assert!(agentsessions_api::is_park_unwind(&api, &park()));
    }
}
