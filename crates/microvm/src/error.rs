//! [`MicrovmError`], the one error type of this crate, and its mapping to [`ApiError`].

use std::path::PathBuf;

use agentsessions_api::{ApiError, StatusCode};

/// Shorthand for results whose error is [`MicrovmError`].
pub type Result<T, E = MicrovmError> = std::result::Result<T, E>;

/// What went wrong running, snapshotting or restoring a VM.
#[derive(Debug, thiserror::Error)]
pub enum MicrovmError {
    /// The configuration cannot run a VM (a missing kernel, an unknown accelerator, …).
    #[error("microvm runtime: invalid configuration: {0}")]
    Config(String),

    /// A call named no session (empty uid, snapshot handle or child uid).
    #[error("microvm runtime: {0} is required")]
    MissingArgument(&'static str),

    /// A session uid that cannot name a directory of the snapshot store.
    #[error("microvm runtime: session uid {0:?} has characters a snapshot path cannot hold")]
    UnsafeSessionUid(String),

    /// A snapshot ref this runtime did not write (another backend's, or a malformed one).
    #[error("microvm runtime: {0:?} is not a microvm snapshot")]
    ForeignSnapshot(String),

    /// The session's memory is gone and the journal cannot rebuild it; `reason` says how this
    /// runtime knows (snapshot file missing or corrupt, VM replaced, no VM and turns recorded).
    #[error("microvm runtime: the memory of session {session} is lost: {reason}")]
    MemoryLost {
        /// The session.
        session: String,
        /// The evidence.
        reason: String,
    },

    /// A fork source is no longer the snapshot its session holds.
    #[error("microvm runtime: snapshot {snapshot} is no longer the one session {session} holds")]
    Superseded {
        /// The parent session.
        session: String,
        /// The snapshot id.
        snapshot: String,
    },

    /// Another operation holds the session's VM right now.
    #[error("microvm runtime: session {0} is busy with another operation")]
    Busy(String),

    /// QEMU could not be started.
    #[error("microvm runtime: cannot start {program}: {source}")]
    Spawn {
        /// The executable.
        program: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },

    /// The VM did not come up (boot, incoming migration or QMP) in time, or exited.
    #[error("microvm runtime: VM of session {session} not ready: {reason}")]
    NotReady {
        /// The session.
        session: String,
        /// What happened.
        reason: String,
    },

    /// A QMP exchange failed (I/O, protocol, or an error QEMU answered).
    #[error("microvm runtime: QMP {command}: {reason}")]
    Qmp {
        /// The command.
        command: String,
        /// Why.
        reason: String,
    },

    /// Reading or writing the snapshot store failed.
    #[error("microvm runtime: snapshot store {path}: {source}")]
    Store {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },

    /// A journal read the host handed in (recorded turns, checkpoint or instance) failed; it is
    /// reported as it came.
    #[error("microvm runtime: reading the journal: {0}")]
    Journal(ApiError),

    /// The runtime was closed; it stays closed.
    #[error("microvm runtime is closed")]
    Closed,
}

impl MicrovmError {
    /// The gRPC code this error is reported with.
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::MissingArgument(_) | Self::UnsafeSessionUid(_) | Self::ForeignSnapshot(_) => {
                StatusCode::InvalidArgument
            }
            Self::Config(_) | Self::MemoryLost { .. } | Self::Closed => {
                StatusCode::FailedPrecondition
            }
            Self::Superseded { .. } | Self::Busy(_) => StatusCode::Aborted,
            Self::Spawn { .. } | Self::NotReady { .. } => StatusCode::Unavailable,
            Self::Qmp { .. } | Self::Store { .. } => StatusCode::Internal,
            Self::Journal(err) => err.status_code(),
        }
    }

    pub(crate) fn store(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Store { path, source }
    }

    pub(crate) fn lost(session: &str, reason: impl Into<String>) -> Self {
        Self::MemoryLost {
            session: session.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Memory loss, supersession and busy compute become the SPI's own errors (so the host reports
/// them as the v0.3.0 API says); the evidence is logged here since those errors carry no text.
impl From<MicrovmError> for ApiError {
    fn from(err: MicrovmError) -> Self {
        match &err {
            MicrovmError::MemoryLost { .. } => {
                tracing::warn!(error = %err, "memory state lost");
                Self::MemoryStateLost
            }
            MicrovmError::Superseded { .. } => {
                tracing::info!(error = %err, "fork source superseded");
                Self::SnapshotSuperseded
            }
            MicrovmError::Busy(_) => Self::ComputeBusy,
            MicrovmError::Journal(inner) => inner.clone(),
            MicrovmError::Config(_)
            | MicrovmError::MissingArgument(_)
            | MicrovmError::UnsafeSessionUid(_)
            | MicrovmError::ForeignSnapshot(_)
            | MicrovmError::Spawn { .. }
            | MicrovmError::NotReady { .. }
            | MicrovmError::Qmp { .. }
            | MicrovmError::Store { .. }
            | MicrovmError::Closed => Self::status(err.status_code(), err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spi_errors_keep_their_identity_and_codes_survive() {
        assert_eq!(
            ApiError::from(MicrovmError::lost("s", "snapshot file missing")),
            ApiError::MemoryStateLost
        );
        assert_eq!(
            ApiError::from(MicrovmError::Superseded {
                session: "s".into(),
                snapshot: "x".into()
            }),
            ApiError::SnapshotSuperseded
        );
        assert_eq!(
            ApiError::from(MicrovmError::Busy("s".into())),
            ApiError::ComputeBusy
        );
        let err = MicrovmError::MissingArgument("a session uid");
        assert!(err.to_string().starts_with(char::is_lowercase));
        match ApiError::from(err) {
            ApiError::Status { code, .. } => assert_eq!(code, StatusCode::InvalidArgument),
            other => panic!("{other:?}"),
        }
    }
}
