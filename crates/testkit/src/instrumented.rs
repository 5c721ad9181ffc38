//! [`Instrumented`]: a journal wrapper for tests that counts what is read through it, and can
//! hold back the answers to queued appends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agentsessions_api::ComputeState;
use agentsessions_journal::{
    AppendRequest, Appended, ApprovalPage, ApprovalsQuery, Catalog, HarnessRow, HeadFollow,
    Journal, JournalError, ListQuery, Log, LogExt as _, LogRecord, RegisterOutcome, Result,
    SessionInfo, SessionPage, SessionRow, Wait,
};
use async_trait::async_trait;
use tokio::sync::oneshot;

/// A journal that counts the reads made of it (records, heads, session rows, lists) and the
/// records those reads returned, so a test can tell a follower that waits for commits from one
/// that polls, or an operation that reads what was appended from one that reads the whole log.
///
/// It can also stand for a writer that is slow to answer
/// ([`Instrumented::holding_queued_answers`]), so a test can tell a caller that waits for a
/// queued append's commit from one that goes on.
#[derive(Debug)]
pub struct Instrumented {
    inner: Arc<dyn Journal>,
    reads: AtomicU64,
    records: AtomicU64,
    session_reads: AtomicU64,
    queued: AtomicU64,
    queued_answers: QueuedAnswers,
}

/// What becomes of a queued append's answer.
#[derive(Debug)]
enum QueuedAnswers {
    /// The inner journal's, as it gives them.
    Given,
    /// Committed through the inner journal at once, but answered only when the next durable
    /// append is made.
    Held(Mutex<Vec<HeldAnswer>>),
    /// Refused, with nothing committed, once the next durable append is made.
    Refused(Mutex<Vec<HeldAnswer>>),
}

type HeldAnswer = (
    oneshot::Sender<Result<Vec<LogRecord>>>,
    Result<Vec<LogRecord>>,
);

impl Instrumented {
    /// Counts the reads made of `inner`.
    pub fn new(inner: Arc<dyn Journal>) -> Self {
        Self {
            inner,
            reads: AtomicU64::new(0),
            records: AtomicU64::new(0),
            session_reads: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            queued_answers: QueuedAnswers::Given,
        }
    }

    /// Commits each queued append at once but answers it only when the next durable append
    /// ([`Wait::Durable`]) is made: a caller that waits for a queued
    /// append's records before its next durable append waits for ever.
    #[must_use]
    pub fn holding_queued_answers(mut self) -> Self {
        self.queued_answers = QueuedAnswers::Held(Mutex::new(Vec::new()));
        self
    }

    /// Refuses each queued append (committing nothing), answering when the next durable append
    /// is made, as a writer that failed the batch would.
    #[must_use]
    pub fn refusing_queued_appends(mut self) -> Self {
        self.queued_answers = QueuedAnswers::Refused(Mutex::new(Vec::new()));
        self
    }

    /// Appends queued ([`Wait::Queued`]) so far.
    pub fn queued_appends(&self) -> u64 {
        self.queued.load(Ordering::SeqCst)
    }

    /// Answers the queued appends held so far.
    fn answer_held(&self) {
        if let QueuedAnswers::Held(held) | QueuedAnswers::Refused(held) = &self.queued_answers {
            let answers = std::mem::take(&mut *held.lock().unwrap_or_else(PoisonError::into_inner));
            for (answer, result) in answers {
                let _ = answer.send(result);
            }
        }
    }

    fn count(&self) {
        self.reads.fetch_add(1, Ordering::SeqCst);
    }

    /// The wrapped journal, for a test's own reads that should not count.
    pub fn inner(&self) -> &Arc<dyn Journal> {
        &self.inner
    }

    /// Reads made so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// Reads of a session's row ([`Catalog::session_info`]) so far, counted in
    /// [`Instrumented::reads`] too.
    pub fn session_reads(&self) -> u64 {
        self.session_reads.load(Ordering::SeqCst)
    }

    /// Records returned by [`Log::read`] so far.
    pub fn records_read(&self) -> u64 {
        self.records.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Log for Instrumented {
    async fn append(&self, request: AppendRequest) -> Result<Appended> {
        match request.wait {
            Wait::Durable => {
                self.answer_held();
                self.inner.append(request).await
            }
            Wait::Committed => self.inner.append(request).await,
            Wait::Queued => {
                self.queued.fetch_add(1, Ordering::SeqCst);
                let (held, result) = match &self.queued_answers {
                    QueuedAnswers::Given => return self.inner.append(request).await,
                    QueuedAnswers::Held(held) => {
                        let committed = self
                            .inner
                            .append_records(request.wait(Wait::Committed))
                            .await;
                        (held, committed)
                    }
                    QueuedAnswers::Refused(held) => (
                        held,
                        Err(JournalError::InvalidArgument(
                            "queued append refused by the test".to_owned(),
                        )),
                    ),
                };
                let (answer, records) = oneshot::channel();
                held.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((answer, result));
                Ok(Appended::queued(records))
            }
        }
    }

    fn follow(&self, session: &str) -> HeadFollow {
        self.inner.follow(session)
    }

    async fn new_fence(&self, session: &str) -> Result<i64> {
        self.inner.new_fence(session).await
    }

    async fn head(&self, session: &str) -> Result<i64> {
        self.count();
        self.inner.head(session).await
    }

    async fn read(&self, session: &str, from: i64, to: i64) -> Result<Vec<LogRecord>> {
        self.count();
        let records = self.inner.read(session, from, to).await?;
        self.records
            .fetch_add(records.len() as u64, Ordering::SeqCst);
        Ok(records)
    }

    async fn fork_session(&self, parent: &str, at_seq: i64, child: &str) -> Result<i64> {
        self.inner.fork_session(parent, at_seq, child).await
    }
}

#[async_trait]
impl Catalog for Instrumented {
    async fn put_session(&self, row: SessionRow) -> Result<()> {
        self.inner.put_session(row).await
    }

    async fn session_info(&self, uid: &str) -> Result<SessionInfo> {
        self.count();
        self.session_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.session_info(uid).await
    }

    async fn list_sessions(&self, query: ListQuery) -> Result<SessionPage> {
        self.count();
        self.inner.list_sessions(query).await
    }

    async fn list_pending_approvals(&self, query: ApprovalsQuery) -> Result<ApprovalPage> {
        self.count();
        self.inner.list_pending_approvals(query).await
    }

    async fn pending_deletions(&self, limit: usize) -> Result<Vec<String>> {
        self.inner.pending_deletions(limit).await
    }

    async fn mark_reclaimed(&self, uid: &str) -> Result<()> {
        self.inner.mark_reclaimed(uid).await
    }

    async fn settle_compute_state(
        &self,
        session: &str,
        at_seq: i64,
        state: ComputeState,
    ) -> Result<bool> {
        self.inner
            .settle_compute_state(session, at_seq, state)
            .await
    }

    async fn register_harness(
        &self,
        name: &str,
        spec: &str,
        spec_digest: &str,
    ) -> Result<(HarnessRow, RegisterOutcome)> {
        self.inner.register_harness(name, spec, spec_digest).await
    }

    async fn get_harness(&self, name: &str) -> Result<Option<HarnessRow>> {
        self.inner.get_harness(name).await
    }

    async fn list_harnesses(
        &self,
        after: &str,
        limit: usize,
        include_retired: bool,
    ) -> Result<Vec<HarnessRow>> {
        self.inner
            .list_harnesses(after, limit, include_retired)
            .await
    }

    async fn retire_harness(&self, name: &str, reason: &str) -> Result<HarnessRow> {
        self.inner.retire_harness(name, reason).await
    }

    async fn reserve_harness_names(&self, names: &[String]) -> Result<()> {
        self.inner.reserve_harness_names(names).await
    }

    async fn is_harness_name_reserved(&self, name: &str) -> Result<bool> {
        self.inner.is_harness_name_reserved(name).await
    }
}
