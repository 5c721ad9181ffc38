//! [`ConsoleError`], everything an HTTP request to the console can fail with, and the one place
//! an error becomes an HTTP status and a JSON body.
//!
//! Errors of the Sessions service arrive as the gRPC status its RPCs answer with (the console
//! calls those RPCs); their HTTP status follows from the gRPC code in one exhaustive table.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tonic::Code;

/// Everything a console request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The credential did not verify, or none was given where one is required.
    #[error("unauthenticated: {0}")]
    Unauthenticated(agentsessions_auth::AuthError),
    /// A state-changing request without the console's CSRF header.
    #[error("missing header {header}: state-changing requests must send it (CSRF protection)")]
    MissingCsrfHeader {
        /// The header's name.
        header: &'static str,
    },
    /// A state-changing request sent from another site.
    #[error("cross-origin request refused (origin {origin:?})")]
    CrossOrigin {
        /// What the browser said the request came from.
        origin: String,
    },
    /// A `Host` header this console does not answer to (DNS rebinding protection).
    #[error("host {host:?} is not served here")]
    HostNotAllowed {
        /// The host asked for.
        host: String,
    },
    /// A query or body field the console itself checks.
    #[error("{field}: {problem}")]
    InvalidField {
        /// The field, as the API names it.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The session does not exist, or the caller may not read it (the two look the same).
    #[error("session {uid:?} not found")]
    SessionNotFound {
        /// The uid asked for.
        uid: String,
    },
    /// The Sessions service refused or failed the call.
    #[error("{}", .0.message())]
    Rpc(#[from] tonic::Status),
    /// The records the service returned do not decode (for the audit bundle).
    #[error("{0}")]
    Records(#[from] agentsessions_client::ClientError),
    /// The audit bundle could not be written.
    #[error("audit bundle: {0}")]
    Audit(#[from] agentsessions_journal::JournalError),
}

/// The result of a console handler.
pub type Result<T, E = ConsoleError> = std::result::Result<T, E>;

impl ConsoleError {
    /// The HTTP status of this error.
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Self::MissingCsrfHeader { .. } | Self::CrossOrigin { .. } => StatusCode::FORBIDDEN,
            Self::HostNotAllowed { .. } => StatusCode::MISDIRECTED_REQUEST,
            Self::InvalidField { .. } => StatusCode::BAD_REQUEST,
            Self::SessionNotFound { .. } => StatusCode::NOT_FOUND,
            Self::Rpc(status) => http_status(status.code()),
            Self::Records(_) | Self::Audit(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The gRPC code name the body reports (`NOT_FOUND` …), so scripts see the same codes as
    /// gRPC clients.
    pub fn code_name(&self) -> &'static str {
        match self {
            Self::Unauthenticated(_) => agentsessions_client::code_name(Code::Unauthenticated),
            Self::MissingCsrfHeader { .. } | Self::CrossOrigin { .. } => {
                agentsessions_client::code_name(Code::PermissionDenied)
            }
            Self::HostNotAllowed { .. } | Self::InvalidField { .. } => {
                agentsessions_client::code_name(Code::InvalidArgument)
            }
            Self::SessionNotFound { .. } => agentsessions_client::code_name(Code::NotFound),
            Self::Rpc(status) => agentsessions_client::code_name(status.code()),
            Self::Records(_) | Self::Audit(_) => agentsessions_client::code_name(Code::Internal),
        }
    }
}

/// The HTTP status of a gRPC code (the mapping of the gRPC-HTTP guidelines).
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::FailedPrecondition => StatusCode::CONFLICT,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Cancelled => StatusCode::REQUEST_TIMEOUT,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The JSON body of an error.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    /// The gRPC code name.
    code: &'a str,
    /// What went wrong, for a person.
    message: String,
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let status = self.status_code();
        if status.is_server_error() {
            tracing::warn!(component = "console", error = %self, "request failed");
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code_name(),
                message: self.to_string(),
            },
        };
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grpc_code_has_an_http_status() {
        let rows = [
            (Code::Ok, 200),
            (Code::Cancelled, 408),
            (Code::Unknown, 500),
            (Code::InvalidArgument, 400),
            (Code::DeadlineExceeded, 504),
            (Code::NotFound, 404),
            (Code::AlreadyExists, 409),
            (Code::PermissionDenied, 403),
            (Code::ResourceExhausted, 429),
            (Code::FailedPrecondition, 409),
            (Code::Aborted, 409),
            (Code::OutOfRange, 400),
            (Code::Unimplemented, 501),
            (Code::Internal, 500),
            (Code::Unavailable, 503),
            (Code::DataLoss, 500),
            (Code::Unauthenticated, 401),
        ];
        for (code, http) in rows {
            assert_eq!(http_status(code).as_u16(), http, "{code:?}");
        }
    }

    #[test]
    fn a_hidden_session_is_a_plain_not_found() {
        let hidden = ConsoleError::SessionNotFound { uid: "s".into() };
        assert_eq!(hidden.status_code(), StatusCode::NOT_FOUND);
        assert_eq!(hidden.code_name(), "NOT_FOUND");
    }
}
