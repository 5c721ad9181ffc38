//! [`ModelError`]: everything that can go wrong while asking a provider for a completion, and how
//! each failure becomes an [`ApiError::Status`] for the host.

use std::time::Duration;

use agentsessions_api::{ApiError, StatusCode};

/// Result alias for this crate.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;

/// Why a provider could not produce a completion.
///
/// [`ModelError::is_retryable`] is true only when the request provably never reached the model,
/// so retrying cannot produce a second completion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// No connection could be opened (refused, DNS, TLS handshake, connect timeout). The request
    /// was never sent.
    #[error("cannot connect to {url}: {detail}")]
    Connect {
        /// The endpoint, without its query.
        url: String,
        /// What the transport reported.
        detail: String,
    },

    /// The request was sent but no complete answer arrived within the configured timeout. The
    /// model may have produced a completion that was lost.
    #[error("no complete answer within {}s", .after.as_secs_f64())]
    Timeout {
        /// The configured HTTP timeout.
        after: Duration,
    },

    /// The connection failed after the request was sent.
    #[error("connection failed after the request was sent: {detail}")]
    Transport {
        /// What the transport reported.
        detail: String,
    },

    /// The provider answered with a non-success HTTP status.
    #[error("provider answered http {status}{}: {message}", attempts_note(*.attempts))]
    HttpStatus {
        /// The HTTP status code.
        status: u16,
        /// The provider's own error message, or the start of its body.
        message: String,
        /// How many requests were made, retries included.
        attempts: u32,
    },

    /// The provider reported an error inside a success response or in the middle of a stream.
    #[error("provider reported {kind}: {message}")]
    ProviderError {
        /// The provider's error type (`overloaded_error`, `server_error`, …), or `error`.
        kind: String,
        /// The provider's own message.
        message: String,
    },

    /// A response body was larger than the cap.
    #[error("response body exceeds {limit} bytes")]
    BodyTooLarge {
        /// The cap in bytes.
        limit: usize,
    },

    /// One line (or one event) of a streamed response was larger than the cap.
    #[error("stream line exceeds {limit} bytes")]
    LineTooLong {
        /// The cap in bytes.
        limit: usize,
    },

    /// The answer does not have the shape the provider's API documents.
    #[error("malformed response: {detail}")]
    MalformedResponse {
        /// What was wrong.
        detail: String,
    },

    /// A chat completion with no choices.
    #[error("response has no choices")]
    NoChoices,

    /// A tool call whose arguments are not a JSON object.
    #[error("tool call {id:?} to {tool:?} has invalid arguments: {detail}")]
    InvalidToolArguments {
        /// The call id.
        id: String,
        /// The tool name.
        tool: String,
        /// Why the arguments were refused.
        detail: String,
    },

    /// A stream ended before the provider marked the completion finished.
    #[error("stream ended before the completion was finished")]
    TruncatedStream,

    /// The request holds a part this provider cannot express.
    #[error("{role} message has a {part} part, which this provider cannot send")]
    UnsupportedPart {
        /// The role of the message that holds it.
        role: String,
        /// The kind of part (`file`, `data`, `tool call`).
        part: &'static str,
    },

    /// A reasoning part meant for this provider cannot be sent back.
    #[error("reasoning part cannot be sent back: {detail}")]
    InvalidReasoning {
        /// Why.
        detail: String,
    },

    /// A request parameter whose value does not have the type the provider expects.
    #[error("parameter {name:?} has invalid value {value:?}: expected {expected}")]
    InvalidParam {
        /// The parameter name.
        name: String,
        /// The value given.
        value: String,
        /// What the provider expects.
        expected: &'static str,
    },

    /// A request parameter that the provider fills in itself (`model`, `messages`, `stream`…).
    #[error("parameter {name:?} cannot be set through params")]
    ReservedParam {
        /// The parameter name.
        name: String,
    },

    /// The provider configuration cannot work (no default model, an invalid header, …).
    #[error("invalid provider configuration: {detail}")]
    InvalidConfig {
        /// What is wrong.
        detail: String,
    },
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" after {attempts} attempts")
    } else {
        String::new()
    }
}

impl ModelError {
    /// Whether the same request may be sent again without risking a second completion reaching
    /// the harness: the request never reached the model (a connect failure), or the provider
    /// answered with a status and no completion (HTTP 429, the transient 5xx answers 500, 502,
    /// 503 and 504, and Anthropic's 529 "overloaded"). An answer that began streaming is never
    /// retried: its failures are the stream's, not a status.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connect { .. } => true,
            Self::HttpStatus { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504 | 529),
            Self::Timeout { .. }
            | Self::Transport { .. }
            | Self::ProviderError { .. }
            | Self::BodyTooLarge { .. }
            | Self::LineTooLong { .. }
            | Self::MalformedResponse { .. }
            | Self::NoChoices
            | Self::InvalidToolArguments { .. }
            | Self::TruncatedStream
            | Self::UnsupportedPart { .. }
            | Self::InvalidReasoning { .. }
            | Self::InvalidParam { .. }
            | Self::ReservedParam { .. }
            | Self::InvalidConfig { .. } => false,
        }
    }

    /// The gRPC code the host reports for this failure.
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::Connect { .. } | Self::Transport { .. } => StatusCode::Unavailable,
            Self::Timeout { .. } => StatusCode::DeadlineExceeded,
            Self::HttpStatus { status, .. } => http_status_code(*status),
            Self::ProviderError { kind, .. } => match kind.as_str() {
                "overloaded_error" => StatusCode::Unavailable,
                "rate_limit_error" => StatusCode::ResourceExhausted,
                "invalid_request_error" => StatusCode::InvalidArgument,
                "authentication_error" => StatusCode::Unauthenticated,
                "permission_error" => StatusCode::PermissionDenied,
                _ => StatusCode::Internal,
            },
            Self::BodyTooLarge { .. }
            | Self::LineTooLong { .. }
            | Self::MalformedResponse { .. }
            | Self::NoChoices
            | Self::InvalidToolArguments { .. }
            | Self::TruncatedStream => StatusCode::Internal,
            Self::UnsupportedPart { .. }
            | Self::InvalidReasoning { .. }
            | Self::InvalidParam { .. }
            | Self::ReservedParam { .. } => StatusCode::InvalidArgument,
            Self::InvalidConfig { .. } => StatusCode::FailedPrecondition,
        }
    }

    /// This error as the [`ApiError::Status`] a provider returns, its message prefixed with the
    /// provider's name so an operator knows which endpoint said it.
    pub fn into_api_error(self, provider: &str) -> ApiError {
        ApiError::status(self.status_code(), format!("{provider}: {self}"))
    }
}

/// Maps an HTTP status to the closest gRPC code.
fn http_status_code(status: u16) -> StatusCode {
    match status {
        400 | 413 | 422 => StatusCode::InvalidArgument,
        401 => StatusCode::Unauthenticated,
        403 => StatusCode::PermissionDenied,
        404 => StatusCode::NotFound,
        408 | 504 => StatusCode::DeadlineExceeded,
        429 => StatusCode::ResourceExhausted,
        502 | 503 | 529 => StatusCode::Unavailable,
        500..=599 => StatusCode::Internal,
        _ => StatusCode::Unknown,
    }
}

impl From<ModelError> for ApiError {
    fn from(err: ModelError) -> Self {
        Self::status(err.status_code(), err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> ModelError {
        ModelError::HttpStatus {
            status,
            message: "m".into(),
            attempts: 1,
        }
    }

    // brief: the status codes the host sees for each kind of provider failure.
    #[test]
    fn failures_map_to_the_documented_codes() {
        let cases = [
            (http(401), StatusCode::Unauthenticated),
            (http(403), StatusCode::PermissionDenied),
            (http(400), StatusCode::InvalidArgument),
            (http(429), StatusCode::ResourceExhausted),
            (http(503), StatusCode::Unavailable),
            (http(500), StatusCode::Internal),
            (
                ModelError::Connect {
                    url: "u".into(),
                    detail: "refused".into(),
                },
                StatusCode::Unavailable,
            ),
            (
                ModelError::Timeout {
                    after: Duration::from_secs(1),
                },
                StatusCode::DeadlineExceeded,
            ),
            (ModelError::TruncatedStream, StatusCode::Internal),
            (ModelError::NoChoices, StatusCode::Internal),
            (
                ModelError::UnsupportedPart {
                    role: "user".into(),
                    part: "file",
                },
                StatusCode::InvalidArgument,
            ),
        ];
        for (err, code) in cases {
            assert_eq!(err.status_code(), code, "{err}");
        }
    }

    // A model call is made at most once: retry only where no completion reached us (unsent, or
    // answered with a transient status).
    #[test]
    fn only_unsent_or_refused_requests_are_retryable() {
        assert!(
            ModelError::Connect {
                url: "u".into(),
                detail: "d".into()
            }
            .is_retryable()
        );
        for status in [429, 500, 502, 503, 504, 529] {
            assert!(http(status).is_retryable(), "{status}");
        }
        for status in [400, 401, 403, 404, 501, 505] {
            assert!(!http(status).is_retryable(), "{status}");
        }
        assert!(
            !ModelError::Timeout {
                after: Duration::from_secs(1)
            }
            .is_retryable()
        );
        assert!(!ModelError::TruncatedStream.is_retryable());
    }

    // STYLE rule 4: lowercase messages without a trailing period; the provider's text is kept.
    #[test]
    fn api_error_carries_the_provider_message() {
        let err = ModelError::HttpStatus {
            status: 429,
            message: "Rate limit reached".into(),
            attempts: 3,
        };
        let api = err.into_api_error("openai");
        assert_eq!(
            api,
            ApiError::status(
                StatusCode::ResourceExhausted,
                "openai: provider answered http 429 after 3 attempts: Rate limit reached"
            )
        );
        let text = ModelError::TruncatedStream.to_string();
        assert!(text.starts_with(char::is_lowercase) && !text.ends_with('.'));
    }
}
