//! The `Sessions` service (wire.md §4, semantics §2–§5, extensions §3): each RPC validates its
//! request, takes the per-session guard where it has effects, and drives the journal and the
//! controller. Errors leave through the table in [`crate::error`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentsessions_api::{
    ApprovalDecision, Delta, Event, EventBody, EventKind, IdentityRef, Lifecycle, LifecycleKind,
    Message, ModelProvider, Session, SnapshotRef, Timestamp,
};
use agentsessions_controller::approval::ApprovalScan;
use agentsessions_controller::log::ExecutionLog;
use agentsessions_controller::{
    Cancellations, Controller, ControllerError, ExecRequest, Observer, ToolExecutor,
};
use agentsessions_harnesswire::request_id;
use agentsessions_journal::rules::new_session_uid;
use agentsessions_journal::{
    HarnessState, Journal, JournalError, ListQuery, LogRecord, SessionInfo, SessionRow, export,
};
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use agentsessions_wire::pb::sessions_server::Sessions;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::error::{Result, ServerError};
use crate::guard::{Held, SessionGuards};
use crate::harnesses::{HarnessEntry, Harnesses, Source};
use crate::render::{Tail, record_to_pb, render, render_with, tail};

/// Most children one Fork may create (semantics §4.4).
pub const MAX_FORK_COUNT: i32 = 128;
/// Records per journal read when streaming a Replay.
const REPLAY_PAGE: i64 = 1_000;
/// How long Cancel waits for the cancelled turn to unwind before answering.
const CANCEL_SETTLE: Duration = Duration::from_secs(5);

/// The state every RPC shares.
pub(crate) struct Inner {
    pub(crate) journal: Arc<dyn Journal>,
    pub(crate) harnesses: Harnesses,
    pub(crate) model: Arc<dyn ModelProvider>,
    pub(crate) project: String,
    pub(crate) tools: Option<Arc<dyn ToolExecutor>>,
    pub(crate) stream_deltas: bool,
    pub(crate) guards: SessionGuards,
    pub(crate) cancellations: Cancellations,
}

/// The `Sessions` gRPC service. Build it with [`crate::ServerBuilder`].
#[derive(Clone)]
pub struct SessionsService {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for SessionsService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionsService")
            .field("project", &self.inner.project)
            .field("harnesses", &self.inner.harnesses.names())
            .finish_non_exhaustive()
    }
}

type Rpc<T> = std::result::Result<Response<T>, Status>;
type UpdateSender = mpsc::UnboundedSender<std::result::Result<pb::ExecUpdate, Status>>;

/// Runs one RPC inside a span carrying its request id, logs its outcome (never payloads), and
/// returns the id to the caller in the response metadata.
pub(crate) async fn traced<T, F>(
    method: &'static str,
    metadata: &tonic::metadata::MetadataMap,
    body: F,
) -> Rpc<T>
where
    F: Future<Output = Result<T>>,
{
    let id = request_id::incoming(metadata);
    let span = tracing::info_span!("rpc", component = "grpc", operation = method, request_id = %id);
    let started = std::time::Instant::now();
    let result = request_id::with_request_id(id.clone(), body)
        .instrument(span.clone())
        .await;
    let _entered = span.enter();
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match result {
        Ok(value) => {
            tracing::info!(outcome = "success", duration_ms, "finished");
            let mut response = Response::new(value);
            request_id::attach(response.metadata_mut(), &id);
            Ok(response)
        }
        Err(err) => {
            tracing::info!(outcome = "error", error_kind = err.kind(), code = ?err.code(), duration_ms, "finished");
            let mut status = err.status();
            request_id::attach(status.metadata_mut(), &id);
            Err(status)
        }
    }
}

fn required<'a>(value: &'a str, what: &str) -> Result<&'a str> {
    if value.is_empty() {
        return Err(ServerError::InvalidArgument(format!("{what} is required")));
    }
    Ok(value)
}

fn lifecycle(kind: LifecycleKind, detail: String, snapshot: Option<SnapshotRef>) -> Event {
    Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind,
            detail,
            snapshot,
            compute_instance: String::new(),
        }),
    )
}

fn deadline_of(deadline_unix: i64) -> Option<SystemTime> {
    u64::try_from(deadline_unix)
        .ok()
        .filter(|&s| s > 0)
        .map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

fn send(tx: &UpdateSender, update: Update) {
    // A client that went away does not stop the turn (semantics §2.2 step 6).
    let _ignored = tx.send(Ok(pb::ExecUpdate {
        update: Some(update),
    }));
}

/// Forwards committed records and deltas of a running turn to its Exec stream, in order.
struct StreamObserver {
    tx: UpdateSender,
    held: Arc<Held>,
}

impl Observer for StreamObserver {
    fn record(&self, record: &LogRecord) {
        if record.event.kind == EventKind::ExecutionStart {
            self.held.set_execution(&record.event.execution_id);
        }
        send(&self.tx, Update::Record(record_to_pb(record)));
    }

    fn delta(&self, delta: &Delta) {
        send(
            &self.tx,
            Update::Delta(pb::Delta {
                execution_id: delta.execution_id.clone(),
                part_index: delta.part_index,
                chunk: delta.chunk.clone(),
                done: delta.done,
            }),
        );
    }
}

impl Inner {
    async fn info(&self, uid: &str) -> Result<SessionInfo> {
        match self.journal.session_info(uid).await {
            Err(JournalError::SessionNotFound(_)) => {
                Err(ServerError::SessionNotFound(uid.to_owned()))
            }
            other => Ok(other?),
        }
    }

    /// The session's info and log tail, refusing a session pending deletion (extensions §3).
    async fn live_session(&self, uid: &str) -> Result<(SessionInfo, Tail)> {
        let info = self.info(uid).await?;
        let tail = tail(self.journal.as_ref(), uid, info.last_seq).await?;
        if tail.deleted {
            return Err(ServerError::DeletionPending(uid.to_owned()));
        }
        Ok((info, tail))
    }

    async fn rendered(&self, uid: &str) -> Result<pb::Session> {
        let info = self.info(uid).await?;
        let running = self.guards.is_busy(uid);
        render(self.journal.as_ref(), info, running).await
    }

    fn controller(&self, entry: &HarnessEntry, uid: &str, fence: i64) -> Controller {
        let controller = Controller::new(
            Arc::clone(&self.journal),
            Arc::clone(&entry.harness),
            Arc::clone(&self.model),
            uid,
        )
        .with_fence(fence)
        .with_registry_name(entry.name.clone())
        .with_cancellations(self.cancellations.clone())
        .with_stream_deltas(self.stream_deltas);
        match &self.tools {
            Some(tools) => controller.with_tools(Arc::clone(tools)),
            None => controller,
        }
    }

    /// Appends a host lifecycle record at the head with a freshly minted fence.
    async fn append_lifecycle(&self, uid: &str, event: Event, fence: Option<i64>) -> Result<()> {
        let fence = match fence {
            Some(fence) => fence,
            None => self.journal.new_fence(uid).await?,
        };
        let head = self.journal.head(uid).await?;
        self.journal.append(uid, head, fence, event).await?;
        Ok(())
    }

    /// A per-turn harness override (semantics §7.3): allowed between static harnesses only; a
    /// session on a registered harness, or an override naming one, is pinned.
    fn check_override(&self, uid: &str, stored: &str, requested: &str) -> Result<()> {
        let stored_name = if stored.is_empty() {
            self.harnesses.default_name()
        } else {
            stored.to_owned()
        };
        if requested == stored_name {
            return Ok(());
        }
        let registered = |name: &str| {
            self.harnesses
                .resolve(name)
                .is_ok_and(|e| e.source == Source::Registered)
        };
        if registered(&stored_name) || registered(requested) {
            return Err(ServerError::FailedPrecondition(format!(
                "session {uid:?} is pinned to harness {stored_name:?}; a registered harness \
                 cannot be swapped for one turn (create a new session, or fork, instead)"
            )));
        }
        Ok(())
    }

    /// Creates a session row exactly as CreateSession does (semantics §2.2 step 1).
    async fn create(&self, session: Session) -> Result<String> {
        let entry = self.harnesses.resolve(&session.harness)?;
        if entry.source == Source::Registered
            && let Some(row) = self.journal.get_harness(&entry.name).await?
            && row.state == HarnessState::Retired
        {
            return Err(ServerError::HarnessRetired(entry.name));
        }
        let uid = new_session_uid();
        let project = if session.project.is_empty() {
            self.project.clone()
        } else {
            session.project
        };
        self.journal
            .put_session(SessionRow {
                uid: uid.clone(),
                project,
                name: session.name,
                harness: session.harness,
                model: session.model,
                labels: session.labels,
                annotations: session.annotations,
                origin: session.origin,
                identity: session.identity,
                ..SessionRow::default()
            })
            .await?;
        Ok(uid)
    }

    async fn exec(&self, req: pb::ExecRequest, tx: UpdateSender) -> Result<()> {
        let inputs = req
            .inputs
            .into_iter()
            .map(Message::try_from)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| ServerError::InvalidArgument(format!("inputs: {e}")))?;
        let uid = if req.session.is_empty() {
            self.create(Session {
                harness: req.harness.clone(),
                ..Session::default()
            })
            .await?
        } else {
            req.session.clone()
        };
        let (info, tail) = self.live_session(&uid).await?;
        // The session frame goes first, before anything can refuse the turn, so even a failed
        // turn tells the client which session it was on (semantics §2.2 step 5).
        send(
            &tx,
            Update::Session(render_with(info.clone(), &tail, self.guards.is_busy(&uid))),
        );
        let held = Arc::new(self.guards.try_take(&uid)?);
        // Inputless Exec on an execution stopped at an approval gate is the recovery path (§5.6).
        let recovery = inputs.is_empty() && {
            let records = self.journal.read(&uid, 1, info.last_seq).await?;
            ApprovalScan::scan(&records, 0)
                .ok()
                .and_then(|scan| scan.selected().map(|gate| !gate.completed))
                .unwrap_or(false)
        };
        // A stale cursor is refused before a fence is minted: minting would supersede the
        // writer that moved the head (on another host) and cost it its turn.
        if let Some(expected) = req.expected_last_seq
            && expected != info.last_seq
        {
            return Err(JournalError::Conflict {
                session: uid,
                expected,
                actual: info.last_seq,
            }
            .into());
        }
        let name = if req.harness.is_empty() || recovery {
            info.row.harness.clone()
        } else {
            self.check_override(&uid, &info.row.harness, &req.harness)?;
            req.harness.clone()
        };
        let entry = self.harnesses.resolve(&name)?;
        entry.admit().await?;
        let fence = self.journal.new_fence(&uid).await?;

        let observer = Arc::new(StreamObserver {
            tx: tx.clone(),
            held: Arc::clone(&held),
        });
        let controller = self.controller(&entry, &uid, fence).with_observer(observer);
        let deadline = deadline_of(req.deadline_unix);
        let outcome = if recovery {
            match controller.resume_until(deadline).await {
                Ok(_) => {
                    self.append_lifecycle(
                        &uid,
                        lifecycle(LifecycleKind::Resume, String::new(), None),
                        Some(fence),
                    )
                    .await
                }
                Err(e) => Err(e.into()),
            }
        } else {
            controller
                .exec(ExecRequest {
                    inputs,
                    expected_last_seq: req.expected_last_seq,
                    config: req.config,
                    resume_from_seq: req.resume_from_seq,
                    deadline,
                })
                .await
                .map(|_| ())
                .map_err(Into::into)
        };
        drop(controller);
        drop(held);
        match outcome {
            Ok(()) if !recovery => Ok(()),
            Ok(()) | Err(ServerError::Controller(ControllerError::Parked(_))) => {
                send(&tx, Update::Session(self.rendered(&uid).await?));
                Ok(())
            }
            Err(err) => Err(err),
        }
    }

    async fn fork(&self, req: pb::ForkRequest) -> Result<pb::ForkResponse> {
        let parent = required(&req.session, "session")?;
        if req.identity.is_some() {
            return Err(ServerError::InvalidArgument(
                "identity must be unset: fork children carry no per-child principal".into(),
            ));
        }
        let count = match req.count {
            c if c <= 0 => 1,
            c if c > MAX_FORK_COUNT => {
                return Err(ServerError::InvalidArgument(format!(
                    "count {c} is out of range: a fork creates 1 to {MAX_FORK_COUNT} children"
                )));
            }
            c => c,
        };
        let count = usize::try_from(count).unwrap_or(1);
        if !req.child_names.is_empty() && req.child_names.len() != count {
            return Err(ServerError::InvalidArgument(format!(
                "child_names has {} entries; give none or exactly count ({count})",
                req.child_names.len()
            )));
        }
        let (info, _tail) = self.live_session(parent).await?;
        let entry = self.harnesses.resolve(&info.row.harness)?;
        let resumability = entry.admit().await?;
        let head = info.last_seq;
        let at = if req.at_seq <= 0 { head } else { req.at_seq };
        if at > head {
            return Err(ServerError::InvalidArgument(format!(
                "at_seq {at} is beyond the session's head ({head})"
            )));
        }
        if resumability.requires_memory_snapshot() && at != head {
            return Err(ServerError::ForkNotAtHead { at, head });
        }
        let prefix = self.journal.read(parent, 1, at).await?;
        let mut children = Vec::with_capacity(count);
        for _ in 0..count {
            let child = new_session_uid();
            self.copy_prefix(&child, &prefix).await?;
            let fence = self.journal.new_fence(&child).await?;
            self.journal
                .append(
                    &child,
                    at,
                    fence,
                    lifecycle(LifecycleKind::Fork, format!("{parent}@{at}"), None),
                )
                .await?;
            children.push(child);
        }
        let mut rendered = Vec::with_capacity(count);
        for (i, child) in children.iter().enumerate() {
            self.journal
                .put_session(SessionRow {
                    uid: child.clone(),
                    project: info.row.project.clone(),
                    name: req.child_names.get(i).cloned().unwrap_or_default(),
                    harness: info.row.harness.clone(),
                    model: info.row.model.clone(),
                    parent_uid: parent.to_owned(),
                    fork_seq: at,
                    labels: req.labels.clone().into_iter().collect(),
                    annotations: info.row.annotations.clone(),
                    origin: info.row.origin.clone(),
                    identity: IdentityRef::default(),
                    created_at: None,
                })
                .await?;
            rendered.push(self.rendered(child).await?);
        }
        Ok(pb::ForkResponse { children: rendered })
    }

    /// Gives `child` the parent's records up to the fork point, same bytes and hashes.
    async fn copy_prefix(&self, child: &str, prefix: &[LogRecord]) -> Result<()> {
        export::load_records(self.journal.as_ref(), child, prefix).await?;
        Ok(())
    }

    async fn approve(&self, req: pb::ApproveRequest) -> Result<pb::ApproveResponse> {
        let uid = required(&req.session, "session")?;
        required(&req.execution_id, "execution_id")?;
        required(&req.tool_call_id, "tool_call_id")?;
        if req.request_seq <= 0 {
            return Err(ServerError::InvalidArgument(
                "request_seq must be the seq of the APPROVAL_REQUEST (> 0)".into(),
            ));
        }
        let Some(approved) = req.approved else {
            return Err(ServerError::InvalidArgument(
                "approved must be set: true to approve, false to deny".into(),
            ));
        };
        let (info, _tail) = self.live_session(uid).await?;
        let _held = self.guards.try_take(uid)?;
        // Approve never runs the harness; any served entry satisfies the controller's shape.
        let entry = self
            .harnesses
            .resolve(&info.row.harness)
            .or_else(|_| self.harnesses.resolve(""))?;
        let decision = ApprovalDecision {
            execution_id: req.execution_id,
            tool_call_id: req.tool_call_id,
            request_seq: req.request_seq,
            approved,
            reason: req.reason,
            identity: req.identity.map(Into::into).unwrap_or_default(),
        };
        let record = self
            .controller(&entry, uid, 0)
            .approve(&decision, Timestamp::now())
            .await?;
        drop(_held);
        Ok(pb::ApproveResponse {
            session: Some(self.rendered(uid).await?),
            decision: Some(record_to_pb(&record)),
        })
    }

    async fn suspend(&self, uid: &str) -> Result<pb::Session> {
        required(uid, "session")?;
        self.live_session(uid).await?;
        let held = self.guards.try_take(uid)?;
        // Harnesses here keep no state outside the log: the snapshot is the journal itself.
        let snapshot = SnapshotRef {
            local: uid.to_owned(),
            ..SnapshotRef::default()
        };
        self.append_lifecycle(
            uid,
            lifecycle(LifecycleKind::Suspend, String::new(), Some(snapshot)),
            None,
        )
        .await?;
        drop(held);
        self.rendered(uid).await
    }

    async fn resume(&self, uid: &str) -> Result<pb::Session> {
        required(uid, "session")?;
        let (info, _tail) = self.live_session(uid).await?;
        let held = self.guards.try_take(uid)?;
        let entry = self.resume_harness(uid, &info).await?;
        entry.admit().await?;
        let fence = self.journal.new_fence(uid).await?;
        match self.controller(&entry, uid, fence).resume().await {
            Ok(_) => {
                self.append_lifecycle(
                    uid,
                    lifecycle(LifecycleKind::Resume, String::new(), None),
                    Some(fence),
                )
                .await?;
            }
            // Waiting for a decision: the paused session is the answer (§4.3 step 3).
            Err(ControllerError::Parked(_)) => {}
            Err(e) => return Err(e.into()),
        }
        drop(held);
        self.rendered(uid).await
    }

    /// The harness a resume re-drives with (semantics §4.3 step 2): the one the pending
    /// execution recorded in its EXECUTION_START (a per-turn override included), else the
    /// session's. A recorded name this host does not serve is refused, never swapped.
    async fn resume_harness(&self, uid: &str, info: &SessionInfo) -> Result<HarnessEntry> {
        let records = self.journal.read(uid, 1, info.last_seq).await?;
        let recorded = ExecutionLog::read(&records)
            .ok()
            .and_then(|log| {
                log.last()
                    .filter(|e| !e.completed())
                    .and_then(|e| e.start.as_ref())
                    .map(|start| start.harness.clone())
            })
            .filter(|name| !name.is_empty());
        match recorded {
            Some(name) => self.harnesses.resolve(&name).map_err(|_| {
                ServerError::FailedPrecondition(format!(
                    "the interrupted turn of session {uid:?} ran on harness {name:?}, which this \
                     host does not serve; resume it on a host that does"
                ))
            }),
            None => self.harnesses.resolve(&info.row.harness),
        }
    }

    async fn cancel(&self, req: pb::CancelRequest) -> Result<pb::Session> {
        let uid = required(&req.session, "session")?;
        self.info(uid).await?;
        let execution = if req.execution_id.is_empty() {
            self.guards.running_execution(uid)
        } else {
            Some(req.execution_id.clone())
        };
        let reason = if req.reason.is_empty() {
            "cancelled by request".to_owned()
        } else {
            req.reason
        };
        let cancelled = execution
            .as_deref()
            .is_some_and(|id| self.cancellations.cancel(id, &reason));
        if !cancelled {
            return Err(ServerError::NothingToCancel {
                session: uid.to_owned(),
                detail: execution.map_or_else(String::new, |id| format!(" under execution {id:?}")),
            });
        }
        // Answer with the session after the turn unwound (LIFECYCLE_CANCEL and END written).
        let settle = tokio::time::Instant::now() + CANCEL_SETTLE;
        while self.guards.is_busy(uid) && tokio::time::Instant::now() < settle {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.rendered(uid).await
    }

    async fn delete(&self, uid: &str) -> Result<pb::Session> {
        required(uid, "uid")?;
        let info = self.info(uid).await?;
        let tail = tail(self.journal.as_ref(), uid, info.last_seq).await?;
        if tail.deleted {
            // Idempotent: the intent is already durable.
            return Ok(render_with(info, &tail, false));
        }
        let held = self.guards.try_take(uid)?;
        self.append_lifecycle(
            uid,
            lifecycle(LifecycleKind::Delete, String::new(), None),
            None,
        )
        .await?;
        drop(held);
        self.rendered(uid).await
    }
}

#[tonic::async_trait]
impl Sessions for SessionsService {
    async fn create_session(&self, request: Request<pb::CreateSessionRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, _, req) = request.into_parts();
        traced("CreateSession", &metadata, async move {
            let session = match req.session {
                Some(wire) => Session::try_from(wire)
                    .map_err(|e| ServerError::InvalidArgument(format!("session: {e}")))?,
                None => Session::default(),
            };
            let uid = inner.create(session).await?;
            inner.rendered(&uid).await
        })
        .await
    }

    async fn get_session(&self, request: Request<pb::GetSessionRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, _, req) = request.into_parts();
        traced("GetSession", &metadata, async move {
            inner.rendered(required(&req.uid, "uid")?).await
        })
        .await
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Rpc<pb::ListSessionsResponse> {
        let inner = &self.inner;
        let (metadata, _, req) = request.into_parts();
        traced("ListSessions", &metadata, async move {
            let project = if req.project.is_empty() {
                inner.project.clone()
            } else {
                req.project
            };
            let page = inner
                .journal
                .list_sessions(ListQuery {
                    project,
                    page_size: i64::from(req.page_size),
                    page_token: req.page_token,
                })
                .await?;
            let mut sessions = Vec::with_capacity(page.sessions.len());
            for info in page.sessions {
                let running = inner.guards.is_busy(&info.row.uid);
                sessions.push(render(inner.journal.as_ref(), info, running).await?);
            }
            Ok(pb::ListSessionsResponse {
                sessions,
                next_page_token: page.next_page_token,
            })
        })
        .await
    }

    async fn delete_session(&self, request: Request<pb::DeleteSessionRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, _, req) = request.into_parts();
        traced("DeleteSession", &metadata, async move {
            inner.delete(&req.uid).await
        })
        .await
    }

    type ExecStream = UnboundedReceiverStream<std::result::Result<pb::ExecUpdate, Status>>;

    async fn exec(&self, request: Request<pb::ExecRequest>) -> Rpc<Self::ExecStream> {
        let (metadata, _, req) = request.into_parts();
        let id = request_id::incoming(&metadata);
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = Arc::clone(&self.inner);
        let span =
            tracing::info_span!("rpc", component = "grpc", operation = "Exec", request_id = %id);
        // The turn runs in its own task: a client that disconnects does not abort it.
        tokio::spawn(
            request_id::with_request_id(id.clone(), async move {
                let started = std::time::Instant::now();
                let result = inner.exec(req, tx.clone()).await;
                let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                match result {
                    Ok(()) => tracing::info!(outcome = "success", duration_ms, "finished"),
                    Err(err) => {
                        tracing::info!(outcome = "error", error_kind = err.kind(), code = ?err.code(), duration_ms, "finished");
                        let _ignored = tx.send(Err(err.status()));
                    }
                }
            })
            .instrument(span),
        );
        let mut response = Response::new(UnboundedReceiverStream::new(rx));
        request_id::attach(response.metadata_mut(), &id);
        Ok(response)
    }

    type ReplayStream = UnboundedReceiverStream<std::result::Result<pb::LogRecord, Status>>;

    async fn replay(&self, request: Request<pb::ReplayRequest>) -> Rpc<Self::ReplayStream> {
        let inner = Arc::clone(&self.inner);
        let (metadata, _, req) = request.into_parts();
        traced("Replay", &metadata, async move {
            let (tx, rx) = mpsc::unbounded_channel();
            let from = req.from_seq.max(1);
            let to = if req.to_seq <= 0 {
                inner.journal.head(&req.session).await?
            } else {
                req.to_seq
            };
            tokio::spawn(async move {
                let mut next = from;
                while next <= to {
                    let last = (next + REPLAY_PAGE - 1).min(to);
                    match inner.journal.read(&req.session, next, last).await {
                        Ok(records) if records.is_empty() => break,
                        Ok(records) => {
                            for record in &records {
                                if tx.send(Ok(record_to_pb(record))).is_err() {
                                    return;
                                }
                            }
                            next = last + 1;
                        }
                        Err(e) => {
                            let _ignored = tx.send(Err(ServerError::from(e).status()));
                            return;
                        }
                    }
                }
            });
            Ok(UnboundedReceiverStream::new(rx))
        })
        .await
    }

    async fn approve(&self, request: Request<pb::ApproveRequest>) -> Rpc<pb::ApproveResponse> {
        let inner = &self.inner;
        let (metadata, _, req) = request.into_parts();
        traced(
            "Approve",
            &metadata,
            async move { inner.approve(req).await },
        )
        .await
    }

    async fn cancel(&self, request: Request<pb::CancelRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, _, req) = request.into_parts();
        traced("Cancel", &metadata, async move { inner.cancel(req).await }).await
    }

    async fn suspend(&self, request: Request<pb::SuspendRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, _, req) = request.into_parts();
        traced("Suspend", &metadata, async move {
            inner.suspend(&req.session).await
        })
        .await
    }

    async fn resume(&self, request: Request<pb::ResumeRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, _, req) = request.into_parts();
        traced("Resume", &metadata, async move {
            inner.resume(&req.session).await
        })
        .await
    }

    async fn fork(&self, request: Request<pb::ForkRequest>) -> Rpc<pb::ForkResponse> {
        let inner = &self.inner;
        let (metadata, _, req) = request.into_parts();
        traced("Fork", &metadata, async move { inner.fork(req).await }).await
    }
}
