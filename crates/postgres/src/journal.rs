//! [`PostgresJournal`]: the [`Journal`] trait over one Postgres database shared by any number
//! of hosts.

use std::collections::HashMap;
use std::sync::Arc;

use agentsessions_api::{ComputeState, DeletionState, Event, Timestamp};
use agentsessions_journal::approvals::{ApprovalPage, ApprovalsPlan, ApprovalsQuery};
use agentsessions_journal::chain::decode_event;
use agentsessions_journal::lineage::{self, PrefixLink, Segment};
use agentsessions_journal::projection::fixed_state;
use agentsessions_journal::rules::{self, ListPlan};
use agentsessions_journal::writer_queue::{self, Ack};
use agentsessions_journal::{
    AppendRequest, Appended, Catalog, CommitFeed, HarnessRow, HeadFollow, JournalError, ListQuery,
    Log, LogRecord, RegisterOutcome, Result, SessionInfo, SessionPage, SessionRow,
};
use async_trait::async_trait;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_postgres::error::SqlState;

use crate::approvals;
use crate::codec::{self, EncodedRow, StoredHarness};
use crate::connection::{Conn, Pool, Target, with_conn};
use crate::failure::{DbError, commit_failed, connection_lost, outcome_unknown};
use crate::listener;
use crate::options::{PostgresOptions, quoted_schema};
use crate::schema;
use crate::tasks::Tasks;
use crate::writer::{Command, Writer};

/// A journal in a Postgres schema. Any number of instances, in one process or on many hosts,
/// may share the schema: every append is checked and chained inside a transaction that holds
/// its session's row lock, so each seq has exactly one winner and a fence minted anywhere
/// refuses older writers everywhere.
///
/// Cheap to share behind an `Arc`. Every task it starts (writers, connection drivers) is owned
/// by its task set. Dropping it closes the writers' queue, which is their signal to commit and
/// acknowledge what is queued and stop; [`PostgresJournal::close`] does the same and then waits
/// for every task to end.
#[derive(Debug)]
pub struct PostgresJournal {
    target: Arc<Target>,
    writer: mpsc::Sender<Command>,
    /// The writer tasks and every connection's driver.
    tasks: Arc<Tasks>,
    pool: Pool,
    default_project: String,
    /// Where this host's appends and the listener's notifications reach followers.
    feed: Arc<CommitFeed>,
    /// Dropped (with the journal, or by [`PostgresJournal::close`]) to stop the listener task.
    stop_listening: oneshot::Sender<()>,
}

impl PostgresJournal {
    /// Connects to the database named by `url` (a `postgresql://` URL or a `key=value`
    /// connection string), migrates the schema to [`SCHEMA_VERSION`](crate::SCHEMA_VERSION) and
    /// starts the writer tasks. TLS is not supported yet: use it over loopback or a private
    /// network. Its connections show in `pg_stat_activity` as `application_name`
    /// `agentsessions-journal` unless the connection string sets another; the commit listener's
    /// has `-listener` appended (`agentsessions-journal-listener`).
    ///
    /// # Errors
    /// [`JournalError::InvalidArgument`] for a malformed connection string or schema name,
    /// [`JournalError::UnsupportedSchema`] for a schema stamped by a newer build (nothing is
    /// written), [`JournalError::Io`] when the server cannot be reached.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self> {
        let quoted = quoted_schema(&options.schema)?;
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            JournalError::InvalidArgument(format!("postgres connection string: {e}"))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name(crate::connection::APPLICATION_NAME);
        }
        let tasks = Arc::new(Tasks::default());
        let target = Arc::new(Target::new(
            config,
            quoted,
            options.schema.clone(),
            Arc::clone(&tasks),
        ));
        let started = Self::start(&target, &tasks, &options).await;
        if started.is_err() {
            tasks.abort_all();
        }
        let (writer, first_reader, listening) = started?;
        let feed = CommitFeed::new();
        let (stop_listening, stop) = oneshot::channel();
        tasks.spawn(listener::run(
            Arc::clone(&target),
            options.schema.clone(),
            Arc::clone(&feed),
            listening,
            stop,
        ));
        Ok(Self {
            pool: Pool::new(Arc::clone(&target), options.readers, vec![first_reader]),
            target,
            writer,
            tasks,
            default_project: options.default_project,
            feed,
            stop_listening,
        })
    }

    /// Migrates the schema, starts the writer tasks, opens the first read connection and the
    /// commit listener's connection (listening before the journal is handed out, so no other
    /// host's commit after `connect` returns goes unheard).
    async fn start(
        target: &Arc<Target>,
        tasks: &Tasks,
        options: &PostgresOptions,
    ) -> Result<(mpsc::Sender<Command>, Conn, listener::Listening)> {
        let mut client = target.open().await?;
        schema::migrate(
            &mut client,
            &options.schema,
            &target.schema,
            Timestamp::now().unix_nanos(),
        )
        .await
        .map_err(DbError::into_read_error)?;
        drop(client);

        // Bounded: when the database falls behind, appenders wait for room (back-pressure)
        // rather than queueing without limit; the default depth is many full batches per writer,
        // so the writers never wait for callers while any are queued.
        let (tx, rx) = mpsc::channel(options.queue_depth.max(1));
        let queue = Arc::new(Mutex::new(rx));
        for _ in 0..options.writers.max(1) {
            let conn = target.connect().await?;
            let writer = Writer::new(
                Arc::clone(target),
                Some(conn),
                options.default_project.clone(),
                options.max_batch,
            );
            tasks.spawn(writer.run(Arc::clone(&queue)));
        }
        Ok((tx, target.connect().await?, listener::listen(target).await?))
    }

    /// Stops accepting writes, lets the writers commit and acknowledge everything queued, closes
    /// the pooled connections and waits for every task the journal started to end.
    pub async fn close(self) {
        drop(self.writer);
        drop(self.stop_listening);
        self.pool.close();
        self.tasks.join_all().await;
    }

    /// The schema this journal uses, quoted.
    pub fn schema(&self) -> &str {
        &self.target.schema
    }

    /// An append with the writer's `fence`, or minting the next one (`None`).
    async fn append_with(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: Option<i64>,
        events: Vec<Event>,
    ) -> Result<Vec<LogRecord>> {
        let records = writer_queue::append(
            &self.writer,
            Command::Append,
            session,
            expected_last_seq,
            fence,
            events,
            true,
        )
        .await?;
        // This host's followers need not wait for the notification's round trip.
        self.feed.publish_records(session, &records);
        Ok(records)
    }

    async fn send<T>(&self, make: impl FnOnce(Ack<T>) -> Command) -> Result<T> {
        writer_queue::request(&self.writer, make).await
    }
}

async fn read_records(
    conn: &Conn,
    session: &str,
    from: i64,
    to: i64,
) -> std::result::Result<Vec<LogRecord>, DbError> {
    let rows = conn
        .client
        .query(&conn.st.read, &[&session, &from, &to])
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let seq: i64 = row.try_get(0)?;
        let blob: &[u8] = row.try_get(4)?;
        let committed_at: i64 = row.try_get(5)?;
        out.push(LogRecord {
            seq,
            prev_hash: row.try_get(1)?,
            hash: row.try_get(2)?,
            fence: row.try_get(3)?,
            event: decode_event(session, seq, blob)?,
            committed_at: (committed_at != 0).then(|| Timestamp::from_unix_nanos(committed_at)),
        });
    }
    Ok(out)
}

/// The stored runs of `session`'s chain, oldest first, from its link walk.
fn segments_from(
    session: &str,
    walk: &[tokio_postgres::Row],
) -> std::result::Result<Vec<Segment>, DbError> {
    let mut links = HashMap::with_capacity(walk.len());
    for row in walk {
        links.insert(
            row.try_get::<_, String>(0)?,
            PrefixLink {
                parent: row.try_get(1)?,
                fork_seq: row.try_get(2)?,
            },
        );
    }
    Ok(lineage::segments(session, |s| Ok(links.get(s).cloned()))?)
}

/// Reads a chain window: the session's own rows and its link walk in one round trip, then the
/// ancestors' runs when it has any.
async fn read_chain(
    conn: &Conn,
    session: &str,
    from: i64,
    to: i64,
) -> std::result::Result<Vec<LogRecord>, DbError> {
    let key: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&session];
    let (walk, own) = tokio::join!(
        conn.client.query(&conn.st.lineage, &key),
        read_records(conn, session, from, to),
    );
    let walk = walk?;
    let own = own?;
    if walk.is_empty() {
        return Ok(own);
    }
    let mut out = Vec::new();
    for run in segments_from(session, &walk)? {
        // The session's own rows all lie past its fork point, so they are its last run.
        if run.session == session {
            break;
        }
        if let Some(run) = run.clip(from, to) {
            out.extend(read_records(conn, &run.session, run.lo, run.hi).await?);
        }
    }
    out.extend(own);
    Ok(out)
}

/// Rows [`fork_point`] reads back per round trip while looking for the projection.
const BACK_PAGE: i64 = 64;

/// The hash of `parent`'s chain at `at_seq` and the compute projection there.
async fn fork_point(
    conn: &Conn,
    parent: &str,
    segments: &[Segment],
    at_seq: i64,
) -> std::result::Result<(String, ComputeState), DbError> {
    let mut hash = None;
    let mut state = None;
    for segment in segments.iter().rev() {
        let Some(mut run) = segment.clip(1, at_seq) else {
            continue;
        };
        while state.is_none() && run.lo <= run.hi {
            let rows = conn
                .client
                .query(
                    &conn.st.records_back,
                    &[&run.session, &run.lo, &run.hi, &BACK_PAGE],
                )
                .await?;
            for row in &rows {
                let seq: i64 = row.try_get(0)?;
                if hash.is_none() {
                    if seq != at_seq {
                        break;
                    }
                    hash = Some(row.try_get::<_, String>(1)?);
                }
                let event = decode_event(&run.session, seq, row.try_get(2)?)?;
                if let Some(fixed) = fixed_state(&event) {
                    state = Some(fixed);
                    break;
                }
                run.hi = seq - 1;
            }
            if hash.is_none() || i64::try_from(rows.len()).unwrap_or(0) < BACK_PAGE {
                break;
            }
        }
        if hash.is_none() || state.is_some() {
            break;
        }
    }
    let hash = hash.ok_or_else(|| rules::no_record_to_fork(parent, at_seq))?;
    Ok((hash, state.unwrap_or(ComputeState::None)))
}

fn session_info_of(row: &tokio_postgres::Row) -> std::result::Result<SessionInfo, DbError> {
    let last_seq: i64 = row.try_get(codec::STORED_COLUMN_COUNT)?;
    Ok(codec::stored_session(row)?.into_info(last_seq)?)
}

/// Runs `$body` inside a transaction that holds the registry tables against other writers
/// (reads go on), so a registration's read and write, or a reservation's check and insert,
/// are atomic across hosts.
macro_rules! registry_tx {
    ($journal:expr, |$conn:ident| $body:expr) => {
        with_conn!($journal.pool, |$conn| {
            $conn.in_transaction(true);
            $conn.client.execute(&$conn.st.begin, &[]).await?;
            let out: std::result::Result<_, DbError> = async {
                $conn
                    .client
                    .batch_execute(&schema::in_schema(
                        "LOCK TABLE {s}.harnesses, {s}.reserved_harness_names \
                         IN SHARE ROW EXCLUSIVE MODE",
                        &$journal.target.schema,
                    ))
                    .await?;
                $body
            }
            .await;
            match out {
                Ok(v) => {
                    $conn.client.execute(&$conn.st.commit, &[]).await?;
                    $conn.in_transaction(false);
                    Ok(v)
                }
                Err(e) => {
                    $conn.client.batch_execute("ROLLBACK").await?;
                    $conn.in_transaction(false);
                    Err(e)
                }
            }
        })
    };
}

async fn load_harness(conn: &Conn, name: &str) -> std::result::Result<Option<HarnessRow>, DbError> {
    match conn
        .client
        .query_opt(&conn.st.get_harness, &[&name])
        .await?
    {
        Some(row) => Ok(Some(codec::harness_from_row(&row)?)),
        None => Ok(None),
    }
}

async fn store_harness(conn: &Conn, h: &HarnessRow) -> std::result::Result<(), DbError> {
    let h = StoredHarness::of(h);
    conn.client
        .execute(
            &conn.st.store_harness,
            &[
                &h.name,
                &h.uid,
                &h.spec,
                &h.spec_digest,
                &h.state,
                &h.retire_reason,
                &h.retired_at,
                &h.created_at,
                &h.updated_at,
            ],
        )
        .await?;
    Ok(())
}

async fn is_reserved(conn: &Conn, name: &str) -> std::result::Result<bool, DbError> {
    Ok(conn
        .client
        .query_one(&conn.st.is_reserved, &[&name])
        .await?
        .try_get(0)?)
}

#[async_trait]
impl Log for PostgresJournal {
    /// Every wait is answered once the records are durable: each write batch commits with the
    /// database's own durability, which is always allowed.
    async fn append(&self, request: AppendRequest) -> Result<Appended> {
        let fence = request.fence.held();
        Ok(Appended::answered(
            self.append_with(
                &request.session,
                request.expected_last_seq,
                fence,
                request.events,
            )
            .await,
        ))
    }

    fn follow(&self, session: &str) -> HeadFollow {
        self.feed.follow(session)
    }

    async fn new_fence(&self, session: &str) -> Result<i64> {
        rules::check_session_uid(session)?;
        self.send(|ack| Command::NewFence {
            session: session.to_owned(),
            ack,
        })
        .await
    }

    async fn head(&self, session: &str) -> Result<i64> {
        with_conn!(self.pool, |c| Ok(c
            .client
            .query_one(&c.st.head, &[&session])
            .await?
            .try_get(0)?))
    }

    async fn read(&self, session: &str, from: i64, to: i64) -> Result<Vec<LogRecord>> {
        let (from, to) = rules::read_window(from, to)?;
        with_conn!(self.pool, |c| read_chain(c, session, from, to).await)
    }

    /// Runs outside the writer's batches: the parent's rows up to its head never change, so
    /// the reads need no lock, and the child's row and link go in with one statement, which
    /// is its own durable transaction. The `sessions` primary key makes racing forks (and a
    /// racing first append) to one child uid have exactly one winner.
    async fn fork_session(&self, parent: &str, at_seq: i64, child: &str) -> Result<i64> {
        rules::check_session_uid(parent)?;
        rules::check_session_uid(child)?;
        let now = Timestamp::now().unix_nanos();
        with_conn!(self.pool, |c| {
            let key: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&parent];
            let (row, head, walk) = tokio::join!(
                c.client.query_opt(&c.st.fork_parent, &key),
                c.client.query_one(&c.st.head, &key),
                c.client.query(&c.st.lineage, &key),
            );
            let (row, walk) = (row?, walk?);
            let head: i64 = head?.try_get(0)?;
            rules::check_fork_parent(parent, at_seq, head, row.is_some())?;
            let segments = segments_from(parent, &walk)?;
            let (hash, state) = fork_point(c, parent, &segments, at_seq).await?;
            let (project, harness, model, owner_issuer, owner_subject) = match &row {
                Some(r) => (
                    r.try_get(0)?,
                    r.try_get(1)?,
                    r.try_get(2)?,
                    r.try_get(3)?,
                    r.try_get(4)?,
                ),
                None => (self.default_project.as_str(), "", "", "", ""),
            };
            let inserted = c
                .client
                .query(
                    &c.st.fork_insert,
                    &[
                        &child,
                        &project,
                        &harness,
                        &model,
                        &parent,
                        &at_seq,
                        &state.as_str(),
                        &now,
                        &hash,
                        &owner_issuer,
                        &owner_subject,
                    ],
                )
                .await;
            match inserted {
                Ok(rows) if rows.is_empty() => {
                    Err(JournalError::SessionExists(child.to_owned()).into())
                }
                Ok(_) => Ok(1),
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    Err(JournalError::SessionExists(child.to_owned()).into())
                }
                Err(e) if connection_lost(&e) => Err(DbError::Journal(outcome_unknown(&e))),
                Err(e) => Err(DbError::Journal(commit_failed(&e))),
            }
        })
    }
}

#[async_trait]
impl Catalog for PostgresJournal {
    async fn put_session(&self, row: SessionRow) -> Result<()> {
        rules::check_session_uid(&row.uid)?;
        let row = Box::new(EncodedRow::new(row)?);
        self.send(|ack| Command::PutSession { row, ack }).await
    }

    async fn session_info(&self, uid: &str) -> Result<SessionInfo> {
        with_conn!(self.pool, |c| {
            match c.client.query_opt(&c.st.session_info, &[&uid]).await? {
                Some(row) => session_info_of(&row),
                None => Err(JournalError::SessionNotFound(uid.to_owned()).into()),
            }
        })
    }

    async fn list_sessions(&self, query: ListQuery) -> Result<SessionPage> {
        let plan = ListPlan::new(&query, &self.default_project)?;
        let project = plan.project.as_str();
        // The keyset predicate `created_at < t OR (created_at = t AND uid > u)` is written as
        // `created_at <= t AND (created_at < t OR uid > u)` so the index seeks to `t`; the first
        // page starts after (i64::MAX, ""), before every row (uids are never empty).
        let (after_time, after_uid) = match &plan.cursor {
            Some(c) => (c.created_at_ns, c.uid.as_str()),
            None => (i64::MAX, ""),
        };
        let limit = plan.fetch_limit();
        with_conn!(self.pool, |c| {
            let rows = match &query.owner {
                Some(owner) => {
                    c.client
                        .query(
                            &c.st.list_owned_sessions,
                            &[
                                &project,
                                &after_time,
                                &after_uid,
                                &limit,
                                &owner.issuer,
                                &owner.subject,
                            ],
                        )
                        .await?
                }
                None => {
                    c.client
                        .query(
                            &c.st.list_sessions,
                            &[&project, &after_time, &after_uid, &limit],
                        )
                        .await?
                }
            };
            let sessions = rows
                .iter()
                .map(session_info_of)
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(plan.page(sessions))
        })
    }

    async fn list_pending_approvals(&self, query: ApprovalsQuery) -> Result<ApprovalPage> {
        let plan = ApprovalsPlan::new(&query, &self.default_project)?;
        with_conn!(self.pool, |c| approvals::list(c, &plan, &query).await)
    }

    async fn pending_deletions(&self, limit: usize) -> Result<Vec<String>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        with_conn!(self.pool, |c| {
            let rows = c.client.query(&c.st.pending_deletions, &[&limit]).await?;
            Ok(rows
                .iter()
                .map(|r| r.try_get::<_, String>(0))
                .collect::<std::result::Result<Vec<_>, _>>()?)
        })
    }

    async fn mark_reclaimed(&self, uid: &str) -> Result<()> {
        let now = Timestamp::now().unix_nanos();
        with_conn!(self.pool, |c| {
            let state: String = match c.client.query_opt(&c.st.deletion_state, &[&uid]).await? {
                Some(row) => row.try_get(0)?,
                None => return Err(JournalError::SessionNotFound(uid.to_owned()).into()),
            };
            rules::check_reclaimable(uid, &DeletionState::parse(&state))?;
            // A deletion state never returns to active, so the check above still holds here;
            // the update is idempotent (the first reclaim time stays).
            c.client
                .execute(&c.st.mark_reclaimed, &[&uid, &now])
                .await?;
            Ok(())
        })
    }

    /// Goes through the writer like an append, so it holds the session's row while it compares
    /// the head: an append from any host either committed before (and the head moved) or waits.
    async fn settle_compute_state(
        &self,
        session: &str,
        at_seq: i64,
        state: ComputeState,
    ) -> Result<bool> {
        rules::check_settled_state(session, state)?;
        self.send(|ack| Command::SettleCompute {
            session: session.to_owned(),
            at_seq,
            state,
            ack,
        })
        .await
    }

    async fn register_harness(
        &self,
        name: &str,
        spec: &str,
        spec_digest: &str,
    ) -> Result<(HarnessRow, RegisterOutcome)> {
        let now = Timestamp::now();
        registry_tx!(self, |c| {
            let existing = load_harness(c, name).await?;
            let reserved = is_reserved(c, name).await?;
            let (row, outcome) =
                rules::register_decision(existing, reserved, name, spec, spec_digest, now)?;
            if outcome != RegisterOutcome::Unchanged {
                store_harness(c, &row).await?;
            }
            Ok((row, outcome))
        })
    }

    async fn get_harness(&self, name: &str) -> Result<Option<HarnessRow>> {
        with_conn!(self.pool, |c| load_harness(c, name).await)
    }

    async fn list_harnesses(
        &self,
        after: &str,
        limit: usize,
        include_retired: bool,
    ) -> Result<Vec<HarnessRow>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        with_conn!(self.pool, |c| {
            let rows = c
                .client
                .query(&c.st.list_harnesses, &[&after, &include_retired, &limit])
                .await?;
            Ok(rows
                .iter()
                .map(codec::harness_from_row)
                .collect::<std::result::Result<Vec<_>, _>>()?)
        })
    }

    async fn retire_harness(&self, name: &str, reason: &str) -> Result<HarnessRow> {
        let now = Timestamp::now();
        registry_tx!(self, |c| {
            let mut row = load_harness(c, name)
                .await?
                .ok_or_else(|| JournalError::HarnessNotFound(name.to_owned()))?;
            rules::retire(&mut row, reason, now);
            store_harness(c, &row).await?;
            Ok(row)
        })
    }

    async fn reserve_harness_names(&self, names: &[String]) -> Result<()> {
        let now = Timestamp::now().unix_nanos();
        registry_tx!(self, |c| {
            c.client.execute(&c.st.reserve, &[&names, &now]).await?;
            Ok(())
        })
    }

    async fn is_harness_name_reserved(&self, name: &str) -> Result<bool> {
        with_conn!(self.pool, |c| is_reserved(c, name).await)
    }
}
