//! The one table from every error the service can meet to a gRPC status (semantics §8 plus
//! extensions §3 and §5). Handlers return [`ServerError`]; only [`ServerError::status`] decides
//! codes, so a row of the table is changed in exactly one place.

use agentsessions_api::{ApiError, StatusCode};
use agentsessions_controller::ControllerError;
use agentsessions_journal::JournalError;
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
            Self::Internal(_) => Code::Internal,
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
        for (err, code) in rows {
            assert_eq!(err.code(), code, "{err}");
            assert_eq!(err.status().code(), code);
            assert!(!err.status().message().is_empty());
        }
    }
}
