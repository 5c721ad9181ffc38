//! The in-memory journal: the reference semantics every backend must match, used by unit tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agentsessions_api::{ComputeState, DeletionState, Timestamp};
use async_trait::async_trait;

use crate::append::{AppendRequest, Appended};
use crate::approvals::{
    ApprovalCursor, ApprovalPage, ApprovalsPlan, ApprovalsQuery, CALL_LOOKBACK, PendingApproval,
    PendingChange, gated_call,
};
use crate::chain::PreparedEvent;
use crate::error::{JournalError, Result};
use crate::extension::{FenceUse, LogHead, extend};
use crate::follow::{CommitFeed, HeadFollow};
use crate::journal::{Catalog, Log};
use crate::projection::state_walking_back;
use crate::record::LogRecord;
use crate::rows::{
    DEFAULT_PROJECT, HarnessRow, HarnessState, ListQuery, RegisterOutcome, SessionInfo,
    SessionPage, SessionRow,
};
use crate::rules;
use crate::usage::UsageTotals;

/// One session's chain: the records it shares with its parent, then its own.
///
/// A fork child holds an `Arc` of its parent's `Chain` and reads records `1..=fork_seq` from it;
/// nothing is copied, and the parent's later appends land past `fork_seq`, where the child never
/// looks. The parent's `own` vector sits behind its own lock only because it is shared; every
/// access happens under the journal's state lock anyway.
#[derive(Debug, Default)]
struct Chain {
    base: Option<(Arc<Chain>, i64)>,
    own: Mutex<Vec<LogRecord>>,
}

impl Chain {
    fn own(&self) -> MutexGuard<'_, Vec<LogRecord>> {
        self.own.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn base_seq(&self) -> i64 {
        self.base.as_ref().map_or(0, |(_, k)| *k)
    }

    fn head(&self) -> (i64, String) {
        match self.own().last() {
            Some(r) => (r.seq, r.hash.clone()),
            None => match &self.base {
                Some((parent, k)) => (*k, parent.record(*k).map(|r| r.hash).unwrap_or_default()),
                None => (0, String::new()),
            },
        }
    }

    fn record(&self, seq: i64) -> Option<LogRecord> {
        if seq <= self.base_seq() {
            return self
                .base
                .as_ref()
                .and_then(|(parent, _)| parent.record(seq));
        }
        let index = usize::try_from(seq - self.base_seq() - 1).ok()?;
        self.own().get(index).cloned()
    }

    /// Appends the records with `from <= seq <= to` to `out`, oldest first.
    fn collect(&self, from: i64, to: i64, out: &mut Vec<LogRecord>) {
        if let Some((parent, k)) = &self.base
            && from <= *k
        {
            parent.collect(from, to.min(*k), out);
        }
        out.extend(
            self.own()
                .iter()
                .filter(|r| r.seq >= from && r.seq <= to)
                .cloned(),
        );
    }

    /// The records with seq at most `at`, newest first.
    fn events_back_from(&self, at: i64) -> Vec<agentsessions_api::Event> {
        let mut out: Vec<_> = self
            .own()
            .iter()
            .rev()
            .filter(|r| r.seq <= at)
            .map(|r| r.event.clone())
            .collect();
        if let Some((parent, k)) = &self.base {
            out.extend(parent.events_back_from(at.min(*k)));
        }
        out
    }
}

#[derive(Debug, Default)]
struct SessionState {
    row: SessionRow,
    created_at: Timestamp,
    updated_at: Timestamp,
    fence: i64,
    compute_state: ComputeState,
    log: Arc<Chain>,
    /// Set for a child made by `fork_session`: `(parent, fork_seq)`, fixed for good.
    link: Option<(String, i64)>,
    deletion: DeletionState,
    reclaimed_at: Option<Timestamp>,
    /// Requests waiting for a decision, in commit order; project and owner are filled in when
    /// listed.
    pending: Vec<PendingApproval>,
    usage: UsageTotals,
}

#[derive(Debug, Default)]
struct State {
    sessions: HashMap<String, SessionState>,
    harnesses: BTreeMap<String, HarnessRow>,
    reserved: BTreeSet<String>,
}

/// A journal held in process memory. Everything is lost when it is dropped.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    state: Mutex<State>,
    default_project: String,
    /// Where appends announce their commits to followers.
    feed: Arc<CommitFeed>,
}

impl MemoryJournal {
    /// An empty journal with the default project `default`.
    pub fn new() -> Self {
        Self {
            state: Mutex::default(),
            default_project: DEFAULT_PROJECT.to_owned(),
            feed: CommitFeed::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied append (every mutation
        // happens after all checks), so a poisoned lock is still consistent.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn project_or_default(&self, project: &str) -> String {
        if project.is_empty() {
            self.default_project.clone()
        } else {
            project.to_owned()
        }
    }

    fn ensure_session<'a>(
        &self,
        state: &'a mut State,
        uid: &str,
        now: Timestamp,
    ) -> &'a mut SessionState {
        state
            .sessions
            .entry(uid.to_owned())
            .or_insert_with(|| SessionState {
                row: SessionRow {
                    uid: uid.to_owned(),
                    project: self.default_project.clone(),
                    ..SessionRow::default()
                },
                created_at: now,
                updated_at: now,
                compute_state: ComputeState::None,
                ..SessionState::default()
            })
    }

    /// Appends under the state lock: with `Some(fence)` as [`FenceUse::Hold`], with `None`
    /// minting the next fence first as [`FenceUse::Mint`] (only after the
    /// CAS check passed, so a stale cursor changes nothing).
    fn append_locked(
        &self,
        state: &mut State,
        session: &str,
        expected_last_seq: i64,
        fence: Option<i64>,
        prepared: Vec<PreparedEvent>,
    ) -> Result<Vec<LogRecord>> {
        let now = Timestamp::now();
        let head = match state.sessions.get(session) {
            Some(s) => {
                let (seq, hash) = s.log.head();
                LogHead {
                    seq,
                    hash,
                    fence: s.fence,
                    compute: s.compute_state,
                }
            }
            None => LogHead {
                compute: ComputeState::None,
                ..LogHead::default()
            },
        };
        let mut extension = extend(
            session,
            &head,
            expected_last_seq,
            FenceUse::from_option(fence),
            prepared.into_iter(),
        )?;
        if extension.records.is_empty() {
            return Ok(Vec::new());
        }
        let s = self.ensure_session(state, session, now);
        s.fence = extension.head.fence;
        s.compute_state = extension.head.compute;
        s.usage = s.usage.plus(extension.usage);
        if extension.deletes && !s.deletion.is_deleted() {
            s.deletion = DeletionState::Pending;
        }
        let approvals = std::mem::take(&mut extension.approvals);
        let records = extension.into_records(Some(now));
        let mut own = s.log.own();
        let mut changes = approvals.into_iter().peekable();
        for record in &records {
            while let Some((_, change)) = changes.next_if(|(seq, _)| *seq == record.seq) {
                apply_pending(&mut s.pending, change, session, record, &own, now);
            }
            own.push(record.clone());
        }
        drop(own);
        s.updated_at = now;
        Ok(records)
    }
}

/// Moves `pending` past the commit of `record`; `own` holds the session's records before it.
fn apply_pending(
    pending: &mut Vec<PendingApproval>,
    change: PendingChange,
    session: &str,
    record: &LogRecord,
    own: &[LogRecord],
    now: Timestamp,
) {
    match change {
        PendingChange::Request {
            execution_id,
            tool_call_id,
            reason,
        } => {
            let call = gated_call(
                own.iter().rev().take(CALL_LOOKBACK).map(|r| &r.event),
                &execution_id,
                &tool_call_id,
            );
            let (tool, args) = call.unwrap_or_default();
            pending.retain(|p| p.tool_call_id != tool_call_id);
            pending.push(PendingApproval {
                session: session.to_owned(),
                execution_id,
                tool_call_id,
                request_seq: record.seq,
                tool,
                args,
                reason,
                requested_at: now,
                ..PendingApproval::default()
            });
        }
        PendingChange::Decided { tool_call_id } => {
            pending.retain(|p| p.tool_call_id != tool_call_id);
        }
        PendingChange::Ended { execution_id } => {
            pending.retain(|p| p.execution_id != execution_id);
        }
        PendingChange::Deleted => pending.clear(),
    }
}

fn info_of(s: &SessionState) -> SessionInfo {
    let mut row = s.row.clone();
    row.created_at = Some(s.created_at);
    SessionInfo {
        row,
        last_seq: s.log.head().0,
        compute_state: s.compute_state,
        fence: s.fence,
        updated_at: s.updated_at,
        deletion: s.deletion.clone(),
        reclaimed_at: s.reclaimed_at,
        usage: s.usage,
    }
}

#[async_trait]
impl Log for MemoryJournal {
    /// Every wait is answered at once: memory is committed and as durable as it gets when the
    /// state lock is released.
    async fn append(&self, request: AppendRequest) -> Result<Appended> {
        let fence = request.fence.held();
        let prepared = rules::prepare_batch(&request.session, request.events, fence.is_none())?;
        let session = request.session.as_str();
        let records = self.append_locked(
            &mut self.lock(),
            session,
            request.expected_last_seq,
            fence,
            prepared,
        );
        if let Ok(records) = &records {
            self.feed.publish_records(session, records);
        }
        Ok(Appended::answered(records))
    }

    fn follow(&self, session: &str) -> HeadFollow {
        self.feed.follow(session)
    }

    async fn new_fence(&self, session: &str) -> Result<i64> {
        rules::check_session_uid(session)?;
        let now = Timestamp::now();
        let mut state = self.lock();
        let s = self.ensure_session(&mut state, session, now);
        s.fence += 1;
        s.updated_at = now;
        Ok(s.fence)
    }

    async fn head(&self, session: &str) -> Result<i64> {
        Ok(self
            .lock()
            .sessions
            .get(session)
            .map_or(0, |s| s.log.head().0))
    }

    async fn read(&self, session: &str, from: i64, to: i64) -> Result<Vec<LogRecord>> {
        let (from, to) = rules::read_window(from, to)?;
        let mut out = Vec::new();
        if let Some(s) = self.lock().sessions.get(session) {
            s.log.collect(from, to, &mut out);
        }
        Ok(out)
    }

    async fn fork_session(&self, parent: &str, at_seq: i64, child: &str) -> Result<i64> {
        rules::check_session_uid(parent)?;
        rules::check_session_uid(child)?;
        let now = Timestamp::now();
        let mut state = self.lock();
        let source = state
            .sessions
            .get(parent)
            .ok_or_else(|| JournalError::SessionNotFound(parent.to_owned()))?;
        rules::check_fork_seq(parent, at_seq, source.log.head().0)?;
        if state.sessions.contains_key(child) {
            return Err(JournalError::SessionExists(child.to_owned()));
        }
        let log = Arc::new(Chain {
            base: Some((Arc::clone(&source.log), at_seq)),
            own: Mutex::default(),
        });
        let compute_state = state_walking_back(
            source
                .log
                .events_back_from(at_seq)
                .into_iter()
                .map(Ok::<_, JournalError>),
        )?;
        let row = SessionRow {
            uid: child.to_owned(),
            project: source.row.project.clone(),
            harness: source.row.harness.clone(),
            model: source.row.model.clone(),
            parent_uid: parent.to_owned(),
            fork_seq: at_seq,
            owner: source.row.owner.clone(),
            ..SessionRow::default()
        };
        state.sessions.insert(
            child.to_owned(),
            SessionState {
                row,
                created_at: now,
                updated_at: now,
                fence: 1,
                compute_state,
                log,
                link: Some((parent.to_owned(), at_seq)),
                ..SessionState::default()
            },
        );
        Ok(1)
    }
}

#[async_trait]
impl Catalog for MemoryJournal {
    async fn put_session(&self, row: SessionRow) -> Result<()> {
        rules::check_session_uid(&row.uid)?;
        let now = Timestamp::now();
        let project = self.project_or_default(&row.project);
        let mut state = self.lock();
        if let Some((parent, fork_seq)) = state.sessions.get(&row.uid).and_then(|s| s.link.as_ref())
        {
            rules::check_lineage_kept(
                &row.uid,
                (&row.parent_uid, row.fork_seq),
                (parent, *fork_seq),
            )?;
        }
        let stored_owner = state
            .sessions
            .get(&row.uid)
            .map(|s| s.row.owner.clone())
            .unwrap_or_default();
        let owner = rules::owner_after(&row.uid, &stored_owner, &row.owner)?;
        let s = self.ensure_session(&mut state, &row.uid, now);
        if let Some(created) = row.created_at {
            s.created_at = created;
        }
        s.row = SessionRow {
            project,
            created_at: None,
            owner,
            ..row
        };
        s.updated_at = now;
        Ok(())
    }

    async fn session_info(&self, uid: &str) -> Result<SessionInfo> {
        self.lock()
            .sessions
            .get(uid)
            .map(info_of)
            .ok_or_else(|| JournalError::SessionNotFound(uid.to_owned()))
    }

    async fn list_sessions(&self, query: ListQuery) -> Result<SessionPage> {
        let plan = rules::ListPlan::new(&query, &self.default_project)?;
        let (cursor, project) = (&plan.cursor, &plan.project);
        let state = self.lock();
        let mut rows: Vec<&SessionState> = state
            .sessions
            .values()
            .filter(|s| s.row.project == *project)
            .filter(|s| query.owner.as_ref().is_none_or(|o| s.row.owner == *o))
            .filter(|s| {
                cursor.as_ref().is_none_or(|c| {
                    let t = s.created_at.unix_nanos();
                    t < c.created_at_ns || (t == c.created_at_ns && s.row.uid > c.uid)
                })
            })
            .collect();
        rows.sort_by(|a, b| {
            b.created_at
                .unix_nanos()
                .cmp(&a.created_at.unix_nanos())
                .then_with(|| a.row.uid.cmp(&b.row.uid))
        });
        rows.truncate(plan.size + 1);
        Ok(plan.page(rows.into_iter().map(info_of).collect()))
    }

    async fn list_pending_approvals(&self, query: ApprovalsQuery) -> Result<ApprovalPage> {
        let plan = ApprovalsPlan::new(&query, &self.default_project)?;
        let state = self.lock();
        let mut entries: Vec<PendingApproval> = state
            .sessions
            .values()
            .filter(|s| s.row.project == plan.project)
            .filter(|s| query.owner.as_ref().is_none_or(|o| s.row.owner == *o))
            .flat_map(|s| {
                s.pending.iter().map(|p| PendingApproval {
                    project: s.row.project.clone(),
                    owner: s.row.owner.clone(),
                    ..p.clone()
                })
            })
            .filter(|p| plan.after_cursor(&ApprovalCursor::of(p)))
            .collect();
        entries.sort_by_key(ApprovalCursor::of);
        entries.truncate(plan.size + 1);
        Ok(plan.page(entries))
    }

    async fn pending_deletions(&self, limit: usize) -> Result<Vec<String>> {
        let state = self.lock();
        let mut pending: Vec<(&SessionState, &String)> = state
            .sessions
            .iter()
            .filter(|(_, s)| s.deletion.is_deleted() && s.reclaimed_at.is_none())
            .map(|(uid, s)| (s, uid))
            .collect();
        pending.sort_by(|a, b| {
            a.0.updated_at
                .unix_nanos()
                .cmp(&b.0.updated_at.unix_nanos())
                .then_with(|| a.1.cmp(b.1))
        });
        Ok(pending
            .into_iter()
            .take(limit)
            .map(|(_, uid)| uid.clone())
            .collect())
    }

    async fn mark_reclaimed(&self, uid: &str) -> Result<()> {
        let now = Timestamp::now();
        let mut state = self.lock();
        let s = state
            .sessions
            .get_mut(uid)
            .ok_or_else(|| JournalError::SessionNotFound(uid.to_owned()))?;
        rules::check_reclaimable(uid, &s.deletion)?;
        if s.reclaimed_at.is_none() {
            s.reclaimed_at = Some(now);
        }
        Ok(())
    }

    async fn settle_compute_state(
        &self,
        session: &str,
        at_seq: i64,
        state: ComputeState,
    ) -> Result<bool> {
        rules::check_settled_state(session, state)?;
        let mut locked = self.lock();
        let s = locked
            .sessions
            .get_mut(session)
            .ok_or_else(|| JournalError::SessionNotFound(session.to_owned()))?;
        if s.log.head().0 != at_seq {
            return Ok(false);
        }
        s.compute_state = state;
        Ok(true)
    }

    async fn register_harness(
        &self,
        name: &str,
        spec: &str,
        spec_digest: &str,
    ) -> Result<(HarnessRow, RegisterOutcome)> {
        let now = Timestamp::now();
        let mut state = self.lock();
        let reserved = state.reserved.contains(name);
        let existing = state.harnesses.get(name).cloned();
        let (row, outcome) =
            rules::register_decision(existing, reserved, name, spec, spec_digest, now)?;
        state.harnesses.insert(name.to_owned(), row.clone());
        Ok((row, outcome))
    }

    async fn get_harness(&self, name: &str) -> Result<Option<HarnessRow>> {
        Ok(self.lock().harnesses.get(name).cloned())
    }

    async fn list_harnesses(
        &self,
        after: &str,
        limit: usize,
        include_retired: bool,
    ) -> Result<Vec<HarnessRow>> {
        Ok(self
            .lock()
            .harnesses
            .values()
            .filter(|h| h.name.as_str() > after)
            .filter(|h| include_retired || h.state == HarnessState::Active)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn retire_harness(&self, name: &str, reason: &str) -> Result<HarnessRow> {
        let now = Timestamp::now();
        let mut state = self.lock();
        let row = state
            .harnesses
            .get_mut(name)
            .ok_or_else(|| JournalError::HarnessNotFound(name.to_owned()))?;
        rules::retire(row, reason, now);
        Ok(row.clone())
    }

    async fn reserve_harness_names(&self, names: &[String]) -> Result<()> {
        let mut state = self.lock();
        state
            .reserved
            .extend(names.iter().filter(|n| !n.is_empty()).cloned());
        Ok(())
    }

    async fn is_harness_name_reserved(&self, name: &str) -> Result<bool> {
        Ok(self.lock().reserved.contains(name))
    }
}
