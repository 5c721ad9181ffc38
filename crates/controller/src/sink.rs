//! The [`EventSink`] a harness runs against: live (journal, then act), replay (serve recorded
//! effects, never act) and resume (serve what is recorded, then go live), per semantics §2.5,
//! §3.3, §3.4 and §5.
//!
//! Every sink call takes one per-run lock, so calls are serialized in the order the harness makes
//! them. Matching a call against the recorded effect stream is pure ([`crate::effects`]); this
//! module performs the appends, model calls and tool executions those decisions ask for.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{
    ApiError, ApprovalRequest, Delta, DeltaSink, Descriptor, Event, EventBody, EventKind,
    EventSink, Mediation, Message, ModelCall, ModelProvider, ModelRequest, ModelResponse,
    Resumability, StatusCode, ToolCall, ToolResult, ToolResultCode, Usage,
};
use agentsessions_journal::{Appended, Journal, JournalError, LogRecord};
use agentsessions_wire::model_input_hash;
use async_trait::async_trait;
use tokio::sync::Mutex;
use tracing::Instrument as _;

use crate::approval::{denial_receipt, receipt_consistent};
use crate::effects::{self, Recorded};
use crate::error::ControllerError;
use crate::hooks::{Observer, ToolCallContext};
use crate::settings::TurnSettings;
use crate::spans;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _, Wait};

/// How the sink treats the recorded effect stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Nothing recorded to serve: every call acts and is journaled.
    Live,
    /// Serve every call from the record; never act, never append.
    Replay,
    /// Serve the record, then continue live past its end.
    Resume,
}

/// What the sink needs besides its state.
pub(crate) struct SinkContext {
    pub(crate) journal: Arc<dyn Journal>,
    pub(crate) session: String,
    pub(crate) fence: i64,
    /// Stamped on every appended event; empty for a legacy execution.
    pub(crate) journal_execution_id: String,
    /// The id deltas and parks carry (a legacy compatibility id for legacy executions).
    pub(crate) wire_execution_id: String,
    pub(crate) observer: Option<Arc<dyn Observer>>,
    pub(crate) model: Arc<dyn ModelProvider>,
    pub(crate) settings: TurnSettings,
    /// The execution's default model (ExecutionStart.model); empty leaves it to the provider.
    pub(crate) default_model: String,
    pub(crate) descriptor: Descriptor,
    pub(crate) mode: Mode,
    pub(crate) legacy: bool,
}

/// Why the sink stopped accepting calls.
#[derive(Debug)]
pub(crate) struct Stop {
    pub(crate) error: ControllerError,
    /// A park (or a failure around one) ends the run without ERROR or END.
    pub(crate) silent: bool,
}

#[derive(Default)]
pub(crate) struct SinkState {
    pub(crate) head: i64,
    pub(crate) recorded: Recorded,
    pub(crate) closed: bool,
    pub(crate) stop: Option<Stop>,
    /// The last typed refusal handed to the harness (it may have been swallowed).
    pub(crate) rejection: Option<ControllerError>,
    gated_ids: HashSet<String>,
    pub(crate) live_model_calls: u64,
    pub(crate) outputs: Vec<String>,
    pub(crate) appended: Vec<LogRecord>,
    /// Records committed by deferred appends and not yet durable, so not yet shown to the
    /// observer: the next durable append shows them first, in seq order.
    pub(crate) unshown: Vec<LogRecord>,
    /// Deferred appends handed to the journal and not yet collected, in order: `head` already
    /// counts them, and the next durable append queues behind them.
    pub(crate) queued: Vec<Appended>,
    /// Usage journaled with its model answer (live, or consumed with it from the record) that
    /// the harness has not reported yet: its report is already recorded, not appended again.
    answered_usage: Vec<Usage>,
}

impl SinkState {
    /// Collects the records of the queued appends (committed ahead of anything appended after
    /// them) into `appended` and `unshown`.
    ///
    /// # Errors
    /// The first queued append the journal refused; the ones after it are dropped (their
    /// cursors were past the head, so they were refused too).
    pub(crate) async fn collect_queued(&mut self) -> Result<(), JournalError> {
        for queued in std::mem::take(&mut self.queued) {
            let records = queued.records().await?;
            self.appended.extend(records.iter().cloned());
            self.unshown.extend(records);
        }
        Ok(())
    }
}

/// The sink of one run.
pub(crate) struct Sink {
    ctx: SinkContext,
    state: Mutex<SinkState>,
}

type ApiResult<T> = agentsessions_api::Result<T>;

/// Relays provider chunks to the observer as deltas.
struct DeltaRelay<'a> {
    observer: &'a dyn Observer,
    execution_id: &'a str,
}

impl DeltaSink for DeltaRelay<'_> {
    fn chunk(&self, part_index: i32, text: &str) {
        if text.is_empty() {
            return;
        }
        self.observer.delta(&Delta {
            execution_id: self.execution_id.to_owned(),
            part_index,
            chunk: text.to_owned(),
            done: false,
        });
    }
}

fn refusal(code: StatusCode, message: impl Into<String>) -> ApiError {
    ApiError::status(code, message)
}

impl Sink {
    /// A sink appending at `head`; `unshown` are records the turn committed before the sink
    /// (its opening) that are not yet durable, shown with the sink's first durable append.
    pub(crate) fn new(
        ctx: SinkContext,
        head: i64,
        recorded: Recorded,
        unshown: Vec<LogRecord>,
    ) -> Self {
        Self {
            ctx,
            state: Mutex::new(SinkState {
                head,
                recorded,
                unshown,
                ..SinkState::default()
            }),
        }
    }

    /// Closes the sink and hands back its state.
    pub(crate) async fn finish(&self) -> SinkState {
        let mut st = self.state.lock().await;
        st.closed = true;
        std::mem::take(&mut *st)
    }

    fn latch(st: &mut SinkState, error: ControllerError, silent: bool) -> ApiError {
        let api = error.to_api();
        if st.stop.is_none() {
            st.stop = Some(Stop { error, silent });
        }
        api
    }

    fn reject(st: &mut SinkState, error: ControllerError) -> ApiError {
        let api = error.to_api();
        st.rejection = Some(error);
        api
    }

    fn diverge(st: &mut SinkState, reason: impl Into<String>) -> ApiError {
        Self::latch(st, ControllerError::ReplayDiverged(reason.into()), false)
    }

    /// The checks every call makes first: closed sink, sticky stop.
    fn ensure_accepting(st: &SinkState) -> ApiResult<()> {
        if st.closed {
            return Err(ControllerError::SinkClosed.to_api());
        }
        if let Some(stop) = &st.stop {
            return Err(stop.error.to_api());
        }
        Ok(())
    }

    /// Appends a record that must be durable before the sink goes on: one an effect or a
    /// park depends on (semantics §3.7). Its sync also makes every deferred record before it
    /// durable, so they are shown to the observer with it.
    async fn append(&self, st: &mut SinkState, event: Event) -> ApiResult<LogRecord> {
        let appended = self
            .ctx
            .journal
            .append_one(&self.ctx.session, st.head, self.ctx.fence, event)
            .await;
        // The deferred appends queued before this one were committed ahead of it. A refusal of
        // one of them explains this one's.
        let appended = st.collect_queued().await.and(appended);
        match appended {
            Ok(record) => {
                st.head = record.seq;
                st.appended.push(record.clone());
                st.unshown.push(record.clone());
                let shown = std::mem::take(&mut st.unshown);
                if let Some(observer) = &self.ctx.observer {
                    shown.iter().for_each(|r| observer.record(r));
                }
                Ok(record)
            }
            Err(e) => Err(Self::latch(st, ControllerError::Journal(e), false)),
        }
    }

    /// Appends a record nothing waits on (an OUTPUT, a TOOL_RESULT, USAGE) without waiting for
    /// its commit: the journal queues it, and the next durable append, which queues behind it,
    /// makes it durable and shows it (see [`Wait::Queued`](agentsessions_journal::Wait::Queued)).
    async fn append_deferred(&self, st: &mut SinkState, event: Event) -> ApiResult<()> {
        self.append_deferred_all(st, vec![event]).await
    }

    /// [`Sink::append_deferred`] of records that commit together or not at all (one append).
    async fn append_deferred_all(&self, st: &mut SinkState, events: Vec<Event>) -> ApiResult<()> {
        let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
        let queued = self
            .ctx
            .journal
            .append(
                AppendRequest::new(
                    &self.ctx.session,
                    st.head,
                    FenceUse::Hold(self.ctx.fence),
                    events,
                )
                .wait(Wait::Queued),
            )
            .await;
        match queued {
            Ok(queued) => {
                st.head += count;
                st.queued.push(queued);
                Ok(())
            }
            Err(e) => Err(Self::latch(st, ControllerError::Journal(e), false)),
        }
    }

    /// An event of this run's execution, as it is journaled: without the host's secrets
    /// (`docs/security.md`, "Redaction"). What the harness is handed back is read from it, so
    /// a replay or a resume serves exactly what this run saw.
    fn event(&self, kind: EventKind, body: EventBody) -> Event {
        self.ctx
            .settings
            .journaled(kind, body)
            .with_execution(self.ctx.journal_execution_id.clone())
    }

    /// A tool result event and the result as journaled.
    fn result_event(&self, result: ToolResult) -> (Event, ToolResult) {
        let event = self.event(EventKind::ToolResult, EventBody::Result(result));
        let journaled = match &event.body {
            Some(EventBody::Result(result)) => result.clone(),
            _ => ToolResult::default(),
        };
        (event, journaled)
    }

    /// Whether the recorded stream has nothing left, so a resume continues live.
    fn goes_live(&self, st: &SinkState) -> bool {
        match self.ctx.mode {
            Mode::Live => true,
            Mode::Resume => st.recorded.exhausted(),
            Mode::Replay => false,
        }
    }

    async fn live_model(
        &self,
        st: &mut SinkState,
        request: &ModelRequest,
        record_call: bool,
    ) -> ApiResult<ModelResponse> {
        let model = if request.model.is_empty() {
            self.ctx.default_model.clone()
        } else {
            request.model.clone()
        };
        if let Some(policy) = &self.ctx.settings.policy
            && !policy.allows(&model)
        {
            return Err(Self::latch(
                st,
                ControllerError::ModelNotAllowed { model },
                false,
            ));
        }
        if record_call {
            let call = ModelCall {
                model: request.model.clone(),
                params: Default::default(),
                input_hash: model_input_hash(request),
                id: self.ctx.settings.ids.model_call_id(),
            };
            let event = self.event(EventKind::ModelCall, EventBody::ModelCall(call));
            self.append(st, event).await?;
        }
        let mut provider_request = request.clone();
        provider_request.model = model;
        let relay = match (&self.ctx.observer, self.ctx.settings.stream_deltas) {
            (Some(observer), true) => Some(DeltaRelay {
                observer: observer.as_ref(),
                execution_id: &self.ctx.wire_execution_id,
            }),
            _ => None,
        };
        let trace = spans::ModelCallTrace::start(self.ctx.model.name(), &provider_request);
        let mut response = match self
            .ctx
            .model
            .complete(
                &provider_request,
                relay.as_ref().map(|r| r as &dyn DeltaSink),
            )
            .instrument(trace.span())
            .await
        {
            Ok(response) => {
                trace.answered(&response);
                response
            }
            // Remembered so a harness that returns it fails the turn with the provider's code.
            Err(e) => {
                let error = ControllerError::ModelFailed(e);
                trace.failed(&error);
                return Err(Self::reject(st, error));
            }
        };
        st.live_model_calls += 1;
        let output = self.event(EventKind::Output, EventBody::Message(response.message));
        response.message = output.message().cloned().unwrap_or_default();
        // The answer and its usage commit in one append, so no crash leaves an answer whose
        // usage is lost; an answer that counts no tokens (the echo model's) records none here.
        if !counts_tokens(&response.usage) {
            self.append_deferred(st, output).await?;
        } else {
            let usage = self.event(EventKind::Usage, EventBody::Usage(response.usage.clone()));
            self.append_deferred_all(st, vec![output, usage]).await?;
            st.answered_usage.push(response.usage.clone());
        }
        if let Some(relay) = relay {
            relay.observer.delta(&Delta {
                execution_id: self.ctx.wire_execution_id.clone(),
                part_index: 0,
                chunk: String::new(),
                done: true,
            });
        }
        st.outputs.push(response.message.text());
        Ok(response)
    }

    /// Runs `call` through the tool executor; `approval_wait` is how long its approval took.
    async fn execute(
        &self,
        call: &ToolCall,
        approval_wait: Option<Duration>,
    ) -> ApiResult<ToolResult> {
        let Some(tools) = &self.ctx.settings.tools else {
            return Err(refusal(
                StatusCode::FailedPrecondition,
                "no tool executor configured",
            ));
        };
        let call_context = ToolCallContext::new(&self.ctx.session, &self.ctx.wire_execution_id);
        let trace = spans::ToolCallTrace::start(call, approval_wait);
        let result = tools
            .execute_for(&call_context, call)
            .instrument(trace.span())
            .await;
        trace.ended(&result);
        let mut result = result?;
        result.id.clone_from(&call.id);
        Ok(result)
    }

    /// Intent, execution, result: the live controller-mediated path of semantics §2.5.
    async fn live_tool(
        &self,
        st: &mut SinkState,
        call: ToolCall,
        intent: Event,
    ) -> ApiResult<ToolResult> {
        self.append(st, intent).await?;
        let result = self.execute(&call, None).await?;
        let (event, result) = self.result_event(result);
        self.append_deferred(st, event).await?;
        Ok(result)
    }

    /// The live approval gate of semantics §5.2: intent, request, park.
    async fn live_gate(
        &self,
        st: &mut SinkState,
        call: ToolCall,
        intent: Event,
    ) -> ApiResult<ToolResult> {
        self.append_deferred(st, intent).await?;
        let request = ApprovalRequest {
            tool_call_id: call.id.clone(),
            reason: String::new(),
        };
        let request = self.event(EventKind::ApprovalRequest, EventBody::Approval(request));
        let record = match self.append(st, request).await {
            Ok(record) => record,
            Err(e) => {
                // The request never became durable: stop without ERROR or END so the intent
                // stays recoverable.
                if let Some(stop) = st.stop.as_mut() {
                    stop.silent = true;
                }
                return Err(e);
            }
        };
        agentsessions_telemetry::metrics().approval_requested();
        let park = agentsessions_api::ApprovalRef {
            execution_id: self.ctx.wire_execution_id.clone(),
            tool_call_id: call.id,
            request_seq: record.seq,
        };
        Err(Self::latch(st, ControllerError::Parked(park), true))
    }

    /// Serves a decided gate from the record, or writes its receipt now (semantics §5.5).
    async fn decided_gate(&self, st: &mut SinkState, call: ToolCall) -> ApiResult<ToolResult> {
        let served = effects::take_gate(&mut st.recorded, &call);
        let gate = match served {
            Ok(gate) => gate,
            Err(reason) => return Err(Self::diverge(st, reason)),
        };
        if let Some(mut receipt) = gate.receipt {
            if !receipt_consistent(gate.decision.approved, &receipt) {
                return Err(Self::diverge(
                    st,
                    "recorded receipt contradicts its decision",
                ));
            }
            receipt.approval = Some(gate.decision);
            return Ok(receipt);
        }
        if self.ctx.mode == Mode::Replay {
            return Err(Self::diverge(st, "gated call has no recorded receipt"));
        }
        let decision = gate.decision;
        let mut receipt = if decision.approved {
            if self.ctx.settings.tools.is_none() {
                return Err(Self::latch(st, ControllerError::MissingToolExecutor, true));
            }
            let waited = st
                .recorded
                .committed_at(gate.request_seq)
                .zip(st.recorded.committed_at(gate.decision_seq));
            let waited = waited.map(|(asked, decided)| spans::between(asked, decided));
            match self.execute(&call, waited).await {
                Ok(mut result) => {
                    result.code = if result.is_error {
                        ToolResultCode::ExecutorError
                    } else {
                        ToolResultCode::Unspecified
                    };
                    result
                }
                Err(e) => ToolResult {
                    id: call.id.clone(),
                    is_error: true,
                    error: e.to_string(),
                    code: ToolResultCode::ExecutorError,
                    ..ToolResult::default()
                },
            }
        } else {
            denial_receipt(&call.id, 0, 0)
        };
        receipt.id.clone_from(&call.id);
        receipt.approval_request_seq = gate.request_seq;
        receipt.approval_decision_seq = gate.decision_seq;
        receipt.approval = None;
        let (event, mut receipt) = self.result_event(receipt);
        self.append_deferred(st, event).await?;
        receipt.approval = Some(decision);
        Ok(receipt)
    }

    async fn gated_tool_call(
        &self,
        st: &mut SinkState,
        call: ToolCall,
        intent: Event,
    ) -> ApiResult<ToolResult> {
        if self.ctx.descriptor.capabilities.resumability != Resumability::StatelessReplay {
            return Err(Self::reject(st, ControllerError::ApprovalUnavailable));
        }
        if self.ctx.session.is_empty() {
            return Err(Self::reject(st, ControllerError::MissingSessionUid));
        }
        if self.ctx.legacy || call.id.is_empty() {
            return Err(Self::reject(
                st,
                ControllerError::InvalidApprovalCall(
                    "a gated call needs an id and cannot run in legacy recovery".into(),
                ),
            ));
        }
        if call.idempotency_key.is_empty() {
            return Err(Self::reject(
                st,
                ControllerError::MissingIdempotencyKey {
                    tool_call_id: call.id,
                },
            ));
        }
        if !st.gated_ids.insert(call.id.clone()) {
            return Err(Self::reject(
                st,
                ControllerError::InvalidApprovalCall(format!(
                    "tool call id {:?} was already used in this execution",
                    call.id
                )),
            ));
        }
        if self.goes_live(st) {
            return self.live_gate(st, call, intent).await;
        }
        self.decided_gate(st, call).await
    }
}

#[async_trait]
impl EventSink for Sink {
    async fn model(&self, request: ModelRequest) -> ApiResult<ModelResponse> {
        let mut guard = self.state.lock().await;
        let st = &mut *guard;
        Self::ensure_accepting(st)?;
        if self.goes_live(st) {
            return self.live_model(st, &request, true).await;
        }
        let hash = model_input_hash(&request);
        match effects::take_model(&mut st.recorded, &request, &hash) {
            effects::ModelStep::Served(response) => {
                let model = if request.model.is_empty() {
                    &self.ctx.default_model
                } else {
                    &request.model
                };
                spans::model_replayed(self.ctx.model.name(), model, &request, &response);
                if response.usage != Usage::default() {
                    st.answered_usage.push(response.usage.clone());
                }
                st.outputs.push(response.message.text());
                Ok(response)
            }
            effects::ModelStep::Diverged(reason) => Err(Self::diverge(st, reason)),
            effects::ModelStep::CompletionMissing { last } => {
                if self.ctx.mode == Mode::Resume && last && !self.ctx.legacy {
                    // A model cut (semantics §3.4): the call is recorded, its answer is not.
                    return self.live_model(st, &request, false).await;
                }
                let message = if self.ctx.mode == Mode::Resume {
                    "recorded completion missing"
                } else {
                    "expected a recorded completion after MODEL_CALL"
                };
                Err(refusal(StatusCode::FailedPrecondition, message))
            }
            effects::ModelStep::Exhausted => Err(Self::diverge(
                st,
                "the harness called the model more times than recorded",
            )),
        }
    }

    async fn output(&self, text: String) -> ApiResult<()> {
        let mut guard = self.state.lock().await;
        let st = &mut *guard;
        Self::ensure_accepting(st)?;
        let message = Message::text_message("assistant", text);
        let output = self.event(EventKind::Output, EventBody::Message(message));
        let text = output.message().map(Message::text).unwrap_or_default();
        if self.goes_live(st) {
            self.append_deferred(st, output).await?;
            st.outputs.push(text);
            return Ok(());
        }
        match effects::take_output(&mut st.recorded, &text) {
            Ok(()) => {
                st.outputs.push(text);
                Ok(())
            }
            Err(reason) => Err(Self::diverge(st, reason)),
        }
    }

    async fn tool_call(&self, call: ToolCall) -> ApiResult<ToolResult> {
        let mut guard = self.state.lock().await;
        let st = &mut *guard;
        Self::ensure_accepting(st)?;
        // The call as journaled is the call made and the one a replay compares with.
        let intent = self.event(EventKind::ToolCall, EventBody::ToolCall(call));
        let call = match &intent.body {
            Some(EventBody::ToolCall(call)) => call.clone(),
            _ => ToolCall::default(),
        };
        if call.mediation == Mediation::RequiresApproval {
            return self.gated_tool_call(st, call, intent).await;
        }
        if st.gated_ids.contains(&call.id) {
            return Err(Self::reject(
                st,
                ControllerError::InvalidApprovalCall(format!(
                    "tool call id {:?} belongs to a gated call",
                    call.id
                )),
            ));
        }
        let live = self.goes_live(st);
        if call.mediation != Mediation::ControllerMediated {
            let reproduces_recorded = !live && effects::next_call_has_id(&st.recorded, &call.id);
            if !reproduces_recorded {
                return Err(Self::reject(
                    st,
                    ControllerError::UnmediatedToolCall {
                        tool_call_id: call.id,
                    },
                ));
            }
        } else if call.idempotency_key.is_empty() {
            return Err(Self::reject(
                st,
                ControllerError::MissingIdempotencyKey {
                    tool_call_id: call.id,
                },
            ));
        }
        if let Err(reason) = effects::check_args(call.args.as_ref()) {
            let error = ControllerError::InvalidToolArgs {
                tool_call_id: call.id.clone(),
                reason,
            };
            if live && self.ctx.mode == Mode::Live {
                return Err(Self::latch(st, error, false));
            }
            return Err(Self::diverge(st, error.to_string()));
        }
        if live {
            return self.live_tool(st, call, intent).await;
        }
        match effects::take_tool(&mut st.recorded, &call) {
            effects::ToolStep::Served(result) => Ok(result),
            effects::ToolStep::Diverged(reason) => Err(Self::diverge(st, reason)),
            effects::ToolStep::ResultMissing { last, recorded } => {
                if self.ctx.mode == Mode::Resume && last {
                    // A tool cut (semantics §3.4): re-drive the recorded call once.
                    let result = self.execute(&recorded, None).await?;
                    let (event, result) = self.result_event(result);
                    self.append_deferred(st, event).await?;
                    return Ok(result);
                }
                Err(refusal(
                    StatusCode::FailedPrecondition,
                    "recorded tool call has no result",
                ))
            }
        }
    }

    async fn report(&self, result: ToolResult) -> ApiResult<()> {
        let mut guard = self.state.lock().await;
        let st = &mut *guard;
        Self::ensure_accepting(st)?;
        if result.approval_request_seq != 0
            || result.approval_decision_seq != 0
            || result.code == ToolResultCode::ApprovalDenied
            || result.approval.is_some()
        {
            return Err(Self::reject(st, ControllerError::ApprovalReceiptReport));
        }
        if self.goes_live(st) {
            let event = self.event(EventKind::ToolResult, EventBody::Result(result));
            self.append_deferred(st, event).await?;
            return Ok(());
        }
        match effects::take_report(&mut st.recorded) {
            Ok(()) => Ok(()),
            Err(reason) => Err(Self::diverge(st, reason)),
        }
    }

    async fn usage(&self, usage: Usage) -> ApiResult<()> {
        let mut guard = self.state.lock().await;
        let st = &mut *guard;
        Self::ensure_accepting(st)?;
        if let Some(answered) = st.answered_usage.iter().position(|u| *u == usage) {
            // Journaled with its answer already.
            st.answered_usage.remove(answered);
            return Ok(());
        }
        if self.goes_live(st) {
            let event = self.event(EventKind::Usage, EventBody::Usage(usage));
            self.append_deferred(st, event).await?;
            return Ok(());
        }
        if self.ctx.legacy {
            // v0.1.2 journals never recorded usage: it is tolerated, not served.
            return Ok(());
        }
        match effects::take_usage(&mut st.recorded, &usage) {
            Ok(()) => Ok(()),
            Err(reason) => Err(Self::diverge(st, reason)),
        }
    }
}

/// Whether `usage` counts any tokens.
fn counts_tokens(usage: &Usage) -> bool {
    usage.input_tokens != 0
        || usage.output_tokens != 0
        || usage.reasoning_tokens != 0
        || usage.cached_input_tokens != 0
}
