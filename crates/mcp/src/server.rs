//! One configured MCP server: connecting to it, keeping its tool list current, noticing when it
//! dies and reconnecting with a bounded exponential backoff.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceExt as _};
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, BufReader,
};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::child::ChildPid;
use crate::config::{Endpoint, McpServerConfig};
use crate::delegation::DelegatingClient;
use crate::http_client;
use crate::notifications::{ProgressRoutes, ServerNotifications, bounded};
use crate::trace_context::TraceHeaders;

/// Most bytes of one line of a stdio server's stderr kept in one log line; a longer line goes
/// on in the next.
const MAX_STDERR_LINE: usize = 8192;
/// Bytes of a stdio server's stdout in transit between its relay and rmcp.
const RELAY_BUFFER: usize = 64 * 1024;

/// Backoff and startup bounds of the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpHubOptions {
    /// Wait before the first reconnection; doubled after each failed one.
    pub initial_backoff: Duration,
    /// The longest wait between reconnections.
    pub max_backoff: Duration,
    /// How long connecting (start and `initialize`) and listing tools may take.
    pub connect_timeout: Duration,
}

impl Default for McpHubOptions {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
        }
    }
}

/// Whether a server can take calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStatus {
    /// The first connection is being made.
    Starting,
    /// Connected; its tools are offered.
    Up,
    /// Not connected; calls to its tools are refused until a reconnection succeeds.
    Down {
        /// Why (the start, handshake or listing failure, or how the connection ended).
        reason: String,
    },
}

/// One server's health, as the daemon logs and exposes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHealth {
    /// The configured name.
    pub name: String,
    /// Whether it takes calls.
    pub status: ServerStatus,
    /// How many tools it offers (0 while down).
    pub tools: usize,
    /// How many times its connection was lost or failed after it first came up.
    pub failures: u32,
}

struct SlotState {
    status: ServerStatus,
    peer: Option<Peer<RoleClient>>,
    tools: Vec<Tool>,
    failures: u32,
}

/// A configured server and what is known about it right now.
pub(crate) struct ServerSlot {
    pub(crate) config: McpServerConfig,
    state: Mutex<SlotState>,
    /// Asks the supervisor to drop a connection whose transport failed a call (an HTTP
    /// endpoint that went away does not end the session by itself).
    reconnect: Notify,
    /// Wakes whoever reports health (one waiter; shared by the hub's slots) when the status or
    /// the tools change.
    changed: Arc<Notify>,
    /// Tools whose listing says `execution.taskSupport: "required"`: they answer only as MCP
    /// tasks, which this host does not run, so they are not offered (each logged once).
    task_only: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for ServerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSlot")
            .field("name", &self.config.name)
            .field("health", &self.health())
            .finish_non_exhaustive()
    }
}

impl ServerSlot {
    pub(crate) fn new(config: McpServerConfig, changed: Arc<Notify>) -> Self {
        Self {
            config,
            state: Mutex::new(SlotState {
                status: ServerStatus::Starting,
                peer: None,
                tools: Vec::new(),
                failures: 0,
            }),
            reconnect: Notify::new(),
            changed,
            task_only: Mutex::new(HashSet::new()),
        }
    }

    /// Notes the tools of a `tools/list` answer that only run as MCP tasks, logging each new one.
    fn note_task_only(&self, names: Vec<String>) {
        let mut known = self
            .task_only
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for name in names {
            if known.insert(name.clone()) {
                tracing::warn!(
                    component = "mcp",
                    server = %self.config.name,
                    tool = %name,
                    "MCP tool not offered: it runs only as an MCP task (execution.taskSupport \"required\"), which this host does not support"
                );
            }
        }
    }

    /// Reports that a call on the current connection failed in its transport.
    pub(crate) fn transport_failed(&self) {
        // Only a supervisor waiting now is woken: no permit outlives the connection it was for.
        self.reconnect.notify_waiters();
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // Plain assignments only; a panic elsewhere cannot leave the state half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn health(&self) -> ServerHealth {
        let state = self.lock();
        ServerHealth {
            name: self.config.name.clone(),
            status: state.status.clone(),
            tools: state.tools.len(),
            failures: state.failures,
        }
    }

    /// The tools offered: those listed, but the ones that only run as MCP tasks.
    pub(crate) fn tools(&self) -> Vec<Tool> {
        let task_only = self
            .task_only
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut tools = self.lock().tools.clone();
        tools.retain(|tool| !task_only.contains(tool.name.as_ref()));
        tools
    }

    /// The connection to call on, or why there is none.
    pub(crate) fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let state = self.lock();
        match (&state.peer, &state.status) {
            (Some(peer), _) => Ok(peer.clone()),
            (None, ServerStatus::Down { reason }) => Err(reason.clone()),
            (None, _) => Err("it has not finished starting".to_owned()),
        }
    }

    fn set_up(&self, peer: Peer<RoleClient>, tools: Vec<Tool>) {
        let mut state = self.lock();
        state.status = ServerStatus::Up;
        state.peer = Some(peer);
        state.tools = tools;
        drop(state);
        self.changed.notify_one();
    }

    fn set_tools(&self, tools: Vec<Tool>) {
        self.lock().tools = tools;
        self.changed.notify_one();
    }

    fn set_down(&self, reason: String) {
        let mut state = self.lock();
        state.status = ServerStatus::Down { reason };
        state.peer = None;
        state.tools.clear();
        state.failures = state.failures.saturating_add(1);
        drop(state);
        self.changed.notify_one();
    }
}

type Connection = RunningService<RoleClient, ServerNotifications>;

/// What a stdio server writes to stderr, one log line per line naming the server, so that a
/// daemon logging JSON stays JSON (and a text log says whose line it is). Ends at the pipe's
/// end or at `shutdown`.
async fn log_stderr(server: String, stderr: impl AsyncRead + Unpin, shutdown: CancellationToken) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(MAX_STDERR_LINE).unwrap_or(u64::MAX);
        let mut bounded_line = (&mut reader).take(limit);
        let read = tokio::select! {
            read = bounded_line.read_until(b'\n', &mut line) => read,
            () = shutdown.cancelled() => return,
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = bounded(text.trim_end_matches(['\n', '\r']), MAX_STDERR_LINE);
                tracing::info!(component = "mcp", server = %server, stderr = %text, "MCP server stderr");
            }
        }
    }
}

/// The tools of a `tools/list` answer (one JSON-RPC line) that only run as MCP tasks. rmcp's
/// `Tool` drops `execution`, so the line is read as it passes.
fn task_only_tools(line: &[u8]) -> Vec<String> {
    let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else {
        return Vec::new();
    };
    let Some(tools) = message.pointer("/result/tools").and_then(|t| t.as_array()) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter(|tool| {
            tool.pointer("/execution/taskSupport")
                .and_then(|v| v.as_str())
                == Some("required")
        })
        .filter_map(|tool| tool.get("name").and_then(|n| n.as_str()).map(str::to_owned))
        .collect()
}

/// Hands a stdio server's stdout on to rmcp line by line, noting the tools that only run as
/// MCP tasks, and reaps the child once its stdout ends. After `shutdown` it waits at most as
/// long as stopping the server may take.
async fn relay_stdout(
    slot: Arc<ServerSlot>,
    stdout: impl AsyncRead + Unpin,
    mut relay: tokio::io::DuplexStream,
    mut process: tokio::process::Child,
    shutdown: CancellationToken,
) {
    let relayed = async {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.windows(11).any(|w| w == b"taskSupport") {
                slot.note_task_only(task_only_tools(&line));
            }
            if relay.write_all(&line).await.is_err() {
                break;
            }
        }
        drop(relay);
        let _exited = process.wait().await;
    };
    let stopped = async {
        shutdown.cancelled().await;
        tokio::time::sleep(STOP_GRACE.saturating_add(KILL_WAIT)).await;
    };
    tokio::select! {
        () = relayed => {}
        // The child is killed when dropped here.
        () = stopped => {}
    }
}

/// What a connection's helpers need: the slot, and the tasks and shutdown of the hub.
type Helpers<'a> = (&'a Arc<ServerSlot>, &'a TaskTracker, &'a CancellationToken);

async fn connect(
    config: &McpServerConfig,
    watcher: ServerNotifications,
    child: &ChildPid,
    (slot, tasks, shutdown): Helpers<'_>,
) -> Result<Connection, String> {
    match config.validate().map_err(|e| e.to_string())? {
        Endpoint::Command(program) => {
            // A cleared environment plus what the entry names: the daemon's own holds the model
            // key and every token the operator exported (docs/security.md).
            let env = config.child_env(std::env::vars_os());
            tracing::info!(
                server = %config.name,
                env = %env.names(),
                "starting MCP server (environment variables by name)"
            );
            let mut command = tokio::process::Command::new(program);
            command
                .args(&config.args)
                .env_clear()
                .envs(env.vars())
                .kill_on_drop(true);
            if let Some(dir) = &config.cwd {
                command.current_dir(dir);
            }
            let piped = std::process::Stdio::piped;
            let mut process = command
                .stdin(piped())
                .stdout(piped())
                .stderr(piped())
                .spawn()
                .map_err(|e| format!("cannot start {program:?}: {e}"))?;
            child.started(process.id());
            let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
                return Err(format!("{program:?} started without its stdio"));
            };
            if let Some(stderr) = process.stderr.take() {
                tasks.spawn(log_stderr(config.name.clone(), stderr, shutdown.clone()));
            }
            let (transport_end, relay_end) = tokio::io::duplex(RELAY_BUFFER);
            tasks.spawn(relay_stdout(
                Arc::clone(slot),
                stdout,
                relay_end,
                process,
                shutdown.clone(),
            ));
            watcher
                .serve((transport_end, stdin))
                .await
                .map_err(|e| format!("initialize failed: {e}"))
        }
        Endpoint::Url(url) => {
            let mut headers = HashMap::new();
            for (name, variable) in &config.headers_from_env {
                let value = std::env::var(variable).map_err(|_| {
                    format!("header {name}: environment variable {variable} is not set")
                })?;
                let name = HeaderName::try_from(name.as_str())
                    .map_err(|e| format!("header {name:?}: {e}"))?;
                let mut value = HeaderValue::try_from(value)
                    .map_err(|_| format!("header {name}: the value of {variable} is not valid"))?;
                value.set_sensitive(true);
                headers.insert(name, value);
            }
            let transport_config =
                StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
            // Each tool call's trace context rides as headers too (`crate::trace_context`).
            if config.delegated_token.is_some() {
                let client = TraceHeaders::new(DelegatingClient::new(http_client::delegating()?));
                watcher
                    .serve(StreamableHttpClientTransport::with_client(
                        client,
                        transport_config,
                    ))
                    .await
                    .map_err(|e| format!("initialize failed: {e}"))
            } else {
                let client = TraceHeaders::new(http_client::plain()?);
                watcher
                    .serve(StreamableHttpClientTransport::with_client(
                        client,
                        transport_config,
                    ))
                    .await
                    .map_err(|e| format!("initialize failed: {e}"))
            }
        }
    }
}

/// Most pages one listing reads, and most tools it keeps. rmcp's `list_all_tools` follows
/// `nextCursor` for as long as a server hands one out, so a server repeating its cursor held the
/// supervisor (and grew its memory, page after page) without end.
const MAX_TOOL_PAGES: usize = 64;
const MAX_TOOLS: usize = 4096;

async fn list(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_TOOL_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let page = peer
            .list_tools(Some(params))
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        tools.extend(page.tools);
        if tools.len() > MAX_TOOLS {
            return Err(format!("tools/list offers more than {MAX_TOOLS} tools"));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!(
        "tools/list did not end within {MAX_TOOL_PAGES} pages"
    ))
}

/// How long a stopping stdio server has to exit after SIGTERM before it is killed (SIGKILL); an
/// HTTP server's session gets as long to close.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long a killed server's connection may take to end after that.
const KILL_WAIT: Duration = Duration::from_millis(500);

/// What one connection attempt ends with: the connection and its first tool list, or why not.
type Attempt = Result<Result<(Connection, Vec<Tool>), String>, tokio::time::error::Elapsed>;

/// Connects, connects again when the connection ends, until `shutdown`; then stops the child
/// (SIGTERM, SIGKILL after [`STOP_GRACE`]) within `STOP_GRACE` plus half a second, whether it
/// was connected or still starting. `ready`, when given, is sent once, after the first attempt
/// either succeeds or fails, so a caller can wait for discovery.
pub(crate) async fn supervise(
    slot: Arc<ServerSlot>,
    options: McpHubOptions,
    (shutdown, tasks): (CancellationToken, TaskTracker),
    progress: Arc<ProgressRoutes>,
    mut ready: Option<mpsc::Sender<()>>,
) {
    let name = slot.config.name.clone();
    let mut backoff = options.initial_backoff;
    loop {
        let (changed, mut list_changed) = mpsc::channel(1);
        let child = ChildPid::default();
        let attempt = tokio::time::timeout(options.connect_timeout, async {
            let notifications = ServerNotifications {
                server: name.clone(),
                list_changed: changed,
                progress: Arc::clone(&progress),
            };
            let connection = connect(
                &slot.config,
                notifications,
                &child,
                (&slot, &tasks, &shutdown),
            )
            .await?;
            match list(connection.peer()).await {
                Ok(tools) => Ok((connection, tools)),
                Err(e) => {
                    let _closed = connection.cancel().await;
                    Err(e)
                }
            }
        });
        tokio::pin!(attempt);
        let attempt = tokio::select! {
            () = shutdown.cancelled() => {
                stop_attempt(&name, attempt.as_mut(), &child).await;
                return;
            }
            attempt = &mut attempt => attempt.unwrap_or_else(|_| Err(format!(
                "no answer within {}s", options.connect_timeout.as_secs()
            ))),
        };
        let reason = match attempt {
            Ok((connection, tools)) => {
                tracing::info!(component = "mcp", server = %name, tools = tools.len(), "MCP server up");
                slot.set_up(connection.peer().clone(), tools);
                if let Some(ready) = ready.take() {
                    let _started = ready.send(()).await;
                }
                backoff = options.initial_backoff;
                let peer = connection.peer().clone();
                let stop = connection.cancellation_token();
                let ended = connection.waiting();
                tokio::pin!(ended);
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => {
                            stop_connection(&name, stop, ended.as_mut(), &child).await;
                            return;
                        }
                        quit = &mut ended => break match quit {
                            Ok(reason) => format!("the connection ended ({reason:?})"),
                            Err(e) => format!("the connection task failed: {e}"),
                        },
                        () = slot.reconnect.notified() => {
                            stop_connection(&name, stop, ended.as_mut(), &child).await;
                            break "a call failed in the transport; reconnecting".to_owned();
                        }
                        // Bounded like the first listing: this loop also watches for shutdown.
                        Some(()) = list_changed.recv() => match tokio::time::timeout(options.connect_timeout, list(&peer)).await {
                            Ok(Ok(tools)) => {
                                tracing::info!(component = "mcp", server = %name, tools = tools.len(), "MCP tool list changed");
                                slot.set_tools(tools);
                            }
                            Ok(Err(e)) => tracing::warn!(component = "mcp", server = %name, error = %e, "MCP tool list refresh failed"),
                            Err(_) => tracing::warn!(component = "mcp", server = %name, timeout_s = options.connect_timeout.as_secs(), "MCP tool list refresh got no answer"),
                        },
                    }
                }
            }
            Err(reason) => reason,
        };
        slot.set_down(reason.clone());
        if let Some(ready) = ready.take() {
            let _started = ready.send(()).await;
        }
        tracing::warn!(
            component = "mcp",
            server = %name,
            error = %reason,
            retry_in_ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX),
            "MCP server down; its tools are refused until it reconnects"
        );
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = backoff.saturating_mul(2).min(options.max_backoff);
    }
}

/// Stops an attempt cut by shutdown. A child that was started gets SIGTERM, and the attempt is
/// driven on while it exits (its end closes the child's stdout, which ends the handshake), then
/// SIGKILL once [`STOP_GRACE`] has passed; an attempt that connected meanwhile is stopped as a
/// connection. Without a child (an HTTP server, or before the spawn) dropping it is the stop.
async fn stop_attempt<F>(server: &str, mut attempt: std::pin::Pin<&mut F>, child: &ChildPid)
where
    F: std::future::Future<Output = Attempt>,
{
    if !child.terminate(server) {
        return;
    }
    let finished = match tokio::time::timeout(STOP_GRACE, &mut attempt).await {
        Ok(finished) => Some(finished),
        Err(_) => {
            child.kill(server);
            tokio::time::timeout(KILL_WAIT, &mut attempt).await.ok()
        }
    };
    if let Some(Ok(Ok((connection, _)))) = finished {
        let stop = connection.cancellation_token();
        let ended = connection.waiting();
        tokio::pin!(ended);
        stop_connection(server, stop, ended.as_mut(), child).await;
    }
}

/// Stops a connection: SIGTERM to its child first (while rmcp, which reaps it, still holds
/// it), then rmcp closes the session (and the child's stdin); SIGKILL when the connection has
/// not ended after [`STOP_GRACE`].
async fn stop_connection<F>(
    server: &str,
    stop: rmcp::service::RunningServiceCancellationToken,
    mut ended: std::pin::Pin<&mut F>,
    child: &ChildPid,
) where
    F: std::future::Future,
{
    child.terminate(server);
    stop.cancel();
    if tokio::time::timeout(STOP_GRACE, &mut ended).await.is_err() {
        if child.kill(server) {
            tracing::warn!(
                component = "mcp",
                server,
                grace_ms = u64::try_from(STOP_GRACE.as_millis()).unwrap_or(u64::MAX),
                "MCP server did not exit after SIGTERM; killed it"
            );
        }
        let _ended = tokio::time::timeout(KILL_WAIT, &mut ended).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A tools/list answer's task-only tools are read from its line: rmcp's Tool drops
    // `execution`.
    #[test]
    fn task_only_tools_are_read_from_a_tools_list_answer() {
        let line = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[
            {"name":"plain","inputSchema":{}},
            {"name":"optional","inputSchema":{},"execution":{"taskSupport":"optional"}},
            {"name":"research","inputSchema":{},"execution":{"taskSupport":"required"}}]}}"#;
        assert_eq!(task_only_tools(line), ["research"]);
        assert!(task_only_tools(b"not json").is_empty());
        assert!(task_only_tools(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#).is_empty());
    }
}
