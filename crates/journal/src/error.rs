//! [`JournalError`]: everything a journal operation can report.

use agentsessions_api::StatusCode;
use agentsessions_wire::WireError;

/// Result alias for journal operations.
pub type Result<T, E = JournalError> = std::result::Result<T, E>;

/// Why a journal operation failed.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The CAS cursor did not match the session head (semantics §1.4 step 1); re-read and retry.
    #[error("append conflict on session {session}: expected last seq {expected}, head is {actual}")]
    Conflict {
        /// Session uid.
        session: String,
        /// The caller's expected last seq.
        expected: i64,
        /// The actual head.
        actual: i64,
    },
    /// The writer's fence was superseded by a newer one (semantics §1.4 step 2).
    #[error("session {session}: fence {fence} is superseded by fence {current}")]
    Fenced {
        /// Session uid.
        session: String,
        /// The fence the writer presented.
        fence: i64,
        /// The session's current fence.
        current: i64,
    },
    /// No metadata row exists for the session.
    #[error("session {0} not found")]
    SessionNotFound(String),
    /// A fork child uid that already names a session (a metadata row, records or a prefix link):
    /// a child must be new, or its records would not be the parent's.
    #[error("session {0} already exists and cannot become a fork child")]
    SessionExists(String),
    /// A list page token that this journal did not issue.
    #[error("invalid page token: {0}")]
    InvalidPageToken(String),
    /// An argument outside its domain (negative seq, empty session uid…).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The database is stamped with a schema this build does not understand; nothing was written.
    #[error("unsupported journal schema version {found} (this build supports up to {supported})")]
    UnsupportedSchema {
        /// The stamp found in the file.
        found: i64,
        /// The newest version this build writes.
        supported: i64,
    },
    /// The event cannot be put on the wire or canonicalized (NaN in a Struct, bad timestamp…).
    #[error("event cannot be journaled: {0}")]
    InvalidEvent(#[source] WireError),
    /// A stored event could not be decoded.
    #[error("session {session} seq {seq}: stored event is undecodable: {reason}")]
    Undecodable {
        /// Session uid.
        session: String,
        /// Record seq.
        seq: i64,
        /// What failed.
        reason: String,
    },
    /// A transport-only event (PARKED) was offered for the journal.
    #[error("{0} events are transport-only and are never journaled")]
    NotJournalable(&'static str),
    /// A harness registration under the name exists with a different spec.
    #[error("harness {0} is already registered with a different spec")]
    HarnessExists(String),
    /// The harness name is reserved (built in, or used by existing sessions).
    #[error("harness name {0} is reserved")]
    HarnessNameReserved(String),
    /// No registration under that name.
    #[error("harness {0} not found")]
    HarnessNotFound(String),
    /// The SQLite storage engine failed (`agentsessions-sqlite`; Postgres maps its failures onto
    /// `CommitFailed` and `Io`). The variant, and the `From` that lets the SQLite backend's `?`
    /// reach it, can only live here (the orphan rule), which is why this crate still depends on
    /// rusqlite.
    #[error("storage error: {0}")]
    Storage(#[from] rusqlite::Error),
    /// Filesystem error opening the journal.
    #[error("journal i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The batch holding this write failed to commit; nothing of it is durable.
    #[error("journal commit failed, nothing was written: {reason}")]
    CommitFailed {
        /// What the storage engine reported.
        reason: String,
        /// Whether a later retry may succeed: contention (busy or locked database) settles on its
        /// own, and a full disk or database once space is freed.
        retryable: bool,
    },
    /// Re-appending an imported record did not reproduce it (its hash, link or seq differ), so the
    /// journal it came from does not follow this chain's rules.
    #[error("imported record {seq} was not reproduced: {reason}")]
    ImportMismatch {
        /// The record's seq.
        seq: i64,
        /// What differed.
        reason: String,
    },
    /// The journal's writer has shut down.
    #[error("journal is closed")]
    Closed,
}

impl JournalError {
    /// The journal's rows of semantics §8, decided here once, wherever a journal error surfaces
    /// (directly, through a turn, or through placement). A commit that may succeed on retry
    /// (contention, a full disk, or a writer that is shutting down) is `UNAVAILABLE`; a storage
    /// failure that will not clear by itself (an I/O error, a failed fsync that poisons the
    /// journal until a restart) is `INTERNAL` (semantics §8 "store/read/decode failures").
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::Conflict { .. } | Self::Fenced { .. } => StatusCode::Aborted,
            Self::SessionNotFound(_) | Self::HarnessNotFound(_) => StatusCode::NotFound,
            Self::InvalidPageToken(_)
            | Self::InvalidArgument(_)
            | Self::InvalidEvent(_)
            | Self::NotJournalable(_) => StatusCode::InvalidArgument,
            Self::SessionExists(_) | Self::HarnessExists(_) | Self::HarnessNameReserved(_) => {
                StatusCode::AlreadyExists
            }
            Self::UnsupportedSchema { .. } => StatusCode::FailedPrecondition,
            Self::Closed => StatusCode::Unavailable,
            Self::CommitFailed { .. } | Self::Storage(_) if self.is_retryable() => {
                StatusCode::Unavailable
            }
            Self::CommitFailed { .. }
            | Self::Storage(_)
            | Self::Undecodable { .. }
            | Self::Io(_)
            | Self::ImportMismatch { .. } => StatusCode::Internal,
        }
    }

    /// Whether retrying after re-reading the head may succeed (CAS conflict, busy database, a
    /// full disk once space is freed).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Conflict { .. } => true,
            Self::CommitFailed { retryable, .. } => *retryable,
            Self::Storage(e) => is_transient(e),
            _ => false,
        }
    }
}

/// Whether a storage error is lock contention (another connection holds the database), which
/// settles on its own. Public for the SQLite backend (`agentsessions-sqlite`), which retries
/// its opening steps on contention.
pub fn is_contention(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// Whether a storage error clears without a restart: contention, or a full disk (`SQLITE_FULL`,
/// which SQLite reports for `ENOSPC` and for its page-count limit) once space is freed. Nothing
/// of the failed transaction was written, so the journal stays usable. The rule
/// [`JournalError::is_retryable`] applies to [`JournalError::Storage`]; public so the SQLite
/// backend (`agentsessions-sqlite`) marks a failed batch's [`JournalError::CommitFailed`] the
/// same way.
pub fn is_transient(e: &rusqlite::Error) -> bool {
    is_contention(e)
        || matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: std::ffi::c_int) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    // Disk faults: a full disk clears once space is freed, so it is retryable; an I/O error is not.
    #[test]
    fn a_full_disk_is_retryable_and_an_io_error_is_not() {
        for code in [
            rusqlite::ffi::SQLITE_FULL,
            rusqlite::ffi::SQLITE_BUSY,
            rusqlite::ffi::SQLITE_LOCKED,
        ] {
            assert!(JournalError::Storage(sqlite(code)).is_retryable(), "{code}");
        }
        for code in [
            rusqlite::ffi::SQLITE_IOERR,
            rusqlite::ffi::SQLITE_CORRUPT,
            rusqlite::ffi::SQLITE_IOERR_FSYNC,
        ] {
            assert!(
                !JournalError::Storage(sqlite(code)).is_retryable(),
                "{code}"
            );
        }
    }
}
