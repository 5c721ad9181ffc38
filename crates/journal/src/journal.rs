//! The [`Journal`] trait and the metadata types it stores.

use std::collections::BTreeMap;
use std::fmt::Debug;

use agentsessions_api::{
    CallerIdentity, ComputeState, DeletionState, Event, IdentityRef, Origin, Timestamp,
};
use async_trait::async_trait;

use crate::approvals::{ApprovalPage, ApprovalsQuery};
use crate::error::Result;
use crate::follow::HeadFollow;
use crate::record::LogRecord;
use crate::usage::UsageTotals;

/// The project a session lands in when none is given.
pub const DEFAULT_PROJECT: &str = "default";
/// List page size when the caller asks for 0 or less.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// Largest list page; larger requests are clamped, not refused.
pub const MAX_PAGE_SIZE: usize = 500;

/// What a session *is*: the metadata row that exists from creation on, before any event
/// (semantics §1.6). Fence, compute state and last seq are owned by the journal and are not
/// part of what a caller writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRow {
    /// Session uid.
    pub uid: String,
    /// Project; empty means the journal's default project.
    pub project: String,
    /// Display name.
    pub name: String,
    /// Harness name.
    pub harness: String,
    /// Model id.
    pub model: String,
    /// Parent uid for a fork child.
    pub parent_uid: String,
    /// Parent seq the child was forked at.
    pub fork_seq: i64,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// External context.
    pub origin: Option<Origin>,
    /// Recorded provenance.
    pub identity: IdentityRef,
    /// Creation time; `None` means now on insert and unchanged on update.
    pub created_at: Option<Timestamp>,
    /// The verified caller that created the session (extensions §1, §2); empty for an unbound
    /// session. Fixed once set: a write may restate it or leave it empty (keeping it), never
    /// change it. A fork child starts with its parent's owner.
    pub owner: CallerIdentity,
}

/// A session's metadata joined with what the journal derives for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// The stored row (`created_at` always set).
    pub row: SessionRow,
    /// Highest committed seq, 0 when the log is empty.
    pub last_seq: i64,
    /// The compute projection of §1.7.
    pub compute_state: ComputeState,
    /// The current fence, 0 when none was minted.
    pub fence: i64,
    /// Last metadata or log change.
    pub updated_at: Timestamp,
    /// The deletion axis (extensions §3), set to pending in the transaction that commits the
    /// session's `LIFECYCLE_DELETE`. A stored value this build does not know fails closed.
    pub deletion: DeletionState,
    /// When the reclaimer released the session's compute and snapshots; `None` until then.
    pub reclaimed_at: Option<Timestamp>,
    /// The session's USAGE records summed, kept in each append's commit.
    pub usage: UsageTotals,
}

/// One page request of [`Journal::list_sessions`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Exact project; empty means the default project.
    pub project: String,
    /// Page size; 0 or less is [`DEFAULT_PAGE_SIZE`], more than [`MAX_PAGE_SIZE`] is clamped.
    pub page_size: i64,
    /// Opaque token from a previous page; empty for the first page.
    pub page_token: String,
    /// Only sessions owned by exactly this caller (an indexed query, so page sizes and tokens
    /// stay exact); `None` lists every owner. An incomplete owner is refused.
    pub owner: Option<CallerIdentity>,
}

impl ListQuery {
    /// The effective page size after defaulting and clamping.
    pub fn effective_size(&self) -> usize {
        match usize::try_from(self.page_size) {
            Ok(0) | Err(_) => DEFAULT_PAGE_SIZE,
            Ok(n) => n.min(MAX_PAGE_SIZE),
        }
    }
}

/// One page of sessions, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPage {
    /// The sessions on this page.
    pub sessions: Vec<SessionInfo>,
    /// Token for the next page; empty on the last page.
    pub next_page_token: String,
}

/// Lifecycle state of a registered harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HarnessState {
    /// Selectable by new sessions.
    Active,
    /// Refused for new sessions; existing sessions keep working.
    Retired,
}

/// A stored harness registration (semantics §1.5 v2, §7.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessRow {
    /// Registry name (an RFC 1123 label).
    pub name: String,
    /// Server-assigned id, stable across unchanged and reactivating registrations.
    pub uid: String,
    /// Canonical proto3-JSON of the spec.
    pub spec: String,
    /// `sha256:` digest of `spec`.
    pub spec_digest: String,
    /// Active or retired.
    pub state: HarnessState,
    /// Reason given on the first retirement.
    pub retire_reason: String,
    /// Time of the first retirement.
    pub retired_at: Option<Timestamp>,
    /// Registration time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

/// What a registration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegisterOutcome {
    /// A new registration.
    Created,
    /// The identical spec was already active under the name.
    Unchanged,
    /// The identical spec was retired and is active again.
    Reactivated,
}

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
