//! The `Sessions` service (wire.md §4, semantics §2–§5, extensions §3): each RPC validates its
//! request, takes the per-session guard where it has effects, and drives the journal and the
//! controller. Errors leave through the table in [`crate::error`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentsessions_api::{Action, ApprovalDecision, CallerIdentity, Delta, Message, Session};
use agentsessions_controller::approval::ApprovalScan;
use agentsessions_controller::{ExecRequest, Observer};
use agentsessions_harnesswire::request_id;
use agentsessions_journal::rules::new_session_uid;
use agentsessions_journal::{
    HarnessState, Journal, JournalError, ListQuery, LogRecord, SessionInfo, SessionRow,
};
use agentsessions_placement::{ExecCall, ForkCall, Placer, ResumeCall, Source};
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use agentsessions_wire::pb::sessions_server::Sessions;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::authz::{Call, Gate, method};
use crate::error::{Result, ServerError};
use crate::render::{Tail, record_to_pb, render, render_with, tail};

/// Most children one Fork may create (semantics §4.4).
pub const MAX_FORK_COUNT: i32 = 128;
/// Records per journal read when streaming a Replay.
const REPLAY_PAGE: i64 = 1_000;

/// The state every RPC shares.
pub(crate) struct Inner {
    pub(crate) journal: Arc<dyn Journal>,
    pub(crate) placer: Placer,
    pub(crate) project: String,
    pub(crate) gate: Gate,
    /// TLS for links to harnesses registered at run time (see `ServerBuilder::harness_link_tls`).
    pub(crate) link_tls: Option<tonic::transport::ClientTlsConfig>,
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
            .field("harnesses", &self.inner.placer.registry().names())
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
}

impl Observer for StreamObserver {
    fn record(&self, record: &LogRecord) {
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

    /// The session `uid`, once `actions` are authorized on it for `call` against its stored
    /// owner, before anything about it is disclosed or changed (extensions §2). A session that
    /// does not exist is checked with no owner, so a refused caller cannot tell it from someone
    /// else's; an allowed one gets `SessionNotFound`.
    async fn authorized(&self, call: &Call, actions: &[Action], uid: &str) -> Result<SessionInfo> {
        match self.journal.session_info(uid).await {
            Ok(info) => {
                self.also_authorized(call, actions, &info).await?;
                Ok(info)
            }
            Err(JournalError::SessionNotFound(_)) => {
                self.gate
                    .session(call, actions, uid, &CallerIdentity::default())
                    .await?;
                Err(ServerError::SessionNotFound(uid.to_owned()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Further `actions` an RPC needs on a session it already read (compound permissions).
    async fn also_authorized(
        &self,
        call: &Call,
        actions: &[Action],
        info: &SessionInfo,
    ) -> Result<()> {
        self.gate
            .session(call, actions, &info.row.uid, &info.row.owner)
            .await
    }

    /// The owner filter a listing by `call` runs with: none when the policy allows listing every
    /// owner's sessions (or no policy is set), else the caller's own (extensions §2).
    async fn list_filter(&self, call: &Call) -> Result<Option<CallerIdentity>> {
        if !self.gate.enforcing() {
            return Ok(None);
        }
        if self
            .gate
            .allows_global(call, Action::List, CallerIdentity::default())
            .await?
        {
            return Ok(None);
        }
        self.gate
            .global(call, Action::List, call.caller.clone())
            .await?;
        Ok(Some(call.caller.clone()))
    }

    /// The session's log tail, refusing a session pending deletion (extensions §3): by its
    /// stored state (an unknown one counts as deleted) or by a delete marker at its tail.
    async fn live_tail(&self, info: &SessionInfo) -> Result<Tail> {
        let uid = info.row.uid.as_str();
        let tail = tail(self.journal.as_ref(), uid, info.last_seq).await?;
        if tail.deleted || info.deletion.is_deleted() {
            return Err(ServerError::DeletionPending(uid.to_owned()));
        }
        Ok(tail)
    }

    async fn rendered(&self, uid: &str) -> Result<pb::Session> {
        self.rendered_info(self.info(uid).await?).await
    }

    async fn rendered_info(&self, info: SessionInfo) -> Result<pb::Session> {
        render(&self.placer, info).await
    }

    /// Creates session `uid` owned by `owner` exactly as CreateSession does (semantics §2.2
    /// step 1, §7.3). The owner is the verified caller, never a request field.
    async fn create(&self, uid: String, session: Session, owner: CallerIdentity) -> Result<String> {
        let route = self.placer.registry().resolve(&session.harness)?;
        if route.source == Source::Registered
            && let Some(row) = self.journal.get_harness(&route.name).await?
            && row.state == HarnessState::Retired
        {
            return Err(ServerError::HarnessRetired(route.name));
        }
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
                owner,
                ..SessionRow::default()
            })
            .await?;
        Ok(uid)
    }

    async fn exec(&self, call: &Call, req: pb::ExecRequest, tx: UpdateSender) -> Result<()> {
        let inputs = req
            .inputs
            .into_iter()
            .map(Message::try_from)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| ServerError::InvalidArgument(format!("inputs: {e}")))?;
        let info = if req.session.is_empty() {
            // Auto-creation needs create, and exec on the session the caller would then own.
            self.gate
                .global(call, Action::Create, CallerIdentity::default())
                .await?;
            let uid = new_session_uid();
            let owner = self.gate.owner_for(call);
            self.gate
                .session(call, &[Action::Exec], &uid, &owner)
                .await?;
            let session = Session {
                harness: req.harness.clone(),
                ..Session::default()
            };
            let uid = self.create(uid, session, owner).await?;
            self.info(&uid).await?
        } else {
            self.authorized(call, &[Action::Exec], &req.session).await?
        };
        let uid = info.row.uid.clone();
        let tail = self.live_tail(&info).await?;
        // The session frame goes first, before anything can refuse the turn, so even a failed
        // turn tells the client which session it was on (semantics §2.2 step 5).
        send(
            &tx,
            Update::Session(render_with(info.clone(), &tail, self.placer.is_busy(&uid))),
        );
        // Inputless Exec on an execution stopped at an approval gate is the recovery path (§5.6).
        let recovery = inputs.is_empty() && {
            let records = self.journal.read(&uid, 1, info.last_seq).await?;
            ApprovalScan::scan(&records, 0)
                .ok()
                .and_then(|scan| scan.selected().map(|gate| !gate.completed))
                .unwrap_or(false)
        };
        let observer: Arc<dyn Observer> = Arc::new(StreamObserver { tx: tx.clone() });
        let deadline = deadline_of(req.deadline_unix);
        let outcome = if recovery {
            self.placer
                .resume(ResumeCall {
                    session: uid.clone(),
                    deadline,
                    expected_last_seq: req.expected_last_seq,
                    observer: Some(observer),
                })
                .await
                .map(|_| ())
        } else {
            self.placer
                .exec(ExecCall {
                    session: uid.clone(),
                    harness: req.harness,
                    request: ExecRequest {
                        inputs,
                        expected_last_seq: req.expected_last_seq,
                        config: req.config,
                        resume_from_seq: req.resume_from_seq,
                        deadline,
                    },
                    observer: Some(observer),
                })
                .await
                .map(|_| ())
        };
        match outcome {
            Ok(()) if !recovery => Ok(()),
            Ok(()) => {
                send(&tx, Update::Session(self.rendered(&uid).await?));
                Ok(())
            }
            Err(err) if err.is_park() => {
                send(&tx, Update::Session(self.rendered(&uid).await?));
                Ok(())
            }
            Err(err) => Err(err.into()),
        }
    }

    async fn fork(&self, call: &Call, req: pb::ForkRequest) -> Result<pb::ForkResponse> {
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
        // Malformed requests are refused above, whoever sends them: that discloses nothing.
        let info = self.authorized(call, &[Action::Fork], parent).await?;
        // A fork that checkpoints the parent's memory suspends it too (extensions §2). A parent
        // pending deletion is refused by the placer.
        if self.gate.enforcing() && self.placer.fork_is_stateful(parent).await? {
            self.also_authorized(call, &[Action::Suspend], &info)
                .await?;
        }
        let outcome = self
            .placer
            .fork(ForkCall {
                parent: parent.to_owned(),
                at_seq: req.at_seq,
                count,
                child_names: req.child_names,
                labels: req.labels.into_iter().collect(),
            })
            .await?;
        let mut children = Vec::with_capacity(outcome.children.len());
        for child in &outcome.children {
            children.push(self.rendered(child).await?);
        }
        Ok(pb::ForkResponse { children })
    }

    async fn approve(&self, call: &Call, req: pb::ApproveRequest) -> Result<pb::ApproveResponse> {
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
        self.authorized(call, &[Action::Approve, Action::Read], uid)
            .await?;
        // A session pending deletion is refused by the placer.
        let decision = ApprovalDecision {
            execution_id: req.execution_id,
            tool_call_id: req.tool_call_id,
            request_seq: req.request_seq,
            approved,
            reason: req.reason,
            identity: req.identity.map(Into::into).unwrap_or_default(),
        };
        let record = self.placer.approve(uid, &decision).await?;
        Ok(pb::ApproveResponse {
            session: Some(self.rendered(uid).await?),
            decision: Some(record_to_pb(&record)),
        })
    }

    async fn suspend(&self, call: &Call, uid: &str) -> Result<pb::Session> {
        required(uid, "session")?;
        self.authorized(call, &[Action::Suspend], uid).await?;
        // A session pending deletion is refused by the placer.
        self.placer.suspend(uid).await?;
        self.rendered(uid).await
    }

    async fn resume(&self, call: &Call, uid: &str) -> Result<pb::Session> {
        required(uid, "session")?;
        let info = self.authorized(call, &[Action::Resume], uid).await?;
        // A resume that runs a decided approval's turn on is an exec too (extensions §2). A
        // session pending deletion is refused by the placer.
        if self.gate.enforcing() && self.placer.resume_drives_effects(uid).await? {
            self.also_authorized(call, &[Action::Exec], &info).await?;
        }
        match self
            .placer
            .resume(ResumeCall {
                session: uid.to_owned(),
                ..ResumeCall::default()
            })
            .await
        {
            // Waiting for a decision: the paused session is the answer (§4.3 step 3).
            Err(e) if !e.is_park() => return Err(e.into()),
            _ => {}
        }
        self.rendered(uid).await
    }

    async fn cancel(&self, call: &Call, req: pb::CancelRequest) -> Result<pb::Session> {
        let uid = required(&req.session, "session")?;
        self.authorized(call, &[Action::Cancel], uid).await?;
        self.placer
            .cancel(uid, &req.execution_id, &req.reason)
            .await?;
        self.rendered(uid).await
    }

    async fn delete(&self, call: &Call, uid: &str) -> Result<pb::Session> {
        required(uid, "uid")?;
        self.authorized(call, &[Action::Delete], uid).await?;
        if self.placer.delete(uid).await? {
            // Release its compute now rather than at the next reclaimer pass; a failure leaves
            // it queued for that pass.
            let placer = self.placer.clone();
            let session = uid.to_owned();
            tokio::spawn(async move {
                if let Err(err) = placer.reclaim(&session).await {
                    tracing::info!(session_uid = %session, error = %err, "reclaim deferred to the next pass");
                }
            });
        }
        self.rendered(uid).await
    }
}

#[tonic::async_trait]
impl Sessions for SessionsService {
    async fn create_session(&self, request: Request<pb::CreateSessionRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::CREATE);
        traced("CreateSession", &metadata, async move {
            inner
                .gate
                .global(&call, Action::Create, CallerIdentity::default())
                .await?;
            let session = match req.session {
                Some(wire) => Session::try_from(wire)
                    .map_err(|e| ServerError::InvalidArgument(format!("session: {e}")))?,
                None => Session::default(),
            };
            let owner = inner.gate.owner_for(&call);
            let uid = inner.create(new_session_uid(), session, owner).await?;
            inner.rendered(&uid).await
        })
        .await
    }

    async fn get_session(&self, request: Request<pb::GetSessionRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::GET);
        traced("GetSession", &metadata, async move {
            let uid = required(&req.uid, "uid")?;
            let info = inner.authorized(&call, &[Action::Read], uid).await?;
            inner.rendered_info(info).await
        })
        .await
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Rpc<pb::ListSessionsResponse> {
        let inner = &self.inner;
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::LIST);
        traced("ListSessions", &metadata, async move {
            let owner = inner.list_filter(&call).await?;
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
                    owner,
                })
                .await?;
            let mut sessions = Vec::with_capacity(page.sessions.len());
            for info in page.sessions {
                sessions.push(render(&inner.placer, info).await?);
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
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::DELETE);
        traced("DeleteSession", &metadata, async move {
            inner.delete(&call, &req.uid).await
        })
        .await
    }

    type ExecStream = UnboundedReceiverStream<std::result::Result<pb::ExecUpdate, Status>>;

    async fn exec(&self, request: Request<pb::ExecRequest>) -> Rpc<Self::ExecStream> {
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::EXEC);
        let id = request_id::incoming(&metadata);
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = Arc::clone(&self.inner);
        let span =
            tracing::info_span!("rpc", component = "grpc", operation = "Exec", request_id = %id);
        // The turn runs in its own task: a client that disconnects does not abort it.
        tokio::spawn(
            request_id::with_request_id(id.clone(), async move {
                let started = std::time::Instant::now();
                let result = inner.exec(&call, req, tx.clone()).await;
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
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::REPLAY);
        traced("Replay", &metadata, async move {
            // An unknown uid streams nothing (semantics §3.1); under a policy it is checked like
            // any session, with no owner, and streams nothing if that is allowed.
            if inner.gate.enforcing() {
                match inner.authorized(&call, &[Action::Read], &req.session).await {
                    Ok(_) | Err(ServerError::SessionNotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
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
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::APPROVE);
        traced("Approve", &metadata, async move {
            inner.approve(&call, req).await
        })
        .await
    }

    async fn cancel(&self, request: Request<pb::CancelRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::CANCEL);
        traced("Cancel", &metadata, async move {
            inner.cancel(&call, req).await
        })
        .await
    }

    async fn suspend(&self, request: Request<pb::SuspendRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::SUSPEND);
        traced("Suspend", &metadata, async move {
            inner.suspend(&call, &req.session).await
        })
        .await
    }

    async fn resume(&self, request: Request<pb::ResumeRequest>) -> Rpc<pb::Session> {
        let inner = &self.inner;
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::RESUME);
        traced("Resume", &metadata, async move {
            inner.resume(&call, &req.session).await
        })
        .await
    }

    async fn fork(&self, request: Request<pb::ForkRequest>) -> Rpc<pb::ForkResponse> {
        let inner = &self.inner;
        let (metadata, extensions, req) = request.into_parts();
        let call = Call::of(&extensions, method::FORK);
        traced(
            "Fork",
            &metadata,
            async move { inner.fork(&call, req).await },
        )
        .await
    }
}
