//! [`ApiError`]: the errors the SPI traits report, the v0.3.0 API's ten error values among them,
//! and the tree helpers ([`ApiError::is`], [`is_park_unwind`]) that stand in for Go's
//! `errors.Is`/`As`.
//!
//! Errors form a tree: [`ApiError::Wrapped`] adds context to one error (Go's `fmt.Errorf("…: %w")`)
//! and [`ApiError::Joined`] groups several (Go's `errors.Join`). Every other variant is a *leaf*.
//! Callers classify an error by its leaves, never by its text:
//!
//! ```
//! use agentsessions_api::{ApiError, ApiErrorKind};
//!
//! let err = ApiError::MemoryStateLost.wrap("restore session s1");
//! assert!(err.is(ApiErrorKind::MemoryStateLost));
//! assert_eq!(err.to_string(), "restore session s1: runtime: session's in-memory harness state is lost");
//! ```
//!
//! The message of a wrapping or joining error already contains the messages of the errors it
//! holds (as in Go), so a reporter that also walks [`std::error::Error::source`] repeats them.

use std::fmt;

use crate::content::ApprovalRef;
use crate::event::ErrorInfo;

/// Result alias for SPI operations.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// A gRPC status code, as carried by [`ErrorInfo::code`] and by [`ApiError::Status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum StatusCode {
    /// Not an error.
    Ok = 0,
    /// The operation was cancelled, typically by the caller.
    Cancelled = 1,
    /// An error with no better code.
    Unknown = 2,
    /// The caller supplied an invalid argument.
    InvalidArgument = 3,
    /// The deadline expired before the operation could complete.
    DeadlineExceeded = 4,
    /// A requested entity was not found.
    NotFound = 5,
    /// The entity a caller tried to create already exists.
    AlreadyExists = 6,
    /// The caller may not perform the operation.
    PermissionDenied = 7,
    /// A resource (quota, capacity) is exhausted.
    ResourceExhausted = 8,
    /// The system is not in the state the operation requires.
    FailedPrecondition = 9,
    /// The operation was aborted by a concurrency conflict; retry at a higher level.
    Aborted = 10,
    /// The operation went past the valid range.
    OutOfRange = 11,
    /// The operation is not implemented or supported.
    Unimplemented = 12,
    /// An invariant the system relies on is broken.
    Internal = 13,
    /// The service is currently unavailable; a retry may succeed.
    Unavailable = 14,
    /// Unrecoverable data loss or corruption.
    DataLoss = 15,
    /// The request has no valid authentication credentials.
    Unauthenticated = 16,
}

impl StatusCode {
    /// Every code, in numeric order.
    pub const ALL: [Self; 17] = [
        Self::Ok,
        Self::Cancelled,
        Self::Unknown,
        Self::InvalidArgument,
        Self::DeadlineExceeded,
        Self::NotFound,
        Self::AlreadyExists,
        Self::PermissionDenied,
        Self::ResourceExhausted,
        Self::FailedPrecondition,
        Self::Aborted,
        Self::OutOfRange,
        Self::Unimplemented,
        Self::Internal,
        Self::Unavailable,
        Self::DataLoss,
        Self::Unauthenticated,
    ];

    /// The numeric gRPC code.
    pub fn number(self) -> i32 {
        self as i32
    }

    /// The code for a numeric gRPC code; `None` when the number is not a known code.
    pub fn from_number(number: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|code| code.number() == number)
    }

    /// The canonical gRPC name (`OK`, `INVALID_ARGUMENT` …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::Cancelled => "CANCELLED",
            Self::Unknown => "UNKNOWN",
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Self::NotFound => "NOT_FOUND",
            Self::AlreadyExists => "ALREADY_EXISTS",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Self::FailedPrecondition => "FAILED_PRECONDITION",
            Self::Aborted => "ABORTED",
            Self::OutOfRange => "OUT_OF_RANGE",
            Self::Unimplemented => "UNIMPLEMENTED",
            Self::Internal => "INTERNAL",
            Self::Unavailable => "UNAVAILABLE",
            Self::DataLoss => "DATA_LOSS",
            Self::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an SPI operation failed.
///
/// The first ten variants are the v0.3.0 API's error values (`ErrApprovalParked` …
/// `ErrSnapshotSuperseded`; their messages are the v0.3.0 API's). [`ApiError::Status`] and
/// [`ApiError::Cancelled`] let harness, sink, runtime and policy implementations report other
/// failures; [`ApiError::Wrapped`] and [`ApiError::Joined`] build error trees. The gRPC code each
/// leaf maps to is decided in [`ApiError::status_code`] and nowhere else (extensions §5 names the
/// codes for the runtime errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// A host-requested approval park, distinct from execution failure (the v0.3.0 API's
    /// `ApprovalParkedError`, which unwraps to `ErrApprovalParked`). It carries the request
    /// correlation only: it commits neither a request nor a decision, whose durable state belongs
    /// to the host's journal. A transport uses the carried ref, never the message, for the park
    /// exchange; see [`is_park_unwind`].
    #[error(
        "approval parked: execution {:?} tool call {:?} request seq {}",
        .0.execution_id,
        .0.tool_call_id,
        .0.request_seq
    )]
    ApprovalParked(ApprovalRef),

    /// A checkpoint's durable copy is still uploading. No usable checkpoint is returned and
    /// nothing is journaled; the upload may complete without operator intervention, so a retry
    /// may succeed. The session service reports it as `UNAVAILABLE`, unlike an invalid checkpoint.
    #[error("runtime: checkpoint upload is pending")]
    CheckpointPending,

    /// The session's compute is in the middle of another operation (another host resuming or
    /// suspending it), so the backend could not place onto it or act on it right now. Nothing was
    /// journaled and the state settles on its own: the session service reports `ABORTED` and the
    /// caller retries. A stateful fork also returns it when another caller replaced or captured the
    /// child compute it just created before it could resume it: no child is created, and the
    /// parent keeps the SUSPEND the fork took and its snapshot, so a retried fork clones a new
    /// child.
    #[error("runtime: compute is busy with another operation")]
    ComputeBusy,

    /// An incomplete owner was passed to owned creation, or an empty or incomplete owner filter to
    /// a session listing (see [`crate::CallerIdentity::valid`]).
    #[error("api: caller identity requires issuer and subject")]
    InvalidCallerIdentity,

    /// A runtime cannot produce or resume a checkpoint with the required durable handle and
    /// fidelity. Capture may already have suspended compute; no usable ref is returned, and callers
    /// must inspect and correct the runtime evidence before retrying. The session service reports
    /// it as `FAILED_PRECONDITION`, not as an internal transport failure.
    #[error("runtime: checkpoint does not meet the required contract")]
    InvalidCheckpoint,

    /// A host model policy without an explicit, allowed default, or with an empty model id (see
    /// [`crate::ModelPolicy::validate`]).
    #[error("model policy requires an explicit allowed default and nonempty model IDs")]
    InvalidModelPolicy,

    /// A `REQUIRES_MEMORY_SNAPSHOT` harness's in-memory state is gone: the compute that held it no
    /// longer exists, came back without that memory, was replaced under the same name, or holds a
    /// checkpoint other than the one the journal last recorded. The journal cannot rebuild that
    /// state (I4), so continuing on fresh compute would run the journal against a harness that has
    /// forgotten it. Retrying does not fix it, except when the missing record was still being
    /// written (or written after the caller read it). The session service reports
    /// `FAILED_PRECONDITION`. Where each [`crate::Runtime`] method returns it is documented there.
    #[error("runtime: session's in-memory harness state is lost")]
    MemoryStateLost,

    /// A session default, a declared model or a mediated model request outside the host's allowed
    /// set. A mediated rejection is execution-fatal even if the harness handles it.
    #[error("model is not allowed by the host policy: {model:?}")]
    ModelNotAllowed {
        /// The model id that was refused.
        model: String,
    },

    /// An [`crate::Authorizer`] denied the request: the caller does not own the session, an
    /// identity is incomplete, the session uid is missing, or the action is not one the policy
    /// grants (create, approve and mint are never granted to owners as such). The service reports
    /// `PERMISSION_DENIED`; any other error from an authorizer is a host failure, not a denial.
    #[error("api: permission denied")]
    PermissionDenied,

    /// A fork's source snapshot is no longer the one the parent holds, because the parent was
    /// resumed (and possibly checkpointed again) after the snapshot was taken. The fork cannot
    /// clone it without pairing the child's journal prefix with different RAM; the caller can
    /// retry the fork at the parent's new head.
    #[error("runtime: fork source snapshot was superseded")]
    SnapshotSuperseded,

    /// A failure reported as a gRPC-style status: a harness run that failed, a transport or
    /// backend error, a provider error. `message` is diagnostic text for operators; services
    /// sanitize it before it reaches a client.
    #[error("status {code}: {message}")]
    Status {
        /// The status code.
        code: StatusCode,
        /// What went wrong.
        message: String,
    },

    /// The operation stopped because the host cancelled the execution (Go's `context.Canceled`).
    /// Dropping a future needs no error; this is what a sink or backend returns to a caller that
    /// is still running when it learns of the cancellation.
    #[error("cancelled")]
    Cancelled,

    /// Several errors at once (Go's `errors.Join`), in the order they occurred. Build it with
    /// [`ApiError::join`], which never produces an empty join.
    #[error("{}", JoinedDisplay(.0))]
    Joined(Vec<ApiError>),

    /// An error with context about the operation that failed (Go's `fmt.Errorf("…: %w")`).
    #[error("{context}: {source}")]
    Wrapped {
        /// What was being done, e.g. `restore session s1`.
        context: String,
        /// The underlying error.
        source: Box<ApiError>,
    },
}

/// The kind of a leaf [`ApiError`], for classification through wrapping and joining
/// ([`ApiError::is`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiErrorKind {
    /// [`ApiError::ApprovalParked`].
    ApprovalParked,
    /// [`ApiError::CheckpointPending`].
    CheckpointPending,
    /// [`ApiError::ComputeBusy`].
    ComputeBusy,
    /// [`ApiError::InvalidCallerIdentity`].
    InvalidCallerIdentity,
    /// [`ApiError::InvalidCheckpoint`].
    InvalidCheckpoint,
    /// [`ApiError::InvalidModelPolicy`].
    InvalidModelPolicy,
    /// [`ApiError::MemoryStateLost`].
    MemoryStateLost,
    /// [`ApiError::ModelNotAllowed`].
    ModelNotAllowed,
    /// [`ApiError::PermissionDenied`].
    PermissionDenied,
    /// [`ApiError::SnapshotSuperseded`].
    SnapshotSuperseded,
    /// [`ApiError::Status`].
    Status,
    /// [`ApiError::Cancelled`].
    Cancelled,
}

impl ApiError {
    /// A [`ApiError::Status`] leaf.
    pub fn status(code: StatusCode, message: impl Into<String>) -> Self {
        Self::Status {
            code,
            message: message.into(),
        }
    }

    /// Wraps `self` with `context` ([`ApiError::Wrapped`]); classification sees through it.
    #[must_use]
    pub fn wrap(self, context: impl Into<String>) -> Self {
        Self::Wrapped {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// Joins errors like Go's `errors.Join`: `None` when there are none, the error itself when
    /// there is exactly one, otherwise an [`ApiError::Joined`] in the given order.
    pub fn join(errors: impl IntoIterator<Item = ApiError>) -> Option<Self> {
        let mut errors: Vec<Self> = errors.into_iter().collect();
        match errors.len() {
            0 | 1 => errors.pop(),
            _ => Some(Self::Joined(errors)),
        }
    }

    /// The kind of this error when it is a leaf; `None` for [`ApiError::Wrapped`] and
    /// [`ApiError::Joined`].
    pub fn leaf_kind(&self) -> Option<ApiErrorKind> {
        Some(match self {
            Self::ApprovalParked(_) => ApiErrorKind::ApprovalParked,
            Self::CheckpointPending => ApiErrorKind::CheckpointPending,
            Self::ComputeBusy => ApiErrorKind::ComputeBusy,
            Self::InvalidCallerIdentity => ApiErrorKind::InvalidCallerIdentity,
            Self::InvalidCheckpoint => ApiErrorKind::InvalidCheckpoint,
            Self::InvalidModelPolicy => ApiErrorKind::InvalidModelPolicy,
            Self::MemoryStateLost => ApiErrorKind::MemoryStateLost,
            Self::ModelNotAllowed { .. } => ApiErrorKind::ModelNotAllowed,
            Self::PermissionDenied => ApiErrorKind::PermissionDenied,
            Self::SnapshotSuperseded => ApiErrorKind::SnapshotSuperseded,
            Self::Status { .. } => ApiErrorKind::Status,
            Self::Cancelled => ApiErrorKind::Cancelled,
            Self::Joined(_) | Self::Wrapped { .. } => return None,
        })
    }

    /// The leaves of the error tree, depth first and in order; a leaf yields itself.
    pub fn leaves(&self) -> Leaves<'_> {
        Leaves { stack: vec![self] }
    }

    /// Whether any leaf is of `kind`, through any wrapping or joining (Go's `errors.Is`).
    pub fn is(&self, kind: ApiErrorKind) -> bool {
        self.leaves().any(|leaf| leaf.leaf_kind() == Some(kind))
    }

    /// The ref of the first park in the tree (Go's `errors.As` to `*ApprovalParkedError`).
    /// Finding one does not make the error a clean park; use [`is_park_unwind`] for that.
    pub fn approval_ref(&self) -> Option<&ApprovalRef> {
        self.leaves().find_map(|leaf| match leaf {
            Self::ApprovalParked(r) => Some(r),
            _ => None,
        })
    }

    /// The gRPC code this error is reported with: on the Sessions API, in a harness's `END`
    /// error and in a failed `Harness.Describe` alike, so the host and a harness never disagree
    /// about the same error (semantics §8, extensions §4–§6). This is the one row per leaf:
    ///
    /// | leaf | code | why |
    /// |---|---|---|
    /// | `ApprovalParked` | OK | a park is not a failure (semantics §8: the Exec/Resume answer is OK) |
    /// | `CheckpointPending` | UNAVAILABLE | the upload settles on its own (extensions §5) |
    /// | `ComputeBusy`, `SnapshotSuperseded` | ABORTED | retry (extensions §5) |
    /// | `InvalidCallerIdentity` | INVALID_ARGUMENT | an incomplete owner or owner filter was passed (v0.3.0 API; semantics §8 "identity not encodable") |
    /// | `InvalidCheckpoint`, `MemoryStateLost` | FAILED_PRECONDITION | extensions §5 |
    /// | `InvalidModelPolicy`, `ModelNotAllowed` | FAILED_PRECONDITION | the host's policy, not the caller's argument (extensions §4) |
    /// | `PermissionDenied` | PERMISSION_DENIED | extensions §2 |
    /// | `Cancelled` | CANCELLED | |
    /// | `Status` | its code | |
    ///
    /// A tree takes the code of its first leaf that is not a park: a park beside an independent
    /// failure is that failure (extensions §6); a tree of parks only is OK. An empty join has no
    /// leaf and is `UNKNOWN`.
    pub fn status_code(&self) -> StatusCode {
        let mut parked = false;
        for code in self.leaves().filter_map(Self::leaf_status_code) {
            if code != StatusCode::Ok {
                return code;
            }
            parked = true;
        }
        if parked {
            StatusCode::Ok
        } else {
            StatusCode::Unknown
        }
    }

    /// The row of [`ApiError::status_code`] for a leaf; `None` for a tree node.
    fn leaf_status_code(&self) -> Option<StatusCode> {
        Some(match self {
            Self::ApprovalParked(_) => StatusCode::Ok,
            Self::CheckpointPending => StatusCode::Unavailable,
            Self::ComputeBusy | Self::SnapshotSuperseded => StatusCode::Aborted,
            Self::InvalidCallerIdentity => StatusCode::InvalidArgument,
            Self::InvalidCheckpoint
            | Self::MemoryStateLost
            | Self::InvalidModelPolicy
            | Self::ModelNotAllowed { .. } => StatusCode::FailedPrecondition,
            Self::PermissionDenied => StatusCode::PermissionDenied,
            Self::Cancelled => StatusCode::Cancelled,
            Self::Status { code, .. } => *code,
            Self::Joined(_) | Self::Wrapped { .. } => return None,
        })
    }

    /// Whether retrying the same operation later may succeed without anyone correcting anything:
    /// true for [`ApiError::ComputeBusy`] and [`ApiError::CheckpointPending`] (the state settles on
    /// its own), [`ApiError::SnapshotSuperseded`] (a retried fork takes the parent's new head) and
    /// a [`ApiError::Status`] of `UNAVAILABLE` or `ABORTED`. A wrapping error is retryable when
    /// what it wraps is; a join when it is non-empty and every leaf is.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::ComputeBusy | Self::CheckpointPending | Self::SnapshotSuperseded => true,
            Self::Status { code, .. } => {
                matches!(code, StatusCode::Unavailable | StatusCode::Aborted)
            }
            Self::Wrapped { source, .. } => source.is_retryable(),
            Self::Joined(errors) => !errors.is_empty() && errors.iter().all(Self::is_retryable),
            Self::ApprovalParked(_)
            | Self::InvalidCallerIdentity
            | Self::InvalidCheckpoint
            | Self::InvalidModelPolicy
            | Self::MemoryStateLost
            | Self::ModelNotAllowed { .. }
            | Self::PermissionDenied
            | Self::Cancelled => false,
        }
    }
}

impl From<ErrorInfo> for ApiError {
    /// A recorded or received error status as an [`ApiError::Status`]. A code that is not a known
    /// gRPC code, or `OK` (which cannot describe a failure), becomes `UNKNOWN`.
    fn from(info: ErrorInfo) -> Self {
        let code = match StatusCode::from_number(info.code) {
            Some(StatusCode::Ok) | None => StatusCode::Unknown,
            Some(code) => code,
        };
        Self::Status {
            code,
            message: info.description,
        }
    }
}

/// Depth-first iterator over the leaves of an [`ApiError`] tree; see [`ApiError::leaves`].
#[derive(Debug, Clone)]
pub struct Leaves<'a> {
    stack: Vec<&'a ApiError>,
}

impl<'a> Iterator for Leaves<'a> {
    type Item = &'a ApiError;

    fn next(&mut self) -> Option<Self::Item> {
        while let Some(err) = self.stack.pop() {
            match err {
                ApiError::Wrapped { source, .. } => self.stack.push(source),
                ApiError::Joined(errors) => self.stack.extend(errors.iter().rev()),
                leaf => return Some(leaf),
            }
        }
        None
    }
}

/// Whether `err` is a clean park unwind for `r`: every leaf of the tree is an
/// [`ApiError::ApprovalParked`] for exactly `r`, with no independent failure anywhere (the v0.3.0
/// API's `IsParkUnwind`). Wrapping and joining are looked through; a join with no errors is not a
/// park.
///
/// A matching park alone does not prove that the host has checkpointed compute or durably
/// recorded a successful pause.
pub fn is_park_unwind(err: &ApiError, r: &ApprovalRef) -> bool {
    match err {
        ApiError::ApprovalParked(parked) => parked == r,
        ApiError::Wrapped { source, .. } => is_park_unwind(source, r),
        ApiError::Joined(errors) => {
            !errors.is_empty() && errors.iter().all(|e| is_park_unwind(e, r))
        }
        _ => false,
    }
}

/// Displays joined errors separated by `; `.
struct JoinedDisplay<'a>(&'a [ApiError]);

impl fmt::Display for JoinedDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("empty error join");
        }
        for (i, err) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{err}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn park(seq: i64) -> ApprovalRef {
        ApprovalRef {
            execution_id: "x1".into(),
            tool_call_id: "t1".into(),
            request_seq: seq,
        }
    }

    // v0.3.0 API: IsParkUnwind — a park for ref is a park unwind.
    #[test]
    fn plain_park_for_the_ref_is_a_park_unwind() {
        assert!(is_park_unwind(&ApiError::ApprovalParked(park(7)), &park(7)));
    }

    // v0.3.0 API: IsParkUnwind — "wrapped or joined parks for ref".
    #[test]
    fn wrapped_park_is_a_park_unwind() {
        let err = ApiError::ApprovalParked(park(7))
            .wrap("tool call t1")
            .wrap("run");
        assert!(is_park_unwind(&err, &park(7)));
    }

    // v0.3.0 API: IsParkUnwind — only parks for ref, joined, still unwind.
    #[test]
    fn joined_parks_for_the_same_ref_are_a_park_unwind() {
        let err = ApiError::Joined(vec![
            ApiError::ApprovalParked(park(7)),
            ApiError::ApprovalParked(park(7)).wrap("sink"),
        ]);
        assert!(is_park_unwind(&err, &park(7)));
    }

    // v0.3.0 API: IsParkUnwind — "with no independent failure elsewhere in the error tree".
    #[test]
    fn joined_park_with_an_independent_failure_is_not_a_park_unwind() {
        let err = ApiError::Joined(vec![
            ApiError::ApprovalParked(park(7)),
            ApiError::status(StatusCode::Unavailable, "connection reset").wrap("close stream"),
        ]);
        assert!(!is_park_unwind(&err, &park(7)));
        assert_eq!(err.approval_ref(), Some(&park(7)));
    }

    // v0.3.0 API: IsParkUnwind — the park must be for exactly ref.
    #[test]
    fn park_for_another_ref_is_not_a_park_unwind() {
        let err = ApiError::ApprovalParked(park(7)).wrap("run");
        assert!(!is_park_unwind(&err, &park(8)));
        let mixed = ApiError::Joined(vec![
            ApiError::ApprovalParked(park(7)),
            ApiError::ApprovalParked(park(8)),
        ]);
        assert!(!is_park_unwind(&mixed, &park(7)));
    }

    // extensions §6: every leaf must be a park; a join of nothing has no park leaf.
    #[test]
    fn empty_join_is_not_a_park_unwind() {
        assert!(!is_park_unwind(&ApiError::Joined(Vec::new()), &park(7)));
        let nested = ApiError::Joined(vec![
            ApiError::ApprovalParked(park(7)),
            ApiError::Joined(Vec::new()),
        ]);
        assert!(!is_park_unwind(&nested, &park(7)));
    }

    // v0.3.0 API: callers test error values through wrapping (errors.Is), never by string matching.
    #[test]
    fn is_finds_a_leaf_kind_through_wrapping_and_joining() {
        let err = ApiError::Joined(vec![
            ApiError::ComputeBusy,
            ApiError::MemoryStateLost.wrap("restore").wrap("resume s1"),
        ]);
        assert!(err.is(ApiErrorKind::MemoryStateLost));
        assert!(err.is(ApiErrorKind::ComputeBusy));
        assert!(!err.is(ApiErrorKind::PermissionDenied));
        assert_eq!(err.leaf_kind(), None);
        assert_eq!(
            err.leaves().collect::<Vec<_>>(),
            vec![&ApiError::ComputeBusy, &ApiError::MemoryStateLost]
        );
    }

    // semantics §8, extensions §2/§4/§5/§6: every leaf's row, and a tree's code.
    #[test]
    fn every_leaf_has_its_code_and_a_tree_takes_its_first_failure() {
        let rows = [
            (ApiError::ApprovalParked(park(7)), StatusCode::Ok),
            (ApiError::CheckpointPending, StatusCode::Unavailable),
            (ApiError::ComputeBusy, StatusCode::Aborted),
            (ApiError::SnapshotSuperseded, StatusCode::Aborted),
            (ApiError::InvalidCallerIdentity, StatusCode::InvalidArgument),
            (ApiError::InvalidCheckpoint, StatusCode::FailedPrecondition),
            (ApiError::MemoryStateLost, StatusCode::FailedPrecondition),
            (ApiError::InvalidModelPolicy, StatusCode::FailedPrecondition),
            (
                ApiError::ModelNotAllowed { model: "m".into() },
                StatusCode::FailedPrecondition,
            ),
            (ApiError::PermissionDenied, StatusCode::PermissionDenied),
            (ApiError::Cancelled, StatusCode::Cancelled),
            (
                ApiError::status(StatusCode::NotFound, "x"),
                StatusCode::NotFound,
            ),
            (
                ApiError::MemoryStateLost.wrap("restore").wrap("resume"),
                StatusCode::FailedPrecondition,
            ),
            (
                ApiError::Joined(vec![ApiError::ComputeBusy, ApiError::Cancelled]),
                StatusCode::Aborted,
            ),
            // extensions §6: a park beside an independent failure is that failure.
            (
                ApiError::Joined(vec![
                    ApiError::ApprovalParked(park(7)),
                    ApiError::status(StatusCode::Unavailable, "reset").wrap("close"),
                ]),
                StatusCode::Unavailable,
            ),
            (
                ApiError::Joined(vec![
                    ApiError::ApprovalParked(park(7)),
                    ApiError::ApprovalParked(park(7)).wrap("sink"),
                ]),
                StatusCode::Ok,
            ),
            (ApiError::Joined(Vec::new()), StatusCode::Unknown),
        ];
        for (err, code) in rows {
            assert_eq!(err.status_code(), code, "{err}");
        }
    }

    // STYLE rule 4: retry is a method, never string matching.
    #[test]
    fn retryable_errors_are_the_ones_that_settle_on_their_own() {
        assert!(ApiError::ComputeBusy.wrap("create").is_retryable());
        assert!(ApiError::CheckpointPending.is_retryable());
        assert!(ApiError::SnapshotSuperseded.is_retryable());
        assert!(ApiError::status(StatusCode::Unavailable, "down").is_retryable());
        assert!(!ApiError::MemoryStateLost.is_retryable());
        assert!(!ApiError::InvalidCheckpoint.is_retryable());
        assert!(!ApiError::Joined(Vec::new()).is_retryable());
        assert!(
            !ApiError::Joined(vec![ApiError::ComputeBusy, ApiError::PermissionDenied])
                .is_retryable()
        );
    }

    // v0.3.0 API (Go errors.Join): joining no errors yields no error. Unlike Go, one error is
    // returned as is; classification and is_park_unwind see the same leaves either way.
    #[test]
    fn join_of_none_is_none_and_of_one_is_that_error() {
        assert_eq!(ApiError::join([]), None);
        assert_eq!(
            ApiError::join([ApiError::ComputeBusy]),
            Some(ApiError::ComputeBusy)
        );
        assert_eq!(
            ApiError::join([ApiError::ComputeBusy, ApiError::Cancelled]),
            Some(ApiError::Joined(vec![
                ApiError::ComputeBusy,
                ApiError::Cancelled
            ]))
        );
    }

    // STYLE rule 4: messages are lowercase, with no trailing period; the v0.3.0 API's texts are
    // kept.
    #[test]
    fn messages_are_lowercase_without_trailing_period() {
        let all = [
            ApiError::ApprovalParked(park(7)),
            ApiError::CheckpointPending,
            ApiError::ComputeBusy,
            ApiError::InvalidCallerIdentity,
            ApiError::InvalidCheckpoint,
            ApiError::InvalidModelPolicy,
            ApiError::MemoryStateLost,
            ApiError::ModelNotAllowed { model: "m".into() },
            ApiError::PermissionDenied,
            ApiError::SnapshotSuperseded,
            ApiError::status(StatusCode::Internal, "boom"),
            ApiError::Cancelled,
            ApiError::Joined(vec![ApiError::Cancelled, ApiError::ComputeBusy]),
            ApiError::Joined(Vec::new()),
            ApiError::Cancelled.wrap("run"),
        ];
        for err in all {
            let text = err.to_string();
            let first = text.chars().next().unwrap_or_default();
            assert!(first.is_lowercase(), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
        assert_eq!(
            ApiError::ApprovalParked(park(7)).to_string(),
            "approval parked: execution \"x1\" tool call \"t1\" request seq 7"
        );
        assert_eq!(
            ApiError::Joined(vec![ApiError::Cancelled, ApiError::ComputeBusy]).to_string(),
            "cancelled; runtime: compute is busy with another operation"
        );
    }

    #[test]
    fn error_info_becomes_a_status_leaf_with_a_known_failure_code() {
        let info = ErrorInfo {
            code: 14,
            description: "down".into(),
        };
        assert_eq!(
            ApiError::from(info),
            ApiError::status(StatusCode::Unavailable, "down")
        );
        for code in [0, 99] {
            let err = ApiError::from(ErrorInfo {
                code,
                description: String::new(),
            });
            assert!(matches!(
                err,
                ApiError::Status {
                    code: StatusCode::Unknown,
                    ..
                }
            ));
        }
        for code in StatusCode::ALL {
            assert_eq!(StatusCode::from_number(code.number()), Some(code));
        }
    }
}
