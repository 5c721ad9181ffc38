//! Opening a SQLite journal file: pragmas, the schema stamp and the migration ladder
//! (semantics §1.5). The table layout is the reference implementation's, so its auditors and
//! verifiers read our files.
//!
//! One addition, outside the ladder: the table `session_prefix(session, parent_uid, fork_seq,
//! fork_hash)`. A row there marks `session` as a *shared-prefix* fork child: its records
//! `1..=fork_seq` are not in its own `events` rows but are the chain of `parent_uid` up to that
//! seq (see [`agentsessions_journal::lineage`]), and `fork_hash` is the hash at that seq, the link of the child's
//! first own record. A child without a row there is read from its own rows only, which is what
//! the reference implementation writes: its children carry `sessions.parent_uid`/`fork_seq` *and*
//! a copied prefix, and such files keep reading as they are. The table is created with
//! `IF NOT EXISTS` on every open and the stamp stays 2, so the reference still opens our files
//! (it sees a shared-prefix child's own records only: the deliberate difference of
//! ARCHITECTURE.md). `sessions.parent_uid`/`fork_seq` of a shared-prefix child are written with
//! the link and kept equal to it. The index on `parent_uid` finds the children that still read
//! a session's rows.
//!
//! A third addition, outside the ladder like the others: what an operator sees without reading
//! logs. `events.committed_at` (when each record was committed, never hashed), the `sessions`
//! usage totals and the `pending_approvals` table, all kept in the append's transaction.
//!
//! A second addition, also outside the ladder: the `sessions` columns `owner_issuer`,
//! `owner_subject`, `deletion_state` and `reclaimed_at` (ownership and deletion, extensions
//! §1–§3) with their indexes. Their defaults mean unbound, active and not reclaimed, which is what
//! a row the reference implementation writes is.

use std::path::Path;
use std::time::{Duration, Instant};

use agentsessions_journal::chain::decode_event;
use agentsessions_journal::error::is_contention;
use agentsessions_journal::{JournalError, Result, rules};
use rusqlite::{Connection, OpenFlags, OptionalExtension as _};

/// The schema version this build writes (and the newest it opens).
pub const SCHEMA_VERSION: i64 = 2;

const V1_DDL: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    session       TEXT PRIMARY KEY,
    fence         INTEGER NOT NULL DEFAULT 0,
    project       TEXT NOT NULL DEFAULT '',
    name          TEXT NOT NULL DEFAULT '',
    harness       TEXT NOT NULL DEFAULT '',
    model         TEXT NOT NULL DEFAULT '',
    parent_uid    TEXT NOT NULL DEFAULT '',
    fork_seq      INTEGER NOT NULL DEFAULT 0,
    compute_state TEXT NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL DEFAULT 0,
    updated_at    INTEGER NOT NULL DEFAULT 0,
    labels        TEXT NOT NULL DEFAULT '',
    annotations   TEXT NOT NULL DEFAULT '',
    origin        TEXT NOT NULL DEFAULT '',
    identity      TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS events (
    session   TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL,
    fence     INTEGER NOT NULL,
    event     BLOB NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE INDEX IF NOT EXISTS sessions_project_created ON sessions(project, created_at DESC, session);
";

const V2_DDL: &str = "
CREATE TABLE IF NOT EXISTS harnesses (
    name          TEXT PRIMARY KEY,
    uid           TEXT NOT NULL,
    spec          TEXT NOT NULL,
    spec_digest   TEXT NOT NULL,
    state         TEXT NOT NULL,
    retire_reason TEXT NOT NULL DEFAULT '',
    retired_at    INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS reserved_harness_names (
    name        TEXT PRIMARY KEY,
    reserved_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_harness ON sessions(harness);
";

/// The shared-prefix marker table; see the module documentation.
const PREFIX_DDL: &str = "
CREATE TABLE IF NOT EXISTS session_prefix (
    session    TEXT PRIMARY KEY,
    parent_uid TEXT NOT NULL,
    fork_seq   INTEGER NOT NULL,
    fork_hash  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS session_prefix_parent ON session_prefix(parent_uid, fork_seq);
";

/// Ownership and deletion (extensions §1–§3): columns added to the reference `sessions` table,
/// each with a default that means what a row without it meant (unbound, active, not
/// reclaimed), so rows the reference implementation inserts read correctly. Added when missing
/// on every open, outside the ladder like `session_prefix`.
const SECURITY_COLUMNS: [(&str, &str); 4] = [
    ("owner_issuer", "TEXT NOT NULL DEFAULT ''"),
    ("owner_subject", "TEXT NOT NULL DEFAULT ''"),
    ("deletion_state", "TEXT NOT NULL DEFAULT ''"),
    ("reclaimed_at", "INTEGER NOT NULL DEFAULT 0"),
];

/// Usage totals ([`agentsessions_journal::usage`]): `sessions` columns after the security ones, zero for a row
/// the reference implementation (or an earlier build) wrote; such a session's earlier USAGE
/// records are not counted.
const USAGE_COLUMNS: [(&str, &str); 4] = [
    ("usage_input_tokens", "INTEGER NOT NULL DEFAULT 0"),
    ("usage_output_tokens", "INTEGER NOT NULL DEFAULT 0"),
    ("usage_reasoning_tokens", "INTEGER NOT NULL DEFAULT 0"),
    ("usage_cached_input_tokens", "INTEGER NOT NULL DEFAULT 0"),
];

/// The commit time of each record ([`LogRecord::committed_at`](agentsessions_journal::LogRecord)): an `events`
/// column after the reference ones, 0 (no time) for a record an earlier build wrote.
const EVENT_COLUMNS: [(&str, &str); 1] = [("committed_at", "INTEGER NOT NULL DEFAULT 0")];

/// The pending-approvals projection ([`agentsessions_journal::approvals`]), kept in each append's transaction;
/// listed oldest first through its index, joined with `sessions` for project and owner.
const APPROVALS_DDL: &str = "
CREATE TABLE IF NOT EXISTS pending_approvals (
    session      TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    request_seq  INTEGER NOT NULL,
    tool         TEXT NOT NULL DEFAULT '',
    args         TEXT NOT NULL DEFAULT '',
    reason       TEXT NOT NULL DEFAULT '',
    requested_at INTEGER NOT NULL,
    PRIMARY KEY (session, tool_call_id)
);
CREATE INDEX IF NOT EXISTS pending_approvals_requested
    ON pending_approvals(requested_at, session, tool_call_id);
";

/// Owner-filtered listing is an index range scan in the listing's order; the reclaimer finds
/// deleted, unreclaimed sessions through a partial index that stays empty while nothing is
/// deleted.
const SECURITY_DDL: &str = "
CREATE INDEX IF NOT EXISTS sessions_owner_created
    ON sessions(owner_issuer, owner_subject, project, created_at DESC, session);
CREATE INDEX IF NOT EXISTS sessions_deletion_pending
    ON sessions(updated_at, session)
    WHERE deletion_state NOT IN ('', 'ACTIVE') AND reclaimed_at = 0;
";

fn add_missing_columns(
    tx: &rusqlite::Transaction<'_>,
    table: &str,
    columns: &[(&str, &str)],
) -> Result<()> {
    let mut present = Vec::new();
    {
        let mut stmt = tx.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            present.push(row.get::<_, String>(0)?);
        }
    }
    for (name, decl) in columns {
        if !present.iter().any(|p| p == name) {
            tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {name} {decl}"))?;
        }
    }
    Ok(())
}

fn add_security_columns(tx: &rusqlite::Transaction<'_>) -> Result<()> {
    add_missing_columns(tx, "sessions", &SECURITY_COLUMNS)?;
    tx.execute_batch(SECURITY_DDL)?;
    Ok(())
}

fn add_operator_views(tx: &rusqlite::Transaction<'_>) -> Result<()> {
    add_missing_columns(tx, "sessions", &USAGE_COLUMNS)?;
    add_missing_columns(tx, "events", &EVENT_COLUMNS)?;
    tx.execute_batch(APPROVALS_DDL)?;
    Ok(())
}

/// Opens a connection with the journal's pragmas. The schema stamp is checked before anything
/// is written, so a file from a newer build is refused untouched.
pub(crate) fn open_connection(path: &Path, writable: bool) -> Result<Connection> {
    let flags = if writable {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI
    } else {
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI
    };
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let conn = match check_version(&conn) {
        // A WAL file whose `-shm` index is gone (no connection has it open) and cannot be
        // created beside it is read as immutable: nothing else is writing it.
        Err(JournalError::Storage(e)) if !writable && is_read_only_error(&e) => {
            let conn = Connection::open_with_flags(immutable_uri(path), flags)?;
            check_version(&conn)?;
            conn
        }
        Err(e) => return Err(e),
        Ok(_) => conn,
    };
    Ok(conn)
}

fn is_read_only_error(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen)
    )
}

/// `file:<path>?immutable=1`, with the characters a URI gives meaning to escaped.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '%' | '?' | '#' => uri.push_str(&format!("%{:02X}", u32::from(c))),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Refuses a negative stamp or one newer than this build.
pub(crate) fn check_version(conn: &Connection) -> Result<i64> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    rules::check_schema_stamp(version, SCHEMA_VERSION)
}

/// Switches to WAL with full sync, then migrates to [`SCHEMA_VERSION`] in one transaction.
pub(crate) fn prepare_writer(conn: &mut Connection, now_ns: i64) -> Result<()> {
    enable_wal(conn)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    // Read the stamp again under the write lock: another process may have migrated meanwhile.
    let version = check_version(&tx)?;
    if version < 1 {
        tx.execute_batch(V1_DDL)?;
    }
    if version < 2 {
        tx.execute_batch(V2_DDL)?;
        reserve_recorded_names(&tx, now_ns)?;
    }
    if version < SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.execute_batch(PREFIX_DDL)?;
    add_security_columns(&tx)?;
    add_operator_views(&tx)?;
    tx.commit()?;
    Ok(())
}

/// WAL mode does not honor the busy handler while another connection holds the file, so the
/// switch is retried with exponential backoff for up to five seconds.
fn enable_wal(conn: &Connection) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut delay = Duration::from_millis(2);
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") || mode.eq_ignore_ascii_case("memory") => {
                return Ok(());
            }
            Ok(mode) => {
                return Err(JournalError::InvalidArgument(format!(
                    "journal file refused WAL mode (reported {mode})"
                )));
            }
            Err(e) if Instant::now() < deadline && is_contention(&e) => {
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(250));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The v1 → v2 rung: names that sessions already use (their row, or a harness recorded on an
/// EXECUTION_START) are reserved so a registration can never take them over. An undecodable event
/// fails the rung, leaving the file at v1.
fn reserve_recorded_names(tx: &rusqlite::Transaction<'_>, now_ns: i64) -> Result<()> {
    tx.execute(
        "INSERT OR IGNORE INTO reserved_harness_names(name, reserved_at)
         SELECT DISTINCT harness, ?1 FROM sessions WHERE harness != ''",
        [now_ns],
    )?;
    let mut names = Vec::new();
    {
        let mut stmt = tx.prepare("SELECT session, seq, event FROM events")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let session: String = row.get(0)?;
            let seq: i64 = row.get(1)?;
            let blob: Vec<u8> = row.get(2)?;
            let event = decode_event(&session, seq, &blob)?;
            if let Some(start) = event.execution_start()
                && !start.harness.is_empty()
            {
                names.push(start.harness.clone());
            }
        }
    }
    let mut insert = tx.prepare(
        "INSERT OR IGNORE INTO reserved_harness_names(name, reserved_at) VALUES (?1, ?2)",
    )?;
    for name in names {
        insert.execute(rusqlite::params![name, now_ns])?;
    }
    Ok(())
}

/// The stamp of an existing file, without opening it for writing.
///
/// # Errors
/// Storage failures.
pub fn schema_version_of(path: &Path) -> Result<Option<i64>> {
    if !path.exists() {
        return Ok(None);
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    Ok(conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .optional()?)
}
