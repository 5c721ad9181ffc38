//! The SQL the writer runs: each statement's text beside the helper that executes it, inside
//! the batch's transaction. The decisions (CAS, fence, registry outcomes) are the shared
//! [`rules`]; the head cache is the writer's.

use agentsessions_api::{CallerIdentity, ComputeState, DeletionState, Event, Timestamp};
use agentsessions_journal::approvals::{CALL_LOOKBACK, PendingChange, encode_args, gated_call};
use agentsessions_journal::chain::decode_event;
use agentsessions_journal::extension::Extended;
use agentsessions_journal::stored::{EncodedRow, StoredHarness};
use agentsessions_journal::{
    Extension, HarnessRow, JournalError, RegisterOutcome, Result, SessionRow, rules,
};
use rusqlite::{Connection, OptionalExtension as _, params};

use super::{SessionHead, Touch};
use crate::{codec, prefix};

pub(super) fn load_head(conn: &Connection, session: &str) -> Result<SessionHead> {
    let own: Option<(i64, String)> = conn
        .prepare_cached(
            "SELECT seq, hash FROM events WHERE session = ?1 ORDER BY seq DESC LIMIT 1",
        )?
        .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    // A shared-prefix child without records of its own stands at its fork point.
    let (seq, hash) = match own {
        Some(head) => head,
        None => prefix::link_head(conn, session)?.unwrap_or_default(),
    };
    let (fence, state): (i64, String) = conn
        .prepare_cached("SELECT fence, compute_state FROM sessions WHERE session = ?1")?
        .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .unwrap_or_default();
    Ok(SessionHead {
        seq,
        hash,
        fence,
        state: ComputeState::parse(&state).unwrap_or(ComputeState::None),
    })
}

/// Runs a multi-record append inside a savepoint so a refusal half-way through leaves nothing
/// of it in the batch's transaction. A single-record append needs none: its checks precede its
/// only insert, and a failed insert writes nothing.
pub(super) fn atomically<T>(
    conn: &Connection,
    records: usize,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    if records <= 1 {
        return f();
    }
    conn.prepare_cached("SAVEPOINT command")?.execute([])?;
    let out = f();
    if out.is_err() {
        conn.prepare_cached("ROLLBACK TO command")?.execute([])?;
    }
    conn.prepare_cached("RELEASE command")?.execute([])?;
    out
}

/// Stores the records of `extension` (decided by [`extend`](agentsessions_journal::extend)) and moves
/// the pending-approvals projection with them. A seq already taken is refused like a CAS miss.
pub(super) fn insert_records(
    conn: &Connection,
    session: &str,
    expected_last_seq: i64,
    extension: &Extension,
    now: i64,
) -> Result<()> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO events(session, seq, prev_hash, hash, fence, event, committed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    let mut changes = extension.approvals.iter().peekable();
    for (i, record) in extension.records.iter().enumerate() {
        match insert.execute(params![
            session,
            record.seq,
            record.prev_hash,
            record.hash,
            extension.fence,
            record.event.blob,
            now
        ]) {
            Ok(_) => {}
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                // The seq is taken: refuse like a CAS miss.
                return Err(JournalError::Conflict {
                    session: session.to_owned(),
                    expected: expected_last_seq,
                    actual: record.seq,
                });
            }
            Err(e) => return Err(e.into()),
        }
        while let Some((_, change)) = changes.next_if(|(seq, _)| *seq == record.seq) {
            move_pending(
                conn,
                session,
                record.seq,
                &extension.records[..i],
                change.clone(),
                now,
            )?;
        }
    }
    Ok(())
}

/// Moves the session's pending approvals past the record at `seq`; `batch` holds the records
/// committed before it in this append, and older ones are read back from the table.
fn move_pending(
    conn: &Connection,
    session: &str,
    seq: i64,
    batch: &[Extended],
    change: PendingChange,
    now: i64,
) -> Result<()> {
    match change {
        PendingChange::Request {
            execution_id,
            tool_call_id,
            reason,
        } => {
            let mut recent: Vec<Event> = batch
                .iter()
                .rev()
                .take(CALL_LOOKBACK)
                .map(|r| r.event.event.clone())
                .collect();
            if recent.len() < CALL_LOOKBACK {
                recent.extend(recent_events(
                    conn,
                    session,
                    seq - 1 - i64::try_from(batch.len()).unwrap_or(0),
                    CALL_LOOKBACK - recent.len(),
                )?);
            }
            let (tool, args) =
                gated_call(&recent, &execution_id, &tool_call_id).unwrap_or_default();
            conn.prepare_cached(
                "INSERT OR REPLACE INTO pending_approvals(session, tool_call_id, execution_id,
                     request_seq, tool, args, reason, requested_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                session,
                tool_call_id,
                execution_id,
                seq,
                tool,
                encode_args(args.as_ref()),
                reason,
                now
            ])?;
        }
        PendingChange::Decided { tool_call_id } => {
            conn.prepare_cached(
                "DELETE FROM pending_approvals WHERE session = ?1 AND tool_call_id = ?2",
            )?
            .execute(params![session, tool_call_id])?;
        }
        PendingChange::Ended { execution_id } => {
            conn.prepare_cached(
                "DELETE FROM pending_approvals WHERE session = ?1 AND execution_id = ?2",
            )?
            .execute(params![session, execution_id])?;
        }
        PendingChange::Deleted => {
            conn.prepare_cached("DELETE FROM pending_approvals WHERE session = ?1")?
                .execute([session])?;
        }
    }
    Ok(())
}

/// Up to `limit` of the session's own records at or below `at`, newest first.
fn recent_events(conn: &Connection, session: &str, at: i64, limit: usize) -> Result<Vec<Event>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, event FROM events WHERE session = ?1 AND seq <= ?2
         ORDER BY seq DESC LIMIT ?3",
    )?;
    let mut rows = stmt.query(params![session, at, i64::try_from(limit).unwrap_or(0)])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let blob: Vec<u8> = row.get(1)?;
        out.push(decode_event(session, seq, &blob)?);
    }
    Ok(out)
}

pub(super) fn new_fence(
    conn: &Connection,
    session: &str,
    now: i64,
    default_project: &str,
) -> Result<i64> {
    Ok(conn
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

/// Whether `session` has a row, records or a prefix link.
pub(super) fn session_taken(conn: &Connection, session: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE session = ?1)
                 OR EXISTS (SELECT 1 FROM events WHERE session = ?1)
                 OR EXISTS (SELECT 1 FROM session_prefix WHERE session = ?1)",
        )?
        .query_row([session], |r| r.get(0))?)
}

pub(super) fn put_session(
    conn: &Connection,
    row: SessionRow,
    now: i64,
    default_project: &str,
) -> Result<()> {
    if let Some(link) = prefix::link(conn, &row.uid)? {
        rules::check_lineage_kept(
            &row.uid,
            (&row.parent_uid, row.fork_seq),
            (&link.parent, link.fork_seq),
        )?;
    }
    let stored_owner = conn
        .prepare_cached("SELECT owner_issuer, owner_subject FROM sessions WHERE session = ?1")?
        .query_row([&row.uid], |r| {
            Ok(CallerIdentity::new(
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
            ))
        })
        .optional()?
        .unwrap_or_default();
    let owner = rules::owner_after(&row.uid, &stored_owner, &row.owner)?;
    let row = EncodedRow::new(row)?;
    let project = if row.project.is_empty() {
        default_project
    } else {
        &row.project
    };
    let created = row.created_at.unwrap_or(0);
    conn.prepare_cached(
        "INSERT INTO sessions(session, project, name, harness, model, parent_uid, fork_seq,
                              labels, annotations, origin, identity, created_at, updated_at,
                              compute_state, owner_issuer, owner_subject)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,
                 CASE WHEN ?12 = 0 THEN ?13 ELSE ?12 END, ?13, 'NONE', ?14, ?15)
         ON CONFLICT(session) DO UPDATE SET
             owner_issuer = excluded.owner_issuer, owner_subject = excluded.owner_subject,
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
        row.labels,
        row.annotations,
        row.origin,
        row.identity,
        created,
        now,
        owner.issuer,
        owner.subject,
    ])?;
    Ok(())
}

/// The `sessions` columns a fork child takes from its parent.
#[derive(Default)]
pub(super) struct ForkedColumns {
    pub(super) project: String,
    pub(super) harness: String,
    pub(super) model: String,
    pub(super) owner_issuer: String,
    pub(super) owner_subject: String,
}

/// The columns a fork child of `parent` inherits, if `parent` has a row.
pub(super) fn fork_parent_columns(
    conn: &Connection,
    parent: &str,
) -> Result<Option<ForkedColumns>> {
    Ok(conn
        .prepare_cached(
            "SELECT project, harness, model, owner_issuer, owner_subject
             FROM sessions WHERE session = ?1",
        )?
        .query_row([parent], |r| {
            Ok(ForkedColumns {
                project: r.get(0)?,
                harness: r.get(1)?,
                model: r.get(2)?,
                owner_issuer: r.get(3)?,
                owner_subject: r.get(4)?,
            })
        })
        .optional()?)
}

/// Writes a shared-prefix child: its `session_prefix` link and its `sessions` row.
#[expect(clippy::too_many_arguments, reason = "one statement's parameters")]
pub(super) fn insert_fork_child(
    conn: &Connection,
    child: &str,
    parent: &str,
    at_seq: i64,
    fork_hash: &str,
    state: ComputeState,
    now: i64,
    inherited: &ForkedColumns,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO session_prefix(session, parent_uid, fork_seq, fork_hash)
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![child, parent, at_seq, fork_hash])?;
    conn.prepare_cached(
        "INSERT INTO sessions(session, fence, project, harness, model, parent_uid,
                              fork_seq, compute_state, created_at, updated_at,
                              owner_issuer, owner_subject)
         VALUES (?1, 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10)",
    )?
    .execute(params![
        child,
        inherited.project,
        inherited.harness,
        inherited.model,
        parent,
        at_seq,
        state.as_str(),
        now,
        inherited.owner_issuer,
        inherited.owner_subject
    ])?;
    Ok(())
}

/// Sets each touched session's update time and compute state, creating the row when missing. A
/// complete row takes a plain `UPDATE`, which leaves the listing index alone; only a missing
/// row, or one without project or creation time, needs the upsert.
pub(super) fn touch_session_rows(
    conn: &Connection,
    touched: impl Iterator<Item = (String, Touch)>,
    now: i64,
    default_project: &str,
) -> Result<()> {
    let mut update = conn.prepare_cached(
        "UPDATE sessions SET updated_at = ?2, compute_state = ?3
         WHERE session = ?1 AND project != '' AND created_at != 0",
    )?;
    let mut upsert = conn.prepare_cached(
        "INSERT INTO sessions(session, project, created_at, updated_at, compute_state)
         VALUES (?1, ?2, ?3, ?3, ?4)
         ON CONFLICT(session) DO UPDATE SET
             updated_at = excluded.updated_at,
             compute_state = excluded.compute_state,
             project = CASE WHEN project = '' THEN excluded.project ELSE project END,
             created_at = CASE WHEN created_at = 0 THEN excluded.created_at ELSE created_at END",
    )?;
    for (session, touch) in touched {
        let state = touch.state.as_str();
        if update.execute(params![session, now, state])? == 0 {
            upsert.execute(params![session, default_project, now, state])?;
        }
        if !touch.usage.is_empty() {
            conn.prepare_cached(
                "UPDATE sessions SET
                     usage_input_tokens = usage_input_tokens + ?2,
                     usage_output_tokens = usage_output_tokens + ?3,
                     usage_reasoning_tokens = usage_reasoning_tokens + ?4,
                     usage_cached_input_tokens = usage_cached_input_tokens + ?5
                 WHERE session = ?1",
            )?
            .execute(params![
                session,
                touch.usage.input_tokens,
                touch.usage.output_tokens,
                touch.usage.reasoning_tokens,
                touch.usage.cached_input_tokens
            ])?;
        }
        if touch.deletes {
            // A state this build does not know stays as it is: it already reads as deleted.
            conn.prepare_cached(
                "UPDATE sessions SET deletion_state = 'PENDING'
                 WHERE session = ?1 AND deletion_state IN ('', 'ACTIVE')",
            )?
            .execute([session])?;
        }
    }
    Ok(())
}

/// Opens the batch's transaction, taking the write lock at once.
pub(super) fn begin_immediate(conn: &Connection) -> rusqlite::Result<()> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    Ok(())
}

/// Changes whenever another connection has committed to the file.
pub(super) fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA data_version")
        .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
}

pub(super) fn commit(conn: &Connection) -> rusqlite::Result<()> {
    conn.prepare_cached("COMMIT")
        .and_then(|mut s| s.execute([]))?;
    Ok(())
}

pub(super) fn rollback(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("ROLLBACK")
}

pub(super) fn mark_reclaimed(conn: &Connection, uid: &str, now: i64) -> Result<()> {
    let state: String = conn
        .prepare_cached("SELECT deletion_state FROM sessions WHERE session = ?1")?
        .query_row([uid], |r| r.get(0))
        .optional()?
        .ok_or_else(|| JournalError::SessionNotFound(uid.to_owned()))?;
    rules::check_reclaimable(uid, &DeletionState::parse(&state))?;
    conn.prepare_cached(
        "UPDATE sessions SET reclaimed_at = ?2 WHERE session = ?1 AND reclaimed_at = 0",
    )?
    .execute(params![uid, now])?;
    Ok(())
}

pub(super) fn session_has_row(conn: &Connection, session: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sessions WHERE session = ?1")?
        .query_row([session], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Sets the compute projection alone: not the update time, which says when the session last
/// changed, and an observation of its runtime is not a change.
pub(super) fn set_compute_state(
    conn: &Connection,
    session: &str,
    state: ComputeState,
) -> Result<()> {
    conn.prepare_cached("UPDATE sessions SET compute_state = ?2 WHERE session = ?1")?
        .execute(params![session, state.as_str()])?;
    Ok(())
}

pub(super) fn load_harness(conn: &Connection, name: &str) -> Result<Option<HarnessRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {} FROM harnesses WHERE name = ?1",
            codec::HARNESS_COLUMNS
        ))?
        .query_row([name], codec::harness_from_row)
        .optional()?)
}

pub(super) fn store_harness(conn: &Connection, h: &HarnessRow) -> Result<()> {
    let h = StoredHarness::of(h);
    conn.prepare_cached(
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
        h.state,
        h.retire_reason,
        h.retired_at,
        h.created_at,
        h.updated_at,
    ])?;
    Ok(())
}

pub(super) fn register(
    conn: &Connection,
    name: &str,
    spec: &str,
    spec_digest: &str,
    now: i64,
) -> Result<(HarnessRow, RegisterOutcome)> {
    let existing = load_harness(conn, name)?;
    let reserved = is_reserved(conn, name)?;
    let (row, outcome) = rules::register_decision(
        existing,
        reserved,
        name,
        spec,
        spec_digest,
        Timestamp::from_unix_nanos(now),
    )?;
    if outcome != RegisterOutcome::Unchanged {
        store_harness(conn, &row)?;
    }
    Ok((row, outcome))
}

pub(super) fn retire(conn: &Connection, name: &str, reason: &str, now: i64) -> Result<HarnessRow> {
    let mut row =
        load_harness(conn, name)?.ok_or_else(|| JournalError::HarnessNotFound(name.to_owned()))?;
    rules::retire(&mut row, reason, Timestamp::from_unix_nanos(now));
    store_harness(conn, &row)?;
    Ok(row)
}

pub(super) fn reserve(conn: &Connection, names: &[String], now: i64) -> Result<()> {
    let mut stmt = conn.prepare_cached(
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
