//! [`Controller`]: the single writer of one session's turns (semantics §2.4, §3.4, §5.5) — its
//! construction and the flows that drive a turn: exec, resume, approve. Replay and closing a
//! turn live in the submodules; the decisions they all take are the pure rules of
//! [`crate::log`], [`crate::approval`] and [`crate::effects`].

mod closing;
mod replay;
mod unfinished;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use agentsessions_api::{
    ApprovalDecision, ApprovalResult, CallerIdentity, Descriptor, Event, EventBody, EventKind,
    ExecutionStart, Harness, History, IdentityContext, Message, ModelPolicy, ModelProvider, Start,
    Timestamp,
};
use agentsessions_journal::{Journal, LogRecord};
use tracing::Instrument as _;

use self::closing::RunEnd;
pub use self::replay::ReplayReport;
use self::unfinished::{ABANDONED, with_closing};
use crate::approval::{ApprovalScan, DecisionAdmission, ResumeStep};
use crate::effects::Recorded;
use crate::error::{ControllerError, Result};
use crate::hooks::{Cancellations, IdSource, Interruption, Observer, ToolExecutor};
use crate::legacy::legacy_execution_id;
use crate::log::{Execution, check_identity, history_for, legacy_tail, needs_identity_check};
use crate::settings::TurnSettings;
use crate::settlement::unfinished_in;
use crate::sink::{Mode, Sink, SinkContext};
use crate::spans;
use crate::view::LogView;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _, Wait};

/// How long the harness may take to describe itself before a turn (semantics §2.3).
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// One turn's request (semantics §2.1).
#[derive(Debug, Clone, Default)]
pub struct ExecRequest {
    /// Inputs, one INPUT record each.
    pub inputs: Vec<Message>,
    /// Strict CAS when set (0 = "no events yet"); the current head when unset.
    pub expected_last_seq: Option<i64>,
    /// Opaque harness config, journaled verbatim.
    pub config: Vec<u8>,
    /// The harness's own opaque cursor, journaled verbatim.
    pub resume_from_seq: i64,
    /// The turn, model call included, stops at this instant.
    pub deadline: Option<SystemTime>,
    /// Close the session's unfinished last turn first instead of refusing the input
    /// (extensions §9): its open tool calls are answered as outcome
    /// unknown (or not run) and it ends CANCELED, in the new turn's opening commit.
    pub abandon_unfinished: bool,
}

/// What a completed turn or resume produced.
#[derive(Debug, Clone, Default)]
pub struct TurnOutcome {
    /// The execution driven (journaled id; a compatibility id for a legacy resume).
    pub execution_id: String,
    /// Texts of every OUTPUT served or written, in order.
    pub outputs: Vec<String>,
    /// Records this call appended.
    pub records: Vec<LogRecord>,
    /// Live provider calls made.
    pub model_calls: u64,
}

/// What a resume did.
#[derive(Debug, Clone, Default)]
pub struct ResumeOutcome {
    /// False when there was nothing to re-drive (empty log or last execution completed).
    pub resumed: bool,
    /// The turn, when one was re-driven.
    pub turn: TurnOutcome,
}

/// The single writer of one session: drives turns, replays, resumes and records decisions.
///
/// A controller holds the fence of one incarnation; the journal refuses its appends once a newer
/// fence is minted. It is cheap to build one per operation.
#[derive(Clone)]
pub struct Controller {
    journal: Arc<dyn Journal>,
    harness: Arc<dyn Harness>,
    model: Arc<dyn ModelProvider>,
    session: String,
    /// The incarnation's fence; shared by clones so a fence minted by [`Controller::exec`]'s
    /// opening commit is the one every later append of this controller uses.
    fence: Arc<AtomicI64>,
    /// Mint the fence in the opening commit of [`Controller::exec`] (see
    /// [`Controller::minting_fence`]).
    mint_on_open: bool,
    registry_name: String,
    observer: Option<Arc<dyn Observer>>,
    settings: TurnSettings,
    compute_instance: String,
    identity: IdentityContext,
    /// The session's verified owner, for the minter bound to each live turn.
    owner: CallerIdentity,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("session", &self.session)
            .field("registry_name", &self.registry_name)
            .field("stream_deltas", &self.settings.stream_deltas)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller for `session` over `journal`, driving `harness` and calling `model` for it.
    /// Fence 0 until [`Controller::with_fence`].
    pub fn new(
        journal: Arc<dyn Journal>,
        harness: Arc<dyn Harness>,
        model: Arc<dyn ModelProvider>,
        session: impl Into<String>,
    ) -> Self {
        Self {
            journal,
            harness,
            model,
            session: session.into(),
            fence: Arc::new(AtomicI64::new(0)),
            mint_on_open: false,
            registry_name: String::new(),
            observer: None,
            settings: TurnSettings::default(),
            compute_instance: String::new(),
            identity: IdentityContext::default(),
            owner: CallerIdentity::default(),
        }
    }

    /// Appends with `fence` (minted by [`Log::new_fence`] for this incarnation).
    #[must_use]
    pub fn with_fence(self, fence: i64) -> Self {
        self.fence.store(fence, Ordering::SeqCst);
        self
    }

    /// [`Controller::exec`] mints this incarnation's fence in the same commit as its opening
    /// records ([`FenceUse::Mint`](agentsessions_journal::FenceUse::Mint)) instead of using one minted before: one
    /// durable commit fewer per turn, and a caller whose cursor is stale changes nothing, so it
    /// can never supersede the writer that won the head. [`Controller::fence`] tells the
    /// minted value afterwards.
    #[must_use]
    pub fn minting_fence(mut self) -> Self {
        self.mint_on_open = true;
        self
    }

    /// The fence this controller appends with (0 before one was set or minted).
    pub fn fence(&self) -> i64 {
        self.fence.load(Ordering::SeqCst)
    }

    /// The registry name the harness is served under (recorded in EXECUTION_START and checked
    /// on replay); the descriptor id when unset.
    #[must_use]
    pub fn with_registry_name(mut self, name: impl Into<String>) -> Self {
        self.registry_name = name.into();
        self
    }

    /// Takes every host-wide setting at once (tools, ids, cancellations, streaming, policy),
    /// replacing what the single-setting builders set before.
    #[must_use]
    pub fn with_settings(mut self, settings: TurnSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Runs controller-mediated and approved tool calls through `tools`.
    #[must_use]
    pub fn with_tools(mut self, tools: Arc<dyn ToolExecutor>) -> Self {
        self.settings.tools = Some(tools);
        self
    }

    /// Reports committed records (and deltas, when streaming) to `observer`.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Asks providers to stream and relays their chunks to the observer as deltas.
    #[must_use]
    pub fn with_stream_deltas(mut self, stream: bool) -> Self {
        self.settings.stream_deltas = stream;
        self
    }

    /// Admits only the models of `policy`; its default is journaled per turn (extensions §4).
    #[must_use]
    pub fn with_policy(mut self, policy: ModelPolicy) -> Self {
        self.settings.policy = Some(policy);
        self
    }

    /// The compute instance this incarnation runs on (extensions §5), recorded per turn.
    #[must_use]
    pub fn with_compute_instance(mut self, instance: impl Into<String>) -> Self {
        self.compute_instance = instance.into();
        self
    }

    /// Registers running executions in `cancellations` so a Cancel can reach them.
    #[must_use]
    pub fn with_cancellations(mut self, cancellations: Cancellations) -> Self {
        self.settings.cancellations = cancellations;
        self
    }

    /// Takes execution and model-call ids from `ids`.
    #[must_use]
    pub fn with_ids(mut self, ids: Arc<dyn IdSource>) -> Self {
        self.settings.ids = ids;
        self
    }

    /// The session principal and token minter handed to the harness.
    #[must_use]
    pub fn with_identity(mut self, identity: IdentityContext) -> Self {
        self.identity = identity;
        self
    }

    /// The session's verified owner (empty for an unbound session): who the delegated tokens of
    /// [`TurnSettings::minting`] are minted for.
    #[must_use]
    pub fn with_owner(mut self, owner: CallerIdentity) -> Self {
        self.owner = owner;
        self
    }

    /// The identity handed to the harness of live execution `execution_id`: the configured
    /// context, with a minter bound to this execution when the host mints tokens and no minter
    /// was set explicitly.
    fn turn_identity(&self, execution_id: &str) -> IdentityContext {
        let mut identity = self.identity.clone();
        if identity.mint_token.is_none()
            && let Some(minting) = &self.settings.minting
        {
            identity.mint_token = Some(minting.minter(
                &self.session,
                execution_id,
                &self.owner,
                &identity.principal,
            ));
        }
        identity
    }

    /// The registry of running executions this controller uses.
    pub fn cancellations(&self) -> &Cancellations {
        &self.settings.cancellations
    }

    fn require_session(&self) -> Result<()> {
        if self.session.is_empty() {
            return Err(ControllerError::MissingSessionUid);
        }
        Ok(())
    }

    async fn read_all(&self) -> Result<Vec<LogRecord>> {
        Ok(self.journal.read(&self.session, 1, 0).await?)
    }

    fn remaining(deadline: Option<SystemTime>) -> Option<Duration> {
        deadline.map(|d| {
            d.duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO)
        })
    }

    async fn describe(&self, deadline: Option<SystemTime>) -> Result<Descriptor> {
        let bound = Self::remaining(deadline).map_or(DESCRIBE_TIMEOUT, |r| r.min(DESCRIBE_TIMEOUT));
        let caller_bound = Self::remaining(deadline).is_some_and(|r| r <= DESCRIBE_TIMEOUT);
        match tokio::time::timeout(bound, self.harness.describe()).await {
            Ok(Ok(descriptor)) => Ok(descriptor),
            Ok(Err(e)) => Err(ControllerError::HarnessDescribeFailed(e)),
            Err(_) if caller_bound => Err(ControllerError::DeadlineExceeded),
            Err(_) => Err(ControllerError::HarnessDescribeFailed(
                agentsessions_api::ApiError::status(
                    agentsessions_api::StatusCode::DeadlineExceeded,
                    "harness did not describe itself within 10s",
                ),
            )),
        }
    }

    /// The name the harness is served under: the registry name, else the descriptor id.
    fn served_name<'a>(&'a self, descriptor: &'a Descriptor) -> &'a str {
        if self.registry_name.is_empty() {
            descriptor.id.as_str()
        } else {
            self.registry_name.as_str()
        }
    }

    fn default_model(&self) -> Result<String> {
        match &self.settings.policy {
            Some(policy) => policy
                .resolve("")
                .map_err(|e| ControllerError::InvalidModelPolicy(e.to_string())),
            None => Ok(String::new()),
        }
    }

    fn sink(
        &self,
        mode: Mode,
        journal_execution_id: &str,
        wire_execution_id: &str,
        default_model: String,
        descriptor: Descriptor,
        legacy: bool,
    ) -> SinkContext {
        SinkContext {
            journal: Arc::clone(&self.journal),
            session: self.session.clone(),
            fence: self.fence(),
            journal_execution_id: journal_execution_id.to_owned(),
            wire_execution_id: wire_execution_id.to_owned(),
            observer: self.observer.clone(),
            model: Arc::clone(&self.model),
            settings: self.settings.clone(),
            default_model,
            descriptor,
            mode,
            legacy,
        }
    }

    fn notify(&self, records: &[LogRecord]) {
        if let Some(observer) = &self.observer {
            for record in records {
                observer.record(record);
            }
        }
    }

    /// Runs one turn (semantics §2.4): EXECUTION_START and the INPUTs in one CAS append at
    /// `expected_last_seq`, then the harness against the live sink, then END or ERROR.
    ///
    /// # Errors
    /// [`ControllerError::Journal`] with a conflict or stale fence when another writer got there
    /// first (nothing was written); [`ControllerError::ApprovalBlocked`] while an approval is
    /// open, unless the request abandons the turn; [`ControllerError::InvalidExecutionLog`] for
    /// a log that cannot take a new turn;
    /// [`ControllerError::HarnessDescribeFailed`]; [`ControllerError::Parked`] when the run parked
    /// for an approval (no END); [`ControllerError::Cancelled`] /
    /// [`ControllerError::DeadlineExceeded`]; the harness's own failure.
    pub async fn exec(&self, request: ExecRequest) -> Result<TurnOutcome> {
        self.require_session()?;
        let records = self.read_all().await?;
        self.exec_on(request, records).await
    }

    /// [`Controller::exec`] on `records`, the session's whole log as the caller just read it
    /// (a host that read it for its own checks saves the second read). Records older than the
    /// head cost nothing but the turn: its opening commit is made at their last seq (or at
    /// `expected_last_seq`), so a log that moved since is a conflict and nothing is written.
    ///
    /// # Errors
    /// As [`Controller::exec`].
    pub async fn exec_on(
        &self,
        request: ExecRequest,
        records: Vec<LogRecord>,
    ) -> Result<TurnOutcome> {
        self.exec_view(request, &LogView::new(records)).await
    }

    /// [`Controller::exec`] on `view`, the session's log as the host keeps it (see
    /// [`LogView`]): nothing is read, grouped or copied again, and the harness's history shares
    /// the view's records. A view older than the head is refused by the opening commit's CAS.
    ///
    /// # Errors
    /// As [`Controller::exec`].
    pub async fn exec_view(&self, request: ExecRequest, view: &LogView) -> Result<TurnOutcome> {
        let span = spans::turn(&self.session, self.metric_harness(), "exec");
        let started = std::time::Instant::now();
        let result = self.run_exec(request, view).instrument(span.clone()).await;
        spans::turn_ended(&span, self.metric_harness(), started, &result);
        result
    }

    /// The harness name turn metrics carry.
    fn metric_harness(&self) -> &str {
        if self.registry_name.is_empty() {
            "unnamed"
        } else {
            &self.registry_name
        }
    }

    async fn run_exec(&self, request: ExecRequest, view: &LogView) -> Result<TurnOutcome> {
        self.require_session()?;
        view.log()?;
        let scan = view.approvals()?;
        if let Some(gate) = scan.selected()
            && gate.blocks_new_input()
            && !request.abandon_unfinished
        {
            return Err(ControllerError::ApprovalBlocked {
                execution_id: gate.execution_id.clone(),
                tool_call_id: gate.call.id.clone(),
            });
        }
        // Any other unfinished turn is superseded as semantics §3.4 has it (a host refuses
        // that first, see `settlement::check_new_input`); one the request abandons is closed in
        // the new turn's opening commit: both or neither.
        let mut events = match unfinished_in(view)? {
            Some(left) if request.abandon_unfinished => {
                self.closing_events(&left, view.records(), ABANDONED)
            }
            _ => Vec::new(),
        };
        let closing = events.len();
        let default_model = self.default_model()?;
        let descriptor = self.describe(request.deadline).await?;
        let execution_id = self.settings.ids.execution_id();
        spans::turn_identified(&execution_id, self.served_name(&descriptor));
        let head = view.head();
        let expected = request.expected_last_seq.unwrap_or(head);
        let marker = ExecutionStart {
            model: default_model.clone(),
            config: request.config.clone(),
            resume_from_seq: request.resume_from_seq,
            input_count: Some(i64::try_from(request.inputs.len()).unwrap_or(i64::MAX)),
            harness: self.served_name(&descriptor).to_owned(),
            harness_version: descriptor.version.clone(),
            compute_instance: self.compute_instance.clone(),
        };
        events.push(
            Event::new(EventKind::ExecutionStart, EventBody::ExecutionStart(marker))
                .with_execution(execution_id.clone()),
        );
        // The harness is handed the inputs as journaled (without the host's secrets), so a
        // replay sees what this turn saw.
        let mut inputs = Vec::with_capacity(request.inputs.len());
        for input in request.inputs {
            let event = self
                .settings
                .journaled(EventKind::Input, EventBody::Message(input))
                .with_execution(execution_id.clone());
            inputs.extend(event.message().cloned());
            events.push(event);
        }
        // One commit for the marker and its inputs: a crash can never leave an incomplete
        // invocation behind. It need not be durable yet: the harness holds no durable
        // authority, and whatever it causes through the host (a model call, a mediated tool)
        // is preceded by a durable append whose sync covers this one (semantics §3.7). The
        // records are shown with that append.
        let fence = (!self.mint_on_open).then(|| self.fence());
        let opened = self
            .journal
            .append_records(
                AppendRequest::new(
                    &self.session,
                    expected,
                    FenceUse::from_option(fence),
                    events,
                )
                .wait(Wait::Committed),
            )
            .await?;
        if fence.is_none()
            && let Some(first) = opened.first()
        {
            self.fence.store(first.fence, Ordering::SeqCst);
        }
        if let Some(observer) = &self.observer {
            observer.opened(&execution_id);
        }
        let start = Start {
            execution_id: execution_id.clone(),
            model: default_model.clone(),
            session_uid: self.session.clone(),
            config: request.config,
            history: history_for(
                &descriptor,
                &with_closing(view, &opened[..closing.min(opened.len())]),
                usize::MAX,
            ),
            inputs,
            identity: self.turn_identity(&execution_id),
            resume_from_seq: request.resume_from_seq,
        };
        let opened_head = opened.last().map_or(expected, |r| r.seq);
        let ctx = self.sink(
            Mode::Live,
            &execution_id,
            &execution_id,
            default_model,
            descriptor,
            false,
        );
        let sink = Sink::new(ctx, opened_head, Recorded::default(), opened.clone());
        let end = self.drive(&start, &sink, request.deadline).await;
        let state = sink.finish().await;
        let mut outcome = self
            .close_turn(end, state, Mode::Live, &execution_id, &execution_id)
            .await?;
        let mut records = opened;
        records.append(&mut outcome.records);
        outcome.records = records;
        Ok(outcome)
    }

    /// Runs the harness until it returns, the execution is cancelled or interrupted by the host's
    /// shutdown, or the deadline passes.
    async fn drive(&self, start: &Start, sink: &Sink, deadline: Option<SystemTime>) -> RunEnd {
        let mut guard = self.settings.cancellations.register(&start.execution_id);
        let sleep = async {
            match Self::remaining(deadline) {
                Some(left) => tokio::time::sleep(left).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = self.harness.run(start, sink) => RunEnd::Finished(result),
            Ok(interruption) = &mut guard.cancelled => match interruption {
                Interruption::Cancelled(reason) => RunEnd::Cancelled(reason),
                Interruption::HostStopping => RunEnd::HostStopping,
            },
            () = sleep => RunEnd::DeadlineExceeded,
        }
    }

    /// The Start an execution was (or would have been) given, rebuilt from the journal.
    fn recorded_start(
        &self,
        execution: &Execution,
        history: &History,
        history_end: usize,
        execution_id: String,
        descriptor: &Descriptor,
    ) -> Start {
        let marker = execution.start.clone().unwrap_or_default();
        Start {
            execution_id,
            model: marker.model,
            session_uid: self.session.clone(),
            config: marker.config,
            history: history_for(descriptor, history, history_end),
            inputs: execution.inputs.clone(),
            identity: self.identity.clone(),
            resume_from_seq: marker.resume_from_seq,
        }
    }

    /// Re-drives the last execution if it was interrupted (semantics §3.4): recorded effects are
    /// served, a trailing model or tool cut is re-driven once, and END (or ERROR) is written.
    ///
    /// # Errors
    /// As [`Controller::replay`], plus [`ControllerError::Parked`] when the execution waits for
    /// (or newly reaches) an approval decision, [`ControllerError::InheritedToolIntent`],
    /// [`ControllerError::IncompleteInvocation`] and journal conflicts.
    pub async fn resume(&self) -> Result<ResumeOutcome> {
        self.resume_until(None).await
    }

    /// [`Controller::resume`] bounded by `deadline`.
    ///
    /// # Errors
    /// As [`Controller::resume`].
    pub async fn resume_until(&self, deadline: Option<SystemTime>) -> Result<ResumeOutcome> {
        let records = self.read_all().await?;
        self.resume_view(deadline, &LogView::new(records)).await
    }

    /// [`Controller::resume_until`] on `view`, the session's log as the host keeps it (see
    /// [`LogView`]): only the pending execution's records are looked at again.
    ///
    /// # Errors
    /// As [`Controller::resume`].
    pub async fn resume_view(
        &self,
        deadline: Option<SystemTime>,
        view: &LogView,
    ) -> Result<ResumeOutcome> {
        let span = spans::turn(&self.session, self.metric_harness(), "resume");
        let started = std::time::Instant::now();
        let result = self
            .run_resume(deadline, view)
            .instrument(span.clone())
            .await;
        // Only a turn that was re-driven counts; "nothing to resume" is no turn.
        if !matches!(&result, Ok(outcome) if !outcome.resumed) {
            spans::turn_ended(&span, self.metric_harness(), started, &result);
        }
        result
    }

    async fn run_resume(
        &self,
        deadline: Option<SystemTime>,
        view: &LogView,
    ) -> Result<ResumeOutcome> {
        let records = view.records();
        if records.is_empty() {
            return Ok(ResumeOutcome::default());
        }
        let log = view.log()?;
        let pending = match log.last() {
            Some(last) => last.clone(),
            None if log.has_legacy => match legacy_tail(records, log.legacy_end) {
                Some(tail) => tail,
                None => return Ok(ResumeOutcome::default()),
            },
            None => return Ok(ResumeOutcome::default()),
        };
        if pending.completed() {
            return Ok(ResumeOutcome::default());
        }
        self.require_session()?;
        pending.check_inputs()?;
        let head = records.last().map_or(0, |r| r.seq);
        if !pending.legacy {
            self.intercept_approval(&pending, view.approvals()?).await?;
            pending.check_inherited_intents(records, log.last_fork_seq)?;
        }
        let execution_id = if pending.legacy {
            legacy_execution_id(&self.session, &records[pending.anchor])?
        } else {
            pending.id.clone()
        };
        let only = [&pending];
        let descriptor = if needs_identity_check(&only, records) {
            let descriptor = self.describe(deadline).await?;
            check_identity(&only, records, self.served_name(&descriptor), &descriptor)?;
            descriptor
        } else {
            // Needed only for a gated call's preconditions; ask once, lazily would need the
            // harness inside the sink.
            self.describe(deadline).await?
        };
        spans::turn_identified(&execution_id, self.served_name(&descriptor));
        let mut start = self.recorded_start(
            &pending,
            &view.history(),
            pending.first,
            execution_id,
            &descriptor,
        );
        // The re-driven turn runs live, so its harness may mint like a new one.
        start.identity = self.turn_identity(&start.execution_id);
        let recorded = Recorded::new(pending.effect_records(records));
        let ctx = self.sink(
            Mode::Resume,
            &pending.id,
            &start.execution_id,
            start.model.clone(),
            descriptor,
            pending.legacy,
        );
        let sink = Sink::new(ctx, head, recorded, Vec::new());
        let end = self.drive(&start, &sink, deadline).await;
        let state = sink.finish().await;
        let turn = self
            .close_turn(end, state, Mode::Resume, &pending.id, &start.execution_id)
            .await?;
        Ok(ResumeOutcome {
            resumed: true,
            turn,
        })
    }

    /// Step 3 of semantics §3.4: a gate of this execution without a receipt is handled without
    /// running anything — a missing request is written, an undecided one parks again.
    async fn intercept_approval(&self, pending: &Execution, scan: &ApprovalScan) -> Result<()> {
        if let ResumeStep::Request(gate) = scan.resume_step(&pending.id)? {
            let request = Event::new(
                EventKind::ApprovalRequest,
                EventBody::Approval(agentsessions_api::ApprovalRequest {
                    tool_call_id: gate.call.id.clone(),
                    reason: String::new(),
                }),
            )
            .with_execution(gate.execution_id.clone());
            let record = self
                .journal
                .append_one(&self.session, scan.head, self.fence(), request)
                .await?;
            self.notify(std::slice::from_ref(&record));
            let mut park = gate.park_ref();
            park.request_seq = record.seq;
            return Err(ControllerError::Parked(park));
        }
        Ok(())
    }

    /// Records an approval decision (semantics §5.5): idempotent for the same decision, refused
    /// for a different one, written with a fresh fence at the scanned head and stamped
    /// `decided_at`.
    ///
    /// # Errors
    /// [`ControllerError::InvalidApprovalDecision`] when no open request matches or it was
    /// decided differently or superseded; journal conflicts.
    pub async fn approve(
        &self,
        decision: &ApprovalDecision,
        decided_at: Timestamp,
    ) -> Result<LogRecord> {
        self.require_session()?;
        let records = self.read_all().await?;
        self.approve_view(decision, decided_at, &LogView::new(records))
            .await
    }

    /// [`Controller::approve`] on `view`, the session's log as the host keeps it (see
    /// [`LogView`]); the decision is written at the view's head, so a view older than the head
    /// is refused by the CAS.
    ///
    /// # Errors
    /// As [`Controller::approve`].
    pub async fn approve_view(
        &self,
        decision: &ApprovalDecision,
        decided_at: Timestamp,
        view: &LogView,
    ) -> Result<LogRecord> {
        self.require_session()?;
        let scan = view.approvals()?;
        if let DecisionAdmission::AlreadyRecorded(existing) = scan.admit_decision(decision)? {
            return Ok(existing.clone());
        }
        let fence = self.journal.new_fence(&self.session).await?;
        let mut event = Event::new(
            EventKind::ApprovalResult,
            EventBody::ApprovalResult(ApprovalResult {
                tool_call_id: decision.tool_call_id.clone(),
                approved: decision.approved,
                reason: decision.reason.clone(),
                request_seq: decision.request_seq,
            }),
        )
        .with_execution(decision.execution_id.clone());
        event.actor = decision.identity.clone();
        event.timestamp = Some(decided_at);
        let event = self.settings.scrubbed(event);
        let record = self
            .journal
            .append_one(&self.session, scan.head, fence, event)
            .await?;
        spans::approval_decided(
            view.records(),
            decision.request_seq,
            decision.approved,
            decided_at,
        );
        self.notify(std::slice::from_ref(&record));
        Ok(record)
    }
}
