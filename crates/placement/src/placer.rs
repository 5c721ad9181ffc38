//! The [`Placer`]: every operation that puts a session's harness on compute or takes it off
//! (semantics §2.3, §4, §5.2 step 4, extensions §3 and §5).
//!
//! ```text
//! exec    guard ─ checks ─ gate ─ create ─ dial ─ re-gate ─ instance ─ Controller::exec (fence minted in its opening commit)
//! resume  guard ─ route ─ park? ─ gate ─ restore ─ dial ─ re-gate ─ instance ─ fence ─ resume ─ RESUME
//! suspend route ─ guard ─ snapshot(EXTERNAL) ─ fence ─ SUSPEND{ref}
//! fork    gate ─ [memory: fence ─ snapshot ─ SUSPEND at at_seq] ─ N × (runtime fork ─ prefix ─ FORK)
//! ```
//!
//! One fence is minted per Exec/Resume invocation and bound to both the incarnation and the
//! controller, so any later writer supersedes it mid flight. An Exec mints it in the same commit
//! as the turn's opening records, after their cursor check, so a caller that lost the race to
//! the head never supersedes the one that won it. Nothing is provisioned or journaled
//! before the admission gate passes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentsessions_api::{
    ApiError, ApprovalDecision, ApprovalRef, Delta, Descriptor, Event, EventBody, EventKind,
    EventSink, ForkOpts, Harness, IdentityRef, Incarnation, Lifecycle, LifecycleKind,
    ModelProvider, SessionSpec, SnapshotKind, SnapshotRef, Start, StatusCode, Timestamp,
};
use agentsessions_controller::approval::ApprovalScan;
use agentsessions_controller::{
    Cancellations, Controller, ControllerError, ExecRequest, Observer, ResumeOutcome, ToolExecutor,
    TurnOutcome,
};
use agentsessions_journal::rules::new_session_uid;
use agentsessions_journal::{Journal, JournalError, LogRecord, SessionInfo, SessionRow};
use async_trait::async_trait;

use crate::backend::DescriptorSource;
use crate::error::{PlacementError, Result, RuntimeOp};
use crate::guard::{Held, SessionGuards};
use crate::history;
use crate::registry::{Registry, Route};

/// Most children one Fork may create (semantics §4.4).
pub const MAX_FORK_COUNT: usize = 128;
/// Bound on a harness's Describe during admission (semantics §2.3 step 4).
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on each best-effort Stop of a fork child after a failed fan-out.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long Cancel waits for the cancelled turn to unwind.
const CANCEL_SETTLE: Duration = Duration::from_secs(5);

/// One Exec.
#[derive(Clone, Default)]
pub struct ExecCall {
    /// The session (must exist).
    pub session: String,
    /// Per-turn harness override; empty = the session's stored harness.
    pub harness: String,
    /// The turn.
    pub request: ExecRequest,
    /// Receives committed records and deltas live.
    pub observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for ExecCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecCall")
            .field("session", &self.session)
            .field("harness", &self.harness)
            .finish_non_exhaustive()
    }
}

/// One Resume (or approval recovery through an inputless Exec).
#[derive(Clone, Default)]
pub struct ResumeCall {
    /// The session.
    pub session: String,
    /// Bound on the re-driven turn.
    pub deadline: Option<SystemTime>,
    /// Strict cursor check before anything runs (recovery through Exec); `None` skips it.
    pub expected_last_seq: Option<i64>,
    /// Receives committed records and deltas live.
    pub observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for ResumeCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResumeCall")
            .field("session", &self.session)
            .field("expected_last_seq", &self.expected_last_seq)
            .finish_non_exhaustive()
    }
}

/// One Fork (semantics §4.4). The caller has validated `identity` (it must be unset).
#[derive(Debug, Clone, Default)]
pub struct ForkCall {
    /// The parent session.
    pub parent: String,
    /// Fork point; 0 or less = the parent's head.
    pub at_seq: i64,
    /// Children to create, 1..=[`MAX_FORK_COUNT`].
    pub count: usize,
    /// Empty, or exactly `count` names.
    pub child_names: Vec<String>,
    /// The children's labels (never merged with the parent's).
    pub labels: BTreeMap<String, String>,
}

/// What a Fork created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForkOutcome {
    /// The fork point actually used.
    pub at_seq: i64,
    /// Child uids in order.
    pub children: Vec<String>,
    /// The checkpoint every child was created from (`{local: parent}` for a stateless fork).
    pub source: SnapshotRef,
}

/// Places sessions' harnesses on their routes' runtimes and drives the controller. Cheap to
/// clone; one per host.
#[derive(Clone)]
pub struct Placer {
    journal: Arc<dyn Journal>,
    model: Arc<dyn ModelProvider>,
    registry: Registry,
    guards: SessionGuards,
    cancellations: Cancellations,
    tools: Option<Arc<dyn ToolExecutor>>,
    stream_deltas: bool,
}

impl std::fmt::Debug for Placer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placer")
            .field("registry", &self.registry)
            .field("stream_deltas", &self.stream_deltas)
            .finish_non_exhaustive()
    }
}

/// Notes the running execution on the guard, then forwards to the caller's observer.
struct Tracked {
    inner: Option<Arc<dyn Observer>>,
    held: Arc<Held>,
}

impl Observer for Tracked {
    fn record(&self, record: &LogRecord) {
        if record.event.kind == EventKind::ExecutionStart {
            self.held.set_execution(&record.event.execution_id);
        }
        if let Some(inner) = &self.inner {
            inner.record(record);
        }
    }

    fn delta(&self, delta: &Delta) {
        if let Some(inner) = &self.inner {
            inner.delta(delta);
        }
    }
}

/// Stands in for the harness where the controller needs one but never runs it (Approve).
struct NoHarness;

#[async_trait]
impl Harness for NoHarness {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Err(ApiError::status(
            StatusCode::FailedPrecondition,
            "recording a decision does not run a harness",
        ))
    }

    async fn run(&self, _start: &Start, _sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        Err(ApiError::status(
            StatusCode::FailedPrecondition,
            "recording a decision does not run a harness",
        ))
    }
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

fn runtime_err(op: RuntimeOp, session: &str) -> impl FnOnce(ApiError) -> PlacementError {
    let session = session.to_owned();
    move |source| PlacementError::Runtime {
        op,
        session,
        source,
    }
}

fn head_of(records: &[LogRecord]) -> i64 {
    records.last().map_or(0, |r| r.seq)
}

fn unavailable(err: &ApiError) -> bool {
    err.leaves().any(|leaf| {
        matches!(
            leaf,
            ApiError::Status {
                code: StatusCode::Unavailable | StatusCode::DeadlineExceeded,
                ..
            }
        )
    })
}

/// Describes `harness` within the admission bound, never past the caller's deadline.
async fn describe_bounded(
    name: &str,
    harness: &dyn Harness,
    deadline: Option<SystemTime>,
) -> Result<Descriptor> {
    let remaining = deadline.map(|d| {
        d.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
    });
    let bound = remaining.map_or(DESCRIBE_TIMEOUT, |r| r.min(DESCRIBE_TIMEOUT));
    let caller_bound = remaining.is_some_and(|r| r <= DESCRIBE_TIMEOUT);
    match tokio::time::timeout(bound, harness.describe()).await {
        Ok(Ok(descriptor)) => Ok(descriptor),
        Ok(Err(source)) if unavailable(&source) => Err(PlacementError::HarnessUnavailable {
            harness: name.to_owned(),
            source,
        }),
        Ok(Err(source)) => Err(PlacementError::DescribeFailed {
            harness: name.to_owned(),
            source,
        }),
        Err(_) if caller_bound => Err(PlacementError::AdmissionInterrupted {
            harness: name.to_owned(),
        }),
        Err(_) => Err(PlacementError::HarnessUnavailable {
            harness: name.to_owned(),
            source: ApiError::status(
                StatusCode::DeadlineExceeded,
                "the harness did not describe itself within 10s",
            ),
        }),
    }
}

impl Placer {
    /// A placer over `journal` serving `registry`'s routes, calling models through `model`.
    pub fn new(
        journal: Arc<dyn Journal>,
        model: Arc<dyn ModelProvider>,
        registry: Registry,
    ) -> Self {
        Self {
            journal,
            model,
            registry,
            guards: SessionGuards::default(),
            cancellations: Cancellations::default(),
            tools: None,
            stream_deltas: false,
        }
    }

    /// Runs controller-mediated and approved tool calls through `tools`.
    #[must_use]
    pub fn with_tools(mut self, tools: Arc<dyn ToolExecutor>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Whether turns ask providers to stream deltas (transport only).
    #[must_use]
    pub fn with_stream_deltas(mut self, stream: bool) -> Self {
        self.stream_deltas = stream;
        self
    }

    /// The routes.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The journal.
    pub fn journal(&self) -> &Arc<dyn Journal> {
        &self.journal
    }

    /// Whether an operation holds `session` on this host.
    pub fn is_busy(&self, session: &str) -> bool {
        self.guards.is_busy(session)
    }

    async fn info(&self, uid: &str) -> Result<SessionInfo> {
        Ok(self.journal.session_info(uid).await?)
    }

    /// The session's records, refusing a session pending deletion: by its stored state (an
    /// unknown one counts as deleted) or by a delete marker in a log written before that state
    /// was stored.
    async fn live_records(&self, info: &SessionInfo) -> Result<Vec<LogRecord>> {
        let uid = info.row.uid.as_str();
        if info.deletion.is_deleted() {
            return Err(PlacementError::DeletionPending(uid.to_owned()));
        }
        let records = self.journal.read(uid, 1, 0).await?;
        if history::deleted(&records) {
            return Err(PlacementError::DeletionPending(uid.to_owned()));
        }
        Ok(records)
    }

    /// The admission gate of semantics §4.1 on one descriptor.
    fn gate(route: &Route, descriptor: &Descriptor) -> Result<()> {
        let expected = route.backend.expected_id();
        if !expected.is_empty() && descriptor.id != expected {
            return Err(PlacementError::DescriptorMismatch {
                harness: route.name.clone(),
                expected: expected.to_owned(),
                reported: descriptor.id.clone(),
            });
        }
        if !descriptor
            .capabilities
            .can_place_on(route.backend.capabilities())
        {
            return Err(PlacementError::Unplaceable {
                harness: route.name.clone(),
                reason: "it requires memory snapshots and its runtime cannot take them; serve it \
                         on a memory-snapshot runtime"
                    .into(),
            });
        }
        Ok(())
    }

    /// Describes through the route's descriptor source and gates, before any compute exists.
    async fn admit(&self, route: &Route, deadline: Option<SystemTime>) -> Result<Descriptor> {
        let descriptor = match &route.backend.source {
            DescriptorSource::Declared(d) => d.clone(),
            DescriptorSource::Probe(h) => {
                describe_bounded(&route.name, h.as_ref(), deadline).await?
            }
        };
        Self::gate(route, &descriptor)?;
        Ok(descriptor)
    }

    /// Dials the incarnation and repeats the gate on the dialed harness (the live re-check).
    async fn dial(
        &self,
        route: &Route,
        incarnation: &Incarnation,
        deadline: Option<SystemTime>,
    ) -> Result<Arc<dyn Harness>> {
        let harness = route
            .backend
            .dialer
            .dial(incarnation)
            .await
            .map_err(|source| PlacementError::Dial {
                harness: route.name.clone(),
                address: incarnation.address.clone(),
                source,
            })?;
        let descriptor = describe_bounded(&route.name, harness.as_ref(), deadline).await?;
        Self::gate(route, &descriptor)?;
        Ok(harness)
    }

    /// Refuses compute that is not the instance the journal recorded (extensions §5).
    fn check_instance(
        session: &str,
        harness: &str,
        records: &[LogRecord],
        incarnation: &Incarnation,
    ) -> Result<()> {
        if incarnation.compute_instance.is_empty() {
            return Ok(());
        }
        let recorded = history::recorded_instance(records, harness);
        if !recorded.is_empty() && recorded != incarnation.compute_instance {
            return Err(PlacementError::InstanceMismatch {
                session: session.to_owned(),
                recorded,
                placed: incarnation.compute_instance.clone(),
            });
        }
        Ok(())
    }

    /// What the runtime is told about the session. The journal reads are taken under the
    /// session guard right before the runtime call, so on one host nothing can move them.
    fn spec(session: &str, harness: &str, records: &[LogRecord]) -> SessionSpec {
        let turns = history::started_turns(records, harness);
        let checkpoint = history::recorded_checkpoint(records, session);
        SessionSpec {
            session_uid: session.to_owned(),
            harness: harness.to_owned(),
            started_turns: Some(Arc::new(move || Ok(turns))),
            recorded_checkpoint: Some(Arc::new(move || Ok(checkpoint.clone()))),
            ..SessionSpec::default()
        }
    }

    fn controller(
        &self,
        name: &str,
        harness: Arc<dyn Harness>,
        session: &str,
        fence: i64,
        instance: &str,
        observer: Arc<dyn Observer>,
    ) -> Controller {
        let controller = Controller::new(
            Arc::clone(&self.journal),
            harness,
            Arc::clone(&self.model),
            session,
        )
        .with_fence(fence)
        .with_registry_name(name)
        .with_cancellations(self.cancellations.clone())
        .with_stream_deltas(self.stream_deltas)
        .with_compute_instance(instance)
        .with_observer(observer);
        match &self.tools {
            Some(tools) => controller.with_tools(Arc::clone(tools)),
            None => controller,
        }
    }

    /// Runs one turn (semantics §2.3).
    ///
    /// # Errors
    /// [`PlacementError::SessionBusy`]; `Journal(SessionNotFound)`; `DeletionPending`;
    /// `Controller(ApprovalBlocked)`; `Journal(Conflict)` for a stale cursor (before any fence);
    /// routing and admission refusals (nothing provisioned or journaled); runtime, dial and
    /// instance failures (nothing journaled); the controller's errors. An approval park comes
    /// back as `Controller(Parked)` after the hand-off (SUSPEND recorded).
    pub async fn exec(&self, call: ExecCall) -> Result<TurnOutcome> {
        let uid = call.session.as_str();
        let held = Arc::new(self.guards.try_take(uid)?);
        let info = self.info(uid).await?;
        let records = self.live_records(&info).await?;
        let scan = ApprovalScan::scan(&records, 0)?;
        if let Some(gate) = scan.selected()
            && gate.blocks_new_input()
        {
            return Err(ControllerError::ApprovalBlocked {
                execution_id: gate.execution_id.clone(),
                tool_call_id: gate.call.id.clone(),
            }
            .into());
        }
        // A stale cursor is refused before a fence is minted: minting would supersede the writer
        // that moved the head (perhaps on another host) and cost it its turn.
        let head = head_of(&records);
        if let Some(expected) = call.request.expected_last_seq
            && expected != head
        {
            return Err(JournalError::Conflict {
                session: uid.to_owned(),
                expected,
                actual: head,
            }
            .into());
        }
        self.registry
            .check_route(uid, &info.row.harness, &call.harness)?;
        let name = if call.harness.is_empty() {
            &info.row.harness
        } else {
            &call.harness
        };
        let route = self.registry.resolve(name)?;
        let deadline = call.request.deadline;
        self.admit(&route, deadline).await?;
        let spec = Self::spec(uid, &route.name, &records);
        let mut incarnation = route
            .backend
            .runtime
            .create(&spec)
            .await
            .map_err(runtime_err(RuntimeOp::Create, uid))?;
        let harness = self.dial(&route, &incarnation, deadline).await?;
        Self::check_instance(uid, &route.name, &records, &incarnation)?;
        let observer = Arc::new(Tracked {
            inner: call.observer.clone(),
            held,
        });
        // The incarnation's fence is minted in the turn's opening commit, after its cursor
        // check: a caller that lost the race to the head changes nothing, not even the fence.
        let controller = self
            .controller(
                &route.name,
                harness,
                uid,
                0,
                &incarnation.compute_instance,
                observer,
            )
            .minting_fence();
        match controller.exec_on(call.request, records).await {
            Err(ControllerError::Parked(park)) => {
                incarnation.fence_token = controller.fence();
                drop(controller);
                self.hand_off(&route, &incarnation, &park, call.observer.as_deref())
                    .await?;
                Err(ControllerError::Parked(park).into())
            }
            other => Ok(other?),
        }
    }

    /// The approval park hand-off (semantics §5.2 step 4): the park must be the journal's open
    /// request; the incarnation is snapshotted and a SUSPEND is written at the captured head with
    /// the invocation's fence.
    async fn hand_off(
        &self,
        route: &Route,
        incarnation: &Incarnation,
        park: &ApprovalRef,
        observer: Option<&dyn Observer>,
    ) -> Result<()> {
        let uid = incarnation.id.as_str();
        let records = self.journal.read(uid, 1, 0).await?;
        let scan = ApprovalScan::scan(&records, 0)?;
        let matches = scan
            .selected()
            .is_some_and(|gate| gate.is_pending() && gate.park_ref() == *park);
        if !matches {
            return Err(ControllerError::ReplayDiverged(format!(
                "the park for tool call {:?} is not the session's open approval request",
                park.tool_call_id
            ))
            .into());
        }
        let mut target = incarnation.clone();
        target.recorded_checkpoint = history::recorded_checkpoint(&records, uid);
        let snapshot = route
            .backend
            .runtime
            .snapshot(&target, SnapshotKind::External)
            .await
            .map_err(runtime_err(RuntimeOp::Snapshot, uid))?;
        let record = self
            .journal
            .append(
                uid,
                head_of(&records),
                incarnation.fence_token,
                lifecycle(LifecycleKind::Suspend, String::new(), Some(snapshot)),
            )
            .await?;
        if let Some(observer) = observer {
            observer.record(&record);
        }
        Ok(())
    }

    /// The route for Resume/Suspend/recovery: the pending execution's recorded harness when there
    /// is one (it must be served here), else the stored one; the pin rule applies to the choice.
    fn recorded_route(
        &self,
        uid: &str,
        info: &SessionInfo,
        records: &[LogRecord],
    ) -> Result<Route> {
        let chosen = match history::pending_harness(records) {
            Some(recorded) if !self.registry.contains(&recorded) => {
                return Err(PlacementError::RecordedHarnessNotServed {
                    session: uid.to_owned(),
                    harness: recorded,
                });
            }
            Some(recorded) => recorded,
            None => info.row.harness.clone(),
        };
        self.registry.check_route(uid, &info.row.harness, &chosen)?;
        self.registry.resolve(&chosen)
    }

    /// Resumes the session (semantics §4.3): re-drives an interrupted execution at most once per
    /// effect, or does nothing when none is pending, and records LIFECYCLE RESUME.
    ///
    /// # Errors
    /// As [`Placer::exec`], plus `RecordedHarnessNotServed`, `Controller(InheritedToolIntent)`; an
    /// undecided approval comes back as `Controller(Parked)` without touching compute.
    pub async fn resume(&self, call: ResumeCall) -> Result<ResumeOutcome> {
        let uid = call.session.as_str();
        let held = Arc::new(self.guards.try_take(uid)?);
        let info = self.info(uid).await?;
        let records = self.live_records(&info).await?;
        let route = self.recorded_route(uid, &info, &records)?;
        let head = head_of(&records);
        if let Some(expected) = call.expected_last_seq
            && expected != head
        {
            return Err(JournalError::Conflict {
                session: uid.to_owned(),
                expected,
                actual: head,
            }
            .into());
        }
        let scan = ApprovalScan::scan(&records, 0)?;
        if let Some(gate) = scan.selected()
            && !gate.completed
            && gate.receipt.is_none()
        {
            if gate.inherited {
                return Err(ControllerError::InheritedToolIntent {
                    tool_call_id: gate.call.id.clone(),
                }
                .into());
            }
            if gate.request_seq > 0 && gate.decision.is_none() {
                // Waiting for a decision: no runtime work until one is recorded.
                return Err(ControllerError::Parked(gate.park_ref()).into());
            }
        }
        self.admit(&route, call.deadline).await?;
        let checkpoint = history::recorded_checkpoint(&records, uid);
        let source = if checkpoint.is_empty() {
            SnapshotRef {
                local: uid.to_owned(),
                ..SnapshotRef::default()
            }
        } else {
            checkpoint
        };
        let recorded = history::recorded_instance(&records, &route.name);
        let runtime = &route.backend.runtime;
        let restored = match runtime.as_instance_restorer() {
            Some(restorer) => {
                let read = move || Ok(recorded.clone());
                restorer.restore_instance(&source, &read).await
            }
            None => runtime.restore(&source).await,
        };
        let mut incarnation = restored.map_err(runtime_err(RuntimeOp::Restore, uid))?;
        let harness = self.dial(&route, &incarnation, call.deadline).await?;
        Self::check_instance(uid, &route.name, &records, &incarnation)?;
        let fence = self.journal.new_fence(uid).await?;
        incarnation.fence_token = fence;
        let observer = Arc::new(Tracked {
            inner: call.observer.clone(),
            held,
        });
        let controller = self.controller(
            &route.name,
            harness,
            uid,
            fence,
            &incarnation.compute_instance,
            observer,
        );
        match controller.resume_until(call.deadline).await {
            Err(ControllerError::Parked(park)) => {
                drop(controller);
                self.hand_off(&route, &incarnation, &park, call.observer.as_deref())
                    .await?;
                Err(ControllerError::Parked(park).into())
            }
            Err(e) => Err(e.into()),
            Ok(outcome) => {
                let head = self.journal.head(uid).await?;
                let record = self
                    .journal
                    .append(
                        uid,
                        head,
                        fence,
                        lifecycle(LifecycleKind::Resume, String::new(), None),
                    )
                    .await?;
                if let Some(observer) = &call.observer {
                    observer.record(&record);
                }
                Ok(outcome)
            }
        }
    }

    /// Suspends the session cold (semantics §4.2): Snapshot(EXTERNAL), then LIFECYCLE SUSPEND
    /// carrying the ref under a fresh fence. Never stops compute.
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`, `DeletionPending`, routing refusals, `SessionBusy`, runtime
    /// failures (MemoryStateLost, CheckpointPending, …; nothing journaled), journal failures.
    pub async fn suspend(&self, session: &str) -> Result<SnapshotRef> {
        let info = self.info(session).await?;
        let records = self.live_records(&info).await?;
        let scan = ApprovalScan::scan(&records, 0)?;
        let open_gate = scan
            .selected()
            .is_some_and(|g| !g.completed && g.receipt.is_none());
        let route = if open_gate {
            self.recorded_route(session, &info, &records)?
        } else {
            self.registry.check_route(session, &info.row.harness, "")?;
            self.registry.resolve(&info.row.harness)?
        };
        let _held = self.guards.try_take(session)?;
        let target = Incarnation {
            id: session.to_owned(),
            compute_instance: history::recorded_instance(&records, &route.name),
            recorded_checkpoint: history::recorded_checkpoint(&records, session),
            ..Incarnation::default()
        };
        let snapshot = route
            .backend
            .runtime
            .snapshot(&target, SnapshotKind::External)
            .await
            .map_err(runtime_err(RuntimeOp::Snapshot, session))?;
        let fence = self.journal.new_fence(session).await?;
        let head = self.journal.head(session).await?;
        self.journal
            .append(
                session,
                head,
                fence,
                lifecycle(
                    LifecycleKind::Suspend,
                    String::new(),
                    Some(snapshot.clone()),
                ),
            )
            .await?;
        Ok(snapshot)
    }

    /// Forks the session into `count` children (semantics §4.4). A stateless harness forks at any
    /// seq from the journal alone; a memory harness forks at the head only, from exactly one
    /// parent checkpoint (a SUSPEND at `at_seq + 1` on the parent) shared by every child. Fork
    /// does not take the session guard.
    ///
    /// # Errors
    /// `ForkCount`, `ChildNames`, `Journal(SessionNotFound)`, `DeletionPending`,
    /// `ForkOutOfRange`, admission refusals, `ForkNotAtHead` (no side effects),
    /// `Journal(Conflict)` when the head moved, `Unplaceable` for a checkpoint without a durable
    /// copy (the SUSPEND stays), runtime fork failures (provisioned children are stopped).
    pub async fn fork(&self, call: ForkCall) -> Result<ForkOutcome> {
        let parent = call.parent.as_str();
        if !(1..=MAX_FORK_COUNT).contains(&call.count) {
            return Err(PlacementError::ForkCount { count: call.count });
        }
        if !call.child_names.is_empty() && call.child_names.len() != call.count {
            return Err(PlacementError::ChildNames {
                count: call.count,
                names: call.child_names.len(),
            });
        }
        let info = self.info(parent).await?;
        let records = self.live_records(&info).await?;
        let route = self.registry.resolve(&info.row.harness)?;
        let descriptor = self.admit(&route, None).await?;
        let head = head_of(&records);
        let at = if call.at_seq <= 0 { head } else { call.at_seq };
        if at < 1 || at > head {
            return Err(PlacementError::ForkOutOfRange { at, head });
        }
        let memory = descriptor
            .capabilities
            .resumability
            .requires_memory_snapshot();
        let source = if memory {
            self.checkpoint_for_fork(&route, parent, at, head, &records)
                .await?
        } else {
            SnapshotRef {
                local: parent.to_owned(),
                ..SnapshotRef::default()
            }
        };
        let mut provisioned: Vec<Incarnation> = Vec::with_capacity(call.count);
        let mut children = Vec::with_capacity(call.count);
        for _ in 0..call.count {
            let child = new_session_uid();
            match self.fork_child(&route, &source, parent, at, &child).await {
                Ok(incarnation) => {
                    provisioned.push(incarnation);
                    children.push(child);
                }
                Err(e) => {
                    self.stop_all(&route, &provisioned).await;
                    return Err(e);
                }
            }
        }
        for (i, child) in children.iter().enumerate() {
            self.journal
                .put_session(SessionRow {
                    uid: child.clone(),
                    project: info.row.project.clone(),
                    name: call.child_names.get(i).cloned().unwrap_or_default(),
                    harness: info.row.harness.clone(),
                    model: info.row.model.clone(),
                    parent_uid: parent.to_owned(),
                    fork_seq: at,
                    labels: call.labels.clone(),
                    annotations: info.row.annotations.clone(),
                    origin: info.row.origin.clone(),
                    identity: IdentityRef::default(),
                    created_at: None,
                    // Owned children: the parent's owner, in the same row that publishes them.
                    owner: info.row.owner.clone(),
                })
                .await?;
        }
        Ok(ForkOutcome {
            at_seq: at,
            children,
            source,
        })
    }

    /// The one parent checkpoint of a memory fork: fence, head re-check, Snapshot(EXTERNAL), and
    /// SUSPEND{ref} appended at `at` on the parent.
    async fn checkpoint_for_fork(
        &self,
        route: &Route,
        parent: &str,
        at: i64,
        head: i64,
        records: &[LogRecord],
    ) -> Result<SnapshotRef> {
        if at != head {
            return Err(PlacementError::ForkNotAtHead {
                harness: route.name.clone(),
                at,
                head,
            });
        }
        let fence = self.journal.new_fence(parent).await?;
        let now = self.journal.head(parent).await?;
        if now != at {
            return Err(JournalError::Conflict {
                session: parent.to_owned(),
                expected: at,
                actual: now,
            }
            .into());
        }
        let target = Incarnation {
            id: parent.to_owned(),
            compute_instance: history::recorded_instance(records, &route.name),
            recorded_checkpoint: history::recorded_checkpoint(records, parent),
            fence_token: fence,
            ..Incarnation::default()
        };
        let snapshot = route
            .backend
            .runtime
            .snapshot(&target, SnapshotKind::External)
            .await
            .map_err(runtime_err(RuntimeOp::Snapshot, parent))?;
        self.journal
            .append(
                parent,
                at,
                fence,
                lifecycle(
                    LifecycleKind::Suspend,
                    String::new(),
                    Some(snapshot.clone()),
                ),
            )
            .await?;
        if snapshot.external_uri.is_empty() {
            return Err(PlacementError::Unplaceable {
                harness: route.name.clone(),
                reason: "its checkpoint has no durable copy to fork from; the parent is suspended \
                         and can be resumed, and a retry must fork at the new head"
                    .into(),
            });
        }
        Ok(snapshot)
    }

    /// One child: runtime fork, then the journal prefix and the FORK marker.
    async fn fork_child(
        &self,
        route: &Route,
        source: &SnapshotRef,
        parent: &str,
        at: i64,
        child: &str,
    ) -> Result<Incarnation> {
        let incarnation = route
            .backend
            .runtime
            .fork(
                source,
                &ForkOpts {
                    child_session_uid: child.to_owned(),
                },
            )
            .await
            .map_err(runtime_err(RuntimeOp::Fork, child))?;
        let journaled = async {
            let fence = self.fork_journal(parent, at, child).await?;
            let mut marker = lifecycle(LifecycleKind::Fork, format!("{parent}@{at}"), None);
            if let Some(EventBody::Lifecycle(l)) = &mut marker.body {
                l.compute_instance.clone_from(&incarnation.compute_instance);
            }
            self.journal.append(child, at, fence, marker).await?;
            Ok::<_, PlacementError>(())
        };
        if let Err(e) = journaled.await {
            self.stop_all(route, std::slice::from_ref(&incarnation))
                .await;
            return Err(e);
        }
        Ok(incarnation)
    }

    /// The journal part of a fork, in one place: the child shares the parent's records up to
    /// `at` (no copy) and gets its first fence.
    async fn fork_journal(&self, parent: &str, at: i64, child: &str) -> Result<i64> {
        Ok(self.journal.fork_session(parent, at, child).await?)
    }

    /// Best-effort teardown of children provisioned by a failed fan-out.
    async fn stop_all(&self, route: &Route, incarnations: &[Incarnation]) {
        for incarnation in incarnations {
            let stopped =
                tokio::time::timeout(STOP_TIMEOUT, route.backend.runtime.stop(incarnation)).await;
            if !matches!(stopped, Ok(Ok(()))) {
                tracing::warn!(child = %incarnation.id, "could not stop a fork child after a failed fork");
            }
        }
    }

    /// Records an approval decision (semantics §5.5) under the session guard. Never runs the
    /// harness.
    ///
    /// # Errors
    /// `SessionBusy`, `Journal(SessionNotFound)`, `DeletionPending`,
    /// `Controller(InvalidApprovalDecision)`, journal failures.
    pub async fn approve(&self, session: &str, decision: &ApprovalDecision) -> Result<LogRecord> {
        let _held = self.guards.try_take(session)?;
        let info = self.info(session).await?;
        self.live_records(&info).await?;
        let controller = Controller::new(
            Arc::clone(&self.journal),
            Arc::new(NoHarness),
            Arc::clone(&self.model),
            session,
        );
        Ok(controller.approve(decision, Timestamp::now()).await?)
    }

    /// Cancels the running execution of `session` (`execution_id` empty = the one running on
    /// this host) and waits briefly for it to unwind (LIFECYCLE CANCEL and its END written).
    /// Returns the cancelled execution id.
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`; `NothingToCancel` when nothing runs under that id here.
    pub async fn cancel(&self, session: &str, execution_id: &str, reason: &str) -> Result<String> {
        self.info(session).await?;
        let execution = if execution_id.is_empty() {
            self.guards.running_execution(session)
        } else {
            Some(execution_id.to_owned())
        };
        let reason = if reason.is_empty() {
            "cancelled by request"
        } else {
            reason
        };
        let Some(execution) = execution.filter(|id| self.cancellations.cancel(id, reason)) else {
            return Err(PlacementError::NothingToCancel {
                session: session.to_owned(),
                detail: if execution_id.is_empty() {
                    String::new()
                } else {
                    format!(" under execution {execution_id:?}")
                },
            });
        };
        let settle = tokio::time::Instant::now() + CANCEL_SETTLE;
        while self.guards.is_busy(session) && tokio::time::Instant::now() < settle {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(execution)
    }

    /// Records the durable intent to delete (extensions §3): LIFECYCLE DELETE under a fresh fence.
    /// Idempotent: returns false when the intent was already recorded. Compute is left to a
    /// reclaimer.
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`, `SessionBusy`, journal failures.
    pub async fn delete(&self, session: &str) -> Result<bool> {
        let info = self.info(session).await?;
        if info.deletion.is_deleted() {
            return Ok(false);
        }
        let records = self.journal.read(session, 1, 0).await?;
        if history::deleted(&records) {
            return Ok(false);
        }
        let _held = self.guards.try_take(session)?;
        let fence = self.journal.new_fence(session).await?;
        let head = self.journal.head(session).await?;
        self.journal
            .append(
                session,
                head,
                fence,
                lifecycle(LifecycleKind::Delete, String::new(), None),
            )
            .await?;
        Ok(true)
    }

    /// Releases what a deleted session still holds (extensions §3): stops its incarnation on
    /// its route's runtime, which frees the compute and whatever snapshots the backend keeps for
    /// it, then marks the session reclaimed. Its records stay: fork children may read them as
    /// their prefix, and Get and Replay keep working. Idempotent.
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`; `Journal(InvalidArgument)` for a session that is not being
    /// deleted; `SessionBusy` while an operation still holds it; `UnknownHarness` when its
    /// harness is not served here (this host cannot reach its compute); `Runtime { op: Stop }`.
    pub async fn reclaim(&self, session: &str) -> Result<()> {
        let info = self.info(session).await?;
        agentsessions_journal::rules::check_reclaimable(session, &info.deletion)?;
        if info.reclaimed_at.is_some() {
            return Ok(());
        }
        let _held = self.guards.try_take(session)?;
        let route = self.registry.resolve(&info.row.harness)?;
        let records = self.journal.read(session, 1, 0).await?;
        let target = Incarnation {
            id: session.to_owned(),
            compute_instance: history::recorded_instance(&records, &route.name),
            recorded_checkpoint: history::recorded_checkpoint(&records, session),
            ..Incarnation::default()
        };
        tokio::time::timeout(STOP_TIMEOUT, route.backend.runtime.stop(&target))
            .await
            .unwrap_or_else(|_| {
                Err(ApiError::status(
                    StatusCode::DeadlineExceeded,
                    format!("stop did not finish within {}s", STOP_TIMEOUT.as_secs()),
                ))
            })
            .map_err(runtime_err(RuntimeOp::Stop, session))?;
        self.journal.mark_reclaimed(session).await?;
        tracing::info!(session_uid = session, "deleted session reclaimed");
        Ok(())
    }

    /// One reclaimer pass: [`Placer::reclaim`] on up to `limit` deleted, unreclaimed sessions.
    /// A session that cannot be reclaimed now stays queued for the next pass.
    ///
    /// # Errors
    /// Only the failure to read the queue; each session's failure is in the report.
    pub async fn reclaim_pending(&self, limit: usize) -> Result<ReclaimReport> {
        let mut report = ReclaimReport::default();
        for session in self.journal.pending_deletions(limit).await? {
            match self.reclaim(&session).await {
                Ok(()) => report.reclaimed.push(session),
                Err(err) => {
                    tracing::warn!(session_uid = %session, error = %err, "deleted session not reclaimed yet");
                    report.failed.push((session, err));
                }
            }
        }
        Ok(report)
    }

    /// Whether forking `parent` checkpoints the parent's memory (a SUSPEND on the parent), which
    /// authorization treats as a suspend too (extensions §2). Reads the route's declared
    /// descriptor; nothing is provisioned or written.
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`, routing and admission refusals.
    pub async fn fork_is_stateful(&self, parent: &str) -> Result<bool> {
        let info = self.info(parent).await?;
        let route = self.registry.resolve(&info.row.harness)?;
        let descriptor = self.admit(&route, None).await?;
        Ok(descriptor
            .capabilities
            .resumability
            .requires_memory_snapshot())
    }

    /// Whether resuming `session` would run its turn on: a decided approval whose turn has not
    /// finished (extensions §2: such a resume also needs exec).
    ///
    /// # Errors
    /// Journal failures; an approval history that does not scan.
    pub async fn resume_drives_effects(&self, session: &str) -> Result<bool> {
        let records = self.journal.read(session, 1, 0).await?;
        let scan = ApprovalScan::scan(&records, 0)?;
        Ok(scan
            .selected()
            .is_some_and(|g| !g.inherited && !g.completed && g.decision.is_some()))
    }
}

/// What one reclaimer pass did.
#[derive(Debug, Default)]
pub struct ReclaimReport {
    /// Sessions reclaimed in this pass.
    pub reclaimed: Vec<String>,
    /// Sessions left queued, with why.
    pub failed: Vec<(String, PlacementError)>,
}
