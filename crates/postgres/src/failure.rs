//! How Postgres failures become [`JournalError`]s. The journal crate's error enum has no
//! Postgres variant, so failures map onto the closest existing ones:
//!
//! | where                               | variant                                         |
//! |-------------------------------------|-------------------------------------------------|
//! | a write batch that did not commit   | `CommitFailed { reason, retryable }`            |
//! | COMMIT sent, then the link was lost | `Io` (outcome unknown: re-read the head)        |
//! | a read, a connect                   | `Io` (kind says connection refused/reset/other) |
//!
//! `retryable` is true for contention, a server short of resources and lost connections
//! (serialization failure, deadlock, lock timeout, class 53: disk full, out of memory, too many
//! connections; server shutting down): a retry after re-reading the head may succeed, and the
//! client is told `UNAVAILABLE`. A duplicate `(session, seq)` never reaches a caller as a storage failure; the
//! writer re-runs its batch and the CAS check reports it as `Conflict` (semantics §1.4 step 4).

use agentsessions_journal::JournalError;
use tokio_postgres::error::SqlState;

/// A failure inside a database round: Postgres itself, or a journal rule.
#[derive(Debug)]
pub(crate) enum DbError {
    Pg(tokio_postgres::Error),
    Journal(JournalError),
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Pg(e)
    }
}

impl From<JournalError> for DbError {
    fn from(e: JournalError) -> Self {
        Self::Journal(e)
    }
}

impl DbError {
    /// The caller's error for a read (or a transaction that surely did not commit).
    pub(crate) fn into_read_error(self) -> JournalError {
        match self {
            Self::Pg(e) => read_error(&e),
            Self::Journal(e) => e,
        }
    }

    pub(crate) fn connection_lost(&self) -> bool {
        matches!(self, Self::Pg(e) if connection_lost(e))
    }
}

/// Whether the connection is gone (closed socket, server shutdown or restart), so that a fresh
/// connection may succeed.
pub(crate) fn connection_lost(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(code) => {
            code.code().starts_with("08")
                || [
                    &SqlState::ADMIN_SHUTDOWN,
                    &SqlState::CRASH_SHUTDOWN,
                    &SqlState::CANNOT_CONNECT_NOW,
                ]
                .contains(&code)
        }
        // No SQLSTATE: the failure is below the protocol (socket I/O).
        None => std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()),
    }
}

/// Contention that settles on its own, a server short of resources, or a connection that a
/// retry replaces.
pub(crate) fn transient(e: &tokio_postgres::Error) -> bool {
    connection_lost(e) || e.code().is_some_and(transient_state)
}

/// Contention, or class 53 "insufficient resources" (disk full, out of memory, too many
/// connections): the transaction was rolled back, so nothing was written, and the same batch
/// may commit once the server has room, as a full SQLite disk does.
fn transient_state(code: &SqlState) -> bool {
    code.code().starts_with("53")
        || [
            &SqlState::T_R_SERIALIZATION_FAILURE,
            &SqlState::T_R_DEADLOCK_DETECTED,
            &SqlState::LOCK_NOT_AVAILABLE,
            &SqlState::UNIQUE_VIOLATION,
        ]
        .contains(&code)
}

/// A conflict that re-running the whole batch with fresh reads resolves (another writer won a
/// seq, a deadlock between hosts' batches).
pub(crate) fn rerun_batch(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|code| {
        [
            &SqlState::UNIQUE_VIOLATION,
            &SqlState::T_R_SERIALIZATION_FAILURE,
            &SqlState::T_R_DEADLOCK_DETECTED,
        ]
        .contains(&code)
    })
}

fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("postgres {}: {}", db.code().code(), db.message()),
        None => format!("postgres: {e}"),
    }
}

pub(crate) fn commit_failed(e: &tokio_postgres::Error) -> JournalError {
    JournalError::CommitFailed {
        reason: describe(e),
        retryable: transient(e),
    }
}

pub(crate) fn read_error(e: &tokio_postgres::Error) -> JournalError {
    let kind = if connection_lost(e) {
        std::io::ErrorKind::ConnectionReset
    } else {
        std::io::ErrorKind::Other
    };
    JournalError::Io(std::io::Error::new(kind, describe(e)))
}

pub(crate) fn connect_error(target: &str, e: &tokio_postgres::Error) -> JournalError {
    JournalError::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!("cannot connect to postgres at {target}: {}", describe(e)),
    ))
}

/// The error for a batch whose COMMIT was sent but whose answer was lost with the connection:
/// it may or may not be durable.
pub(crate) fn outcome_unknown(e: &tokio_postgres::Error) -> JournalError {
    JournalError::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        format!(
            "the connection to postgres was lost while committing, so the append may or may not \
             be durable; re-read the session head before retrying ({})",
            describe(e)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Disk faults: a server whose disk is full (SQLSTATE 53100) rolled the batch back, so the
    // commit is retryable (UNAVAILABLE), as SQLite's SQLITE_FULL is; a broken constraint is not.
    #[test]
    fn insufficient_resources_are_transient_and_other_failures_are_not() {
        for code in [
            SqlState::DISK_FULL,
            SqlState::INSUFFICIENT_RESOURCES,
            SqlState::OUT_OF_MEMORY,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::CONFIGURATION_LIMIT_EXCEEDED,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::LOCK_NOT_AVAILABLE,
        ] {
            assert!(transient_state(&code), "{}", code.code());
        }
        for code in [
            SqlState::DATA_CORRUPTED,
            SqlState::IO_ERROR,
            SqlState::CHECK_VIOLATION,
            SqlState::UNDEFINED_TABLE,
            SqlState::PROGRAM_LIMIT_EXCEEDED,
        ] {
            assert!(!transient_state(&code), "{}", code.code());
        }
    }
}
