//! The `Sessions` service (wire.md §4, semantics §2–§5, extensions §3): each RPC validates its
//! request ([`crate::requests`]), authorizes it, and drives the placer and the journal. Errors
//! leave through the table in [`crate::error`]; the per-RPC boilerplate is [`crate::rpc`].

use std::sync::Arc;

use agentsessions_api::{Action, CallerIdentity, ComputeState, IdentityRef, Session};
use agentsessions_journal::rules::new_session_uid;
use agentsessions_journal::{
    ApprovalsQuery, HarnessState, Journal, JournalError, ListQuery, RecordFollower, SessionInfo,
    SessionRow,
};
use agentsessions_placement::{ForkCall, Placer, ResumeCall, Source, TurnCall, TurnRun};
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use agentsessions_wire::pb::sessions_server::{Sessions, SessionsServer};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Status};

use crate::authz::{Call, CallAuthorizer, method};
use crate::error::{Result, ServerError};
use crate::limits::Admission;
use crate::record_page::RecordPage;
use crate::render::{
    Tail, approval_to_pb, record_to_pb, render, render_listed, render_with, seq_range, tail,
};
use crate::requests::{
    ApproveOrder, CancelOrder, ExecOrder, ForkOrder, NewSession, SessionUid, WatchOrder,
};
use crate::rpc::{Incoming, Rpc, finished, unary};
use crate::streams::{
    ExecFeed, ExecStream, ReplayStream, WatchStream, WatchUpdatesStream, replay, replay_channel,
};
use crate::watch::{WatchFrame, watch};

/// Default largest request or response message the service accepts or sends (an Exec frame
/// carries a whole record, a Start the whole history); [`crate::Limits::max_message_bytes`]
/// sets it per service.
pub const MAX_MESSAGE_BYTES: usize = crate::Limits::DEFAULT_MAX_MESSAGE_BYTES;

/// The state every RPC shares.
pub(crate) struct Inner {
    pub(crate) journal: Arc<dyn Journal>,
    pub(crate) placer: Placer,
    pub(crate) project: String,
    pub(crate) authz: CallAuthorizer,
    /// TLS for links to harnesses registered at run time (see `ServerBuilder::harness_link_tls`).
    pub(crate) link_tls: Option<tonic::transport::ClientTlsConfig>,
    /// Every task an RPC leaves running (turns, streams, reclaims); [`SessionsService::shutdown`]
    /// waits for them.
    pub(crate) tasks: TaskTracker,
    /// Fired at shutdown: streams stop waiting for their clients.
    pub(crate) stop: CancellationToken,
    /// The overload limits' permits.
    pub(crate) admission: Admission,
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

impl SessionsService {
    /// The tonic service, with message limits of [`crate::Limits::max_message_bytes`]. An
    /// oversized request is refused by tonic with `OUT_OF_RANGE`; [`Self::into_limited_server`]
    /// (what the `serve_*` functions mount) answers it with the table's `RESOURCE_EXHAUSTED`.
    pub fn into_server(self) -> SessionsServer<Self> {
        let max = self.limits().max_message_bytes;
        SessionsServer::new(self)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max)
    }

    /// Where the host's tool executor reports running calls' progress: the Exec and
    /// WatchUpdates streams of their sessions send it on (extensions §11).
    pub fn progress_sink(&self) -> Arc<dyn agentsessions_controller::ProgressSink> {
        Arc::clone(self.inner.placer.progress()) as Arc<dyn agentsessions_controller::ProgressSink>
    }

    /// [`Self::into_server`] whose oversized-request refusals are `RESOURCE_EXHAUSTED`.
    pub fn into_limited_server(self) -> crate::MessageLimited<SessionsServer<Self>> {
        let max = self.limits().max_message_bytes;
        crate::MessageLimited::new(self.into_server(), max)
    }

    /// The overload limits this service enforces.
    pub fn limits(&self) -> crate::Limits {
        self.inner.admission.limits()
    }

    /// One reclaimer pass over up to `limit` deleted sessions (extensions §3): stops their
    /// compute, which frees the snapshots the runtime kept, and marks them reclaimed. Hosts run
    /// it periodically; a session that cannot be reclaimed yet stays queued.
    ///
    /// # Errors
    /// Reading the queue failed.
    pub async fn reclaim_pending(
        &self,
        limit: usize,
    ) -> Result<agentsessions_placement::ReclaimReport> {
        Ok(self.inner.placer.reclaim_pending(limit).await?)
    }

    /// Settles the stored compute state of this service's project's sessions that the journal
    /// says hold compute (LIVE or WARM) but whose last turn ended (docs/extensions.md, "Compute
    /// state"): rows stored before their host settled at each turn's end, or whose incarnation
    /// went away since. A host runs it once at startup. Reads at most `pages` pages of the
    /// listing (of 500); returns how many sessions it changed.
    ///
    /// # Errors
    /// Listing the sessions failed; a session that cannot be settled is skipped.
    pub async fn settle_idle_compute(&self, pages: usize) -> Result<usize> {
        let placer = &self.inner.placer;
        let mut settled = 0;
        let mut token = String::new();
        for _ in 0..pages {
            let page = self
                .inner
                .journal
                .list_sessions(ListQuery {
                    project: self.inner.project.clone(),
                    page_size: 500,
                    page_token: token,
                    owner: None,
                })
                .await?;
            for info in &page.sessions {
                if !matches!(info.compute_state, ComputeState::Live | ComputeState::Warm) {
                    continue;
                }
                match placer.settle_idle_compute(&info.row.uid).await {
                    Ok(true) => settled += 1,
                    Ok(false) => {}
                    Err(err) => {
                        tracing::debug!(session_uid = %info.row.uid, error = %err, "compute state not settled");
                    }
                }
            }
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        Ok(settled)
    }

    /// Names of the served harnesses and the default one.
    pub fn harness_names(&self) -> (Vec<String>, String) {
        let registry = self.inner.placer.registry();
        (registry.names(), registry.default_name())
    }

    /// Stops the work RPCs left running (STYLE rule 8): streams stop waiting for their
    /// clients, running turns finish at a journal-consistent point, and this returns when every
    /// task has ended. The `serve_*` functions call it once their listener is drained; a host
    /// that mounts [`SessionsService::into_server`] on its own router calls it itself.
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }

    /// Stops every turn still running (and any that starts later) because the host is shutting
    /// down: each writes an ERROR note ("host shutting down; resume to continue") and stays
    /// resumable, so [`SessionsService::shutdown`] is not held up by a slow tool or model. A
    /// host calls it once in-flight calls had their chance to finish; returns how many ran.
    pub fn interrupt_turns(&self) -> usize {
        self.inner.placer.interrupt_turns()
    }

    /// A token cancelled when the service starts stopping (a listener's shutdown, or
    /// [`SessionsService::shutdown`]), for other front ends' long-lived streams to end with it.
    /// Cancelling it stops nothing else.
    pub fn stopping(&self) -> CancellationToken {
        self.inner.stop.child_token()
    }

    /// The stop signal alone, for a listener's shutdown future to fire before it drains.
    pub(crate) fn stop_token(&self) -> CancellationToken {
        self.inner.stop.clone()
    }
}

impl Inner {
    async fn info(&self, uid: &str) -> Result<SessionInfo> {
        match self.journal.session_info(uid).await {
            Err(JournalError::SessionNotFound(_)) => Err(ServerError::SessionNotFound {
                uid: uid.to_owned(),
            }),
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
                self.authz
                    .session(call, actions, uid, &CallerIdentity::default())
                    .await?;
                Err(ServerError::SessionNotFound {
                    uid: uid.to_owned(),
                })
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
        self.authz
            .session(call, actions, &info.row.uid, &info.row.owner)
            .await
    }

    /// The owner filter a listing by `call` runs with: none when the policy allows listing every
    /// owner's sessions (or no policy is set), else the caller's own (extensions §2).
    async fn list_filter(&self, call: &Call) -> Result<Option<CallerIdentity>> {
        if !self.authz.enforcing() {
            return Ok(None);
        }
        if self
            .authz
            .allows_global(call, Action::List, CallerIdentity::default())
            .await?
        {
            return Ok(None);
        }
        self.authz
            .global(call, Action::List, call.caller.clone())
            .await?;
        Ok(Some(call.caller.clone()))
    }

    /// The session's log tail, refusing a session pending deletion (extensions §3): by its
    /// stored state (an unknown one counts as deleted) or by a delete marker at its tail.
    async fn live_tail(&self, info: &SessionInfo) -> Result<Tail> {
        let uid = info.row.uid.as_str();
        let tail = tail(&self.placer, uid, info.last_seq).await?;
        if tail.deleted || info.deletion.is_deleted() {
            return Err(ServerError::DeletionPending {
                uid: uid.to_owned(),
            });
        }
        Ok(tail)
    }

    /// Settles the journal's compute state with the runtime once an operation on `uid` ended
    /// (docs/extensions.md, "Compute state"). A failure costs only the listing's freshness, not
    /// the call: a Get still asks the runtime.
    async fn settle_compute(&self, uid: &str) {
        if let Err(err) = self.placer.settle_compute(uid).await {
            tracing::debug!(session_uid = uid, error = %err, "compute state not settled");
        }
    }

    async fn rendered(&self, uid: &str) -> Result<pb::Session> {
        self.rendered_info(self.info(uid).await?).await
    }

    async fn rendered_info(&self, info: SessionInfo) -> Result<pb::Session> {
        render(&self.placer, info).await
    }

    /// Creates session `uid` owned by `owner` exactly as CreateSession does (semantics §2.2
    /// step 1, §7.3). The owner is the verified caller, never a request field. The row records
    /// the harness the host resolved (the default route's name when none was asked for) and,
    /// when the caller named no model, the model its turns resolve to
    /// ([`Placer::default_model`](agentsessions_placement::Placer::default_model)).
    async fn create(&self, uid: String, session: Session, owner: CallerIdentity) -> Result<String> {
        let route = self.placer.registry().resolve(&session.harness)?;
        if route.source == Source::Registered
            && let Some(row) = self.journal.get_harness(&route.name).await?
            && row.state == HarnessState::Retired
        {
            return Err(ServerError::HarnessRetired { name: route.name });
        }
        let project = if session.project.is_empty() {
            self.project.clone()
        } else {
            session.project
        };
        let model = if session.model.is_empty() {
            self.placer.default_model(&route).await
        } else {
            session.model
        };
        self.journal
            .put_session(SessionRow {
                uid: uid.clone(),
                project,
                name: session.name,
                harness: route.name,
                model,
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

    async fn create_session(
        &self,
        call: &Call,
        req: pb::CreateSessionRequest,
    ) -> Result<pb::Session> {
        self.authz
            .global(call, Action::Create, CallerIdentity::default())
            .await?;
        let NewSession(session) = NewSession::try_from(req)?;
        let owner = self.authz.owner_for(call);
        let uid = self.create(new_session_uid(), session, owner).await?;
        self.rendered(&uid).await
    }

    /// `project`, or this server's project when a request names none.
    fn project_or_default(&self, project: String) -> String {
        if project.is_empty() {
            self.project.clone()
        } else {
            project
        }
    }

    async fn list(
        &self,
        call: &Call,
        req: pb::ListSessionsRequest,
    ) -> Result<pb::ListSessionsResponse> {
        let owner = self.list_filter(call).await?;
        let project = self.project_or_default(req.project);
        let page = self
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
            sessions.push(render_listed(&self.placer, info).await?);
        }
        Ok(pb::ListSessionsResponse {
            sessions,
            next_page_token: page.next_page_token,
        })
    }

    /// One Exec (semantics §2.2), streaming through `feed`.
    async fn exec(&self, call: &Call, req: pb::ExecRequest, feed: &ExecFeed) -> Result<()> {
        let order = ExecOrder::try_from(req)?;
        let info = if order.session.is_empty() {
            // Auto-creation needs create, and exec on the session the caller would then own.
            self.authz
                .global(call, Action::Create, CallerIdentity::default())
                .await?;
            let uid = new_session_uid();
            let owner = self.authz.owner_for(call);
            self.authz
                .session(call, &[Action::Exec], &uid, &owner)
                .await?;
            let session = Session {
                harness: order.harness.clone(),
                ..Session::default()
            };
            let uid = self.create(uid, session, owner).await?;
            self.info(&uid).await?
        } else {
            let info = self
                .authorized(call, &[Action::Exec], &order.session)
                .await?;
            // Abandoning the unfinished turn cancels it: that needs cancel too.
            if order.turn.abandon_unfinished && self.authz.enforcing() {
                self.also_authorized(call, &[Action::Cancel], &info).await?;
            }
            info
        };
        let uid = info.row.uid.clone();
        let tail = self.live_tail(&info).await?;
        // The session frame goes first, before anything can refuse the turn, so even a failed
        // turn tells the client which session it was on (semantics §2.2 step 5).
        let first = render_with(&self.placer, info.clone(), &tail);
        feed.send(Update::Session(first)).await;
        // Watched before the turn starts, so no report of its tools is missed.
        let progress = self.placer.progress().watch(&uid);
        // Placement owns the turn from here: whether it is a new one or the continuation of an
        // unfinished one, its guard, its events and its compute once it ends.
        let (events, turn) = self.placer.run_turn(TurnCall {
            session: info,
            harness: order.harness,
            request: order.turn,
        });
        let (outcome, ()) = tokio::join!(turn, feed.forward(events, progress));
        match outcome {
            Ok(TurnRun::Ran(_)) => Ok(()),
            Err(err) if !err.is_park() => Err(err.into()),
            // A continuation, or a park: the final frame is the session as it now stands
            // (semantics §2.2 step 10).
            Ok(TurnRun::Continued(_)) | Err(_) => {
                feed.send(Update::Session(self.rendered(&uid).await?)).await;
                Ok(())
            }
        }
    }

    /// Opens a Replay: authorizes it and fixes its range; the records follow in a task.
    async fn replay(&self, call: &Call, req: pb::ReplayRequest) -> Result<ReplayStream> {
        // An unknown uid streams nothing (semantics §3.1); under a policy it is checked like
        // any session, with no owner, and streams nothing if that is allowed.
        if self.authz.enforcing() {
            match self.authorized(call, &[Action::Read], &req.session).await {
                Ok(_) | Err(ServerError::SessionNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let from = req.from_seq.max(1);
        let to = if req.to_seq <= 0 {
            self.journal.head(&req.session).await?
        } else {
            req.to_seq
        };
        let admitted = self.admission.stream()?;
        let (tx, stream) = replay_channel();
        let replayed = replay(
            Arc::clone(&self.journal),
            req.session,
            (from, to),
            tx,
            self.stop.clone(),
        );
        self.tasks.spawn(async move {
            replayed.await;
            drop(admitted);
        });
        Ok(stream)
    }

    /// One page of a session's records (the ReadRecords extension), authorized like Replay.
    async fn read_records(
        &self,
        call: &Call,
        req: pb::ReadRecordsRequest,
    ) -> Result<pb::ReadRecordsResponse> {
        if self.authz.enforcing() {
            match self.authorized(call, &[Action::Read], &req.session).await {
                Ok(_) | Err(ServerError::SessionNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        // From the records this host keeps of the session (validated against the journal's
        // head by one tail read), so a page costs its encoding, not a read and decode of it.
        let state = self
            .placer
            .states()
            .current(self.journal.as_ref(), &req.session)
            .await?;
        let head = state.head();
        let range = RecordPage::of(&req, head)?;
        let records = match range.last() {
            Some(last) => seq_range(state.records(), range.from, last),
            None => &[],
        };
        Ok(range.answer(records, head))
    }

    /// Opens a Watch (or, with `F` a [`pb::WatchUpdate`], a WatchUpdates): authorizes it as a
    /// read, subscribes to the session's commits (and its tools' progress), and streams from a
    /// task; a deleted session streams what is left up to its head and ends.
    async fn watch<F: WatchFrame>(
        &self,
        call: &Call,
        req: pb::WatchRequest,
        with_progress: bool,
    ) -> Result<ReceiverStream<std::result::Result<F, Status>>> {
        let order = WatchOrder::try_from(req)?;
        let info = self
            .authorized(call, &[Action::Read], &order.session)
            .await?;
        let admitted = self.admission.stream()?;
        let (tx, stream) = replay_channel();
        if info.deletion.is_deleted() {
            // Nothing commits after the delete intent: what there is, is all there will be.
            let replayed = replay(
                Arc::clone(&self.journal),
                order.session,
                (order.from_seq, info.last_seq),
                tx,
                self.stop.clone(),
            );
            self.tasks.spawn(async move {
                replayed.await;
                drop(admitted);
            });
        } else {
            // Watched before the first read, as the commits are: nothing falls between.
            let progress = with_progress.then(|| self.placer.progress().watch(&order.session));
            let follower =
                RecordFollower::new(Arc::clone(&self.journal), &order.session, order.from_seq);
            let watched = watch(follower, progress, tx, self.stop.clone());
            self.tasks.spawn(async move {
                watched.await;
                drop(admitted);
            });
        }
        Ok(stream)
    }

    async fn fork(&self, call: &Call, req: pb::ForkRequest) -> Result<pb::ForkResponse> {
        // Malformed requests are refused before anything is read, whoever sends them.
        let order = ForkOrder::try_from(req)?;
        let parent = order.parent.as_str();
        let info = self.authorized(call, &[Action::Fork], parent).await?;
        // A fork that checkpoints the parent's memory suspends it too (extensions §2). A parent
        // pending deletion is refused by the placer.
        if self.authz.enforcing() && self.placer.fork_is_stateful(parent).await? {
            self.also_authorized(call, &[Action::Suspend], &info)
                .await?;
        }
        let outcome = self
            .placer
            .fork(ForkCall {
                parent: order.parent.clone(),
                at_seq: order.at_seq,
                count: order.count,
                child_names: order.child_names,
                labels: order.labels,
            })
            .await?;
        let mut children = Vec::with_capacity(outcome.children.len());
        for child in &outcome.children {
            children.push(self.rendered(child).await?);
        }
        Ok(pb::ForkResponse { children })
    }

    /// The approval requests waiting for a decision that `call` may see, oldest first: an
    /// indexed read of the journal's projection, owner-filtered like a listing.
    async fn list_approvals(
        &self,
        call: &Call,
        req: pb::ListApprovalsRequest,
    ) -> Result<pb::ListApprovalsResponse> {
        let owner = self.list_filter(call).await?;
        let project = self.project_or_default(req.project);
        let page = self
            .journal
            .list_pending_approvals(ApprovalsQuery {
                project,
                page_size: i64::from(req.page_size),
                page_token: req.page_token,
                owner,
            })
            .await?;
        Ok(pb::ListApprovalsResponse {
            approvals: page.approvals.into_iter().map(approval_to_pb).collect(),
            next_page_token: page.next_page_token,
        })
    }

    async fn approve(&self, call: &Call, req: pb::ApproveRequest) -> Result<pb::ApproveResponse> {
        let ApproveOrder {
            session,
            mut decision,
        } = ApproveOrder::try_from(req)?;
        self.authorized(call, &[Action::Approve, Action::Read], &session)
            .await?;
        if self.authz.enforcing() {
            // Who decided is the verified caller, never what the request claims.
            decision.identity = IdentityRef {
                principal: String::new(),
                issuer: call.caller.issuer.clone(),
                subject: call.caller.subject.clone(),
            };
        }
        // A session pending deletion is refused by the placer.
        let record = self.placer.approve(&session, &decision).await?;
        Ok(pb::ApproveResponse {
            session: Some(self.rendered(&session).await?),
            decision: Some(record_to_pb(&record)),
        })
    }

    async fn suspend(&self, call: &Call, SessionUid(uid): SessionUid) -> Result<pb::Session> {
        self.authorized(call, &[Action::Suspend], &uid).await?;
        // A session pending deletion is refused by the placer.
        self.placer.suspend(&uid).await?;
        self.rendered(&uid).await
    }

    async fn resume(&self, call: &Call, SessionUid(uid): SessionUid) -> Result<pb::Session> {
        let info = self.authorized(call, &[Action::Resume], &uid).await?;
        // A resume that runs a decided approval's turn on is an exec too (extensions §2). A
        // session pending deletion is refused by the placer.
        if self.authz.enforcing() && self.placer.resume_drives_effects(&uid).await? {
            self.also_authorized(call, &[Action::Exec], &info).await?;
        }
        let admitted = self.admission.turn(false)?;
        let resumed = self
            .placer
            .resume(ResumeCall {
                session: uid.clone(),
                ..ResumeCall::default()
            })
            .await;
        drop(admitted);
        self.settle_compute(&uid).await;
        match resumed {
            // Waiting for a decision: the paused session is the answer (semantics §4.3 step 3).
            Err(e) if !e.is_park() => return Err(e.into()),
            Ok(_) | Err(_) => {}
        }
        self.rendered(&uid).await
    }

    async fn cancel(&self, call: &Call, order: CancelOrder) -> Result<pb::Session> {
        self.authorized(call, &[Action::Cancel], &order.session)
            .await?;
        self.placer
            .cancel(&order.session, &order.execution_id, &order.reason)
            .await?;
        self.rendered(&order.session).await
    }

    async fn delete(&self, call: &Call, SessionUid(uid): SessionUid) -> Result<pb::Session> {
        self.authorized(call, &[Action::Delete], &uid).await?;
        if self.placer.delete(&uid).await? {
            // Release its compute now rather than at the next reclaimer pass; a failure leaves
            // it queued for that pass.
            let placer = self.placer.clone();
            let session = uid.clone();
            self.tasks.spawn(async move {
                if let Err(err) = placer.reclaim(&session).await {
                    tracing::info!(session_uid = %session, error = %err, "reclaim deferred to the next pass");
                }
            });
        }
        self.rendered(&uid).await
    }
}

#[tonic::async_trait]
impl Sessions for SessionsService {
    async fn create_session(&self, request: Request<pb::CreateSessionRequest>) -> Rpc<pb::Session> {
        unary(method::CREATE, request, |call, req| async move {
            self.inner.create_session(&call, req).await
        })
        .await
    }

    async fn get_session(&self, request: Request<pb::GetSessionRequest>) -> Rpc<pb::Session> {
        unary(method::GET, request, |call, req| async move {
            let SessionUid(uid) = SessionUid::try_from(req)?;
            let info = self.inner.authorized(&call, &[Action::Read], &uid).await?;
            self.inner.rendered_info(info).await
        })
        .await
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Rpc<pb::ListSessionsResponse> {
        unary(method::LIST, request, |call, req| async move {
            self.inner.list(&call, req).await
        })
        .await
    }

    async fn delete_session(&self, request: Request<pb::DeleteSessionRequest>) -> Rpc<pb::Session> {
        unary(method::DELETE, request, |call, req| async move {
            self.inner.delete(&call, SessionUid::try_from(req)?).await
        })
        .await
    }

    type ExecStream = ExecStream;

    async fn exec(&self, request: Request<pb::ExecRequest>) -> Rpc<Self::ExecStream> {
        let (incoming, req) = Incoming::open(method::EXEC, request);
        // Over a limit, the call is refused before anything is read or written.
        let admitted = match self.inner.admission.turn(true) {
            Ok(admitted) => admitted,
            Err(err) => {
                let status = err.status();
                let _entered = incoming.span.enter();
                let _logged = finished::<()>(method::EXEC, std::time::Instant::now(), Err(err));
                return Err(incoming.refuse(status));
            }
        };
        let (feed, stream) = ExecFeed::channel(self.inner.stop.clone());
        let inner = Arc::clone(&self.inner);
        let call = incoming.call.clone();
        // The turn runs in its own task: a client that disconnects does not abort it.
        self.inner.tasks.spawn(incoming.run(async move {
            let started = std::time::Instant::now();
            let result = inner.exec(&call, req, &feed).await;
            if let Err(err) = &result {
                feed.fail(err).await;
            }
            let _logged = finished(method::EXEC, started, result);
            drop(admitted);
        }));
        Ok(incoming.respond(stream))
    }

    type ReplayStream = ReplayStream;

    async fn replay(&self, request: Request<pb::ReplayRequest>) -> Rpc<Self::ReplayStream> {
        unary(method::REPLAY, request, |call, req| async move {
            self.inner.replay(&call, req).await
        })
        .await
    }

    async fn approve(&self, request: Request<pb::ApproveRequest>) -> Rpc<pb::ApproveResponse> {
        unary(method::APPROVE, request, |call, req| async move {
            self.inner.approve(&call, req).await
        })
        .await
    }

    async fn read_records(
        &self,
        request: Request<pb::ReadRecordsRequest>,
    ) -> Rpc<pb::ReadRecordsResponse> {
        unary(method::READ_RECORDS, request, |call, req| async move {
            self.inner.read_records(&call, req).await
        })
        .await
    }

    async fn list_approvals(
        &self,
        request: Request<pb::ListApprovalsRequest>,
    ) -> Rpc<pb::ListApprovalsResponse> {
        unary(method::LIST_APPROVALS, request, |call, req| async move {
            self.inner.list_approvals(&call, req).await
        })
        .await
    }

    async fn cancel(&self, request: Request<pb::CancelRequest>) -> Rpc<pb::Session> {
        unary(method::CANCEL, request, |call, req| async move {
            self.inner.cancel(&call, CancelOrder::try_from(req)?).await
        })
        .await
    }

    async fn suspend(&self, request: Request<pb::SuspendRequest>) -> Rpc<pb::Session> {
        unary(method::SUSPEND, request, |call, req| async move {
            self.inner.suspend(&call, SessionUid::try_from(req)?).await
        })
        .await
    }

    async fn resume(&self, request: Request<pb::ResumeRequest>) -> Rpc<pb::Session> {
        unary(method::RESUME, request, |call, req| async move {
            self.inner.resume(&call, SessionUid::try_from(req)?).await
        })
        .await
    }

    type WatchStream = WatchStream;

    async fn watch(&self, request: Request<pb::WatchRequest>) -> Rpc<Self::WatchStream> {
        unary(method::WATCH, request, |call, req| async move {
            self.inner.watch(&call, req, false).await
        })
        .await
    }

    type WatchUpdatesStream = WatchUpdatesStream;

    async fn watch_updates(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Rpc<Self::WatchUpdatesStream> {
        unary(method::WATCH_UPDATES, request, |call, req| async move {
            self.inner.watch(&call, req, true).await
        })
        .await
    }

    async fn fork(&self, request: Request<pb::ForkRequest>) -> Rpc<pb::ForkResponse> {
        unary(method::FORK, request, |call, req| async move {
            self.inner.fork(&call, req).await
        })
        .await
    }
}
