//! [`ServerError`], everything a Sessions or HarnessRegistry RPC can fail with, and the one place
//! an error becomes a [`Status`] (semantics §8 plus extensions §2, §3 and §5).
//!
//! Each error's code is decided once, by the crate that defines it: the variants of this crate
//! in [`ServerError::status_code`], placement's in
//! [`PlacementError::status_code`](agentsessions_placement::PlacementError::status_code), the
//! controller's and the journal's in `agentsessions_controller::error`, the SPI's in
//! [`ApiError::status_code`]. Every match is exhaustive, with no catch-all, so a new variant
//! forces a decision; handlers never build a `Status` themselves.

use agentsessions_api::{Action, ApiError, StatusCode};
use agentsessions_controller::ControllerError;
use agentsessions_controller::error::{code_kind, journal_kind};
use agentsessions_harnesswire::HarnessWireError;
use agentsessions_journal::JournalError;
use agentsessions_placement::PlacementError;
use agentsessions_wire::WireError;
use tonic::{Code, Status};

/// Which limit refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    /// `max_concurrent_turns` (`Limits`).
    Turns,
    /// `max_open_streams` (`Limits`).
    Streams,
}

impl Limited {
    /// The setting's name, as the configuration spells it.
    pub fn setting(self) -> &'static str {
        match self {
            Self::Turns => "max_concurrent_turns",
            Self::Streams => "max_open_streams",
        }
    }
}

/// Everything a Sessions or HarnessRegistry RPC can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A request field the RPC needs was left empty or unset.
    #[error("{field} is required")]
    MissingField {
        /// The field, as the request names it.
        field: &'static str,
    },
    /// A request field that does not convert to its domain type.
    #[error("{field}: {source}")]
    InvalidField {
        /// The field, as the request names it.
        field: &'static str,
        /// Why it does not convert.
        source: WireError,
    },
    /// Fork children carry no per-child principal (semantics §8).
    #[error("identity must be unset: fork children carry no per-child principal")]
    ForkIdentitySet,
    /// A fork creates 1 to [`crate::MAX_FORK_COUNT`] children (semantics §4.4).
    #[error(
        "count {count} is out of range: a fork creates 1 to {max} children",
        max = crate::MAX_FORK_COUNT
    )]
    ForkCountOutOfRange {
        /// The requested count.
        count: i32,
    },
    /// `child_names` must be empty or name every child.
    #[error("child_names has {names} entries; give none or exactly count ({count})")]
    ChildNamesMismatch {
        /// The number of children.
        count: usize,
        /// The names given.
        names: usize,
    },
    /// An approval names the seq of its APPROVAL_REQUEST, which is positive.
    #[error("request_seq must be the seq of the APPROVAL_REQUEST (> 0), not {request_seq}")]
    RequestSeqNotPositive {
        /// The seq given.
        request_seq: i64,
    },
    /// An approval without a decision (absent is not "deny").
    #[error("approved must be set: true to approve, false to deny")]
    ApprovedUnset,
    /// A server was built without any harness.
    #[error("a server needs at least one harness")]
    NoHarnesses,
    /// An overload limit set to 0, which would refuse every call.
    #[error("{setting} must be at least 1")]
    ZeroLimit {
        /// The setting, as the configuration names it.
        setting: &'static str,
    },
    /// A static harness route the registry refused (an empty or repeated name; the error
    /// names it).
    #[error("static harness route: {source}")]
    StaticRoute {
        /// Why the registry refused it.
        source: PlacementError,
    },
    /// A registration name that is not an RFC 1123 label.
    #[error(
        "name {name:?} must be an RFC 1123 label (lowercase letters, digits and '-', at most 63)"
    )]
    InvalidHarnessName {
        /// The name given.
        name: String,
    },
    /// A harness spec that is malformed or names something this host cannot parse.
    #[error("harness spec: {reason}")]
    InvalidSpec {
        /// What is wrong, naming the offending field.
        reason: String,
    },
    /// A harness spec larger than a registration may be.
    #[error("spec is {bytes} bytes in canonical form; the limit is {limit}")]
    SpecTooLarge {
        /// Its canonical size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A negative page size.
    #[error("page_size must not be negative, got {page_size}")]
    NegativePageSize {
        /// The size given.
        page_size: i32,
    },
    /// A negative record count for ReadRecords.
    #[error("max_records must not be negative, got {max_records}")]
    NegativeMaxRecords {
        /// The count given.
        max_records: i32,
    },
    /// A page token this service did not issue.
    #[error("page_token {token:?} was not issued by this service")]
    InvalidPageToken {
        /// The token given.
        token: String,
    },
    /// A retirement reason longer than the limit.
    #[error("reason is {bytes} bytes; the limit is {limit}")]
    RetireReasonTooLong {
        /// Its length.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// No session with this uid.
    #[error("session {uid:?} not found")]
    SessionNotFound {
        /// The uid asked for.
        uid: String,
    },
    /// No harness registered under the name.
    #[error("harness {name:?} is not registered")]
    HarnessNotFound {
        /// The name asked for.
        name: String,
    },
    /// A static harness of this host has a stored registration of the same name (semantics
    /// §7.2): an operator must resolve the collision.
    #[error("static harness {name:?} collides with a stored registration of that name")]
    StaticNameStored {
        /// The name.
        name: String,
    },
    /// A registration under the name of a static harness of this host.
    #[error("{name:?} is a static harness of this host")]
    StaticNameTaken {
        /// The name.
        name: String,
    },
    /// The name is registered with another spec; registrations are immutable.
    #[error(
        "{name:?} is registered with another spec; registrations are immutable, use a new name"
    )]
    RegistrationImmutable {
        /// The name.
        name: String,
    },
    /// The harness is retired: new sessions cannot select it.
    #[error(
        "harness {name:?} is retired; existing sessions keep it, new sessions must pick another"
    )]
    HarnessRetired {
        /// The name.
        name: String,
    },
    /// A static harness cannot be retired through the registry.
    #[error("{name:?} is a static harness; remove it from the host's configuration instead")]
    StaticHarnessRetire {
        /// The name.
        name: String,
    },
    /// A spec placed on a substrate, which this host has no backend for.
    #[error("no substrate backend is configured on this host")]
    NoSubstrateBackend,
    /// A substrate placement this host's substrate backend cannot serve (an atespace it does
    /// not have, a template it cannot run).
    #[error("substrate {atespace:?} template {template:?}: {reason}")]
    SubstrateRefused {
        /// The atespace asked for.
        atespace: String,
        /// The template asked for.
        template: String,
        /// Why it cannot be served here.
        reason: String,
    },
    /// The link to a registered harness cannot be set up (its address or TLS settings).
    #[error("harness {name:?}: {source}")]
    HarnessLink {
        /// The harness.
        name: String,
        /// Why the link cannot be made.
        source: HarnessWireError,
    },
    /// The session is being deleted (extensions §3).
    #[error("session {uid:?} is pending deletion; it accepts no further effects")]
    DeletionPending {
        /// The session.
        uid: String,
    },
    /// The server stopped a stream that has no end of its own (Watch) because it shuts down;
    /// the client resumes on another host or later from the seq after its last record.
    #[error("the server is shutting down; watch again from the seq after the last record")]
    ShuttingDown,
    /// A count limit of this host is reached (`crate::Limits`): the call is refused, not
    /// queued; the client retries after a backoff.
    #[error("overloaded: {max} at once is this host's {setting}; retry after a backoff", setting = .limit.setting())]
    Overloaded {
        /// Which limit.
        limit: Limited,
        /// Its configured value.
        max: usize,
    },
    /// A message larger than this host's `max_message_bytes`.
    #[error("message larger than this host's max_message_bytes ({limit} bytes)")]
    MessageTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The authorization policy denied the call (extensions §2). The message names the action
    /// only: whether the session exists, and whose it is, stays undisclosed.
    #[error("permission denied: this caller may not perform {:?} here", .0.as_str())]
    PermissionDenied(Action),
    /// The authorization policy failed without deciding; its reason is in its own logs, never
    /// in the status.
    #[error("authorization could not be decided; the call was not performed")]
    AuthorizationFailed,
    /// The controller refused or failed.
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// The journal refused or failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Placement refused or failed (routing, admission, runtime, guard).
    #[error(transparent)]
    Placement(#[from] PlacementError),
}

/// Results of the service.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

impl ServerError {
    /// The gRPC code of this error: this crate's rows, and the wrapped errors' own.
    pub fn status_code(&self) -> StatusCode {
        match self {
            // Service-level validation (semantics §8) and registry validation (semantics §7.2).
            Self::MissingField { .. }
            | Self::InvalidField { .. }
            | Self::ForkIdentitySet
            | Self::ForkCountOutOfRange { .. }
            | Self::ChildNamesMismatch { .. }
            | Self::RequestSeqNotPositive { .. }
            | Self::ApprovedUnset
            | Self::NoHarnesses
            | Self::ZeroLimit { .. }
            | Self::StaticRoute { .. }
            | Self::InvalidHarnessName { .. }
            | Self::InvalidSpec { .. }
            | Self::SpecTooLarge { .. }
            | Self::NegativePageSize { .. }
            | Self::NegativeMaxRecords { .. }
            | Self::InvalidPageToken { .. }
            | Self::RetireReasonTooLong { .. } => StatusCode::InvalidArgument,
            Self::SessionNotFound { .. } | Self::HarnessNotFound { .. } => StatusCode::NotFound,
            Self::StaticNameStored { .. }
            | Self::StaticNameTaken { .. }
            | Self::RegistrationImmutable { .. } => StatusCode::AlreadyExists,
            // semantics §8: a retired harness on create; semantics §7.2: what this host cannot
            // serve or retire; extensions §3: a session pending deletion.
            Self::HarnessRetired { .. }
            | Self::StaticHarnessRetire { .. }
            | Self::NoSubstrateBackend
            | Self::SubstrateRefused { .. }
            | Self::HarnessLink { .. }
            | Self::DeletionPending { .. } => StatusCode::FailedPrecondition,
            // extensions §2: a denial, and a policy failure that is the host's, not the caller's.
            Self::PermissionDenied(_) => StatusCode::PermissionDenied,
            Self::AuthorizationFailed => StatusCode::Internal,
            Self::ShuttingDown => StatusCode::Unavailable,
            // Overload: refused at once, never queued without bound, so memory stays bounded.
            Self::Overloaded { .. } | Self::MessageTooLarge { .. } => StatusCode::ResourceExhausted,
            Self::Controller(e) => e.status_code(),
            Self::Journal(e) => e.status_code(),
            Self::Placement(e) => e.status_code(),
        }
    }

    /// The tonic code of [`Self::status_code`].
    pub fn code(&self) -> Code {
        tonic_code(self.status_code())
    }

    /// The status a client receives: the table's code with a message a person can act on.
    pub fn status(&self) -> Status {
        Status::new(self.code(), self.to_string())
    }

    /// A stable, low-cardinality name for logs (`error_kind`, semantics §8).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::DeletionPending { .. } => "deletion_pending",
            Self::PermissionDenied(_) => "permission_denied",
            Self::AuthorizationFailed => "authorization_failed",
            Self::Overloaded { .. } => "overloaded",
            Self::MessageTooLarge { .. } => "message_too_large",
            Self::Controller(e) => e.kind(),
            Self::Journal(e) => journal_kind(e),
            Self::Placement(e) => e.kind(),
            Self::MissingField { .. }
            | Self::InvalidField { .. }
            | Self::ForkIdentitySet
            | Self::ForkCountOutOfRange { .. }
            | Self::ChildNamesMismatch { .. }
            | Self::RequestSeqNotPositive { .. }
            | Self::ApprovedUnset
            | Self::NoHarnesses
            | Self::ZeroLimit { .. }
            | Self::StaticRoute { .. }
            | Self::InvalidHarnessName { .. }
            | Self::InvalidSpec { .. }
            | Self::SpecTooLarge { .. }
            | Self::NegativePageSize { .. }
            | Self::NegativeMaxRecords { .. }
            | Self::InvalidPageToken { .. }
            | Self::RetireReasonTooLong { .. }
            | Self::SessionNotFound { .. }
            | Self::HarnessNotFound { .. }
            | Self::StaticNameStored { .. }
            | Self::StaticNameTaken { .. }
            | Self::RegistrationImmutable { .. }
            | Self::HarnessRetired { .. }
            | Self::StaticHarnessRetire { .. }
            | Self::NoSubstrateBackend
            | Self::SubstrateRefused { .. }
            | Self::HarnessLink { .. }
            | Self::ShuttingDown => code_kind(self.status_code()),
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

/// The tonic code for an SPI status code (same numbering).
fn tonic_code(code: StatusCode) -> Code {
    Code::from_i32(code.number())
}

#[cfg(test)]
mod tests {
    use agentsessions_api::ApprovalRef;
    use agentsessions_placement::RuntimeOp;

    use super::*;

    // semantics §8, §7.2 and extensions §2/§3: every row of this crate's table, plus one row
    // per wrapped crate to show the delegation.
    #[test]
    fn every_service_error_has_its_code() {
        let s = || String::from("x");
        let rows: Vec<(ServerError, Code)> = vec![
            (
                ServerError::MissingField { field: "uid" },
                Code::InvalidArgument,
            ),
            (
                ServerError::InvalidField {
                    field: "inputs",
                    source: WireError::MissingField {
                        field: "role".into(),
                    },
                },
                Code::InvalidArgument,
            ),
            (ServerError::ForkIdentitySet, Code::InvalidArgument),
            (
                ServerError::ForkCountOutOfRange { count: 129 },
                Code::InvalidArgument,
            ),
            (
                ServerError::ChildNamesMismatch { count: 2, names: 1 },
                Code::InvalidArgument,
            ),
            (
                ServerError::RequestSeqNotPositive { request_seq: 0 },
                Code::InvalidArgument,
            ),
            (ServerError::ApprovedUnset, Code::InvalidArgument),
            (ServerError::NoHarnesses, Code::InvalidArgument),
            (
                ServerError::ZeroLimit {
                    setting: "max_open_streams",
                },
                Code::InvalidArgument,
            ),
            (
                ServerError::StaticRoute {
                    source: PlacementError::NameTaken {
                        name: s(),
                        reason: s(),
                    },
                },
                Code::InvalidArgument,
            ),
            (
                ServerError::InvalidHarnessName { name: s() },
                Code::InvalidArgument,
            ),
            (
                ServerError::InvalidSpec { reason: s() },
                Code::InvalidArgument,
            ),
            (
                ServerError::SpecTooLarge {
                    bytes: 5000,
                    limit: 4096,
                },
                Code::InvalidArgument,
            ),
            (
                ServerError::NegativePageSize { page_size: -1 },
                Code::InvalidArgument,
            ),
            (
                ServerError::NegativeMaxRecords { max_records: -1 },
                Code::InvalidArgument,
            ),
            (
                ServerError::InvalidPageToken { token: s() },
                Code::InvalidArgument,
            ),
            (
                ServerError::RetireReasonTooLong {
                    bytes: 2000,
                    limit: 1024,
                },
                Code::InvalidArgument,
            ),
            (ServerError::SessionNotFound { uid: s() }, Code::NotFound),
            (ServerError::HarnessNotFound { name: s() }, Code::NotFound),
            (
                ServerError::StaticNameStored { name: s() },
                Code::AlreadyExists,
            ),
            (
                ServerError::StaticNameTaken { name: s() },
                Code::AlreadyExists,
            ),
            (
                ServerError::RegistrationImmutable { name: s() },
                Code::AlreadyExists,
            ),
            (
                ServerError::HarnessRetired { name: s() },
                Code::FailedPrecondition,
            ),
            (
                ServerError::StaticHarnessRetire { name: s() },
                Code::FailedPrecondition,
            ),
            (ServerError::NoSubstrateBackend, Code::FailedPrecondition),
            (
                ServerError::SubstrateRefused {
                    atespace: s(),
                    template: s(),
                    reason: s(),
                },
                Code::FailedPrecondition,
            ),
            (
                ServerError::HarnessLink {
                    name: s(),
                    source: HarnessWireError::NoRuntime,
                },
                Code::FailedPrecondition,
            ),
            (
                ServerError::DeletionPending { uid: s() },
                Code::FailedPrecondition,
            ),
            (
                ServerError::PermissionDenied(Action::Read),
                Code::PermissionDenied,
            ),
            (ServerError::AuthorizationFailed, Code::Internal),
            (ServerError::ShuttingDown, Code::Unavailable),
            (
                ServerError::Overloaded {
                    limit: Limited::Turns,
                    max: 4,
                },
                Code::ResourceExhausted,
            ),
            (
                ServerError::MessageTooLarge { limit: 1024 },
                Code::ResourceExhausted,
            ),
            (
                ServerError::Controller(ControllerError::ApprovalBlocked {
                    execution_id: s(),
                    tool_call_id: s(),
                }),
                Code::FailedPrecondition,
            ),
            (
                ServerError::Journal(JournalError::InvalidPageToken(s())),
                Code::InvalidArgument,
            ),
            (
                ServerError::Placement(PlacementError::SessionBusy(s())),
                Code::Aborted,
            ),
        ];
        for (err, code) in rows {
            assert_eq!(err.code(), code, "{err}");
            assert_eq!(err.status().code(), code);
            assert!(!err.status().message().is_empty());
            assert!(!err.kind().is_empty());
        }
    }

    // The disagreements the one table removed: each error has one code however it reaches the
    // client, and the Sessions side and the harness side (harnesswire) agree on SPI errors.
    #[test]
    fn one_error_one_code_on_every_path() {
        let s = || String::from("x");
        let commit = || JournalError::CommitFailed {
            reason: "database is locked".into(),
            retryable: true,
        };
        let paths = [
            ServerError::Journal(commit()),
            ServerError::Controller(ControllerError::Journal(commit())),
            ServerError::Placement(PlacementError::Journal(commit())),
            ServerError::Placement(PlacementError::Controller(ControllerError::Journal(
                commit(),
            ))),
        ];
        for err in paths {
            assert_eq!(err.code(), Code::Unavailable, "{err:?}");
            assert_eq!(err.kind(), "unavailable", "{err:?}");
        }
        // semantics §8: an approval park is the OK outcome of Exec and Resume.
        let park = ServerError::Placement(PlacementError::Controller(ControllerError::Parked(
            ApprovalRef::default(),
        )));
        assert_eq!(park.code(), Code::Ok);
        let leaves = [
            ApiError::InvalidCallerIdentity,
            ApiError::InvalidModelPolicy,
            ApiError::ModelNotAllowed { model: "m".into() },
            ApiError::MemoryStateLost,
            ApiError::InvalidCheckpoint,
            ApiError::ComputeBusy,
            ApiError::SnapshotSuperseded,
            ApiError::CheckpointPending,
            ApiError::PermissionDenied,
            ApiError::Cancelled,
            ApiError::status(StatusCode::NotFound, "gone"),
        ];
        for leaf in leaves {
            let sessions = ServerError::Placement(PlacementError::Runtime {
                op: RuntimeOp::Restore,
                session: s(),
                source: leaf.clone(),
            })
            .status_code();
            let harness = agentsessions_harnesswire::status_code_of(&leaf);
            assert_eq!(sessions, harness, "{leaf}");
        }
        assert_eq!(
            ApiError::InvalidCallerIdentity.status_code(),
            StatusCode::InvalidArgument
        );
    }
}
