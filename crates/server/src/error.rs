//! The one table from every error the service can meet to a gRPC status (semantics §8 plus
//! extensions §3 and §5). Handlers return [`ServerError`]; only [`ServerError::status`] decides
//! codes, so a row of the table is changed in exactly one place.

use agentsessions_api::{Action, ApiError, StatusCode};
use agentsessions_controller::ControllerError;
use agentsessions_journal::JournalError;
use agentsessions_placement::PlacementError;
use tonic::{Code, Status};

/// Everything a Sessions RPC can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A request field is missing or malformed.
    #[error("{0}")]
    InvalidArgument(String),
    /// No session with this uid.
    #[error("session {0:?} not found")]
    SessionNotFound(String),
    /// The harness name is not served here.
    #[error("unknown harness {name:?}; this server serves: {served}")]
    UnknownHarness {
        /// The name asked for.
        name: String,
        /// The names served, comma separated.
        served: String,
    },
    /// Another operation holds the session on this host.
    #[error("session {0:?} is busy with another operation; retry when it finishes")]
    SessionBusy(String),
    /// The harness reports another descriptor id than its registration expects.
    #[error(
        "harness {harness:?} reports descriptor id {reported:?}, but its registration expects {expected:?}"
    )]
    DescriptorMismatch {
        /// The harness.
        harness: String,
        /// The expected id.
        expected: String,
        /// What it reported.
        reported: String,
    },
    /// No harness registered under the name.
    #[error("harness {0:?} is not registered")]
    HarnessNotFound(String),
    /// The harness is retired: new sessions cannot select it.
    #[error("harness {0:?} is retired; existing sessions keep it, new sessions must pick another")]
    HarnessRetired(String),
    /// A name a registration may not take.
    #[error("{0}")]
    AlreadyExists(String),
    /// The harness needs memory snapshots and the compute behind it cannot take them.
    #[error(
        "harness {harness:?} requires memory snapshots, which this server's runtime cannot take; \
         serve it on a memory-snapshot runtime"
    )]
    Unplaceable {
        /// The harness.
        harness: String,
    },
    /// A REQUIRES_MEMORY_SNAPSHOT session can fork only at its head.
    #[error("a memory-snapshot harness forks only at the head (seq {head}), not at seq {at}")]
    ForkNotAtHead {
        /// The requested seq.
        at: i64,
        /// The current head.
        head: i64,
    },
    /// The session is being deleted (extensions §3).
    #[error("session {0:?} is pending deletion; it accepts no further effects")]
    DeletionPending(String),
    /// Cancel found nothing to stop.
    #[error("no execution of session {session:?} is running on this host{detail}")]
    NothingToCancel {
        /// The session.
        session: String,
        /// Which execution was asked for, if any.
        detail: String,
    },
    /// A recorded approval tuple the session does not hold.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The controller refused or failed.
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// The journal refused or failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Placement refused or failed (routing, admission, runtime, guard).
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// The authorization policy denied the call (extensions §2). The message names the action
    /// only: whether the session exists, and whose it is, stays undisclosed.
    #[error("permission denied: this caller may not perform {:?} here", .0.as_str())]
    PermissionDenied(Action),
    /// The authorization policy failed without deciding; its reason is in its own logs, never
    /// in the status.
    #[error("authorization could not be decided; the call was not performed")]
    AuthorizationFailed,
    /// A stored or produced value that does not convert.
    #[error("internal: {0}")]
    Internal(String),
}

/// Results of the service.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

impl ServerError {
    /// The gRPC code of this error (the table).
    pub fn code(&self) -> Code {
        match self {
            Self::InvalidArgument(_) | Self::UnknownHarness { .. } => Code::InvalidArgument,
            Self::SessionNotFound(_) | Self::HarnessNotFound(_) => Code::NotFound,
            Self::SessionBusy(_) => Code::Aborted,
            Self::AlreadyExists(_) => Code::AlreadyExists,
            Self::Unplaceable { .. }
            | Self::DescriptorMismatch { .. }
            | Self::HarnessRetired(_)
            | Self::ForkNotAtHead { .. }
            | Self::DeletionPending(_)
            | Self::NothingToCancel { .. }
            | Self::FailedPrecondition(_) => Code::FailedPrecondition,
            Self::Controller(e) => code_of(e.status_code()),
            Self::Journal(e) => journal_code(e),
            Self::Placement(e) => placement_code(e),
            Self::PermissionDenied(_) => Code::PermissionDenied,
            Self::AuthorizationFailed | Self::Internal(_) => Code::Internal,
        }
    }

    /// The status a client receives: the table's code with a message a person can act on.
    pub fn status(&self) -> Status {
        Status::new(self.code(), self.to_string())
    }

    /// A stable, low-cardinality name for logs (`error_kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidArgument(_) => "invalid_argument",
            Self::SessionNotFound(_) | Self::HarnessNotFound(_) => "not_found",
            Self::UnknownHarness { .. } => "unknown_harness",
            Self::SessionBusy(_) => "session_busy",
            Self::Unplaceable { .. } | Self::ForkNotAtHead { .. } => "unplaceable",
            Self::DescriptorMismatch { .. } => "descriptor_mismatch",
            Self::HarnessRetired(_) => "failed_precondition",
            Self::AlreadyExists(_) => "already_exists",
            Self::DeletionPending(_) => "deletion_pending",
            Self::NothingToCancel { .. } | Self::FailedPrecondition(_) => "failed_precondition",
            Self::Controller(e) => e.kind(),
            Self::Journal(e) => match journal_code(e) {
                Code::Aborted => "conflict",
                Code::NotFound => "not_found",
                Code::InvalidArgument => "invalid_argument",
                _ => "internal",
            },
            Self::Placement(e) => e.kind(),
            Self::PermissionDenied(_) => "permission_denied",
            Self::AuthorizationFailed => "authorization_failed",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<ServerError> for Status {
    fn from(err: ServerError) -> Self {
        err.status()
    }
}

impl From<ApiError> for ServerError {
    fn from(err: ApiError) -> Self {
        Self::Controller(ControllerError::Harness(err))
    }
}

fn journal_code(err: &JournalError) -> Code {
    match err {
        JournalError::Conflict { .. } | JournalError::Fenced { .. } => Code::Aborted,
        JournalError::SessionNotFound(_) | JournalError::HarnessNotFound(_) => Code::NotFound,
        JournalError::InvalidPageToken(_)
        | JournalError::InvalidArgument(_)
        | JournalError::InvalidEvent(_)
        | JournalError::NotJournalable(_) => Code::InvalidArgument,
        JournalError::HarnessExists(_) | JournalError::HarnessNameReserved(_) => {
            Code::AlreadyExists
        }
        JournalError::UnsupportedSchema { .. } => Code::FailedPrecondition,
        JournalError::CommitFailed { .. } | JournalError::Closed => Code::Unavailable,
        _ => Code::Internal,
    }
}

/// Placement's rows (semantics §8 placement column, extensions §3 and §5).
fn placement_code(err: &PlacementError) -> Code {
    match err {
        PlacementError::UnknownHarness { .. }
        | PlacementError::ForkOutOfRange { .. }
        | PlacementError::ForkCount { .. }
        | PlacementError::ChildNames { .. } => Code::InvalidArgument,
        PlacementError::NameTaken { .. } => Code::AlreadyExists,
        PlacementError::SessionBusy(_) => Code::Aborted,
        PlacementError::Unplaceable { .. }
        | PlacementError::DescriptorMismatch { .. }
        | PlacementError::RecordedHarnessNotServed { .. }
        | PlacementError::Pinned { .. }
        | PlacementError::ForkNotAtHead { .. }
        | PlacementError::DeletionPending(_)
        | PlacementError::NothingToCancel { .. }
        | PlacementError::InstanceMismatch { .. } => Code::FailedPrecondition,
        PlacementError::HarnessUnavailable { .. } => Code::Unavailable,
        PlacementError::AdmissionInterrupted { .. } => Code::DeadlineExceeded,
        PlacementError::DescribeFailed { .. } => Code::Internal,
        PlacementError::Dial { source, .. } => match api_code(source) {
            Code::InvalidArgument => Code::InvalidArgument,
            _ => Code::Unavailable,
        },
        PlacementError::Runtime { source, .. } => api_code(source),
        PlacementError::Controller(e) => code_of(e.status_code()),
        PlacementError::Journal(e) => journal_code(e),
    }
}

/// SPI errors a runtime, dialer or harness returns (extensions §5): the typed ones by kind, a
/// status by its code, wrapped and joined ones by their first leaf.
fn api_code(err: &ApiError) -> Code {
    match err {
        ApiError::ComputeBusy | ApiError::SnapshotSuperseded => Code::Aborted,
        ApiError::CheckpointPending => Code::Unavailable,
        ApiError::MemoryStateLost
        | ApiError::InvalidCheckpoint
        | ApiError::InvalidModelPolicy
        | ApiError::ModelNotAllowed { .. } => Code::FailedPrecondition,
        ApiError::InvalidCallerIdentity => Code::Unauthenticated,
        ApiError::PermissionDenied => Code::PermissionDenied,
        ApiError::Cancelled => Code::Cancelled,
        ApiError::ApprovalParked(_) => Code::Ok,
        ApiError::Status { code, .. } => code_of(*code),
        ApiError::Wrapped { source, .. } => api_code(source),
        ApiError::Joined(errors) => errors.first().map_or(Code::Internal, api_code),
    }
}

/// The tonic code for an SPI status code (same numbering).
pub fn code_of(code: StatusCode) -> Code {
    Code::from_i32(code.number())
}

#[cfg(test)]
mod tests {
    use super::*;

    // semantics §8 and extensions §3/§5: each row of the service-level table.
    #[test]
    fn every_service_error_has_its_code() {
        let rows: Vec<(ServerError, Code)> = vec![
            (
                ServerError::InvalidArgument("uid is required".into()),
                Code::InvalidArgument,
            ),
            (ServerError::SessionNotFound("s".into()), Code::NotFound),
            (
                ServerError::UnknownHarness {
                    name: "x".into(),
                    served: "echo".into(),
                },
                Code::InvalidArgument,
            ),
            (ServerError::SessionBusy("s".into()), Code::Aborted),
            (
                ServerError::Unplaceable {
                    harness: "counter".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                ServerError::ForkNotAtHead { at: 1, head: 5 },
                Code::FailedPrecondition,
            ),
            (
                ServerError::DeletionPending("s".into()),
                Code::FailedPrecondition,
            ),
            (
                ServerError::PermissionDenied(Action::Read),
                Code::PermissionDenied,
            ),
            (ServerError::AuthorizationFailed, Code::Internal),
            (
                ServerError::NothingToCancel {
                    session: "s".into(),
                    detail: String::new(),
                },
                Code::FailedPrecondition,
            ),
            (
                ServerError::Journal(JournalError::Conflict {
                    session: "s".into(),
                    expected: 0,
                    actual: 1,
                }),
                Code::Aborted,
            ),
            (
                ServerError::Journal(JournalError::InvalidPageToken("bad".into())),
                Code::InvalidArgument,
            ),
            (
                ServerError::Journal(JournalError::SessionNotFound("s".into())),
                Code::NotFound,
            ),
            (
                ServerError::Controller(ControllerError::ApprovalBlocked {
                    execution_id: "e".into(),
                    tool_call_id: "c".into(),
                }),
                Code::FailedPrecondition,
            ),
            (
                ServerError::Controller(ControllerError::InvalidApprovalDecision("x".into())),
                Code::FailedPrecondition,
            ),
            (
                ServerError::DescriptorMismatch {
                    harness: "h".into(),
                    expected: "a".into(),
                    reported: "b".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                ServerError::HarnessRetired("h".into()),
                Code::FailedPrecondition,
            ),
            (ServerError::AlreadyExists("h".into()), Code::AlreadyExists),
            (
                ServerError::Journal(JournalError::HarnessNameReserved("echo".into())),
                Code::AlreadyExists,
            ),
            (ServerError::Internal("x".into()), Code::Internal),
        ];
        let api = |e: ApiError| PlacementError::Runtime {
            op: agentsessions_placement::RuntimeOp::Create,
            session: "s".into(),
            source: e,
        };
        // Placement's rows (semantics §8 placement column, extensions §3 and §5).
        let placement: Vec<(PlacementError, Code)> = vec![
            (
                PlacementError::UnknownHarness {
                    name: "x".into(),
                    served: "echo".into(),
                },
                Code::InvalidArgument,
            ),
            (PlacementError::SessionBusy("s".into()), Code::Aborted),
            (
                PlacementError::Unplaceable {
                    harness: "counter".into(),
                    reason: "no memory snapshots".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                PlacementError::DescriptorMismatch {
                    harness: "h".into(),
                    expected: "a".into(),
                    reported: "b".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                PlacementError::HarnessUnavailable {
                    harness: "h".into(),
                    source: ApiError::status(StatusCode::Unavailable, "down"),
                },
                Code::Unavailable,
            ),
            (
                PlacementError::AdmissionInterrupted {
                    harness: "h".into(),
                },
                Code::DeadlineExceeded,
            ),
            (
                PlacementError::RecordedHarnessNotServed {
                    session: "s".into(),
                    harness: "h".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                PlacementError::Pinned {
                    session: "s".into(),
                    pinned: "a".into(),
                    requested: "b".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                PlacementError::ForkNotAtHead {
                    harness: "h".into(),
                    at: 1,
                    head: 5,
                },
                Code::FailedPrecondition,
            ),
            (
                PlacementError::ForkOutOfRange { at: 9, head: 5 },
                Code::InvalidArgument,
            ),
            (
                PlacementError::ForkCount { count: 129 },
                Code::InvalidArgument,
            ),
            (
                PlacementError::ChildNames { count: 2, names: 1 },
                Code::InvalidArgument,
            ),
            (
                PlacementError::DeletionPending("s".into()),
                Code::FailedPrecondition,
            ),
            (
                PlacementError::NothingToCancel {
                    session: "s".into(),
                    detail: String::new(),
                },
                Code::FailedPrecondition,
            ),
            (
                PlacementError::InstanceMismatch {
                    session: "s".into(),
                    recorded: "a".into(),
                    placed: "b".into(),
                },
                Code::FailedPrecondition,
            ),
            (api(ApiError::MemoryStateLost), Code::FailedPrecondition),
            (api(ApiError::ComputeBusy), Code::Aborted),
            (api(ApiError::CheckpointPending), Code::Unavailable),
            (api(ApiError::InvalidCheckpoint), Code::FailedPrecondition),
            (api(ApiError::SnapshotSuperseded), Code::Aborted),
            (
                api(ApiError::MemoryStateLost.wrap("restoring")),
                Code::FailedPrecondition,
            ),
            (
                PlacementError::Dial {
                    harness: "h".into(),
                    address: "unix:/x".into(),
                    source: ApiError::status(StatusCode::Unavailable, "nothing listens"),
                },
                Code::Unavailable,
            ),
            (
                PlacementError::NameTaken {
                    name: "echo".into(),
                    reason: "reserved".into(),
                },
                Code::AlreadyExists,
            ),
            (
                PlacementError::Controller(ControllerError::Parked(Default::default())),
                Code::Ok,
            ),
            (
                PlacementError::Journal(JournalError::Fenced {
                    session: "s".into(),
                    fence: 1,
                    current: 2,
                }),
                Code::Aborted,
            ),
        ];
        let rows = rows.into_iter().chain(
            placement
                .into_iter()
                .map(|(e, c)| (ServerError::from(e), c)),
        );
        for (err, code) in rows {
            assert_eq!(err.code(), code, "{err}");
            assert_eq!(err.status().code(), code);
            assert!(!err.status().message().is_empty());
        }
    }
}
