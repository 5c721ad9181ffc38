//! The writer tasks: group commit of appends, fence mints and metadata writes.
//!
//! Callers send commands over one bounded channel. Each writer task (one connection each) takes
//! a command, drains what else is queued (up to `max_batch`) and runs the lot as one transaction,
//! so many sessions share one commit flush. Every caller is acknowledged only after COMMIT
//! returned; a failed transaction fails every caller in it, so nothing is half-durable.
//!
//! One transaction is two round trips, each a pipeline of statements:
//!
//! ```text
//!  1. BEGIN · read the stamp · create missing session rows (sorted)
//!     · lock the batch's session rows (SELECT … ORDER BY session FOR UPDATE) · read their heads
//!     -- decide every command in memory: CAS, fence, seq/prev_hash/hash, projection --
//!  2. insert events · write back changed session rows · drop rows no command used
//!     · notify the sessions appended to (`crate::listener`) · COMMIT
//! ```
//!
//! Correctness across hosts comes from the row lock: an append and a fence mint on a session
//! both hold its `sessions` row for the rest of their transaction, and the heads are read by a
//! statement that starts after the lock is granted (READ COMMITTED takes a fresh snapshot per
//! statement), so they are exact. Locks are taken in one order (sorted uids) by every host, so
//! batches do not deadlock; should the server still report a deadlock, or should the
//! `(session, seq)` key refuse a duplicate, the batch is re-run from the start with fresh reads,
//! and a lost seq then surfaces as the CAS `Conflict` of semantics §1.4 step 4.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{CallerIdentity, ComputeState, DeletionState, Timestamp};
use agentsessions_journal::extension::{FenceUse, LogHead, extend};
use agentsessions_journal::writer_queue::{Ack, Append};
use agentsessions_journal::{JournalError, LogRecord, rules};
use tokio::sync::{Mutex, mpsc};

use crate::approvals::PendingMoves;
use crate::codec::{EncodedRow, StoredSession, stored_session};
use crate::connection::{Conn, Target};
use crate::failure::{commit_failed, connection_lost, outcome_unknown, rerun_batch};
use crate::listener;
use crate::schema::SCHEMA_VERSION;

/// Runs of one batch before its callers are failed (deadlock, duplicate key, lost connection).
const MAX_ATTEMPTS: u32 = 4;

/// A write the writer tasks perform.
#[derive(Debug)]
pub(crate) enum Command {
    Append(Append),
    NewFence {
        session: String,
        ack: Ack<i64>,
    },
    PutSession {
        row: Box<EncodedRow>,
        ack: Ack<()>,
    },
    SettleCompute {
        session: String,
        at_seq: i64,
        state: ComputeState,
        ack: Ack<bool>,
    },
}

impl Command {
    fn fail(self, err: JournalError) {
        // A caller that stopped waiting has nothing to be told.
        match self {
            Self::Append(Append { ack, .. }) => drop(ack.send(Err(err))),
            Self::NewFence { ack, .. } => drop(ack.send(Err(err))),
            Self::PutSession { ack, .. } => drop(ack.send(Err(err))),
            Self::SettleCompute { ack, .. } => drop(ack.send(Err(err))),
        }
    }
}

/// What one command did inside a batch, before the batch commits.
#[derive(Debug)]
enum Outcome {
    /// The fence the records were written with, and their envelopes `(seq, prev_hash, hash)`
    /// in order.
    Appended(i64, Vec<(i64, String, String)>),
    Fence(i64),
    Put,
    /// Whether a settle found the head it named and set the compute state.
    Settled(bool),
    Refused(JournalError),
}

/// Why a batch did not commit.
#[derive(Debug)]
enum BatchError {
    /// The schema stamp is no longer this build's (a newer build migrated the database):
    /// nothing is written and every caller is refused.
    StampMoved { found: i64 },
    /// Postgres failed; `commit_sent` says whether COMMIT may have reached the server.
    Db {
        err: tokio_postgres::Error,
        commit_sent: bool,
    },
}

impl From<tokio_postgres::Error> for BatchError {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::Db {
            err,
            commit_sent: false,
        }
    }
}

/// A `sessions` row locked by the batch.
#[derive(Debug)]
struct Slot {
    row: StoredSession,
    /// Created by this batch's first round.
    created: bool,
    /// Some command wrote it; a created row no command used is deleted again, so a refused
    /// append leaves no trace.
    used: bool,
    changed: bool,
}

/// One writer task's state: its connection (reopened after a loss) and its settings.
#[derive(Debug)]
pub(crate) struct Writer {
    target: Arc<Target>,
    conn: Option<Conn>,
    default_project: String,
    max_batch: usize,
}

impl Writer {
    pub(crate) fn new(
        target: Arc<Target>,
        conn: Option<Conn>,
        default_project: String,
        max_batch: usize,
    ) -> Self {
        Self {
            target,
            conn,
            default_project,
            max_batch: max_batch.max(1),
        }
    }

    /// Takes batches from the shared queue until every sender is gone. The queue's lock is held
    /// only while a batch is gathered, so the other writers gather and commit meanwhile.
    pub(crate) async fn run(mut self, queue: Arc<Mutex<mpsc::Receiver<Command>>>) {
        let mut commands = Vec::with_capacity(self.max_batch);
        loop {
            {
                let mut rx = queue.lock().await;
                let Some(first) = rx.recv().await else {
                    break;
                };
                commands.push(first);
                while commands.len() < self.max_batch {
                    match rx.try_recv() {
                        Ok(cmd) => commands.push(cmd),
                        Err(_) => break,
                    }
                }
            }
            let taken = commands.len();
            let started = std::time::Instant::now();
            self.commit(std::mem::take(&mut commands)).await;
            let queued = queue.lock().await.len();
            agentsessions_telemetry::metrics().journal_batch(
                "postgres",
                taken,
                started.elapsed(),
                queued,
            );
        }
    }

    /// Commits one batch, re-running it when a re-run can succeed, and acknowledges every
    /// caller in it.
    async fn commit(&mut self, commands: Vec<Command>) {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let conn = match self.conn.take() {
                Some(conn) if !conn.client.is_closed() => conn,
                _ => match self.target.connect().await {
                    Ok(conn) => conn,
                    Err(e) => {
                        for cmd in commands {
                            cmd.fail(unconnected(&e));
                        }
                        return;
                    }
                },
            };
            let now = Timestamp::now().unix_nanos();
            let result = run_batch(
                &conn,
                &commands,
                now,
                &self.default_project,
                &self.target.schema_name,
            )
            .await;
            let lost = match &result {
                Err(BatchError::Db { err, .. }) => connection_lost(err),
                _ => false,
            };
            if result.is_err() && !lost {
                // Leave the connection outside any transaction; should this fail, the next
                // batch's BEGIN reports it.
                drop(conn.client.batch_execute("ROLLBACK").await);
            }
            if !lost {
                self.conn = Some(conn);
            }
            match result {
                Ok(outcomes) => {
                    acknowledge(commands, outcomes, now);
                    return;
                }
                Err(BatchError::StampMoved { found }) => {
                    for cmd in commands {
                        cmd.fail(JournalError::UnsupportedSchema {
                            found,
                            supported: SCHEMA_VERSION,
                        });
                    }
                    return;
                }
                Err(BatchError::Db { err, commit_sent }) => {
                    if lost && commit_sent {
                        for cmd in commands {
                            cmd.fail(outcome_unknown(&err));
                        }
                        return;
                    }
                    if attempt < MAX_ATTEMPTS && (lost || rerun_batch(&err)) {
                        tracing::debug!(error = %err, attempt, "journal batch re-run");
                        if lost {
                            tokio::time::sleep(Duration::from_millis(10 << attempt)).await;
                        }
                        continue;
                    }
                    for cmd in commands {
                        cmd.fail(commit_failed(&err));
                    }
                    return;
                }
            }
        }
    }
}

/// Each caller's error when the writer cannot open a connection: the schema refusal as it is,
/// anything else as a retryable failed commit (nothing was sent).
fn unconnected(e: &JournalError) -> JournalError {
    match e {
        JournalError::UnsupportedSchema { found, supported } => JournalError::UnsupportedSchema {
            found: *found,
            supported: *supported,
        },
        other => JournalError::CommitFailed {
            reason: format!("the journal writer has no connection: {other}"),
            retryable: true,
        },
    }
}

/// Sends every caller its result after the batch committed.
fn acknowledge(commands: Vec<Command>, outcomes: Vec<Outcome>, now: i64) {
    for (cmd, outcome) in commands.into_iter().zip(outcomes) {
        match (cmd, outcome) {
            (Command::Append(Append { events, ack, .. }), Outcome::Appended(fence, envelopes)) => {
                let records = events
                    .into_iter()
                    .zip(envelopes)
                    .map(|(p, (seq, prev_hash, hash))| LogRecord {
                        seq,
                        prev_hash,
                        hash,
                        fence,
                        event: p.event,
                        committed_at: Some(Timestamp::from_unix_nanos(now)),
                    })
                    .collect();
                drop(ack.send(Ok(records)));
            }
            (Command::NewFence { ack, .. }, Outcome::Fence(fence)) => drop(ack.send(Ok(fence))),
            (Command::PutSession { ack, .. }, Outcome::Put) => drop(ack.send(Ok(()))),
            (Command::SettleCompute { ack, .. }, Outcome::Settled(set)) => drop(ack.send(Ok(set))),
            (cmd, Outcome::Refused(err)) => cmd.fail(err),
            (cmd, other) => cmd.fail(JournalError::InvalidArgument(format!(
                "journal writer produced {other:?} for another command"
            ))),
        }
    }
}

fn session_of(cmd: &Command) -> &str {
    match cmd {
        Command::Append(Append { session, .. })
        | Command::NewFence { session, .. }
        | Command::SettleCompute { session, .. } => session,
        Command::PutSession { row, .. } => &row.uid,
    }
}

/// Runs one batch as one transaction; returns each command's outcome once COMMIT succeeded.
async fn run_batch(
    conn: &Conn,
    commands: &[Command],
    now: i64,
    default_project: &str,
    schema_name: &str,
) -> std::result::Result<Vec<Outcome>, BatchError> {
    let (client, st) = (&conn.client, &conn.st);
    // Sessions that need a row (anything that may write one), all sessions to lock, and the
    // sessions whose head is needed; sorted, so every host locks in the same order.
    let mut need_row = BTreeSet::new();
    let mut lock = BTreeSet::new();
    let mut want_head = BTreeSet::new();
    let mut want_link = BTreeSet::new();
    for cmd in commands {
        let session = session_of(cmd);
        lock.insert(session);
        match cmd {
            Command::Append(Append { events, .. }) => {
                want_head.insert(session);
                if !events.is_empty() {
                    need_row.insert(session);
                }
            }
            Command::NewFence { .. } => {
                need_row.insert(session);
            }
            Command::PutSession { .. } => {
                need_row.insert(session);
                want_link.insert(session);
            }
            // Only an existing row is settled; its lock orders the settle with appends.
            Command::SettleCompute { .. } => {
                want_head.insert(session);
            }
        }
    }
    let need_row: Vec<&str> = need_row.into_iter().collect();
    let lock: Vec<&str> = lock.into_iter().collect();
    let want_head: Vec<&str> = want_head.into_iter().collect();
    let want_link: Vec<&str> = want_link.into_iter().collect();

    // Round 1. The server runs pipelined statements in order, so the rows exist before the lock
    // is asked for, and the heads are read by a statement that starts after the lock is held.
    // Links are written once with their child's row, so reading them after the lock sees them.
    let (begun, stamp, created, locked, heads, links) = tokio::join!(
        client.execute(&st.begin, &[]),
        client.query_opt(&st.stamp, &[]),
        async {
            if need_row.is_empty() {
                return Ok(Vec::new());
            }
            client
                .query(&st.insert_missing, &[&need_row, &default_project, &now])
                .await
        },
        async { client.query(&st.lock_sessions, &[&lock]).await },
        async {
            if want_head.is_empty() {
                return Ok(Vec::new());
            }
            client.query(&st.heads, &[&want_head]).await
        },
        async {
            if want_link.is_empty() {
                return Ok(Vec::new());
            }
            client.query(&st.links_of, &[&want_link]).await
        },
    );
    begun?;
    // The stamp decides before any other failure: a newer layout may be why the rest failed.
    let found = match stamp? {
        Some(row) => row.try_get::<_, i64>(0)?,
        None => 0,
    };
    if found != SCHEMA_VERSION {
        return Err(BatchError::StampMoved { found });
    }
    let created: BTreeSet<String> = created?
        .iter()
        .map(|r| r.try_get::<_, String>(0))
        .collect::<std::result::Result<_, _>>()?;
    let (locked, heads, links) = (locked?, heads?, links?);
    let links: HashMap<String, (String, i64)> = links
        .iter()
        .map(|r| Ok((r.try_get(0)?, (r.try_get(1)?, r.try_get(2)?))))
        .collect::<std::result::Result<_, tokio_postgres::Error>>()?;
    let mut slots: HashMap<String, Slot> = HashMap::with_capacity(locked.len());
    for row in &locked {
        let row = stored_session(row)?;
        slots.insert(
            row.session.clone(),
            Slot {
                created: created.contains(&row.session),
                row,
                used: false,
                changed: false,
            },
        );
    }
    let mut heads: HashMap<String, (i64, String)> = heads
        .iter()
        .map(|r| Ok((r.try_get(0)?, (r.try_get(1)?, r.try_get(2)?))))
        .collect::<std::result::Result<_, tokio_postgres::Error>>()?;

    // Decide every command in order, as a single writer would.
    let mut events = EventColumns::default();
    let mut approvals = PendingMoves::default();
    let outcomes: Vec<Outcome> = commands
        .iter()
        .map(|cmd| {
            apply(
                cmd,
                &mut slots,
                &mut heads,
                &links,
                &mut events,
                &mut approvals,
                now,
                default_project,
            )
        })
        .collect();
    // Only a batch that requests or closes an approval pays this round.
    Box::pin(approvals.write(conn, now)).await?;
    // One notification per session appended to, delivered by Postgres at COMMIT only.
    let appended: BTreeSet<&str> = commands
        .iter()
        .zip(&outcomes)
        .filter_map(|(cmd, outcome)| match outcome {
            Outcome::Appended(_, envelopes) if !envelopes.is_empty() => Some(session_of(cmd)),
            _ => None,
        })
        .collect();
    let notifications: Vec<String> = appended
        .into_iter()
        .filter_map(|session| {
            let head = heads.get(session)?.0;
            Some(listener::payload(schema_name, session, head))
        })
        .collect();

    // Round 2.
    let mut rows = SessionColumns::default();
    let mut unused = Vec::new();
    let mut sessions: Vec<&Slot> = slots.values().collect();
    sessions.sort_by(|a, b| a.row.session.cmp(&b.row.session));
    for slot in sessions {
        if slot.created && !slot.used {
            unused.push(slot.row.session.as_str());
        } else if slot.changed {
            rows.push(&slot.row);
        }
    }
    let (inserted, updated, deleted, notified, committed) = tokio::join!(
        async {
            if events.session.is_empty() {
                return Ok(0);
            }
            client
                .execute(
                    &st.insert_events,
                    &[
                        &events.session,
                        &events.seq,
                        &events.prev_hash,
                        &events.hash,
                        &events.fence,
                        &events.blob,
                        &now,
                    ],
                )
                .await
        },
        async {
            if rows.session.is_empty() {
                return Ok(0);
            }
            client
                .execute(
                    &st.update_sessions,
                    &[
                        &rows.session,
                        &rows.fence,
                        &rows.project,
                        &rows.name,
                        &rows.harness,
                        &rows.model,
                        &rows.parent_uid,
                        &rows.fork_seq,
                        &rows.compute_state,
                        &rows.created_at,
                        &rows.updated_at,
                        &rows.labels,
                        &rows.annotations,
                        &rows.origin,
                        &rows.identity,
                        &rows.owner_issuer,
                        &rows.owner_subject,
                        &rows.deletion_state,
                        &rows.usage_input_tokens,
                        &rows.usage_output_tokens,
                        &rows.usage_reasoning_tokens,
                        &rows.usage_cached_input_tokens,
                    ],
                )
                .await
        },
        async {
            if unused.is_empty() {
                return Ok(0);
            }
            client.execute(&st.delete_sessions, &[&unused]).await
        },
        async {
            if notifications.is_empty() {
                return Ok(0);
            }
            client.execute(&st.notify, &[&notifications]).await
        },
        client.execute(&st.commit, &[]),
    );
    // COMMIT went out with the writes, so a lost connection leaves the outcome unknown. A
    // statement that failed otherwise aborted the transaction, and Postgres answers the COMMIT
    // after it with a rollback: nothing of the batch is stored.
    let results = [inserted, updated, deleted, notified, committed];
    let lost = results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .any(connection_lost);
    for result in results {
        result.map_err(|err| BatchError::Db {
            err,
            commit_sent: lost,
        })?;
    }
    Ok(outcomes)
}

/// Applies one command to the locked rows and heads in memory.
#[expect(
    clippy::too_many_arguments,
    reason = "the batch's state, each part borrowed on its own"
)]
fn apply<'a>(
    cmd: &'a Command,
    slots: &mut HashMap<String, Slot>,
    heads: &mut HashMap<String, (i64, String)>,
    links: &HashMap<String, (String, i64)>,
    events: &mut EventColumns<'a>,
    approvals: &mut PendingMoves,
    now: i64,
    default_project: &str,
) -> Outcome {
    let session = session_of(cmd);
    let missing_row = || {
        Outcome::Refused(JournalError::CommitFailed {
            reason: format!("session {session}'s row vanished inside its transaction"),
            retryable: true,
        })
    };
    match cmd {
        Command::Append(Append {
            expected_last_seq,
            fence,
            events: prepared,
            ..
        }) => {
            let (seq, hash) = heads.get(session).cloned().unwrap_or_default();
            let head = LogHead {
                seq,
                hash,
                fence: slots.get(session).map_or(0, |s| s.row.fence),
                compute: slots
                    .get(session)
                    .map_or(ComputeState::None, |s| s.row.compute()),
            };
            let extension = match extend(
                session,
                &head,
                *expected_last_seq,
                FenceUse::from_option(*fence),
                prepared.iter(),
            ) {
                Ok(extension) => extension,
                Err(e) => return Outcome::Refused(e),
            };
            if extension.records.is_empty() {
                return Outcome::Appended(extension.fence, Vec::new());
            }
            let Some(slot) = slots.get_mut(session) else {
                return missing_row();
            };
            slot.row.fence = extension.head.fence;
            slot.row.usage = slot.row.usage.plus(extension.usage);
            if extension.deletes && !DeletionState::parse(&slot.row.deletion_state).is_deleted() {
                // Same transaction as the record; a state this build does not know stays as
                // it is, since it already reads as deleted.
                DeletionState::Pending
                    .as_str()
                    .clone_into(&mut slot.row.deletion_state);
            }
            let mut changes = extension.approvals.into_iter().peekable();
            let mut envelopes = Vec::with_capacity(extension.records.len());
            for record in extension.records {
                events.push(
                    session,
                    record.seq,
                    &record.prev_hash,
                    &record.hash,
                    extension.fence,
                    &record.event.blob,
                );
                let change = changes
                    .next_if(|(seq, _)| *seq == record.seq)
                    .map(|(_, change)| change);
                approvals.record(session, record.seq, &record.event.event, change);
                envelopes.push((record.seq, record.prev_hash, record.hash));
            }
            heads.insert(
                session.to_owned(),
                (extension.head.seq, extension.head.hash),
            );
            touch(slot, now, default_project);
            slot.row.compute_state = extension.head.compute.as_str().to_owned();
            Outcome::Appended(extension.fence, envelopes)
        }
        Command::NewFence { .. } => {
            let Some(slot) = slots.get_mut(session) else {
                return missing_row();
            };
            slot.row.fence += 1;
            touch(slot, now, default_project);
            Outcome::Fence(slot.row.fence)
        }
        Command::PutSession { row, .. } => {
            if let Some(link) = links.get(session)
                && let Err(e) = rules::check_lineage_kept(
                    session,
                    (&row.parent_uid, row.fork_seq),
                    (&link.0, link.1),
                )
            {
                return Outcome::Refused(e);
            }
            let Some(slot) = slots.get_mut(session) else {
                return missing_row();
            };
            let stored = &mut slot.row;
            let owner = match rules::owner_after(
                session,
                &CallerIdentity::new(stored.owner_issuer.clone(), stored.owner_subject.clone()),
                &row.owner,
            ) {
                Ok(owner) => owner,
                Err(e) => return Outcome::Refused(e),
            };
            stored.owner_issuer = owner.issuer;
            stored.owner_subject = owner.subject;
            stored.project = if row.project.is_empty() {
                default_project.to_owned()
            } else {
                row.project.clone()
            };
            stored.name.clone_from(&row.name);
            stored.harness.clone_from(&row.harness);
            stored.model.clone_from(&row.model);
            stored.parent_uid.clone_from(&row.parent_uid);
            stored.fork_seq = row.fork_seq;
            stored.labels.clone_from(&row.labels);
            stored.annotations.clone_from(&row.annotations);
            stored.origin.clone_from(&row.origin);
            stored.identity.clone_from(&row.identity);
            stored.created_at = match row.created_at {
                Some(t) => t,
                None if stored.created_at == 0 => now,
                None => stored.created_at,
            };
            if stored.compute_state.is_empty() {
                ComputeState::None
                    .as_str()
                    .clone_into(&mut stored.compute_state);
            }
            stored.updated_at = now;
            slot.used = true;
            slot.changed = true;
            Outcome::Put
        }
        Command::SettleCompute { at_seq, state, .. } => {
            let Some(slot) = slots.get_mut(session) else {
                return Outcome::Refused(JournalError::SessionNotFound(session.to_owned()));
            };
            let head = heads.get(session).map_or(0, |(seq, _)| *seq);
            if head != *at_seq {
                return Outcome::Settled(false);
            }
            // Not the update time: an observation of the runtime is not a change of the session.
            state.as_str().clone_into(&mut slot.row.compute_state);
            slot.used = true;
            slot.changed = true;
            Outcome::Settled(true)
        }
    }
}

/// The log moved or a fence was minted: bump the update time and fill what a row created by
/// an older writer may lack.
fn touch(slot: &mut Slot, now: i64, default_project: &str) {
    let row = &mut slot.row;
    row.updated_at = now;
    if row.project.is_empty() {
        default_project.clone_into(&mut row.project);
    }
    if row.created_at == 0 {
        row.created_at = now;
    }
    if row.compute_state.is_empty() {
        ComputeState::None
            .as_str()
            .clone_into(&mut row.compute_state);
    }
    slot.used = true;
    slot.changed = true;
}

/// The `events` rows of a batch as column arrays for one `unnest` insert.
#[derive(Debug, Default)]
struct EventColumns<'a> {
    session: Vec<&'a str>,
    seq: Vec<i64>,
    prev_hash: Vec<String>,
    hash: Vec<String>,
    fence: Vec<i64>,
    blob: Vec<&'a [u8]>,
}

impl<'a> EventColumns<'a> {
    fn push(
        &mut self,
        session: &'a str,
        seq: i64,
        prev: &str,
        hash: &str,
        fence: i64,
        blob: &'a [u8],
    ) {
        self.session.push(session);
        self.seq.push(seq);
        self.prev_hash.push(prev.to_owned());
        self.hash.push(hash.to_owned());
        self.fence.push(fence);
        self.blob.push(blob);
    }
}

/// Changed `sessions` rows as column arrays for one `unnest` update.
#[derive(Debug, Default)]
struct SessionColumns<'a> {
    session: Vec<&'a str>,
    fence: Vec<i64>,
    project: Vec<&'a str>,
    name: Vec<&'a str>,
    harness: Vec<&'a str>,
    model: Vec<&'a str>,
    parent_uid: Vec<&'a str>,
    fork_seq: Vec<i64>,
    compute_state: Vec<&'a str>,
    created_at: Vec<i64>,
    updated_at: Vec<i64>,
    labels: Vec<&'a str>,
    annotations: Vec<&'a str>,
    origin: Vec<&'a str>,
    identity: Vec<&'a str>,
    owner_issuer: Vec<&'a str>,
    owner_subject: Vec<&'a str>,
    deletion_state: Vec<&'a str>,
    usage_input_tokens: Vec<i64>,
    usage_output_tokens: Vec<i64>,
    usage_reasoning_tokens: Vec<i64>,
    usage_cached_input_tokens: Vec<i64>,
}

impl<'a> SessionColumns<'a> {
    fn push(&mut self, row: &'a StoredSession) {
        self.session.push(&row.session);
        self.fence.push(row.fence);
        self.project.push(&row.project);
        self.name.push(&row.name);
        self.harness.push(&row.harness);
        self.model.push(&row.model);
        self.parent_uid.push(&row.parent_uid);
        self.fork_seq.push(row.fork_seq);
        self.compute_state.push(&row.compute_state);
        self.created_at.push(row.created_at);
        self.updated_at.push(row.updated_at);
        self.labels.push(&row.labels);
        self.annotations.push(&row.annotations);
        self.origin.push(&row.origin);
        self.identity.push(&row.identity);
        self.owner_issuer.push(&row.owner_issuer);
        self.owner_subject.push(&row.owner_subject);
        self.deletion_state.push(&row.deletion_state);
        self.usage_input_tokens.push(row.usage.input_tokens);
        self.usage_output_tokens.push(row.usage.output_tokens);
        self.usage_reasoning_tokens.push(row.usage.reasoning_tokens);
        self.usage_cached_input_tokens
            .push(row.usage.cached_input_tokens);
    }
}
