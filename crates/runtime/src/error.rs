//! [`RuntimeError`], the one error type of this crate, and its mapping to [`ApiError`].

use std::path::PathBuf;
use std::time::Duration;

use agentsessions_api::{ApiError, StatusCode};
use agentsessions_harnesswire::HarnessWireError;

/// Shorthand for results whose error is [`RuntimeError`].
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// What went wrong placing, reaching or tearing down a harness.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A harness address is not one of the accepted forms (semantics §10.7).
    #[error("invalid harness address {address:?}: {reason}")]
    InvalidAddress {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// Create was called without a session uid.
    #[error("{runtime} runtime: a session uid is required")]
    MissingSessionUid {
        /// The backend name.
        runtime: &'static str,
    },

    /// Restore was called with a snapshot ref that names no session (`local` is empty).
    #[error("{runtime} runtime: the snapshot ref names no session (empty local handle)")]
    MissingSnapshotHandle {
        /// The backend name.
        runtime: &'static str,
    },

    /// Fork was called without a child session uid.
    #[error("{runtime} runtime: a child session uid is required")]
    MissingChildUid {
        /// The backend name.
        runtime: &'static str,
    },

    /// A warm (LOCAL) snapshot was asked of a backend that keeps nothing node-resident.
    #[error("{runtime} runtime: LOCAL (warm) snapshots are not supported; use EXTERNAL")]
    LocalSnapshotUnsupported {
        /// The backend name.
        runtime: &'static str,
    },

    /// The backend was closed; it stays closed.
    #[error("{runtime} runtime is closed")]
    Closed {
        /// The backend name.
        runtime: &'static str,
    },

    /// The in-process harness server could not be started.
    #[error("local runtime: cannot serve the harness on {path}: {source}")]
    Serve {
        /// The socket path.
        path: PathBuf,
        /// Why.
        source: HarnessWireError,
    },

    /// No `harnessnode` executable was found.
    #[error(
        "local runtime: cannot find the harnessnode binary (looked at {looked_at}); \
         configure its path or set HARNESSNODE"
    )]
    HarnessnodeNotFound {
        /// The places that were tried.
        looked_at: String,
    },

    /// The harness process could not be started.
    #[error("local runtime: cannot start {program}: {source}")]
    Spawn {
        /// The executable.
        program: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },

    /// The harness process did not become ready (healthy on its socket) in time, or exited.
    #[error("local runtime: harness process for session {session} not ready: {reason}")]
    NotReady {
        /// The session the process was started for.
        session: String,
        /// What happened: the exit status, or how long was waited.
        reason: String,
    },

    /// A harness process could not be stopped.
    #[error("local runtime: cannot stop the harness process of session {session}: {source}")]
    Stop {
        /// The session.
        session: String,
        /// The OS error.
        source: std::io::Error,
    },

    /// Describe failed against the harness at `address`; `code` is the status it failed with.
    #[error("describe harness at {address}: {message}")]
    Describe {
        /// The harness address.
        address: String,
        /// The gRPC code of the failure, kept from the underlying status.
        code: StatusCode,
        /// The underlying error's message.
        message: String,
    },

    /// An incarnation's call metadata cannot travel as gRPC metadata.
    #[error("call metadata entry {key:?} is not a valid gRPC ASCII header")]
    InvalidMetadata {
        /// The offending key.
        key: String,
    },

    /// A channel to a harness could not be created.
    #[error("harness at {address}: {source}")]
    Channel {
        /// The harness address.
        address: String,
        /// Why.
        source: HarnessWireError,
    },
}

/// How long the local runtime waited; used in [`RuntimeError::NotReady`] reasons.
pub(crate) fn waited(timeout: Duration) -> String {
    format!("no healthy answer on its socket within {timeout:?}")
}

impl RuntimeError {
    /// The gRPC code this error is reported with.
    pub fn code(&self) -> StatusCode {
        match self {
            Self::InvalidAddress { .. }
            | Self::MissingSessionUid { .. }
            | Self::MissingSnapshotHandle { .. }
            | Self::MissingChildUid { .. }
            | Self::InvalidMetadata { .. } => StatusCode::InvalidArgument,
            Self::LocalSnapshotUnsupported { .. } => StatusCode::Unimplemented,
            Self::Closed { .. } | Self::HarnessnodeNotFound { .. } => {
                StatusCode::FailedPrecondition
            }
            Self::Spawn { .. } | Self::NotReady { .. } => StatusCode::Unavailable,
            Self::Stop { .. } => StatusCode::Internal,
            Self::Serve { source, .. } | Self::Channel { source, .. } => source.code(),
            Self::Describe { code, .. } => *code,
        }
    }

    /// Whether retrying later may succeed without anyone changing anything.
    pub fn is_retryable(&self) -> bool {
        matches!(self.code(), StatusCode::Unavailable | StatusCode::Aborted)
    }
}

/// Every variant is an [`ApiError::Status`] with [`RuntimeError::code`] and this error's message.
impl From<RuntimeError> for ApiError {
    fn from(err: RuntimeError) -> Self {
        Self::status(err.code(), err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // STYLE rule 4: lowercase messages without a trailing period; codes survive the mapping.
    #[test]
    fn messages_are_lowercase_and_codes_survive() {
        let all = [
            RuntimeError::MissingSessionUid { runtime: "local" },
            RuntimeError::LocalSnapshotUnsupported { runtime: "remote" },
            RuntimeError::Describe {
                address: "127.0.0.1:1".into(),
                code: StatusCode::Unavailable,
                message: "connection refused".into(),
            },
        ];
        for err in all {
            let text = err.to_string();
            assert!(text.starts_with(char::is_lowercase), "{text}");
            assert!(!text.ends_with('.'), "{text}");
            let code = err.code();
            match ApiError::from(err) {
                ApiError::Status { code: got, .. } => assert_eq!(got, code),
                other => panic!("{other:?}"),
            }
        }
    }
}
