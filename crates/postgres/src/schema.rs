//! The journal's tables in their Postgres schema, the version stamp and the migration ladder.
//!
//! The layout is the SQLite one of semantics §1.5 with Postgres types (`BIGINT` for integers,
//! `BYTEA` for the event blob), so the same auditing queries work on both. Keys and names that
//! are ordered (session uids, harness names) use the `"C"` collation: listing and keyset paging
//! compare them byte-wise, as every other backend does, whatever the database's locale.
//!
//! The stamp lives in `schema_version` (one row). A database stamped negative or newer than this
//! build is refused with [`JournalError::UnsupportedSchema`] before anything is written; a
//! fresh schema gets the DDL and the stamp in one transaction, under an advisory lock so hosts
//! starting together migrate once.

use agentsessions_journal::JournalError;
use tokio_postgres::Client;

use crate::failure::DbError;

/// The schema version this build writes (and the newest it opens). Postgres layouts are
/// versioned on their own, starting at 1; the SQLite stamp is a separate ladder.
///
/// | version | adds |
/// |---|---|
/// | 1 | sessions, events, harness registry (the SQLite v2 layout) |
/// | 2 | `session_prefix`: shared-prefix fork children |
/// | 3 | `sessions` ownership and deletion columns with their indexes |
/// | 4 | `events.committed_at`, `sessions` usage totals, `pending_approvals` with its index |
pub const SCHEMA_VERSION: i64 = 4;

/// Version 1: the sessions, events and harness registry tables of semantics §1.5 (SQLite v2).
/// No Postgres layout predates the registry, so SQLite's v1 → v2 rung (reserving the harness
/// names that sessions already use) has nothing to do here.
const V1_DDL: &str = r#"
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.schema_version (
    id          SMALLINT PRIMARY KEY CHECK (id = 1),
    version     BIGINT NOT NULL,
    migrated_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.sessions (
    session       TEXT COLLATE "C" PRIMARY KEY,
    fence         BIGINT NOT NULL DEFAULT 0,
    project       TEXT NOT NULL DEFAULT '',
    name          TEXT NOT NULL DEFAULT '',
    harness       TEXT NOT NULL DEFAULT '',
    model         TEXT NOT NULL DEFAULT '',
    parent_uid    TEXT NOT NULL DEFAULT '',
    fork_seq      BIGINT NOT NULL DEFAULT 0,
    compute_state TEXT NOT NULL DEFAULT '',
    created_at    BIGINT NOT NULL DEFAULT 0,
    updated_at    BIGINT NOT NULL DEFAULT 0,
    labels        TEXT NOT NULL DEFAULT '',
    annotations   TEXT NOT NULL DEFAULT '',
    origin        TEXT NOT NULL DEFAULT '',
    identity      TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS {s}.events (
    session   TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL,
    fence     BIGINT NOT NULL,
    event     BYTEA NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE INDEX IF NOT EXISTS sessions_project_created
    ON {s}.sessions (project, created_at DESC, session);
CREATE TABLE IF NOT EXISTS {s}.harnesses (
    name          TEXT COLLATE "C" PRIMARY KEY,
    uid           TEXT NOT NULL,
    spec          TEXT NOT NULL,
    spec_digest   TEXT NOT NULL,
    state         TEXT NOT NULL,
    retire_reason TEXT NOT NULL DEFAULT '',
    retired_at    BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.reserved_harness_names (
    name        TEXT COLLATE "C" PRIMARY KEY,
    reserved_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_harness ON {s}.sessions (harness);
"#;

/// Version 2: shared-prefix fork children (see `agentsessions_journal::lineage`). A row marks
/// `session` as a child whose records `1..=fork_seq` are `parent_uid`'s chain up to that seq;
/// `fork_hash` is the hash there, the link of the child's first own record and its head before
/// it has one. Rows are written once, with the child's `sessions` row, and never changed; the
/// index finds the children that still read a session's rows (a future deleter must keep them).
const V2_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS {s}.session_prefix (
    session    TEXT COLLATE "C" PRIMARY KEY,
    parent_uid TEXT COLLATE "C" NOT NULL,
    fork_seq   BIGINT NOT NULL,
    fork_hash  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS session_prefix_parent ON {s}.session_prefix (parent_uid, fork_seq);
"#;

/// Version 3: ownership and deletion (extensions §1–§3), the columns the SQLite journal adds to
/// its `sessions` table. The defaults mean unbound, active, not reclaimed: what every row written
/// before them was. Owner-filtered listing is a range scan of `sessions_owner_created` in the
/// listing's order; the reclaimer's queue is a partial index that is empty while nothing is
/// deleted.
const V3_DDL: &str = r#"
ALTER TABLE {s}.sessions
    ADD COLUMN IF NOT EXISTS owner_issuer   TEXT NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS owner_subject  TEXT NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS deletion_state TEXT NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS reclaimed_at   BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS sessions_owner_created
    ON {s}.sessions (owner_issuer, owner_subject, project, created_at DESC, session);
CREATE INDEX IF NOT EXISTS sessions_deletion_pending
    ON {s}.sessions (updated_at, session)
    WHERE deletion_state NOT IN ('', 'ACTIVE') AND reclaimed_at = 0;
"#;

/// Version 4: what an operator reads without scanning logs, the SQLite journal's columns and
/// table of the same names: each record's commit time (0 for a record written before it; never
/// hashed), each session's summed USAGE records, and the requests waiting for an approval
/// decision, kept in the append's transaction and listed oldest first through their index.
const V4_DDL: &str = r#"
ALTER TABLE {s}.events
    ADD COLUMN IF NOT EXISTS committed_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {s}.sessions
    ADD COLUMN IF NOT EXISTS usage_input_tokens        BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS usage_output_tokens       BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS usage_reasoning_tokens    BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS usage_cached_input_tokens BIGINT NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {s}.pending_approvals (
    session      TEXT COLLATE "C" NOT NULL,
    tool_call_id TEXT COLLATE "C" NOT NULL,
    execution_id TEXT NOT NULL,
    request_seq  BIGINT NOT NULL,
    tool         TEXT NOT NULL DEFAULT '',
    args         TEXT NOT NULL DEFAULT '',
    reason       TEXT NOT NULL DEFAULT '',
    requested_at BIGINT NOT NULL,
    PRIMARY KEY (session, tool_call_id)
);
CREATE INDEX IF NOT EXISTS pending_approvals_requested
    ON {s}.pending_approvals (requested_at, session, tool_call_id);
"#;

/// Substitutes the quoted schema name into a statement template.
pub(crate) fn in_schema(template: &str, quoted_schema: &str) -> String {
    template.replace("{s}", quoted_schema)
}

/// The stamp as stored; 0 when the schema or its stamp does not exist yet.
pub(crate) async fn stamp(client: &Client, quoted_schema: &str) -> Result<i64, DbError> {
    let table = format!("{quoted_schema}.schema_version");
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await?
        .try_get(0)?;
    if !exists {
        return Ok(0);
    }
    let row = client
        .query_opt(&format!("SELECT version FROM {table} WHERE id = 1"), &[])
        .await?;
    Ok(match row {
        Some(row) => row.try_get(0)?,
        None => 0,
    })
}

/// Refuses a stamp outside `0..=SCHEMA_VERSION`.
pub(crate) fn check_version(found: i64) -> Result<i64, JournalError> {
    agentsessions_journal::rules::check_schema_stamp(found, SCHEMA_VERSION)
}

/// Checks the stamp and migrates to [`SCHEMA_VERSION`] in one transaction. A refused database is
/// left exactly as it was: the transaction is rolled back before any DDL runs.
pub(crate) async fn migrate(
    client: &mut Client,
    schema: &str,
    quoted_schema: &str,
    now_ns: i64,
) -> Result<(), DbError> {
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&format!("agentsessions journal migration {schema}")],
    )
    .await?;
    // Read under the lock: another host may have migrated while this one waited.
    let version = check_version(stamp(tx.client(), quoted_schema).await?)?;
    if version < 1 {
        tx.batch_execute(&in_schema(V1_DDL, quoted_schema)).await?;
    }
    if version < 2 {
        tx.batch_execute(&in_schema(V2_DDL, quoted_schema)).await?;
    }
    if version < 3 {
        tx.batch_execute(&in_schema(V3_DDL, quoted_schema)).await?;
    }
    if version < 4 {
        tx.batch_execute(&in_schema(V4_DDL, quoted_schema)).await?;
    }
    if version < SCHEMA_VERSION {
        tx.execute(
            &in_schema(
                "INSERT INTO {s}.schema_version (id, version, migrated_at) VALUES (1, $1, $2)
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version,
                                                migrated_at = excluded.migrated_at",
                quoted_schema,
            ),
            &[&SCHEMA_VERSION, &now_ns],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
