//! Test doubles for driving the controller in process: models, harnesses, a tool executor and
//! an observer. Every double is named for what it is; none stands in for a shipped feature.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentsessions_api::{
    ApiError, Capabilities, Delta, DeltaSink, Descriptor, EventSink, Harness, Mediation, Message,
    ModelProvider, ModelRequest, ModelResponse, Resumability, Start, StatusCode, ToolCall,
    ToolResult, Usage,
};
use agentsessions_controller::{Controller, Observer, ToolExecutor};
use agentsessions_journal::{Journal, LogRecord, MemoryJournal, export};
use async_trait::async_trait;

pub type ApiResult<T> = agentsessions_api::Result<T>;

fn last_text(request: &ModelRequest) -> String {
    request
        .messages
        .last()
        .map(Message::text)
        .unwrap_or_default()
}

/// A nondeterministic model: the n-th call answers `resp#<n>:<last message text>`. Optionally
/// streams the answer one character at a time.
#[derive(Debug, Default)]
pub struct CountModel {
    pub calls: AtomicU64,
    pub stream: bool,
}

impl CountModel {
    pub fn streaming() -> Self {
        Self {
            calls: AtomicU64::new(0),
            stream: true,
        }
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ModelProvider for CountModel {
    fn name(&self) -> &str {
        "test-count"
    }

    fn default_model(&self) -> &str {
        "count"
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: Option<&dyn DeltaSink>,
    ) -> ApiResult<ModelResponse> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let text = format!("resp#{n}:{}", last_text(request));
        if let (true, Some(deltas)) = (self.stream, deltas) {
            for c in text.chars() {
                deltas.chunk(0, &c.to_string());
            }
        }
        Ok(ModelResponse {
            message: Message::text_message("assistant", text),
            usage: Usage::default(),
        })
    }
}

/// A model that never answers; records when its pending call is dropped (cancellation).
#[derive(Debug, Default)]
pub struct StuckModel {
    pub started: AtomicBool,
    pub dropped: Arc<AtomicBool>,
}

struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl ModelProvider for StuckModel {
    fn name(&self) -> &str {
        "test-stuck"
    }

    fn default_model(&self) -> &str {
        "stuck"
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: Option<&dyn DeltaSink>,
    ) -> ApiResult<ModelResponse> {
        let _flag = DropFlag(Arc::clone(&self.dropped));
        self.started.store(true, Ordering::SeqCst);
        std::future::pending::<()>().await;
        Err(ApiError::status(StatusCode::Internal, "unreachable"))
    }
}

/// A model that always fails.
#[derive(Debug, Default)]
pub struct FailingModel;

#[async_trait]
impl ModelProvider for FailingModel {
    fn name(&self) -> &str {
        "test-failing"
    }

    fn default_model(&self) -> &str {
        "failing"
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: Option<&dyn DeltaSink>,
    ) -> ApiResult<ModelResponse> {
        Err(ApiError::status(StatusCode::Unavailable, "provider down"))
    }
}

pub fn descriptor(id: &str, resumability: Resumability) -> Descriptor {
    Descriptor {
        id: id.into(),
        version: "1".into(),
        models: vec![],
        tools: vec![],
        capabilities: Capabilities {
            resumability,
            fork_safe: true,
            ..Capabilities::default()
        },
    }
}

/// The echo harness of the conformance fixtures: one model call with the last input's text.
#[derive(Debug, Default)]
pub struct EchoHarness {
    pub starts: Mutex<Vec<Start>>,
}

#[async_trait]
impl Harness for EchoHarness {
    async fn describe(&self) -> ApiResult<Descriptor> {
        Ok(descriptor("echo", Resumability::StatelessReplay))
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> ApiResult<()> {
        if let Ok(mut starts) = self.starts.lock() {
            starts.push(start.clone());
        }
        let text = start.inputs.last().map(Message::text).unwrap_or_default();
        sink.model(ModelRequest {
            model: "echo".into(),
            messages: vec![Message::text_message("user", text)],
            ..ModelRequest::default()
        })
        .await?;
        Ok(())
    }
}

/// What a [`ScriptHarness`] does, step by step.
#[derive(Debug, Clone)]
pub enum Step {
    Model(String),
    Output(String),
    Tool(ToolCall),
    /// A tool call whose error the harness swallows.
    ToolIgnoringError(ToolCall),
    Report(ToolResult),
    Usage(Usage),
    Fail(String),
}

/// A harness that performs a fixed script, with a chosen resumability.
#[derive(Debug)]
pub struct ScriptHarness {
    pub id: String,
    pub resumability: Resumability,
    pub steps: Vec<Step>,
    pub starts: Mutex<Vec<Start>>,
    pub results: Mutex<Vec<ToolResult>>,
}

impl ScriptHarness {
    pub fn new(steps: Vec<Step>) -> Self {
        Self::with_resumability(steps, Resumability::StatelessReplay)
    }

    pub fn with_resumability(steps: Vec<Step>, resumability: Resumability) -> Self {
        Self {
            id: "script".into(),
            resumability,
            steps,
            starts: Mutex::new(Vec::new()),
            results: Mutex::new(Vec::new()),
        }
    }

    pub fn last_start(&self) -> Option<Start> {
        self.starts.lock().ok().and_then(|s| s.last().cloned())
    }
}

#[async_trait]
impl Harness for ScriptHarness {
    async fn describe(&self) -> ApiResult<Descriptor> {
        Ok(descriptor(&self.id, self.resumability))
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> ApiResult<()> {
        if let Ok(mut starts) = self.starts.lock() {
            starts.push(start.clone());
        }
        for step in &self.steps {
            match step {
                Step::Model(text) => {
                    sink.model(ModelRequest {
                        model: String::new(),
                        messages: vec![Message::text_message("user", text.clone())],
                        ..ModelRequest::default()
                    })
                    .await?;
                }
                Step::Output(text) => sink.output(text.clone()).await?,
                Step::Tool(call) => {
                    let result = sink.tool_call(call.clone()).await?;
                    if let Ok(mut results) = self.results.lock() {
                        results.push(result);
                    }
                }
                Step::ToolIgnoringError(call) => {
                    let _ = sink.tool_call(call.clone()).await;
                }
                Step::Report(result) => sink.report(result.clone()).await?,
                Step::Usage(usage) => sink.usage(usage.clone()).await?,
                Step::Fail(message) => {
                    return Err(ApiError::status(StatusCode::Internal, message.clone()));
                }
            }
        }
        Ok(())
    }
}

pub fn mediated_call(id: &str, key: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        tool: "charge".into(),
        args: None,
        mediation: Mediation::ControllerMediated,
        idempotency_key: key.into(),
    }
}

pub fn gated_call(id: &str, key: &str) -> ToolCall {
    ToolCall {
        mediation: Mediation::RequiresApproval,
        ..mediated_call(id, key)
    }
}

/// An executor that deduplicates by idempotency key: the first call per key is the effect;
/// repeats return the cached result. Optionally fails every call.
#[derive(Debug, Default)]
pub struct IdempotentTool {
    pub effects: Mutex<HashMap<String, u64>>,
    pub attempts: AtomicU64,
    pub fail_with: Option<String>,
    cache: Mutex<HashMap<String, ToolResult>>,
}

impl IdempotentTool {
    pub fn failing(message: &str) -> Self {
        Self {
            fail_with: Some(message.into()),
            ..Self::default()
        }
    }

    pub fn effects(&self, key: &str) -> u64 {
        self.effects
            .lock()
            .map(|e| e.get(key).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ToolExecutor for IdempotentTool {
    async fn execute(&self, _session: &str, call: &ToolCall) -> ApiResult<ToolResult> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if let Some(message) = &self.fail_with {
            return Err(ApiError::status(StatusCode::Internal, message.clone()));
        }
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| ApiError::status(StatusCode::Internal, "poisoned"))?;
        if let Some(hit) = cache.get(&call.idempotency_key) {
            return Ok(hit.clone());
        }
        if let Ok(mut effects) = self.effects.lock() {
            *effects.entry(call.idempotency_key.clone()).or_default() += 1;
        }
        let mut output = serde_json::Map::new();
        output.insert("ran".into(), serde_json::Value::Bool(true));
        let result = ToolResult {
            id: call.id.clone(),
            output: Some(output),
            ..ToolResult::default()
        };
        cache.insert(call.idempotency_key.clone(), result.clone());
        Ok(result)
    }
}

/// Collects committed records and deltas.
#[derive(Debug, Default)]
pub struct Recorder {
    pub records: Mutex<Vec<LogRecord>>,
    pub deltas: Mutex<Vec<Delta>>,
}

impl Recorder {
    pub fn delta_count(&self) -> usize {
        self.deltas.lock().map(|d| d.len()).unwrap_or(0)
    }
}

impl Observer for Recorder {
    fn record(&self, record: &LogRecord) {
        if let Ok(mut records) = self.records.lock() {
            records.push(record.clone());
        }
    }

    fn delta(&self, delta: &Delta) {
        if let Ok(mut deltas) = self.deltas.lock() {
            deltas.push(delta.clone());
        }
    }
}

pub fn memory() -> Arc<dyn Journal> {
    Arc::new(MemoryJournal::new())
}

pub fn controller(
    journal: &Arc<dyn Journal>,
    harness: Arc<dyn Harness>,
    model: Arc<dyn ModelProvider>,
) -> Controller {
    Controller::new(Arc::clone(journal), harness, model, "s")
}

pub fn user(text: &str) -> Message {
    Message::text_message("user", text)
}

pub async fn read(journal: &Arc<dyn Journal>) -> Vec<LogRecord> {
    journal.read("s", 1, 0).await.unwrap()
}

/// Simulates losing the journal tail in a crash: a fresh journal holding records `1..keep`
/// of session `s` (same hashes, same fences).
pub async fn truncated(journal: &Arc<dyn Journal>, keep_below: i64) -> Arc<dyn Journal> {
    let records: Vec<LogRecord> = read(journal)
        .await
        .into_iter()
        .filter(|r| r.seq < keep_below)
        .collect();
    let fresh = memory();
    export::load_records(fresh.as_ref(), "s", &records)
        .await
        .unwrap();
    fresh
}

pub fn kinds(records: &[LogRecord]) -> Vec<&'static str> {
    records.iter().map(|r| r.event.kind.as_str()).collect()
}

/// The built-in echo model: `echo:` + the last message's text.
#[derive(Debug, Default)]
pub struct EchoModel {
    pub calls: AtomicU64,
}

impl EchoModel {
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ModelProvider for EchoModel {
    fn name(&self) -> &str {
        "test-echo"
    }

    fn default_model(&self) -> &str {
        "echo"
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: Option<&dyn DeltaSink>,
    ) -> ApiResult<ModelResponse> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ModelResponse {
            message: Message::text_message("assistant", format!("echo:{}", last_text(request))),
            usage: Usage::default(),
        })
    }
}
