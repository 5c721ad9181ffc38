//! [`PlacementError`]: why a placement operation was refused or failed.
//!
//! Each variant names what went wrong and carries what a person needs to act on it;
//! [`PlacementError::status_code`] is its row in the error table (semantics §8, placement
//! column), delegating wrapped controller, journal and SPI errors to their own rows.

use agentsessions_api::{ApiError, StatusCode};
use agentsessions_controller::ControllerError;
use agentsessions_controller::error::journal_kind;
use agentsessions_journal::JournalError;

/// The placement result type.
pub type Result<T, E = PlacementError> = std::result::Result<T, E>;

/// Which runtime call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeOp {
    /// `Runtime::create`.
    Create,
    /// `Runtime::snapshot`.
    Snapshot,
    /// `Runtime::restore` (or `InstanceRestorer::restore_instance`).
    Restore,
    /// `Runtime::fork`.
    Fork,
    /// `Runtime::stop` (the deletion reclaimer).
    Stop,
}

impl RuntimeOp {
    /// The lowercase name used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Snapshot => "snapshot",
            Self::Restore => "restore",
            Self::Fork => "fork",
            Self::Stop => "stop",
        }
    }
}

/// Everything the Placer can refuse or fail with.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// No harness is served under the name (semantics §7.1).
    #[error("unknown harness {name:?}; this host serves: {served}")]
    UnknownHarness {
        /// The name asked for.
        name: String,
        /// The served names, comma separated.
        served: String,
    },
    /// The name cannot be added to the registry.
    #[error("harness name {name:?} cannot be added: {reason}")]
    NameTaken {
        /// The name.
        name: String,
        /// Why (reserved, already present, empty).
        reason: String,
    },
    /// Another Exec/Suspend/Resume/Approve holds the session on this host; not queued.
    #[error("session {0:?} is busy with another operation; retry when it finishes")]
    SessionBusy(String),
    /// The harness needs memory snapshots and the runtime cannot take them, or a memory fork
    /// could not get a durable checkpoint (semantics §4.1, §4.4).
    #[error("harness {harness:?} cannot be placed: {reason}")]
    Unplaceable {
        /// The harness.
        harness: String,
        /// Why, in words a person can act on.
        reason: String,
    },
    /// The harness reports another descriptor id than the one its placement expects.
    #[error(
        "harness {harness:?} reports descriptor id {reported:?}, but its placement expects {expected:?}"
    )]
    DescriptorMismatch {
        /// The harness.
        harness: String,
        /// The expected id.
        expected: String,
        /// What it reported.
        reported: String,
    },
    /// The harness did not answer Describe (peer unavailable or timed out).
    #[error("harness {harness:?} is unavailable: {source}")]
    HarnessUnavailable {
        /// The harness.
        harness: String,
        /// The transport error.
        source: ApiError,
    },
    /// The caller's deadline passed while the harness was being described.
    #[error("the deadline passed while admitting harness {harness:?}")]
    AdmissionInterrupted {
        /// The harness.
        harness: String,
    },
    /// Describe failed for another reason.
    #[error("harness {harness:?} failed to describe itself: {source}")]
    DescribeFailed {
        /// The harness.
        harness: String,
        /// The harness's error.
        source: ApiError,
    },
    /// The pending execution recorded a harness this host does not serve (semantics §4.3).
    #[error(
        "session {session:?} has a pending execution recorded on harness {harness:?}, which this \
         host does not serve; serve it here or resume on a host that does"
    )]
    RecordedHarnessNotServed {
        /// The session.
        session: String,
        /// The recorded registry name.
        harness: String,
    },
    /// A registered harness cannot be swapped for another one (semantics §7.3).
    #[error(
        "session {session:?} is pinned to harness {pinned:?}; a registered harness cannot be \
         swapped for {requested:?} (create a new session, or fork, instead)"
    )]
    Pinned {
        /// The session.
        session: String,
        /// The stored harness.
        pinned: String,
        /// The harness asked for.
        requested: String,
    },
    /// A memory-snapshot harness forks only at the head.
    #[error(
        "harness {harness:?} keeps its state in memory and forks only at the head (seq {head}), \
         not at seq {at}"
    )]
    ForkNotAtHead {
        /// The harness.
        harness: String,
        /// The requested seq.
        at: i64,
        /// The current head.
        head: i64,
    },
    /// `at_seq` names no record of the parent.
    #[error("at_seq {at} is outside the session's records 1..={head}")]
    ForkOutOfRange {
        /// The requested seq.
        at: i64,
        /// The current head.
        head: i64,
    },
    /// A fork creates 1 to [`crate::MAX_FORK_COUNT`] children.
    #[error("a fork creates 1 to {max} children, not {count}", max = crate::MAX_FORK_COUNT)]
    ForkCount {
        /// The requested count.
        count: usize,
    },
    /// `child_names` must be empty or name every child.
    #[error("child_names has {names} entries; give none or exactly count ({count})")]
    ChildNames {
        /// The requested count.
        count: usize,
        /// Names given.
        names: usize,
    },
    /// The session is pending deletion (extensions §3).
    #[error("session {0:?} is pending deletion; it accepts no further effects")]
    DeletionPending(String),
    /// A decision this host would record but could not carry out (extensions §9); nothing was
    /// journaled.
    #[error(
        "session {session:?}: this host cannot carry out a decision on tool call \
         {tool_call_id:?}: {missing}; decide it on a host that can, or cancel the turn \
         (`agentctl cancel`)"
    )]
    DecisionNotCarried {
        /// The session.
        session: String,
        /// The gated call.
        tool_call_id: String,
        /// What this host lacks.
        missing: String,
    },
    /// Cancel found no unfinished execution: the last turn has ended.
    #[error("session {session:?} has no unfinished turn to cancel{detail}")]
    NothingToCancel {
        /// The session.
        session: String,
        /// Which execution was asked for, if any.
        detail: String,
    },
    /// The placed compute is not the instance the journal recorded (extensions §5).
    #[error(
        "session {session:?} was placed on compute instance {placed:?} but its memory state lives \
         on {recorded:?}; the replacement holds none of it (fork from a checkpoint or start a new \
         session)"
    )]
    InstanceMismatch {
        /// The session.
        session: String,
        /// The instance the journal recorded.
        recorded: String,
        /// The instance the runtime placed the session on.
        placed: String,
    },
    /// A runtime call failed; the [`ApiError`] says how (MemoryStateLost, ComputeBusy, …).
    #[error("runtime {op} for session {session:?} failed: {source}", op = .op.as_str())]
    Runtime {
        /// The call.
        op: RuntimeOp,
        /// The session.
        session: String,
        /// The runtime's error.
        source: ApiError,
    },
    /// The harness at the incarnation's address could not be reached.
    #[error("cannot reach harness {harness:?} at {address:?}: {source}")]
    Dial {
        /// The harness.
        harness: String,
        /// The incarnation address.
        address: String,
        /// The dialer's error.
        source: ApiError,
    },
    /// The controller refused or failed (includes an approval park, which is not a failure).
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// The journal refused or failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

impl PlacementError {
    /// Whether the operation ended in an approval park (an OK outcome for Exec and Resume).
    pub fn is_park(&self) -> bool {
        matches!(self, Self::Controller(ControllerError::Parked(_)))
    }

    /// The gRPC code of this error (semantics §8 placement column, extensions §3 and §5). Every
    /// variant has its row, with no catch-all; wrapped errors take their own crate's row.
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::UnknownHarness { .. }
            | Self::ForkOutOfRange { .. }
            | Self::ForkCount { .. }
            | Self::ChildNames { .. } => StatusCode::InvalidArgument,
            Self::NameTaken { .. } => StatusCode::AlreadyExists,
            Self::SessionBusy(_) => StatusCode::Aborted,
            Self::Unplaceable { .. }
            | Self::DescriptorMismatch { .. }
            | Self::RecordedHarnessNotServed { .. }
            | Self::Pinned { .. }
            | Self::ForkNotAtHead { .. }
            | Self::DeletionPending(_)
            | Self::DecisionNotCarried { .. }
            | Self::NothingToCancel { .. }
            | Self::InstanceMismatch { .. } => StatusCode::FailedPrecondition,
            Self::HarnessUnavailable { .. } => StatusCode::Unavailable,
            Self::AdmissionInterrupted { .. } => StatusCode::DeadlineExceeded,
            Self::DescribeFailed { .. } => StatusCode::Internal,
            // An address the dialer refuses is the caller's to fix; any other failure to reach
            // the harness may clear on retry.
            Self::Dial { source, .. } => {
                if source.status_code() == StatusCode::InvalidArgument {
                    StatusCode::InvalidArgument
                } else {
                    StatusCode::Unavailable
                }
            }
            Self::Runtime { source, .. } => source.status_code(),
            Self::Controller(e) => e.status_code(),
            Self::Journal(e) => e.status_code(),
        }
    }

    /// A short stable name for structured logs (semantics §8 `error_kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnknownHarness { .. }
            | Self::ForkOutOfRange { .. }
            | Self::ForkCount { .. }
            | Self::ChildNames { .. } => "invalid_argument",
            Self::NameTaken { .. } => "already_exists",
            Self::SessionBusy(_) => "conflict",
            Self::Unplaceable { .. } | Self::ForkNotAtHead { .. } => "unplaceable",
            Self::DescriptorMismatch { .. } => "descriptor_mismatch",
            Self::HarnessUnavailable { .. } | Self::Dial { .. } => "harness_unavailable",
            Self::AdmissionInterrupted { .. } => "deadline_exceeded",
            Self::RecordedHarnessNotServed { .. }
            | Self::Pinned { .. }
            | Self::DeletionPending(_)
            | Self::DecisionNotCarried { .. }
            | Self::NothingToCancel { .. }
            | Self::InstanceMismatch { .. } => "failed_precondition",
            Self::DescribeFailed { .. } | Self::Runtime { .. } => "operation_failed",
            Self::Controller(e) => e.kind(),
            Self::Journal(e) => journal_kind(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{ApprovalRef, StatusCode as C};

    use super::*;

    fn runtime(source: ApiError) -> PlacementError {
        PlacementError::Runtime {
            op: RuntimeOp::Create,
            session: "s".into(),
            source,
        }
    }

    fn dial(source: ApiError) -> PlacementError {
        PlacementError::Dial {
            harness: "h".into(),
            address: "unix:/x".into(),
            source,
        }
    }

    // semantics §8 placement column, extensions §3 and §5: every variant's row.
    #[test]
    fn every_variant_has_its_code() {
        let s = || String::from("s");
        let rows = [
            (
                PlacementError::UnknownHarness {
                    name: s(),
                    served: s(),
                },
                C::InvalidArgument,
            ),
            (
                PlacementError::NameTaken {
                    name: s(),
                    reason: s(),
                },
                C::AlreadyExists,
            ),
            (PlacementError::SessionBusy(s()), C::Aborted),
            (
                PlacementError::Unplaceable {
                    harness: s(),
                    reason: s(),
                },
                C::FailedPrecondition,
            ),
            (
                PlacementError::DescriptorMismatch {
                    harness: s(),
                    expected: s(),
                    reported: s(),
                },
                C::FailedPrecondition,
            ),
            (
                PlacementError::HarnessUnavailable {
                    harness: s(),
                    source: ApiError::status(C::Unavailable, "down"),
                },
                C::Unavailable,
            ),
            (
                PlacementError::AdmissionInterrupted { harness: s() },
                C::DeadlineExceeded,
            ),
            (
                PlacementError::DescribeFailed {
                    harness: s(),
                    source: ApiError::status(C::Internal, "boom"),
                },
                C::Internal,
            ),
            (
                PlacementError::RecordedHarnessNotServed {
                    session: s(),
                    harness: s(),
                },
                C::FailedPrecondition,
            ),
            (
                PlacementError::Pinned {
                    session: s(),
                    pinned: s(),
                    requested: s(),
                },
                C::FailedPrecondition,
            ),
            (
                PlacementError::ForkNotAtHead {
                    harness: s(),
                    at: 1,
                    head: 5,
                },
                C::FailedPrecondition,
            ),
            (
                PlacementError::ForkOutOfRange { at: 9, head: 5 },
                C::InvalidArgument,
            ),
            (PlacementError::ForkCount { count: 129 }, C::InvalidArgument),
            (
                PlacementError::ChildNames { count: 2, names: 1 },
                C::InvalidArgument,
            ),
            // extensions §3: a session pending deletion accepts no further effects.
            (PlacementError::DeletionPending(s()), C::FailedPrecondition),
            (
                PlacementError::NothingToCancel {
                    session: s(),
                    detail: String::new(),
                },
                C::FailedPrecondition,
            ),
            // extensions §9: a decision this host cannot carry out is
            // refused before anything is journaled.
            (
                PlacementError::DecisionNotCarried {
                    session: s(),
                    tool_call_id: s(),
                    missing: s(),
                },
                C::FailedPrecondition,
            ),
            // extensions §5: a replacement instance holds none of the session's memory.
            (
                PlacementError::InstanceMismatch {
                    session: s(),
                    recorded: s(),
                    placed: s(),
                },
                C::FailedPrecondition,
            ),
            // extensions §5: the runtime errors keep their SPI rows.
            (runtime(ApiError::MemoryStateLost), C::FailedPrecondition),
            (runtime(ApiError::ComputeBusy), C::Aborted),
            (runtime(ApiError::CheckpointPending), C::Unavailable),
            (runtime(ApiError::InvalidCheckpoint), C::FailedPrecondition),
            (runtime(ApiError::SnapshotSuperseded), C::Aborted),
            (
                runtime(ApiError::MemoryStateLost.wrap("restoring")),
                C::FailedPrecondition,
            ),
            (
                dial(ApiError::status(C::Unavailable, "nothing listens")),
                C::Unavailable,
            ),
            (
                dial(ApiError::status(C::InvalidArgument, "bad address")),
                C::InvalidArgument,
            ),
            (dial(ApiError::Cancelled), C::Unavailable),
            // semantics §8: a park is the OK outcome of Exec and Resume.
            (
                PlacementError::Controller(ControllerError::Parked(ApprovalRef::default())),
                C::Ok,
            ),
            (
                PlacementError::Journal(JournalError::Fenced {
                    session: s(),
                    fence: 1,
                    current: 2,
                }),
                C::Aborted,
            ),
            // The same retryable commit failure is UNAVAILABLE through a turn and directly.
            (
                PlacementError::Controller(ControllerError::Journal(JournalError::CommitFailed {
                    reason: s(),
                    retryable: true,
                })),
                C::Unavailable,
            ),
            (
                PlacementError::Journal(JournalError::CommitFailed {
                    reason: s(),
                    retryable: true,
                }),
                C::Unavailable,
            ),
        ];
        for (err, code) in rows {
            assert_eq!(err.status_code(), code, "{err}");
            assert!(!err.kind().is_empty());
        }
    }
}
