//! The journal's two traits: [`Log`], the hash-chained session log (append, read, head,
//! follow, fork, fence), and [`Catalog`], what is stored beside it (session rows, listings,
//! the pending-approvals index, the deletion queue, the harness registry). [`Journal`] is both,
//! which every backend is.

use std::fmt::Debug;

use agentsessions_api::{ComputeState, Event};
use async_trait::async_trait;

use crate::append::{AppendRequest, Appended, FenceUse};
use crate::approvals::{ApprovalPage, ApprovalsQuery};
use crate::error::JournalError;
use crate::error::Result;
use crate::follow::HeadFollow;
use crate::record::LogRecord;
use crate::rows::{HarnessRow, ListQuery, RegisterOutcome, SessionInfo, SessionPage, SessionRow};

#[cfg(doc)]
use crate::append::Wait;

/// The durable, hash-chained session log (semantics §1).
///
/// One writer per session is enforced by two checks inside one atomic append:
///
/// ```text
///   append(session, expected_last_seq, fence, events)
///     1. expected_last_seq == head(session)      else Conflict   (CAS)
///     2. fence >= stored fence of session         else Fenced     (superseded writer)
///     3. seq = head + 1; prev_hash = hash(head) or ""; hash = content_hash(prev, seq, event)
///     4. insert + metadata touch + projections, in the same transaction
/// ```
///
/// Only [`Log::new_fence`] and a minting append raise a session's fence; appending with a
/// higher one does not.
#[async_trait]
pub trait Log: Send + Sync + Debug {
    /// Appends `request.events` to `request.session` as consecutive records `head + 1 ..`, all
    /// or nothing, after the two checks of one writer per session (semantics §1.4), decided by
    /// the one append rule every backend shares ([`extend`](crate::extension::extend)):
    ///
    /// - the cursor `expected_last_seq` must be the head, else
    ///   [`Conflict`](crate::JournalError::Conflict);
    /// - with [`FenceUse::Hold`] the fence must not be below the session's, else
    ///   [`Fenced`](crate::JournalError::Fenced); with [`FenceUse::Mint`] the append opens an
    ///   incarnation's writing: it mints the session's next fence (as [`Log::new_fence`]) in
    ///   the same commit, only once the cursor passed, so a racer that lost the head changes
    ///   nothing, not even the fence. Every record carries the fence.
    ///
    /// An empty batch checks and writes nothing. `request.wait` says when the answer comes:
    ///
    /// - [`Wait::Durable`]: once the records (and everything committed before them) are
    ///   durable.
    /// - [`Wait::Committed`]: once committed — chained, checked, in order, and read back by
    ///   this journal's readers only once durable — perhaps before they are durable. For
    ///   records no external effect depends on (an OUTPUT, a TOOL_RESULT, USAGE): the next
    ///   durable append returns only once it *and everything committed before it* are
    ///   durable, so a turn waits for durability once, before the effect or the answer that
    ///   needs it (semantics §3.7). An OS crash may take such records back, always as a suffix
    ///   of the log; a process kill does not. Show them to nobody before a later durable
    ///   append (or a read) returns.
    /// - [`Wait::Queued`]: once the append is in its writer's queue, before it is committed;
    ///   the caller collects the records (or the refusal) from the returned [`Appended`], and
    ///   may append again at once at `expected_last_seq + events.len()` (should this one be
    ///   refused, that next one is refused too: its cursor is past the head). It must collect
    ///   them before it shows them to anyone or reads the session again.
    ///
    /// A backend may always answer later than asked (durable for committed, committed for
    /// queued); the returned [`Appended`] then holds its answer already.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::JournalError::InvalidArgument) for an empty uid or an empty
    /// minting batch, [`InvalidEvent`](crate::JournalError::InvalidEvent) for an event that
    /// cannot be canonicalized and [`NotJournalable`](crate::JournalError::NotJournalable) for
    /// PARKED (nothing is written); a journal that is closed. Every other refusal (conflict,
    /// fence, storage) comes through [`Appended::records`] for a queued append and here
    /// otherwise.
    async fn append(&self, request: AppendRequest) -> Result<Appended>;

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
    /// projection the parent had at `at_seq`; a later [`Catalog::put_session`] fills in the rest.
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
}

/// What the journal stores beside the log: session rows and listings, the pending-approvals
/// index, the deletion queue and the harness registry.
#[async_trait]
pub trait Catalog: Send + Sync + Debug {
    /// Inserts or updates a session's metadata row. It never touches the fence or the compute
    /// projection (a new row starts at `NONE`).
    ///
    /// On a child made by [`Log::fork_session`] the row's `parent_uid` and `fork_seq` must
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

/// A whole journal: the log and its catalog, as every backend provides them. Hosts hold an
/// `Arc<dyn Journal>`.
pub trait Journal: Log + Catalog {}

impl<T: Log + Catalog + ?Sized> Journal for T {}

/// Shorthands over [`Log::append`] for every log.
#[async_trait]
pub trait LogExt: Log {
    /// Appends `request` and waits for its records.
    ///
    /// # Errors
    /// As [`Log::append`] and [`Appended::records`].
    async fn append_records(&self, request: AppendRequest) -> Result<Vec<LogRecord>> {
        self.append(request).await?.records().await
    }

    /// Appends one event durably with the writer's `fence` and returns its record.
    ///
    /// # Errors
    /// As [`Log::append`].
    async fn append_one(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: i64,
        event: Event,
    ) -> Result<LogRecord> {
        let request = AppendRequest::new(
            session,
            expected_last_seq,
            FenceUse::Hold(fence),
            vec![event],
        );
        self.append_records(request)
            .await?
            .pop()
            .ok_or_else(|| JournalError::InvalidArgument("append committed no record".to_owned()))
    }
}

impl<T: Log + ?Sized> LogExt for T {}
