//! [`HarnessWireError`], the one error type of this crate, and every mapping between it,
//! [`ApiError`] and [`tonic::Status`]: the status code of each variant is decided in
//! [`HarnessWireError::code`] and nowhere else; an [`ApiError`] takes the code of
//! [`ApiError::status_code`], the same row the Sessions side reports ([`status_code_of`] only
//! keeps a failure from travelling as `OK`).

use std::time::Duration;

use agentsessions_api::{ApiError, ErrorInfo, StatusCode};
use agentsessions_wire::WireError;
use agentsessions_wire::pb;

/// Shorthand for results whose error is [`HarnessWireError`].
pub type Result<T, E = HarnessWireError> = std::result::Result<T, E>;

/// What went wrong serving or driving a harness over `Harness.Connect` / `Harness.Describe`.
///
/// The protocol variants name the frame or event that broke the contract of semantics §9; a peer
/// that sends one is misbehaving, and the execution fails (it stays resumable from the journal).
#[derive(Debug, thiserror::Error)]
pub enum HarnessWireError {
    /// A run was started (or a stream opened) without an execution id; the protocol correlates
    /// every frame by it.
    #[error("harness stream: an execution id is required")]
    MissingExecutionId,

    /// The first frame the host sent was not `start`.
    #[error("harness stream: the first frame must be start, got {got}")]
    FirstFrameNotStart {
        /// The frame that arrived instead.
        got: &'static str,
    },

    /// A frame or event belongs to another execution than the stream's.
    #[error("harness stream: frame for execution {got:?}, want {want:?}")]
    ExecutionMismatch {
        /// The stream's execution id.
        want: String,
        /// The id the frame carried.
        got: String,
    },

    /// A frame belongs to another session than the one the stream started with.
    #[error("harness stream: frame for session {got:?}, want {want:?}")]
    SessionMismatch {
        /// The stream's session uid.
        want: String,
        /// The uid the frame carried.
        got: String,
    },

    /// An event of `kind` arrived without the body that kind requires.
    #[error("harness stream: {kind} event without its {field} body")]
    MissingPayload {
        /// The event kind, e.g. `TOOL_CALL`.
        kind: &'static str,
        /// The body member it needs, e.g. `tool`.
        field: &'static str,
    },

    /// The harness sent an event only the host may write (APPROVAL_REQUEST, APPROVAL_RESULT,
    /// EXECUTION_START, or PARKED outside the park exchange).
    #[error("harness stream: harness emitted host-owned control event {kind}")]
    HostOwnedEvent {
        /// The event kind.
        kind: &'static str,
    },

    /// The host answered a sink call with the wrong kind of frame.
    #[error("harness stream: expected a {want} frame, got {got}")]
    UnexpectedFrame {
        /// What the pending call waits for.
        want: &'static str,
        /// What arrived.
        got: &'static str,
    },

    /// A model result answers another model call than the pending one.
    #[error("harness stream: model result for call {got:?}, want {want:?}")]
    ModelCallMismatch {
        /// The pending model call's id.
        want: String,
        /// The `model_call_id` that arrived.
        got: String,
    },

    /// A tool result answers another tool call than the pending one.
    #[error("harness stream: tool result for call {got:?}, want {want:?}")]
    ToolResultMismatch {
        /// The pending tool call's id.
        want: String,
        /// The result id that arrived.
        got: String,
    },

    /// A tool result carries approval fields (request or decision seq, a denial, a decision) on a
    /// path that has no approval: an ordinary tool call's result or a reported result.
    #[error(
        "harness stream: tool result {tool_call_id:?} carries approval fields on an ungated path"
    )]
    ApprovalShapedResult {
        /// The result's id.
        tool_call_id: String,
    },

    /// An approval-gated (`REQUIRES_APPROVAL`) tool call cannot be correlated: it needs a
    /// session uid and a call id.
    #[error("harness stream: an approval-gated tool call needs {missing}")]
    InvalidApprovalCall {
        /// What is missing: `a session uid` or `a tool call id`.
        missing: &'static str,
    },

    /// The approval decision or receipt for a gated call does not fit the call.
    #[error("harness stream: invalid approval for tool call {tool_call_id:?}: {reason}")]
    InvalidApproval {
        /// The gated call.
        tool_call_id: String,
        /// What does not fit.
        reason: &'static str,
    },

    /// A `park` frame does not match the pending gated call (execution, call id, or a request
    /// seq that is not positive).
    #[error("harness stream: invalid park for tool call {tool_call_id:?}")]
    InvalidPark {
        /// The gated call.
        tool_call_id: String,
    },

    /// The remote harness did not complete the park exchange (semantics §9.5): no matching
    /// PARKED acknowledgement, or more events after it. The durable approval request stays
    /// recoverable.
    #[error("harness stream: park exchange failed: {reason}")]
    ParkExchange {
        /// What went wrong.
        reason: &'static str,
    },

    /// A frame or event could not be converted to domain types.
    #[error("harness stream: invalid frame: {0}")]
    InvalidFrame(#[from] WireError),

    /// The host went away while the harness waited for its answer.
    #[error("harness stream: the host closed the stream")]
    HostClosed,

    /// The remote harness's stream ended (cleanly) without an END event. Never success: the
    /// execution's outcome is unknown.
    #[error("remote harness closed the stream without END")]
    ClosedWithoutEnd,

    /// The remote harness ended the execution in a state other than `COMPLETED`.
    #[error("remote harness ended {state}{}", describe_end(.description))]
    RemoteEnded {
        /// The END state, e.g. `FAILED`.
        state: String,
        /// The gRPC code of the END error (0 when it carried none).
        code: i32,
        /// The END error's description.
        description: String,
    },

    /// The host answered a token mint (the `mint_request` extension) with an error.
    #[error("host refused to mint a token{}", describe_end(.description))]
    MintRefused {
        /// The gRPC code of the host's error.
        code: i32,
        /// The host's description.
        description: String,
    },

    /// The host did not answer a token mint in time.
    #[error("host did not answer the token mint within {timeout:?}")]
    MintTimeout {
        /// The bound that passed.
        timeout: Duration,
    },

    /// A remote harness asked for a token, but this execution has no token minter (the host has
    /// no identity configured).
    #[error("no token minter for this execution: the host has no identity configured")]
    NoMinter,

    /// A gRPC call failed (transport error, or a status the peer returned).
    #[error("harness rpc failed: {code}: {message}")]
    Rpc {
        /// The status code.
        code: StatusCode,
        /// The status message.
        message: String,
    },

    /// Describe did not answer within the timeout (semantics §9.1 bounds every call).
    #[error("harness describe timed out after {timeout:?}")]
    DescribeTimeout {
        /// The bound that passed.
        timeout: Duration,
    },

    /// A harness address could not be turned into an endpoint.
    #[error("invalid harness address {address:?}: {source}")]
    InvalidAddress {
        /// The address as given.
        address: String,
        /// Why tonic refused it.
        source: tonic::transport::Error,
    },

    /// TLS settings for a harness link that cannot be used.
    #[error("TLS for harness address {address:?}: {reason}")]
    InvalidTls {
        /// The address as given.
        address: String,
        /// Why.
        reason: String,
    },

    /// A channel was requested outside a tokio runtime, which the channel's worker needs.
    #[error("harness channel: no tokio runtime is running")]
    NoRuntime,

    /// The serving helper could not listen on its address.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address or socket path.
        address: String,
        /// The OS error.
        source: std::io::Error,
    },

    /// The gRPC server failed while serving.
    #[error("harness server failed: {0}")]
    Serve(tonic::transport::Error),

    /// A listen address is not one of the forms [`crate::ListenAddr`] accepts.
    #[error("invalid listen address {address:?}: {reason}")]
    InvalidListenAddress {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A unix socket path is taken by a server that still answers; it is not stale.
    #[error("unix socket {path} is in use by a running server")]
    SocketInUse {
        /// The socket path.
        path: String,
    },

    /// A unix socket path is taken by something that is not a socket, which is never removed.
    #[error("{path} exists and is not a unix socket; refusing to replace it")]
    NotASocket {
        /// The path.
        path: String,
    },
}

/// Renders the END description for [`HarnessWireError::RemoteEnded`]: `: <description>`, or
/// nothing when there is none.
fn describe_end(description: &str) -> String {
    if description.is_empty() {
        String::new()
    } else {
        format!(": {description}")
    }
}

impl HarnessWireError {
    /// The gRPC code this error is reported with, in either direction.
    pub fn code(&self) -> StatusCode {
        match self {
            Self::MissingExecutionId
            | Self::InvalidAddress { .. }
            | Self::InvalidTls { .. }
            | Self::InvalidListenAddress { .. } => StatusCode::InvalidArgument,
            Self::SocketInUse { .. } | Self::NotASocket { .. } => StatusCode::FailedPrecondition,
            // The controller's ErrInvalidApprovalCall / ErrApprovalReceiptReport (semantics §8).
            Self::InvalidApprovalCall { .. } | Self::ApprovalShapedResult { .. } => {
                StatusCode::FailedPrecondition
            }
            Self::FirstFrameNotStart { .. }
            | Self::ExecutionMismatch { .. }
            | Self::SessionMismatch { .. }
            | Self::MissingPayload { .. }
            | Self::HostOwnedEvent { .. }
            | Self::UnexpectedFrame { .. }
            | Self::ModelCallMismatch { .. }
            | Self::ToolResultMismatch { .. }
            | Self::InvalidApproval { .. }
            | Self::InvalidPark { .. }
            | Self::ParkExchange { .. }
            | Self::InvalidFrame(_)
            | Self::NoRuntime => StatusCode::Internal,
            Self::HostClosed => StatusCode::Cancelled,
            Self::ClosedWithoutEnd | Self::Bind { .. } | Self::Serve(_) => StatusCode::Unavailable,
            Self::RemoteEnded { code, .. } | Self::MintRefused { code, .. } => failure_code(*code),
            Self::MintTimeout { .. } => StatusCode::DeadlineExceeded,
            Self::NoMinter => StatusCode::FailedPrecondition,
            Self::Rpc { code, .. } => *code,
            Self::DescribeTimeout { .. } => StatusCode::DeadlineExceeded,
        }
    }

    /// Whether retrying later may succeed without anyone correcting anything: when the code is
    /// `UNAVAILABLE` or `ABORTED`, as for [`ApiError::is_retryable`].
    pub fn is_retryable(&self) -> bool {
        matches!(self.code(), StatusCode::Unavailable | StatusCode::Aborted)
    }
}

/// A received numeric code as a failure code: unknown numbers and `OK` become `UNKNOWN`.
fn failure_code(number: i32) -> StatusCode {
    StatusCode::from_number(number).map_or(StatusCode::Unknown, as_failure)
}

/// [`HarnessWireError::HostClosed`] is [`ApiError::Cancelled`]; every other variant is an
/// [`ApiError::Status`] with [`HarnessWireError::code`] and this error's message.
impl From<HarnessWireError> for ApiError {
    fn from(err: HarnessWireError) -> Self {
        match err {
            HarnessWireError::HostClosed => Self::Cancelled,
            other => Self::status(other.code(), other.to_string()),
        }
    }
}

impl From<HarnessWireError> for tonic::Status {
    fn from(err: HarnessWireError) -> Self {
        Self::new(tonic_code(err.code()), err.to_string())
    }
}

/// A status received from the peer or the transport.
impl From<tonic::Status> for HarnessWireError {
    fn from(status: tonic::Status) -> Self {
        Self::Rpc {
            code: failure_code(i32::from(status.code())),
            message: status.message().to_owned(),
        }
    }
}

/// The gRPC code a *failure* carrying `err` travels with (an END frame's error, a failed
/// Describe): the code of the one table, [`ApiError::status_code`], which the Sessions side uses
/// too. A failure never travels as `OK`: a stray park (a tree of parks only, which the table
/// gives OK) goes as `UNKNOWN`, the code the receiving side reads an `OK` failure as.
pub fn status_code_of(err: &ApiError) -> StatusCode {
    as_failure(err.status_code())
}

fn as_failure(code: StatusCode) -> StatusCode {
    if code == StatusCode::Ok {
        StatusCode::Unknown
    } else {
        code
    }
}

/// The wire form of a failed run's error, for `END{FAILED}`.
pub(crate) fn end_error(err: &ApiError) -> pb::Error {
    pb::Error::from(ErrorInfo {
        code: status_code_of(err).number(),
        description: err.to_string(),
    })
}

/// A failed Describe (or any harness error answered as a status).
pub(crate) fn api_error_to_status(err: &ApiError) -> tonic::Status {
    tonic::Status::new(tonic_code(status_code_of(err)), err.to_string())
}

fn tonic_code(code: StatusCode) -> tonic::Code {
    tonic::Code::from_i32(code.number())
}

#[cfg(test)]
mod tests {
    use agentsessions_api::ApprovalRef;

    use super::*;

    #[test]
    fn host_closed_is_cancelled_and_the_rest_keep_code_and_message() {
        assert_eq!(
            ApiError::from(HarnessWireError::HostClosed),
            ApiError::Cancelled
        );
        let err = HarnessWireError::RemoteEnded {
            state: "FAILED".into(),
            code: 13,
            description: "boom".into(),
        };
        assert_eq!(err.to_string(), "remote harness ended FAILED: boom");
        assert_eq!(
            ApiError::from(err),
            ApiError::status(StatusCode::Internal, "remote harness ended FAILED: boom")
        );
        let bare = HarnessWireError::RemoteEnded {
            state: "CANCELED".into(),
            code: 0,
            description: String::new(),
        };
        assert_eq!(bare.to_string(), "remote harness ended CANCELED");
        assert_eq!(bare.code(), StatusCode::Unknown);
    }

    // semantics §9.3 (deviation, see the crate docs): EOF without END is a retryable failure.
    #[test]
    fn closing_without_end_is_an_unavailable_failure() {
        let err = HarnessWireError::ClosedWithoutEnd;
        assert!(err.is_retryable());
        let status = tonic::Status::from(err);
        assert_eq!(status.code(), tonic::Code::Unavailable);
    }

    #[test]
    fn statuses_round_trip_through_the_error() {
        let err = HarnessWireError::from(tonic::Status::not_found("no such harness"));
        assert_eq!(err.code(), StatusCode::NotFound);
        let back = tonic::Status::from(err);
        assert_eq!(back.code(), tonic::Code::NotFound);
        assert!(back.message().contains("no such harness"));
        let ok = HarnessWireError::from(tonic::Status::new(tonic::Code::Ok, ""));
        assert_eq!(ok.code(), StatusCode::Unknown);
    }

    #[test]
    fn api_errors_take_the_code_of_their_first_leaf() {
        let park = ApiError::ApprovalParked(ApprovalRef::default());
        let cases = [
            (
                ApiError::status(StatusCode::NotFound, "x").wrap("ctx"),
                StatusCode::NotFound,
            ),
            (ApiError::Cancelled, StatusCode::Cancelled),
            (ApiError::ComputeBusy, StatusCode::Aborted),
            (ApiError::CheckpointPending, StatusCode::Unavailable),
            (ApiError::MemoryStateLost, StatusCode::FailedPrecondition),
            (ApiError::PermissionDenied, StatusCode::PermissionDenied),
            // A park is OK in the table (semantics §8); as a failure it travels as UNKNOWN.
            (park.clone(), StatusCode::Unknown),
            (
                ApiError::Joined(vec![park, ApiError::ComputeBusy]),
                StatusCode::Aborted,
            ),
            // extensions §4: a model policy is the host's, not the caller's argument.
            (
                ApiError::Joined(vec![ApiError::InvalidModelPolicy, ApiError::Cancelled]),
                StatusCode::FailedPrecondition,
            ),
            (ApiError::InvalidCallerIdentity, StatusCode::InvalidArgument),
            (ApiError::Joined(Vec::new()), StatusCode::Unknown),
        ];
        for (err, code) in cases {
            assert_eq!(status_code_of(&err), code, "{err}");
        }
        let end = end_error(&ApiError::status(StatusCode::Internal, "boom"));
        assert_eq!(end.code, 13);
        assert_eq!(end.description, "status INTERNAL: boom");
    }

    // STYLE rule 4: messages are lowercase, with no trailing period.
    #[test]
    fn messages_are_lowercase() {
        let all = [
            HarnessWireError::MissingExecutionId,
            HarnessWireError::FirstFrameNotStart { got: "cancel" },
            HarnessWireError::HostOwnedEvent { kind: "PARKED" },
            HarnessWireError::ClosedWithoutEnd,
            HarnessWireError::HostClosed,
            HarnessWireError::NoRuntime,
            HarnessWireError::DescribeTimeout {
                timeout: Duration::from_secs(10),
            },
        ];
        for err in all {
            let text = err.to_string();
            assert!(text.starts_with(char::is_lowercase), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
    }
}
