//! The single writer thread with group commit.
//!
//! Callers send commands over a bounded channel. The thread takes one command, drains whatever
//! else is already queued (up to [`MAX_BATCH`]), applies them all in one `IMMEDIATE`
//! transaction, commits (one fsync), and only then acknowledges every caller. A failed commit
//! fails the whole batch, so no caller is told its record is durable unless it is.

use agentsessions_api::{ComputeState, Timestamp};
use rusqlite::{Connection, OptionalExtension as _, Transaction, params};
use tokio::sync::{mpsc, oneshot};

use crate::chain::PreparedEvent;
use crate::error::{JournalError, Result, is_contention};
use crate::journal::{HarnessRow, RegisterOutcome, SessionRow};
use crate::projection::project_compute_state;
use crate::record::LogRecord;
use crate::rules;
use crate::sqlite::codec;

/// Most commands committed in one transaction.
pub(crate) const MAX_BATCH: usize = 1024;

type Ack<T> = oneshot::Sender<Result<T>>;

/// A write the thread performs.
#[derive(Debug)]
pub(crate) enum Command {
    Append {
        session: String,
        expected_last_seq: i64,
        fence: i64,
        events: Vec<PreparedEvent>,
        ack: Ack<Vec<LogRecord>>,
    },
    NewFence {
        session: String,
        ack: Ack<i64>,
    },
    PutSession {
        row: Box<SessionRow>,
        ack: Ack<()>,
    },
    Register {
        name: String,
        spec: String,
        spec_digest: String,
        ack: Ack<(HarnessRow, RegisterOutcome)>,
    },
    Retire {
        name: String,
        reason: String,
        ack: Ack<HarnessRow>,
    },
    Reserve {
        names: Vec<String>,
        ack: Ack<()>,
    },
}

/// A command's result held until the batch commits.
enum Done {
    Append(Ack<Vec<LogRecord>>, Result<Vec<LogRecord>>),
    Fence(Ack<i64>, Result<i64>),
    Unit(Ack<()>, Result<()>),
    Register(
        Ack<(HarnessRow, RegisterOutcome)>,
        Result<(HarnessRow, RegisterOutcome)>,
    ),
    Harness(Ack<HarnessRow>, Result<HarnessRow>),
}

impl Done {
    fn send(self) {
        // A caller that stopped waiting has nothing to be told.
        match self {
            Self::Append(ack, r) => drop(ack.send(r)),
            Self::Fence(ack, r) => drop(ack.send(r)),
            Self::Unit(ack, r) => drop(ack.send(r)),
            Self::Register(ack, r) => drop(ack.send(r)),
            Self::Harness(ack, r) => drop(ack.send(r)),
        }
    }

    fn fail(self, failure: &Failure) {
        let err = || failure.error();
        match self {
            Self::Append(ack, _) => drop(ack.send(Err(err()))),
            Self::Fence(ack, _) => drop(ack.send(Err(err()))),
            Self::Unit(ack, _) => drop(ack.send(Err(err()))),
            Self::Register(ack, _) => drop(ack.send(Err(err()))),
            Self::Harness(ack, _) => drop(ack.send(Err(err()))),
        }
    }

    /// Storage failures poison the transaction; logical refusals (CAS, fence) wrote nothing.
    fn storage_failure(&self) -> Option<Failure> {
        let err = match self {
            Self::Append(_, Err(e)) | Self::Fence(_, Err(e)) | Self::Unit(_, Err(e)) => e,
            Self::Register(_, Err(e)) | Self::Harness(_, Err(e)) => e,
            _ => return None,
        };
        matches!(err, JournalError::Storage(_)).then(|| Failure {
            reason: err.to_string(),
            retryable: err.is_retryable(),
        })
    }
}

/// Why a whole batch failed; every caller in it gets the same error.
struct Failure {
    reason: String,
    retryable: bool,
}

impl Failure {
    fn of(e: &rusqlite::Error) -> Self {
        Self {
            reason: e.to_string(),
            retryable: is_contention(e),
        }
    }

    fn error(&self) -> JournalError {
        JournalError::CommitFailed {
            reason: self.reason.clone(),
            retryable: self.retryable,
        }
    }
}

/// Runs the writer loop until every sender is dropped.
pub(crate) fn run(mut conn: Connection, mut rx: mpsc::Receiver<Command>, default_project: &str) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(cmd) => batch.push(cmd),
                Err(_) => break,
            }
        }
        commit_batch(&mut conn, &mut batch, default_project);
    }
}

fn commit_batch(conn: &mut Connection, batch: &mut Vec<Command>, default_project: &str) {
    let mut done = Vec::with_capacity(batch.len());
    let tx = match conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => {
            let failure = Failure::of(&e);
            for cmd in batch.drain(..) {
                fail_command(cmd, &failure);
            }
            return;
        }
    };
    let now = Timestamp::now().unix_nanos();
    for cmd in batch.drain(..) {
        done.push(apply(&tx, cmd, now, default_project));
    }
    let poisoned = done.iter().find_map(Done::storage_failure);
    let outcome = match poisoned {
        Some(failure) => Err(failure),
        None => tx.commit().map_err(|e| Failure::of(&e)),
    };
    match outcome {
        Ok(()) => done.into_iter().for_each(Done::send),
        Err(failure) => done.into_iter().for_each(|d| d.fail(&failure)),
    }
}

fn fail_command(cmd: Command, failure: &Failure) {
    let err = || failure.error();
    match cmd {
        Command::Append { ack, .. } => drop(ack.send(Err(err()))),
        Command::NewFence { ack, .. } => drop(ack.send(Err(err()))),
        Command::PutSession { ack, .. } | Command::Reserve { ack, .. } => {
            drop(ack.send(Err(err())));
        }
        Command::Register { ack, .. } => drop(ack.send(Err(err()))),
        Command::Retire { ack, .. } => drop(ack.send(Err(err()))),
    }
}

fn apply(tx: &Transaction<'_>, cmd: Command, now: i64, default_project: &str) -> Done {
    match cmd {
        Command::Append {
            session,
            expected_last_seq,
            fence,
            events,
            ack,
        } => Done::Append(
            ack,
            atomically(tx, events.len(), || {
                append(
                    tx,
                    &session,
                    expected_last_seq,
                    fence,
                    events,
                    now,
                    default_project,
                )
            }),
        ),
        Command::NewFence { session, ack } => {
            Done::Fence(ack, new_fence(tx, &session, now, default_project))
        }
        Command::PutSession { row, ack } => {
            Done::Unit(ack, put_session(tx, *row, now, default_project))
        }
        Command::Register {
            name,
            spec,
            spec_digest,
            ack,
        } => Done::Register(ack, register(tx, &name, &spec, &spec_digest, now)),
        Command::Retire { name, reason, ack } => {
            Done::Harness(ack, retire(tx, &name, &reason, now))
        }
        Command::Reserve { names, ack } => Done::Unit(ack, reserve(tx, &names, now)),
    }
}

/// Runs a multi-record append inside a savepoint so a refusal half-way through leaves nothing
/// of it in the batch's transaction. A single-record append needs none: its checks precede its
/// only insert, and a failed insert writes nothing.
fn atomically<T>(tx: &Transaction<'_>, records: usize, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if records <= 1 {
        return f();
    }
    tx.prepare_cached("SAVEPOINT command")?.execute([])?;
    let out = f();
    if out.is_err() {
        tx.prepare_cached("ROLLBACK TO command")?.execute([])?;
    }
    tx.prepare_cached("RELEASE command")?.execute([])?;
    out
}

fn append(
    tx: &Transaction<'_>,
    session: &str,
    expected_last_seq: i64,
    fence: i64,
    events: Vec<PreparedEvent>,
    now: i64,
    default_project: &str,
) -> Result<Vec<LogRecord>> {
    let (head, mut prev_hash): (i64, String) = tx
        .prepare_cached(
            "SELECT seq, hash FROM events WHERE session = ?1 ORDER BY seq DESC LIMIT 1",
        )?
        .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .unwrap_or_default();
    let (current_fence, stored_state): (i64, String) = tx
        .prepare_cached("SELECT fence, compute_state FROM sessions WHERE session = ?1")?
        .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .unwrap_or_default();
    rules::check_append(session, expected_last_seq, head, fence, current_fence)?;
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut state = ComputeState::parse(&stored_state).unwrap_or(ComputeState::None);
    let mut insert = tx.prepare_cached(
        "INSERT INTO events(session, seq, prev_hash, hash, fence, event) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut out = Vec::with_capacity(events.len());
    for (seq, event) in (head + 1..).zip(events) {
        let hash = event.hash_at(&prev_hash, seq);
        let inserted = insert.execute(params![session, seq, prev_hash, hash, fence, event.blob]);
        if let Err(rusqlite::Error::SqliteFailure(f, _)) = &inserted
            && f.code == rusqlite::ErrorCode::ConstraintViolation
        {
            // Only possible if another writer slipped past the lock; refuse like a CAS miss.
            return Err(JournalError::Conflict {
                session: session.to_owned(),
                expected: expected_last_seq,
                actual: seq,
            });
        }
        inserted?;
        state = project_compute_state(state, &event.event);
        let record = LogRecord {
            seq,
            prev_hash: std::mem::replace(&mut prev_hash, hash.clone()),
            hash,
            fence,
            event: event.event,
        };
        out.push(record);
    }
    tx.prepare_cached(
        "INSERT INTO sessions(session, project, created_at, updated_at, compute_state)
         VALUES (?1, ?2, ?3, ?3, ?4)
         ON CONFLICT(session) DO UPDATE SET
             updated_at = excluded.updated_at,
             compute_state = excluded.compute_state,
             project = CASE WHEN project = '' THEN excluded.project ELSE project END,
             created_at = CASE WHEN created_at = 0 THEN excluded.created_at ELSE created_at END",
    )?
    .execute(params![session, default_project, now, state.as_str()])?;
    Ok(out)
}

fn new_fence(tx: &Transaction<'_>, session: &str, now: i64, default_project: &str) -> Result<i64> {
    Ok(tx
        .prepare_cached(
            "INSERT INTO sessions(session, fence, project, created_at, updated_at, compute_state)
             VALUES (?1, 1, ?2, ?3, ?3, 'NONE')
             ON CONFLICT(session) DO UPDATE SET
                 fence = fence + 1,
                 updated_at = excluded.updated_at,
                 project = CASE WHEN project = '' THEN excluded.project ELSE project END,
                 created_at = CASE WHEN created_at = 0 THEN excluded.created_at ELSE created_at END
             RETURNING fence",
        )?
        .query_row(params![session, default_project, now], |r| r.get(0))?)
}

fn put_session(
    tx: &Transaction<'_>,
    row: SessionRow,
    now: i64,
    default_project: &str,
) -> Result<()> {
    let project = if row.project.is_empty() {
        default_project.to_owned()
    } else {
        row.project
    };
    let created = row.created_at.map_or(0, Timestamp::unix_nanos);
    tx.prepare_cached(
        "INSERT INTO sessions(session, project, name, harness, model, parent_uid, fork_seq,
                              labels, annotations, origin, identity, created_at, updated_at,
                              compute_state)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,
                 CASE WHEN ?12 = 0 THEN ?13 ELSE ?12 END, ?13, 'NONE')
         ON CONFLICT(session) DO UPDATE SET
             project = excluded.project, name = excluded.name, harness = excluded.harness,
             model = excluded.model, parent_uid = excluded.parent_uid,
             fork_seq = excluded.fork_seq, labels = excluded.labels,
             annotations = excluded.annotations, origin = excluded.origin,
             identity = excluded.identity, updated_at = excluded.updated_at,
             created_at = CASE WHEN ?12 != 0 THEN ?12
                               WHEN created_at = 0 THEN excluded.created_at
                               ELSE created_at END",
    )?
    .execute(params![
        row.uid,
        project,
        row.name,
        row.harness,
        row.model,
        row.parent_uid,
        row.fork_seq,
        codec::encode_map(&row.labels),
        codec::encode_map(&row.annotations),
        codec::encode_origin(row.origin.as_ref())?,
        codec::encode_identity(&row.identity)?,
        created,
        now,
    ])?;
    Ok(())
}

fn load_harness(tx: &Transaction<'_>, name: &str) -> Result<Option<HarnessRow>> {
    Ok(tx
        .prepare_cached(&format!(
            "SELECT {} FROM harnesses WHERE name = ?1",
            codec::HARNESS_COLUMNS
        ))?
        .query_row([name], codec::harness_from_row)
        .optional()?)
}

fn store_harness(tx: &Transaction<'_>, h: &HarnessRow) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO harnesses(name, uid, spec, spec_digest, state, retire_reason, retired_at,
                               created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT(name) DO UPDATE SET
             state = excluded.state, retire_reason = excluded.retire_reason,
             retired_at = excluded.retired_at, updated_at = excluded.updated_at",
    )?
    .execute(params![
        h.name,
        h.uid,
        h.spec,
        h.spec_digest,
        codec::harness_state_str(h.state),
        h.retire_reason,
        h.retired_at.map_or(0, Timestamp::unix_nanos),
        h.created_at.unix_nanos(),
        h.updated_at.unix_nanos(),
    ])?;
    Ok(())
}

fn register(
    tx: &Transaction<'_>,
    name: &str,
    spec: &str,
    spec_digest: &str,
    now: i64,
) -> Result<(HarnessRow, RegisterOutcome)> {
    let existing = load_harness(tx, name)?;
    let reserved = is_reserved(tx, name)?;
    let (row, outcome) = rules::register_decision(
        existing,
        reserved,
        name,
        spec,
        spec_digest,
        Timestamp::from_unix_nanos(now),
    )?;
    if outcome != RegisterOutcome::Unchanged {
        store_harness(tx, &row)?;
    }
    Ok((row, outcome))
}

fn retire(tx: &Transaction<'_>, name: &str, reason: &str, now: i64) -> Result<HarnessRow> {
    let mut row =
        load_harness(tx, name)?.ok_or_else(|| JournalError::HarnessNotFound(name.to_owned()))?;
    rules::retire(&mut row, reason, Timestamp::from_unix_nanos(now));
    store_harness(tx, &row)?;
    Ok(row)
}

fn reserve(tx: &Transaction<'_>, names: &[String], now: i64) -> Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT OR IGNORE INTO reserved_harness_names(name, reserved_at) VALUES (?1, ?2)",
    )?;
    for name in names.iter().filter(|n| !n.is_empty()) {
        stmt.execute(params![name, now])?;
    }
    Ok(())
}

pub(crate) fn is_reserved(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM reserved_harness_names WHERE name = ?1")?
        .query_row([name], |_| Ok(()))
        .optional()?
        .is_some())
}
