//! The [`Journal`] trait: the session log every backend implements.

use std::fmt::Debug;

use agentsessions_api::{ComputeState, Event};
use async_trait::async_trait;

use crate::approvals::{ApprovalPage, ApprovalsQuery};
use crate::error::Result;
use crate::follow::HeadFollow;
use crate::queued::QueuedAppend;
use crate::record::LogRecord;
use crate::rows::{HarnessRow, ListQuery, RegisterOutcome, SessionInfo, SessionPage, SessionRow};

/// The durable, hash-chained session log with its metadata (semantics §1).
///
/// One writer per session is enforced by two checks inside one atomic append:
///
/// ```text
///   append(session, expected_last_seq, fence, event)
///     1. expected_last_seq == head(session)      else Conflict   (CAS)
///     2. fence >= stored fence of session         else Fenced     (superseded writer)
///     3. seq = head + 1; prev_hash = hash(head) or ""; hash = content_hash(prev, seq, event)
///     4. insert + metadata touch + compute projection, in the same transaction
/// ```
///
/// Only [`Journal::new_fence`] raises a session's fence; appending with a higher fence does not.
#[async_trait]
pub trait Journal: Send + Sync + Debug {
    /// Appends `event` as record `head + 1` and returns the committed record. Returns only after
    /// the record is durable.
    ///
    /// # Errors
    /// [`Conflict`](crate::JournalError::Conflict) when `expected_last_seq` is not the head,
    /// [`Fenced`](crate::JournalError::Fenced) when `fence` is below the session's fence,
    /// [`InvalidEvent`](crate::JournalError::InvalidEvent) when the event cannot be canonicalized
    /// (nothing is written), [`NotJournalable`](crate::JournalError::NotJournalable) for PARKED,
    /// and storage failures.
    async fn append(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: i64,
        event: Event,
    ) -> Result<LogRecord> {
        let mut records = self
            .append_batch(session, expected_last_seq, fence, vec![event])
            .await?;
        records.pop().ok_or_else(|| {
            crate::JournalError::InvalidArgument("append committed no record".to_owned())
        })
    }

    /// Appends `events` as consecutive records `head + 1 ..`, all or nothing, in one durable
    /// commit. The CAS and fence checks are those of [`Journal::append`], made once for the
    /// batch. An empty batch checks them and writes nothing.
    ///
    /// # Errors
    /// As [`Journal::append`]; when any event is invalid nothing is written.
    async fn append_batch(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: i64,
        events: Vec<Event>,
    ) -> Result<Vec<LogRecord>>;

    /// Opens an incarnation's writing in one durable commit: checks the CAS cursor, mints the
    /// session's next fence (as [`Journal::new_fence`]) and appends `events` with it. Every
    /// returned record carries the new fence, which the caller then appends with.
    ///
    /// Unlike `new_fence` followed by `append_batch`, a caller whose cursor is stale changes
    /// nothing — not even the fence — so a racer that lost the head can never supersede the
    /// writer that won it.
    ///
    /// # Errors
    /// [`Conflict`](crate::JournalError::Conflict) when `expected_last_seq` is not the head
    /// (the fence stays as it was); [`InvalidArgument`](crate::JournalError::InvalidArgument)
    /// for an empty batch; otherwise as [`Journal::append_batch`].
    async fn append_batch_fencing(
        &self,
        session: &str,
        expected_last_seq: i64,
        events: Vec<Event>,
    ) -> Result<Vec<LogRecord>>;

    /// Appends like [`Journal::append_batch`] (`fence` given) or
    /// [`Journal::append_batch_fencing`] (`None`), but may return as soon as the batch is
    /// committed — chained, CAS- and fence-checked, in order, and read back by this journal's
    /// readers only once durable — without waiting for it to be durable itself.
    ///
    /// For records no external effect depends on (an OUTPUT, a TOOL_RESULT, USAGE): the next
    /// append through [`Journal::append_batch`] returns only once it *and everything committed
    /// before it* are durable, so a turn waits for durability once, before the effect or the
    /// answer that needs it (semantics §3.7). Until then an OS crash or power loss may take the
    /// records back, always as a suffix of the log; a process kill does not. A caller must not
    /// show such a record to anyone before a later durable append (or a read) returns.
    ///
    /// The default waits for durability, which is always allowed.
    ///
    /// # Errors
    /// As [`Journal::append_batch`] and [`Journal::append_batch_fencing`].
    async fn append_deferred(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: Option<i64>,
        events: Vec<Event>,
    ) -> Result<Vec<LogRecord>> {
        match fence {
            Some(fence) => {
                self.append_batch(session, expected_last_seq, fence, events)
                    .await
            }
            None => {
                self.append_batch_fencing(session, expected_last_seq, events)
                    .await
            }
        }
    }

    /// Hands an append like [`Journal::append_deferred`] (with `fence`) to the journal and
    /// returns once it is queued for its commit, before it is committed: the caller collects
    /// the records (or the refusal) later with [`QueuedAppend::records`]. Appends are applied
    /// in the order they are queued, so the caller may append again at once at
    /// `expected_last_seq + events.len()`; should this one be refused, that next append is
    /// refused too (its cursor is past the head).
    ///
    /// For a turn's records nothing waits on (an OUTPUT, a TOOL_RESULT, USAGE): the turn goes
    /// on while the writer commits them, and the next durable append rides behind them in the
    /// same queue. The caller must collect the records before it shows them to anyone, and
    /// before it reads the session again.
    ///
    /// The default commits before it returns ([`Journal::append_deferred`]), which is always
    /// allowed.
    ///
    /// # Errors
    /// An event that cannot be canonicalized, or a journal that is closed, may be refused at
    /// once; every other refusal comes through [`QueuedAppend::records`].
    async fn append_queued(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: i64,
        events: Vec<Event>,
    ) -> Result<QueuedAppend> {
        Ok(QueuedAppend::answered(
            self.append_deferred(session, expected_last_seq, Some(fence), events)
                .await,
        ))
    }

    /// A subscription to `session`'s commits: it wakes when records are committed to the
    /// session through this journal, and, on a journal shared by hosts (Postgres), through any
    /// of them. It carries the newest head only, so a slow subscriber never costs memory; the
    /// records are read from the journal ([`RecordFollower`](crate::RecordFollower) does that).
    /// Subscribe before reading what is already committed. Any session uid may be followed,
    /// including one that does not exist yet.
    fn follow(&self, session: &str) -> HeadFollow;

    /// Atomically increments and returns the session's fence, creating its row (fence 1) when
    /// missing. Every holder of an older fence is refused from then on.
    ///
    /// # Errors
    /// Storage failures.
    async fn new_fence(&self, session: &str) -> Result<i64>;

    /// The highest committed seq, or 0.
    ///
    /// # Errors
    /// Storage failures.
    async fn head(&self, session: &str) -> Result<i64>;

    /// Records with `from <= seq <= to` in order (`to == 0` means up to the head), hashes
    /// verbatim. For a fork child the records up to its fork point are its parent's.
    ///
    /// # Errors
    /// [`Undecodable`](crate::JournalError::Undecodable) for a stored event that does not decode,
    /// storage failures.
    async fn read(&self, session: &str, from: i64, to: i64) -> Result<Vec<LogRecord>>;

    /// Creates `child` as a fork of `parent` at `at_seq` without copying a record: the child's
    /// records `1..=at_seq` *are* the parent's (same bytes, same hashes, read from the parent's
    /// storage), its head is `at_seq`, and its first own record links to the parent's hash at
    /// `at_seq`. Returns the child's freshly minted fence (1); the caller appends the FORK marker
    /// at `expected_last_seq = at_seq` with it.
    ///
    /// ```text
    ///  parent:  1 ─ 2 ─ 3 ─ 4 ─ 5 ─ 6 …         (keeps growing; the child never sees 4..)
    ///                   └─ child: 4 (FORK) ─ 5 …   head(child) = 3 right after the fork
    /// ```
    ///
    /// The child's metadata row is created in the same durable commit with `parent_uid` and
    /// `fork_seq` set, the parent's project, harness and model, fence 1, and the compute
    /// projection the parent had at `at_seq`; a later [`Journal::put_session`] fills in the rest.
    /// The link from child to parent is fixed for good: `put_session` on the child refuses another
    /// `parent_uid` or `fork_seq`, and appending to or forking the parent never changes what the
    /// child reads. Forks of forks and forks at any historical seq work the same way, at a cost
    /// independent of `at_seq`.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::JournalError::InvalidArgument) when `at_seq` is not within
    /// `1..=head(parent)` or a uid is empty,
    /// [`SessionNotFound`](crate::JournalError::SessionNotFound) when the parent has neither a
    /// row nor records, [`SessionExists`](crate::JournalError::SessionExists) when `child`
    /// already has a row, records or a link (nothing is written), and storage failures.
    async fn fork_session(&self, parent: &str, at_seq: i64, child: &str) -> Result<i64>;

    /// Inserts or updates a session's metadata row. It never touches the fence or the compute
    /// projection (a new row starts at `NONE`).
    ///
    /// On a child made by [`Journal::fork_session`] the row's `parent_uid` and `fork_seq` must
    /// equal the ones it was forked with: its records depend on them.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::JournalError::InvalidArgument) for a changed lineage on a
    /// shared-prefix child; storage failures.
    async fn put_session(&self, row: SessionRow) -> Result<()>;

    /// The session's metadata and derived state.
    ///
    /// # Errors
    /// [`SessionNotFound`](crate::JournalError::SessionNotFound) when no row exists.
    async fn session_info(&self, uid: &str) -> Result<SessionInfo>;

    /// One page of a project's sessions ordered by (created_at desc, uid asc), including
    /// sessions with no events, optionally only those of one owner.
    ///
    /// # Errors
    /// [`InvalidPageToken`](crate::JournalError::InvalidPageToken) for a token this journal did
    /// not issue (never a silent restart);
    /// [`InvalidArgument`](crate::JournalError::InvalidArgument) for an incomplete owner filter.
    async fn list_sessions(&self, query: ListQuery) -> Result<SessionPage>;

    /// One page of a project's approval requests that wait for a decision, oldest first (by
    /// commit time, then session and call id), optionally only those on one owner's sessions.
    /// The journal keeps these in the commit that appends a request, its decision, the end of
    /// its execution or the session's delete intent, so this is an indexed read, never a scan of
    /// the logs. A fork child does not list its parent's requests.
    ///
    /// # Errors
    /// [`InvalidPageToken`](crate::JournalError::InvalidPageToken) for a token this journal did
    /// not issue; [`InvalidArgument`](crate::JournalError::InvalidArgument) for an incomplete
    /// owner filter; storage failures.
    async fn list_pending_approvals(&self, query: ApprovalsQuery) -> Result<ApprovalPage>;

    /// Up to `limit` sessions whose deletion state is not active (pending, or a state this build
    /// does not know) and that were not reclaimed yet, oldest change first: the reclaimer's work.
    ///
    /// # Errors
    /// Storage failures.
    async fn pending_deletions(&self, limit: usize) -> Result<Vec<String>>;

    /// Records that the session's compute and snapshots were released. Refused for a session
    /// whose deletion state is active: only a deleted session is reclaimed.
    ///
    /// # Errors
    /// [`SessionNotFound`](crate::JournalError::SessionNotFound),
    /// [`InvalidArgument`](crate::JournalError::InvalidArgument) for an active session, storage
    /// failures.
    async fn mark_reclaimed(&self, uid: &str) -> Result<()>;

    /// Settles the compute projection with what the session's runtime reports: sets it to
    /// `state` when the session's head is still `at_seq`, and returns whether it did. The
    /// projection each append moves is what the log implies (semantics §1.7); the log cannot
    /// say that an incarnation went away between turns (a runtime that keeps none once a turn
    /// ends, a process that died), so the host that learns it settles it here, and listings
    /// and gauges then read what is. When the head moved past `at_seq`, nothing changes and the
    /// answer is `false`: the newer records' projection stands. Nothing else changes either
    /// (no record, fence or update time); the next append moves the projection on from `state`.
    ///
    /// # Errors
    /// [`SessionNotFound`](crate::JournalError::SessionNotFound) when the session has no row,
    /// [`InvalidArgument`](crate::JournalError::InvalidArgument) for
    /// [`ComputeState::Unspecified`](agentsessions_api::ComputeState::Unspecified), storage
    /// failures.
    async fn settle_compute_state(
        &self,
        session: &str,
        at_seq: i64,
        state: ComputeState,
    ) -> Result<bool>;

    /// Stores a harness registration, atomically deciding its outcome.
    ///
    /// # Errors
    /// [`HarnessExists`](crate::JournalError::HarnessExists) when the name holds another spec,
    /// [`HarnessNameReserved`](crate::JournalError::HarnessNameReserved) when it is reserved.
    async fn register_harness(
        &self,
        name: &str,
        spec: &str,
        spec_digest: &str,
    ) -> Result<(HarnessRow, RegisterOutcome)>;

    /// A stored registration, or `None`.
    ///
    /// # Errors
    /// Storage failures.
    async fn get_harness(&self, name: &str) -> Result<Option<HarnessRow>>;

    /// Registrations with name greater than `after`, in name order, at most `limit`.
    ///
    /// # Errors
    /// Storage failures.
    async fn list_harnesses(
        &self,
        after: &str,
        limit: usize,
        include_retired: bool,
    ) -> Result<Vec<HarnessRow>>;

    /// Retires a registration; retiring a retired one changes nothing.
    ///
    /// # Errors
    /// [`HarnessNotFound`](crate::JournalError::HarnessNotFound).
    async fn retire_harness(&self, name: &str, reason: &str) -> Result<HarnessRow>;

    /// Permanently reserves names so they can never be registered (built-in and static names,
    /// names recorded by sessions).
    ///
    /// # Errors
    /// Storage failures.
    async fn reserve_harness_names(&self, names: &[String]) -> Result<()>;

    /// Whether `name` is reserved.
    ///
    /// # Errors
    /// Storage failures.
    async fn is_harness_name_reserved(&self, name: &str) -> Result<bool>;
}
