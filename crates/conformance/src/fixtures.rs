//! The suite's shared fixtures (hashing-and-conformance (d), "Shared fixtures"): a persistent
//! SQLite store, journal truncation, tool harnesses, an idempotent executor, a delta counter and
//! a chat-completions endpoint that counts requests.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentsessions_api::{
    ApiError, Capabilities, Delta, Descriptor, EventSink, Harness, Mediation, Message,
    ModelRequest, Resumability, Start, StatusCode, ToolCall, ToolResult, Usage,
};
use agentsessions_controller::{Observer, ToolExecutor};
use agentsessions_journal::{Journal, LogRecord, verify_records};
use agentsessions_sqlite::SqliteJournal;
use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::tasks::FixtureTasks;

/// The session most checks use.
pub const SESSION: &str = "s";

type ApiResult<T> = agentsessions_api::Result<T>;

/// A persistent SQLite journal in its own temporary directory; reopen it to simulate a process
/// restart.
#[derive(Debug)]
pub struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    /// A fresh, empty store.
    ///
    /// # Panics
    /// When no temporary directory can be created.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("a temporary directory for the store"),
        }
    }

    /// The database file.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("journal.db")
    }

    /// Opens the journal (a new connection and writer each time).
    ///
    /// # Panics
    /// When the file cannot be opened.
    pub fn open(&self) -> Arc<dyn Journal> {
        Arc::new(SqliteJournal::open(self.path()).expect("open the SQLite journal"))
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

/// Deletes every record of `session` from seq `from` on, as a crash that lost the journal tail
/// would (raw SQL on the closed file).
///
/// # Panics
/// When the file cannot be edited.
pub fn truncate_from(path: &Path, session: &str, from: i64) {
    let db = rusqlite::Connection::open(path).expect("open the journal file");
    db.execute(
        "DELETE FROM events WHERE session = ?1 AND seq >= ?2",
        rusqlite::params![session, from],
    )
    .expect("truncate the journal");
}

/// All records of `session`.
///
/// # Panics
/// On a read failure.
pub async fn records(journal: &Arc<dyn Journal>, session: &str) -> Vec<LogRecord> {
    journal.read(session, 1, 0).await.expect("read the journal")
}

/// Asserts the chain of `session` verifies.
///
/// # Panics
/// When it does not.
pub async fn assert_verifies(journal: &Arc<dyn Journal>, session: &str) {
    let all = records(journal, session).await;
    if let Err(fault) = verify_records(&all) {
        panic!("chain of {session} does not verify: {fault}");
    }
}

/// A user message.
pub fn user(text: &str) -> Message {
    Message::text_message("user", text)
}

fn descriptor(id: &str) -> Descriptor {
    Descriptor {
        id: id.into(),
        version: "1".into(),
        models: Vec::new(),
        tools: Vec::new(),
        capabilities: Capabilities {
            resumability: Resumability::StatelessReplay,
            fork_safe: true,
            ..Capabilities::default()
        },
    }
}

/// `toolHarness{key}`: one controller-mediated call `{id t1, tool charge, key}`.
#[derive(Debug, Clone)]
pub struct ToolHarness {
    /// The call it emits.
    pub call: ToolCall,
}

impl ToolHarness {
    /// The fixture call with `key` (empty for the missing-key check).
    pub fn new(key: &str) -> Self {
        Self {
            call: ToolCall {
                id: "t1".into(),
                tool: "charge".into(),
                args: None,
                mediation: Mediation::ControllerMediated,
                idempotency_key: key.into(),
            },
        }
    }

    /// A harness emitting exactly `call`.
    pub fn with_call(call: ToolCall) -> Self {
        Self { call }
    }
}

#[async_trait]
impl Harness for ToolHarness {
    async fn describe(&self) -> ApiResult<Descriptor> {
        Ok(descriptor("tool"))
    }

    async fn run(&self, _start: &Start, sink: &dyn EventSink) -> ApiResult<()> {
        sink.tool_call(self.call.clone()).await?;
        Ok(())
    }
}

/// One model call, then a Usage report.
#[derive(Debug, Clone)]
pub struct UsageHarness {
    /// What it reports.
    pub usage: Usage,
}

#[async_trait]
impl Harness for UsageHarness {
    async fn describe(&self) -> ApiResult<Descriptor> {
        Ok(descriptor("usage"))
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> ApiResult<()> {
        let text = start.inputs.last().map(Message::text).unwrap_or_default();
        sink.model(ModelRequest {
            model: "echo".into(),
            messages: vec![user(&text)],
            ..ModelRequest::default()
        })
        .await?;
        sink.usage(self.usage.clone()).await
    }
}

/// A harness whose run fails with `message`.
#[derive(Debug, Clone)]
pub struct FailingHarness {
    /// The failure text.
    pub message: String,
}

#[async_trait]
impl Harness for FailingHarness {
    async fn describe(&self) -> ApiResult<Descriptor> {
        Ok(descriptor("failing"))
    }

    async fn run(&self, _start: &Start, _sink: &dyn EventSink) -> ApiResult<()> {
        Err(ApiError::status(StatusCode::Internal, self.message.clone()))
    }
}

/// `idempotentTool`: the first call per key is the effect; repeats return the cached result.
#[derive(Debug, Default)]
pub struct IdempotentTool {
    effects: Mutex<HashMap<String, u64>>,
    cache: Mutex<HashMap<String, ToolResult>>,
    attempts: AtomicU64,
}

impl IdempotentTool {
    /// Effects performed for `key`.
    pub fn effects(&self, key: &str) -> u64 {
        self.effects
            .lock()
            .map(|e| e.get(key).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Calls received, deduplicated or not.
    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ToolExecutor for IdempotentTool {
    async fn execute(&self, _session: &str, call: &ToolCall) -> ApiResult<ToolResult> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| ApiError::status(StatusCode::Internal, "tool cache poisoned"))?;
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

/// Counts deltas and remembers the records it saw.
#[derive(Debug, Default)]
pub struct DeltaCounter {
    deltas: Mutex<Vec<Delta>>,
    records: AtomicUsize,
}

impl DeltaCounter {
    /// Deltas seen.
    pub fn deltas(&self) -> Vec<Delta> {
        self.deltas.lock().map(|d| d.clone()).unwrap_or_default()
    }

    /// Records seen.
    pub fn records(&self) -> usize {
        self.records.load(Ordering::SeqCst)
    }
}

impl Observer for DeltaCounter {
    fn record(&self, _record: &LogRecord) {
        self.records.fetch_add(1, Ordering::SeqCst);
    }

    fn delta(&self, delta: &Delta) {
        if let Ok(mut deltas) = self.deltas.lock() {
            deltas.push(delta.clone());
        }
    }
}

/// A loopback HTTP endpoint answering every POST with one fixed JSON body, counting requests.
/// It serves until dropped.
#[derive(Debug)]
pub struct CountingEndpoint {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    requests: Arc<AtomicU64>,
    release: tokio::sync::watch::Sender<bool>,
    /// Held, never read: dropping it stops the accept loop and every connection.
    _serving: FixtureTasks,
}

impl CountingEndpoint {
    /// Serves `body` (an `application/json` 200 answer) until dropped.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(body: &'static str) -> Self {
        Self::start_holding(body, 0).await
    }

    /// Like [`CountingEndpoint::start`], but the first `hold` requests are counted and left
    /// unanswered (the connection stays open) until [`CountingEndpoint::release_held`]: a model
    /// call in flight when a host dies or stalls.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start_holding(body: &'static str, hold: u64) -> Self {
        Self::start_full(body, None, hold).await
    }

    /// [`CountingEndpoint::start_holding`] that answers a request asking for a stream
    /// (`"stream":true` in its body) with `stream_body` as `text/event-stream`.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start_full(
        body: &'static str,
        stream_body: Option<&'static str>,
        hold: u64,
    ) -> Self {
        let held = Arc::new(AtomicU64::new(hold));
        let (release, released) = tokio::sync::watch::channel(false);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let port = listener.local_addr().expect("bound address").port();
        let requests = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&requests);
        let tasks = FixtureTasks::default();
        let scope = tasks.scope().clone();
        tasks.scope().spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let counter = Arc::clone(&counter);
                let held = Arc::clone(&held);
                let mut released = released.clone();
                scope.spawn(async move {
                    if let Some(request) = read_request(&mut socket).await {
                        counter.fetch_add(1, Ordering::SeqCst);
                        let streaming = String::from_utf8_lossy(&request)
                            .replace(' ', "")
                            .contains("\"stream\":true");
                        let (content_type, body) = match stream_body {
                            Some(sse) if streaming => ("text/event-stream", sse),
                            _ => ("application/json", body),
                        };
                        let hold = held
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                            .is_ok();
                        if hold {
                            // Answer only when released; a caller that goes away first just
                            // closes the socket.
                            let _ = released.wait_for(|go| *go).await;
                        }
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = socket.write_all(answer.as_bytes()).await;
                        let _ = socket.shutdown().await;
                    }
                });
            }
        });
        Self {
            base_url: format!("http://127.0.0.1:{port}"),
            requests,
            release,
            _serving: tasks,
        }
    }

    /// Answers every held request.
    pub fn release_held(&self) {
        self.release.send_replace(true);
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Reads one HTTP/1.1 request (headers and a content-length body).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if buffer.len() >= end + 4 + length {
            return Some(buffer[end + 4..end + 4 + length].to_vec());
        }
    }
}

/// What a [`StartCapture`] harness was handed at the start of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenStart {
    /// `Start.config`.
    pub config: Vec<u8>,
    /// `Start.resume_from_seq`.
    pub cursor: i64,
    /// Number of history events.
    pub history: usize,
    /// Texts of the inputs.
    pub inputs: Vec<String>,
}

/// The `execution_start` fixture: records every Start it receives, asks the model once with a
/// request whose params encode the config (hex), cursor and history length, then outputs
/// `continued` — or, when `interrupt` is set, fails right after the model answered.
#[derive(Debug, Default)]
pub struct StartCapture {
    /// Fail after the model call instead of finishing.
    pub interrupt: bool,
    seen: Mutex<Vec<SeenStart>>,
}

impl StartCapture {
    /// A harness that finishes (`interrupt` false) or breaks off after its model call.
    pub fn new(interrupt: bool) -> Self {
        Self {
            interrupt,
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Every Start received, in order.
    ///
    /// # Panics
    /// When the lock was poisoned by a panicking run.
    pub fn seen(&self) -> Vec<SeenStart> {
        self.seen.lock().expect("start capture lock").clone()
    }
}

#[async_trait]
impl Harness for StartCapture {
    async fn describe(&self) -> ApiResult<Descriptor> {
        Ok(descriptor("start-capture"))
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> ApiResult<()> {
        let inputs: Vec<String> = start.inputs.iter().map(Message::text).collect();
        let seen = SeenStart {
            config: start.config.clone(),
            cursor: start.resume_from_seq,
            history: start.history.len(),
            inputs: inputs.clone(),
        };
        if let Ok(mut all) = self.seen.lock() {
            all.push(seen.clone());
        }
        let hex: String = seen.config.iter().map(|b| format!("{b:02x}")).collect();
        let params = [
            ("config".to_owned(), hex),
            ("cursor".to_owned(), seen.cursor.to_string()),
            ("history".to_owned(), seen.history.to_string()),
        ];
        sink.model(ModelRequest {
            model: "echo".into(),
            messages: vec![user(inputs.last().map_or("", String::as_str))],
            params: Some(params.into_iter().collect()),
            ..ModelRequest::default()
        })
        .await?;
        if self.interrupt {
            return Err(ApiError::status(StatusCode::Unavailable, "interrupted"));
        }
        sink.output("continued".into()).await
    }
}

/// The approval fixture: one REQUIRES_APPROVAL call `{id call, tool charge, key k}`; a park
/// ends the run with the park error; a decided call's receipt is kept for the check, then the
/// harness outputs `continued`.
#[derive(Debug, Default)]
pub struct ApprovalHarness {
    receipts: Mutex<Vec<ToolResult>>,
}

impl ApprovalHarness {
    /// The gated call it makes.
    pub fn call() -> ToolCall {
        ToolCall {
            id: "call".into(),
            tool: "charge".into(),
            args: None,
            mediation: Mediation::RequiresApproval,
            idempotency_key: "k".into(),
        }
    }

    /// Receipts handed to the harness, in order.
    ///
    /// # Panics
    /// When the lock was poisoned by a panicking run.
    pub fn receipts(&self) -> Vec<ToolResult> {
        self.receipts.lock().expect("receipt lock").clone()
    }
}

#[async_trait]
impl Harness for ApprovalHarness {
    async fn describe(&self) -> ApiResult<Descriptor> {
        Ok(descriptor("approval"))
    }

    async fn run(&self, _start: &Start, sink: &dyn EventSink) -> ApiResult<()> {
        let receipt = sink.tool_call(Self::call()).await?;
        if let Ok(mut all) = self.receipts.lock() {
            all.push(receipt);
        }
        sink.output("continued".into()).await
    }
}
