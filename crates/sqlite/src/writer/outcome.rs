//! What the writer tells its callers: each command's result held until its batch is durable,
//! and the one error a whole failed batch gets.

use agentsessions_journal::error::is_transient;
pub(super) use agentsessions_journal::writer_queue::Ack;
use agentsessions_journal::writer_queue::Append;
use agentsessions_journal::{HarnessRow, JournalError, LogRecord, RegisterOutcome, Result};

use super::Command;

/// A command's result held until its batch is durable.
pub(super) enum Done {
    Append(Ack<Vec<LogRecord>>, Result<Vec<LogRecord>>),
    /// A deferred append: told once its batch commits, without waiting for the sync.
    Committed(Ack<Vec<LogRecord>>, Result<Vec<LogRecord>>),
    Fence(Ack<i64>, Result<i64>),
    Unit(Ack<()>, Result<()>),
    Flag(Ack<bool>, Result<bool>),
    Register(
        Ack<(HarnessRow, RegisterOutcome)>,
        Result<(HarnessRow, RegisterOutcome)>,
    ),
    Harness(Ack<HarnessRow>, Result<HarnessRow>),
}

impl Done {
    pub(super) fn send(self) {
        // A caller that stopped waiting has nothing to be told.
        match self {
            Self::Append(ack, r) | Self::Committed(ack, r) => drop(ack.send(r)),
            Self::Fence(ack, r) => drop(ack.send(r)),
            Self::Unit(ack, r) => drop(ack.send(r)),
            Self::Flag(ack, r) => drop(ack.send(r)),
            Self::Register(ack, r) => drop(ack.send(r)),
            Self::Harness(ack, r) => drop(ack.send(r)),
        }
    }

    pub(super) fn fail(self, err: impl Fn() -> JournalError) {
        match self {
            Self::Append(ack, _) | Self::Committed(ack, _) => drop(ack.send(Err(err()))),
            Self::Fence(ack, _) => drop(ack.send(Err(err()))),
            Self::Unit(ack, _) => drop(ack.send(Err(err()))),
            Self::Flag(ack, _) => drop(ack.send(Err(err()))),
            Self::Register(ack, _) => drop(ack.send(Err(err()))),
            Self::Harness(ack, _) => drop(ack.send(Err(err()))),
        }
    }

    /// Storage failures poison the transaction; logical refusals (CAS, fence) wrote nothing.
    /// Whether the caller is told at commit rather than once durable: a deferred append, and a
    /// settled compute state (an observation of the runtime that a crash may take back, and the
    /// next settle makes again), so settling never adds a durable wait to a turn.
    pub(super) fn at_commit(&self) -> bool {
        matches!(self, Self::Committed(..) | Self::Flag(..))
    }

    pub(super) fn storage_failure(&self) -> Option<Failure> {
        let err = match self {
            Self::Append(_, Err(e)) | Self::Committed(_, Err(e)) => e,
            Self::Fence(_, Err(e)) | Self::Unit(_, Err(e)) | Self::Flag(_, Err(e)) => e,
            Self::Register(_, Err(e)) | Self::Harness(_, Err(e)) => e,
            _ => return None,
        };
        matches!(err, JournalError::Storage(_)).then(|| Failure::of_journal(err))
    }
}

/// Why a whole batch failed; every caller in it gets the same error.
pub(super) struct Failure {
    reason: String,
    retryable: bool,
}

impl Failure {
    pub(super) fn of(e: &rusqlite::Error) -> Self {
        Self {
            reason: e.to_string(),
            retryable: is_transient(e),
        }
    }

    pub(super) fn of_journal(e: &JournalError) -> Self {
        Self {
            reason: e.to_string(),
            retryable: e.is_retryable(),
        }
    }

    pub(super) fn error(&self) -> JournalError {
        JournalError::CommitFailed {
            reason: self.reason.clone(),
            retryable: self.retryable,
        }
    }
}

/// A command that was not applied, with its caller's error.
pub(super) fn failed(cmd: Command, e: JournalError) -> Done {
    match cmd {
        Command::Append(Append { ack, .. }) => Done::Append(ack, Err(e)),
        Command::NewFence { ack, .. } | Command::Fork { ack, .. } => Done::Fence(ack, Err(e)),
        Command::PutSession { ack, .. }
        | Command::Reserve { ack, .. }
        | Command::MarkReclaimed { ack, .. } => Done::Unit(ack, Err(e)),
        Command::SettleCompute { ack, .. } => Done::Flag(ack, Err(e)),
        Command::Register { ack, .. } => Done::Register(ack, Err(e)),
        Command::Retire { ack, .. } => Done::Harness(ack, Err(e)),
    }
}

pub(super) fn fail_command(cmd: Command, err: impl Fn() -> JournalError) {
    match cmd {
        Command::Append(Append { ack, .. }) => drop(ack.send(Err(err()))),
        Command::NewFence { ack, .. } | Command::Fork { ack, .. } => drop(ack.send(Err(err()))),
        Command::PutSession { ack, .. }
        | Command::Reserve { ack, .. }
        | Command::MarkReclaimed { ack, .. } => {
            drop(ack.send(Err(err())));
        }
        Command::SettleCompute { ack, .. } => drop(ack.send(Err(err()))),
        Command::Register { ack, .. } => drop(ack.send(Err(err()))),
        Command::Retire { ack, .. } => drop(ack.send(Err(err()))),
    }
}
