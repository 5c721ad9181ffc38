//! Connections: where to connect ([`Target`]), one open connection with its prepared statements
//! ([`Conn`]), and the small pool of read connections ([`Pool`]).
//!
//! Every connection checks the schema stamp when it opens, so a host started before a newer
//! build migrated the database refuses to go on with the old layout. A connection that the
//! server closed (restart, `pg_terminate_backend`, network loss) is dropped and replaced on the
//! next use; reads retry once on a fresh connection, writes are handled by the writer.

use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};

use agentsessions_journal::{JournalError, Result};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{Client, Config, NoTls, Socket, Statement};

use crate::codec::{HARNESS_COLUMNS, STORED_COLUMNS};
use crate::failure::{DbError, connect_error};
use crate::schema::{self, SCHEMA_VERSION, in_schema};
use crate::tasks::Tasks;

/// The channel every journal notifies and listens on; the payload names the schema, so
/// journals in other schemas of the database ignore each other's commits.
pub(crate) const CHANNEL: &str = "agentsessions_commits";

/// The pending-approvals projection's statements (`crate::approvals` runs them), in
/// `Statements` order: close, open, list, list by owner.
const APPROVAL_STATEMENTS: [&str; 4] = [
    "DELETE FROM {s}.pending_approvals a
     USING unnest($1::TEXT[], $2::TEXT[], $3::TEXT[]) AS d(session, kind, key)
     WHERE a.session = d.session
       AND (d.kind = 'session'
            OR (d.kind = 'call' AND a.tool_call_id = d.key)
            OR (d.kind = 'execution' AND a.execution_id = d.key))",
    "INSERT INTO {s}.pending_approvals (session, tool_call_id, execution_id, request_seq, tool,
                                        args, reason, requested_at)
     SELECT u.*, $8::BIGINT FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::BIGINT[],
                                        $5::TEXT[], $6::TEXT[], $7::TEXT[]) AS u
     ON CONFLICT (session, tool_call_id) DO UPDATE SET
         execution_id = excluded.execution_id, request_seq = excluded.request_seq,
         tool = excluded.tool, args = excluded.args, reason = excluded.reason,
         requested_at = excluded.requested_at",
    "SELECT a.session, s.project, s.owner_issuer, s.owner_subject, a.execution_id,
            a.tool_call_id, a.request_seq, a.tool, a.args, a.reason, a.requested_at
     FROM {s}.pending_approvals a JOIN {s}.sessions s ON s.session = a.session
     WHERE s.project = $1
       AND (NOT $2::BOOLEAN OR (a.requested_at, a.session, a.tool_call_id) > ($3, $4, $5))
     ORDER BY a.requested_at, a.session, a.tool_call_id
     LIMIT $6",
    "SELECT a.session, s.project, s.owner_issuer, s.owner_subject, a.execution_id,
            a.tool_call_id, a.request_seq, a.tool, a.args, a.reason, a.requested_at
     FROM {s}.pending_approvals a JOIN {s}.sessions s ON s.session = a.session
     WHERE s.project = $1 AND s.owner_issuer = $7 AND s.owner_subject = $8
       AND (NOT $2::BOOLEAN OR (a.requested_at, a.session, a.tool_call_id) > ($3, $4, $5))
     ORDER BY a.requested_at, a.session, a.tool_call_id
     LIMIT $6",
];

/// The `application_name` of the journal's connections when the connection string sets none.
pub(crate) const APPLICATION_NAME: &str = "agentsessions-journal";

/// Appended to the `application_name` of the commit listener's connection
/// (`agentsessions-journal-listener` by default).
pub(crate) const LISTENER_SUFFIX: &str = "-listener";

/// Where the journal's connections go.
#[derive(Debug)]
pub(crate) struct Target {
    config: Config,
    /// Host, port and database for messages (never the password).
    pub(crate) display: String,
    /// The schema as a quoted identifier.
    pub(crate) schema: String,
    /// The schema's plain name, as commit notifications carry it.
    pub(crate) schema_name: String,
    /// Where each connection's driver task is spawned.
    tasks: Arc<Tasks>,
}

impl Target {
    pub(crate) fn new(
        config: Config,
        schema: String,
        schema_name: String,
        tasks: Arc<Tasks>,
    ) -> Self {
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .collect();
        let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
        let display = format!(
            "host={} port={} dbname={}",
            hosts.join(","),
            if ports.is_empty() {
                "5432".to_owned()
            } else {
                ports.join(",")
            },
            config
                .get_dbname()
                .or_else(|| config.get_user())
                .unwrap_or_default()
        );
        Self {
            config,
            display,
            schema,
            schema_name,
            tasks,
        }
    }

    /// Opens a bare connection whose driving is left to the caller (the commit listener, which
    /// reads its notifications from it). Its `application_name` is the journal's with
    /// [`LISTENER_SUFFIX`], so an operator (or a test) can tell the listening backend from the
    /// pooled ones in `pg_stat_activity`.
    pub(crate) async fn open_undriven(
        &self,
    ) -> Result<(Client, tokio_postgres::Connection<Socket, NoTlsStream>)> {
        let mut config = self.config.clone();
        let name = format!(
            "{}{LISTENER_SUFFIX}",
            config.get_application_name().unwrap_or(APPLICATION_NAME)
        );
        config.application_name(name);
        config
            .connect(NoTls)
            .await
            .map_err(|e| connect_error(&self.display, &e))
    }

    /// Opens a bare connection; its driver task, owned by the journal's [`Tasks`], ends when the
    /// client is dropped or the server closes the socket.
    pub(crate) async fn open(&self) -> Result<Client> {
        let (client, connection) = self
            .config
            .connect(NoTls)
            .await
            .map_err(|e| connect_error(&self.display, &e))?;
        self.tasks.spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "journal postgres connection ended");
            }
        });
        Ok(client)
    }

    /// Opens a connection, checks the stamp and prepares every statement.
    pub(crate) async fn connect(&self) -> Result<Conn> {
        let client = self.open().await?;
        let found = schema::stamp(&client, &self.schema)
            .await
            .map_err(DbError::into_read_error)?;
        if found != SCHEMA_VERSION {
            return Err(JournalError::UnsupportedSchema {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        // Every statement is keyed by its parameters the same way whatever their values, so
        // the plan made once per connection serves all executions; re-planning each one (the
        // default for the first few) costs as much as running it.
        client
            .batch_execute("SET plan_cache_mode = force_generic_plan")
            .await
            .map_err(|e| DbError::Pg(e).into_read_error())?;
        // Boxed: preparing every statement at once is a large future.
        let st = Box::pin(Statements::prepare(&client, &self.schema))
            .await
            .map_err(|e| DbError::Pg(e).into_read_error())?;
        Ok(Conn { client, st })
    }
}

/// One open connection and its prepared statements.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) client: Client,
    pub(crate) st: Statements,
}

/// Every statement the journal runs, prepared once per connection.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) begin: Statement,
    pub(crate) commit: Statement,
    pub(crate) stamp: Statement,
    pub(crate) head: Statement,
    pub(crate) read: Statement,
    pub(crate) session_info: Statement,
    pub(crate) list_sessions: Statement,
    pub(crate) list_owned_sessions: Statement,
    pub(crate) pending_deletions: Statement,
    pub(crate) deletion_state: Statement,
    pub(crate) mark_reclaimed: Statement,
    pub(crate) get_harness: Statement,
    pub(crate) list_harnesses: Statement,
    pub(crate) is_reserved: Statement,
    pub(crate) store_harness: Statement,
    pub(crate) reserve: Statement,
    pub(crate) insert_missing: Statement,
    pub(crate) lock_sessions: Statement,
    pub(crate) heads: Statement,
    pub(crate) insert_events: Statement,
    pub(crate) update_sessions: Statement,
    pub(crate) delete_sessions: Statement,
    pub(crate) links_of: Statement,
    pub(crate) lineage: Statement,
    pub(crate) fork_parent: Statement,
    pub(crate) records_back: Statement,
    pub(crate) fork_insert: Statement,
    pub(crate) pending_close: Statement,
    pub(crate) pending_open: Statement,
    pub(crate) list_pending: Statement,
    pub(crate) list_owned_pending: Statement,
    /// Announces a batch's new heads to every host's commit listener (`crate::listener`).
    pub(crate) notify: Statement,
}

/// The derived columns after [`STORED_COLUMNS`] in session reads.
const LAST_SEQ: &str = "COALESCE((SELECT MAX(e.seq) FROM {s}.events e WHERE e.session = s.session),
     (SELECT p.fork_seq FROM {s}.session_prefix p WHERE p.session = s.session), 0)::BIGINT";

impl Statements {
    async fn prepare(client: &Client, schema: &str) -> Result<Self, tokio_postgres::Error> {
        let sql = |template: &str| in_schema(template, schema);
        let session_select = format!(
            "SELECT {}, {LAST_SEQ} FROM {{s}}.sessions s",
            STORED_COLUMNS
                .split(", ")
                .map(|c| format!("s.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let texts = [
            sql("BEGIN"),
            sql("COMMIT"),
            sql("SELECT version FROM {s}.schema_version WHERE id = 1"),
            sql(
                "SELECT COALESCE((SELECT MAX(seq) FROM {s}.events WHERE session = $1),
                                 (SELECT fork_seq FROM {s}.session_prefix WHERE session = $1),
                                 0)::BIGINT",
            ),
            sql(
                "SELECT seq, prev_hash, hash, fence, event, committed_at FROM {s}.events
                 WHERE session = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
            ),
            sql(&format!("{session_select} WHERE s.session = $1")),
            sql(&format!(
                "{session_select}
                 WHERE s.project = $1
                   AND s.created_at <= $2 AND (s.created_at < $2 OR s.session > $3)
                 ORDER BY s.created_at DESC, s.session ASC
                 LIMIT $4"
            )),
            sql(&format!(
                "{session_select}
                 WHERE s.owner_issuer = $5 AND s.owner_subject = $6 AND s.project = $1
                   AND s.created_at <= $2 AND (s.created_at < $2 OR s.session > $3)
                 ORDER BY s.created_at DESC, s.session ASC
                 LIMIT $4"
            )),
            sql("SELECT session FROM {s}.sessions
                 WHERE deletion_state NOT IN ('', 'ACTIVE') AND reclaimed_at = 0
                 ORDER BY updated_at, session LIMIT $1"),
            sql("SELECT deletion_state FROM {s}.sessions WHERE session = $1"),
            sql("UPDATE {s}.sessions SET reclaimed_at = $2
                 WHERE session = $1 AND reclaimed_at = 0
                   AND deletion_state NOT IN ('', 'ACTIVE')"),
            sql(&format!(
                "SELECT {HARNESS_COLUMNS} FROM {{s}}.harnesses WHERE name = $1"
            )),
            sql(&format!(
                "SELECT {HARNESS_COLUMNS} FROM {{s}}.harnesses
                 WHERE name > $1 AND ($2::BOOLEAN OR state = 'active')
                 ORDER BY name LIMIT $3"
            )),
            sql("SELECT EXISTS (SELECT 1 FROM {s}.reserved_harness_names WHERE name = $1)"),
            sql(&format!(
                "INSERT INTO {{s}}.harnesses ({HARNESS_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (name) DO UPDATE SET
                     state = excluded.state, retire_reason = excluded.retire_reason,
                     retired_at = excluded.retired_at, updated_at = excluded.updated_at"
            )),
            sql("INSERT INTO {s}.reserved_harness_names (name, reserved_at)
                 SELECT n, $2::BIGINT FROM unnest($1::TEXT[]) AS n WHERE n <> ''
                 ON CONFLICT (name) DO NOTHING"),
            // Rows are created in the array's (sorted) order so that hosts creating the same
            // sessions wait on each other in one order and never deadlock.
            sql(
                "INSERT INTO {s}.sessions (session, project, created_at, updated_at, compute_state)
                 SELECT u.session, $2::TEXT, $3::BIGINT, $3::BIGINT, 'NONE'
                 FROM unnest($1::TEXT[]) WITH ORDINALITY AS u(session, ord)
                 ORDER BY u.ord
                 ON CONFLICT (session) DO NOTHING
                 RETURNING session",
            ),
            sql(&format!(
                "SELECT {STORED_COLUMNS} FROM {{s}}.sessions
                 WHERE session = ANY($1::TEXT[]) ORDER BY session FOR UPDATE"
            )),
            // A shared-prefix child without records of its own stands at its fork point; its own
            // records are all past it, so the larger seq is the head either way.
            sql(
                "SELECT u.session, e.seq, e.hash FROM unnest($1::TEXT[]) AS u(session)
                 CROSS JOIN LATERAL (
                     SELECT seq, hash FROM (
                         (SELECT seq, hash FROM {s}.events ev WHERE ev.session = u.session
                          ORDER BY seq DESC LIMIT 1)
                         UNION ALL
                         (SELECT fork_seq, fork_hash FROM {s}.session_prefix p
                          WHERE p.session = u.session)
                     ) h ORDER BY seq DESC LIMIT 1) e",
            ),
            sql(
                "INSERT INTO {s}.events (session, seq, prev_hash, hash, fence, event, committed_at)
                 SELECT u.*, $7::BIGINT FROM unnest($1::TEXT[], $2::BIGINT[], $3::TEXT[],
                                                    $4::TEXT[], $5::BIGINT[], $6::BYTEA[]) AS u",
            ),
            sql("UPDATE {s}.sessions AS t SET
                     fence = u.fence, project = u.project, name = u.name, harness = u.harness,
                     model = u.model, parent_uid = u.parent_uid, fork_seq = u.fork_seq,
                     compute_state = u.compute_state, created_at = u.created_at,
                     updated_at = u.updated_at, labels = u.labels, annotations = u.annotations,
                     origin = u.origin, identity = u.identity, owner_issuer = u.owner_issuer,
                     owner_subject = u.owner_subject, deletion_state = u.deletion_state,
                     usage_input_tokens = u.usage_input_tokens,
                     usage_output_tokens = u.usage_output_tokens,
                     usage_reasoning_tokens = u.usage_reasoning_tokens,
                     usage_cached_input_tokens = u.usage_cached_input_tokens
                 FROM unnest($1::TEXT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[],
                             $6::TEXT[], $7::TEXT[], $8::BIGINT[], $9::TEXT[], $10::BIGINT[],
                             $11::BIGINT[], $12::TEXT[], $13::TEXT[], $14::TEXT[], $15::TEXT[],
                             $16::TEXT[], $17::TEXT[], $18::TEXT[], $19::BIGINT[], $20::BIGINT[],
                             $21::BIGINT[], $22::BIGINT[])
                     AS u(session, fence, project, name, harness, model, parent_uid, fork_seq,
                          compute_state, created_at, updated_at, labels, annotations, origin,
                          identity, owner_issuer, owner_subject, deletion_state,
                          usage_input_tokens, usage_output_tokens, usage_reasoning_tokens,
                          usage_cached_input_tokens)
                 WHERE t.session = u.session"),
            sql("DELETE FROM {s}.sessions WHERE session = ANY($1::TEXT[])"),
            sql(
                "SELECT session, parent_uid, fork_seq FROM {s}.session_prefix
                 WHERE session = ANY($1::TEXT[])",
            ),
            // The links from $1 up to the first session that has none, nearest first.
            sql(&format!(
                "WITH RECURSIVE walk(session, parent_uid, fork_seq, depth) AS (
                     SELECT session, parent_uid, fork_seq, 1 FROM {{s}}.session_prefix
                     WHERE session = $1
                   UNION ALL
                     SELECT p.session, p.parent_uid, p.fork_seq, w.depth + 1
                     FROM walk w JOIN {{s}}.session_prefix p ON p.session = w.parent_uid
                     WHERE w.depth < {}
                 )
                 SELECT session, parent_uid, fork_seq FROM walk ORDER BY depth",
                agentsessions_journal::lineage::MAX_FORK_DEPTH
            )),
            sql("SELECT project, harness, model, owner_issuer, owner_subject
                 FROM {s}.sessions WHERE session = $1"),
            sql("SELECT seq, hash, event FROM {s}.events
                 WHERE session = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq DESC LIMIT $4"),
            // The child's row and its link in one statement: both or neither. A uid that has a
            // row, a link or records is refused (no row returned, or a key violation).
            sql("WITH child AS (
                     INSERT INTO {s}.sessions (session, fence, project, harness, model, parent_uid,
                                               fork_seq, compute_state, created_at, updated_at,
                                               owner_issuer, owner_subject)
                     SELECT $1::TEXT, 1, $2::TEXT, $3::TEXT, $4::TEXT, $5::TEXT, $6::BIGINT,
                            $7::TEXT, $8::BIGINT, $8::BIGINT, $10::TEXT, $11::TEXT
                     WHERE NOT EXISTS (SELECT 1 FROM {s}.events WHERE session = $1::TEXT)
                     ON CONFLICT (session) DO NOTHING
                     RETURNING session)
                 INSERT INTO {s}.session_prefix (session, parent_uid, fork_seq, fork_hash)
                 SELECT session, $5::TEXT, $6::BIGINT, $9::TEXT FROM child
                 RETURNING session"),
            sql(APPROVAL_STATEMENTS[0]),
            sql(APPROVAL_STATEMENTS[1]),
            sql(APPROVAL_STATEMENTS[2]),
            sql(APPROVAL_STATEMENTS[3]),
            format!(
                "SELECT pg_notify('{}', p) FROM unnest($1::TEXT[]) AS p",
                CHANNEL
            ),
        ];
        // Polled together, the requests are pipelined on the one connection.
        let [
            begin,
            commit,
            stamp,
            head,
            read,
            session_info,
            list_sessions,
            list_owned_sessions,
            pending_deletions,
            deletion_state,
            mark_reclaimed,
            get_harness,
            list_harnesses,
            is_reserved,
            store_harness,
            reserve,
            insert_missing,
            lock_sessions,
            heads,
            insert_events,
            update_sessions,
            delete_sessions,
            links_of,
            lineage,
            fork_parent,
            records_back,
            fork_insert,
            pending_close,
            pending_open,
            list_pending,
            list_owned_pending,
            notify,
        ] = &texts;
        let (
            begin,
            commit,
            stamp,
            head,
            read,
            session_info,
            list_sessions,
            list_owned_sessions,
            pending_deletions,
            deletion_state,
            mark_reclaimed,
            get_harness,
            list_harnesses,
            is_reserved,
            store_harness,
            reserve,
            insert_missing,
            lock_sessions,
            heads,
            insert_events,
            update_sessions,
            delete_sessions,
            links_of,
            lineage,
            fork_parent,
            records_back,
            fork_insert,
            pending_close,
            pending_open,
            list_pending,
            list_owned_pending,
            notify,
        ) = tokio::try_join!(
            client.prepare(begin),
            client.prepare(commit),
            client.prepare(stamp),
            client.prepare(head),
            client.prepare(read),
            client.prepare(session_info),
            client.prepare(list_sessions),
            client.prepare(list_owned_sessions),
            client.prepare(pending_deletions),
            client.prepare(deletion_state),
            client.prepare(mark_reclaimed),
            client.prepare(get_harness),
            client.prepare(list_harnesses),
            client.prepare(is_reserved),
            client.prepare(store_harness),
            client.prepare(reserve),
            client.prepare(insert_missing),
            client.prepare(lock_sessions),
            client.prepare(heads),
            client.prepare(insert_events),
            client.prepare(update_sessions),
            client.prepare(delete_sessions),
            client.prepare(links_of),
            client.prepare(lineage),
            client.prepare(fork_parent),
            client.prepare(records_back),
            client.prepare(fork_insert),
            client.prepare(pending_close),
            client.prepare(pending_open),
            client.prepare(list_pending),
            client.prepare(list_owned_pending),
            client.prepare(notify),
        )?;
        Ok(Self {
            begin,
            commit,
            stamp,
            head,
            read,
            session_info,
            list_sessions,
            list_owned_sessions,
            pending_deletions,
            deletion_state,
            mark_reclaimed,
            get_harness,
            list_harnesses,
            is_reserved,
            store_harness,
            reserve,
            insert_missing,
            lock_sessions,
            heads,
            insert_events,
            update_sessions,
            delete_sessions,
            links_of,
            lineage,
            fork_parent,
            records_back,
            fork_insert,
            pending_close,
            pending_open,
            list_pending,
            list_owned_pending,
            notify,
        })
    }
}

/// Read (and registry) connections: at most `size` leased at once, idle ones kept open.
#[derive(Debug)]
pub(crate) struct Pool {
    target: Arc<Target>,
    idle: Mutex<Vec<Conn>>,
    permits: Semaphore,
}

impl Pool {
    pub(crate) fn new(target: Arc<Target>, size: usize, open: Vec<Conn>) -> Self {
        Self {
            target,
            idle: Mutex::new(open),
            permits: Semaphore::new(size.max(1)),
        }
    }

    /// Closes the idle connections (their drivers end with them).
    pub(crate) fn close(&self) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// A connection for one operation, opened when none is idle.
    pub(crate) async fn lease(&self) -> Result<Lease<'_>> {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| JournalError::Closed)?;
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match idle {
            Some(conn) if !conn.client.is_closed() => conn,
            _ => self.target.connect().await?,
        };
        Ok(Lease {
            pool: self,
            conn: Some(conn),
            keep: true,
            _permit: permit,
        })
    }
}

/// A leased connection; it goes back to the pool when dropped unless it was discarded (closed
/// by the server, or dropped in the middle of a transaction).
#[derive(Debug)]
pub(crate) struct Lease<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
    keep: bool,
    _permit: SemaphorePermit<'a>,
}

impl Lease<'_> {
    /// Closes the connection instead of returning it.
    pub(crate) fn discard(&mut self) {
        self.keep = false;
    }

    /// Marks the connection as inside a transaction (`true`) or back outside it: a lease dropped
    /// inside one is closed, so no pooled connection carries a half-done transaction.
    pub(crate) fn in_transaction(&mut self, open: bool) {
        self.keep = !open;
    }
}

impl Deref for Lease<'_> {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        // `conn` is taken only in `drop`, after which nothing can dereference the lease.
        self.conn
            .as_ref()
            .expect("a lease holds its connection until dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.keep
            && !conn.client.is_closed()
        {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
        }
    }
}

/// Runs `$body` (an expression using `$conn: &Conn` and `?` on [`DbError`]s) on a leased
/// connection. When the server had closed that connection, it is dropped and the body runs once
/// more on a fresh one: reads are idempotent, and a transaction cut by a lost connection was
/// rolled back by the server.
macro_rules! with_conn {
    ($pool:expr, |$conn:ident| $body:expr) => {{
        let mut retried = false;
        loop {
            let mut lease = $pool.lease().await?;
            let $conn: &mut $crate::connection::Lease<'_> = &mut lease;
            let out: ::std::result::Result<_, $crate::failure::DbError> = async { $body }.await;
            match out {
                Err(e) if e.connection_lost() && !retried => {
                    lease.discard();
                    retried = true;
                }
                Err(e) => {
                    if e.connection_lost() {
                        lease.discard();
                    }
                    break Err(e.into_read_error());
                }
                Ok(v) => break Ok(v),
            }
        }
    }};
}
pub(crate) use with_conn;
