//! [`McpHub`]: every configured MCP server behind one tool catalog and one tool executor.
//!
//! The model sees each tool as `<server>__<tool>` (server names hold no `_`, so the split is
//! unambiguous and two servers' tools never clash). Calls are mediated: the ledger claims each
//! one durably before it is sent, so a re-driven call is answered from the ledger or reported as
//! of unknown outcome, never sent twice. A server configured with `delegated_token` gets, on each
//! call, a token the host mints for that call just before sending it (`crate::delegation`).
//! A call's `notifications/progress` go to the sink [`McpHub::report_progress`] names, with the
//! session, execution and call they belong to (extensions §11).

use std::sync::Arc;

use agentsessions_api::{
    ApiError, ApiErrorKind, OfferedTool, StatusCode, ToolCall, ToolCatalog, ToolDefinition,
    ToolResult,
};
use agentsessions_auth::DelegatedTokens;
use agentsessions_controller::{ProgressSink, ToolCallContext, ToolExecutor};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleClient, ServiceError};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{McpServerConfig, NAME_SEPARATOR, validate_all};
use crate::delegation::DelegatedToken;
use crate::error::Result;
use crate::ledger::{Claim, StoredOutcome, ToolLedger};
use crate::notifications::{CallRoute, ProgressRoutes};
use crate::result::{error_result, from_outcome};
use crate::server::{McpHubOptions, ServerHealth, ServerSlot, supervise};

/// The MCP servers of a host. Share it as `Arc<McpHub>`; call [`McpHub::shutdown`] before exit.
pub struct McpHub {
    servers: Vec<Arc<ServerSlot>>,
    ledger: ToolLedger,
    /// Mints the token each `tools/call` to a `delegated_token` server carries; `None` on a
    /// host without `[identity]` (no server may then ask for one).
    tokens: Option<Arc<dyn DelegatedTokens>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    /// Woken by every slot when its status or tools change ([`McpHub::changed`]).
    changed: Arc<Notify>,
    /// The calls in flight, for their progress.
    progress: Arc<ProgressRoutes>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("servers", &self.servers)
            .field("ledger", &self.ledger)
            .field("delegated_tokens", &self.tokens.is_some())
            .finish_non_exhaustive()
    }
}

impl McpHub {
    /// Starts every server and waits until each has been connected and listed, or has failed
    /// its first attempt (a failed server keeps retrying in the background).
    ///
    /// # Errors
    /// [`crate::McpError::Config`] for an invalid entry (a `delegated_token` one among them: this
    /// hub mints nothing); nothing is started then.
    pub async fn start(
        servers: Vec<McpServerConfig>,
        ledger: ToolLedger,
        options: McpHubOptions,
    ) -> Result<Self> {
        Self::start_with_tokens(servers, ledger, options, None).await
    }

    /// [`McpHub::start`] on a host that mints delegated tokens: `tokens` mints the one each
    /// `tools/call` to a `delegated_token` server carries.
    ///
    /// # Errors
    /// [`crate::McpError::Config`] for an invalid entry, or a `delegated_token` one when
    /// `tokens` is `None`; nothing is started then.
    pub async fn start_with_tokens(
        servers: Vec<McpServerConfig>,
        ledger: ToolLedger,
        options: McpHubOptions,
        tokens: Option<Arc<dyn DelegatedTokens>>,
    ) -> Result<Self> {
        let count = servers.len();
        let (ready, mut started) = mpsc::channel(count.max(1));
        // Should the caller stop waiting (drop this future), the hub is dropped and its
        // supervisors stop instead of reconnecting for ever with no hub to shut them down.
        let hub = Self::spawn(servers, ledger, options, tokens, Some(ready))?;
        for _ in 0..count {
            if started.recv().await.is_none() {
                break;
            }
        }
        Ok(hub)
    }

    /// [`McpHub::start_with_tokens`] without waiting: every server starts connecting in the
    /// background and reports [`crate::ServerStatus::Starting`] until its first attempt ends;
    /// its tools are offered once it is up ([`McpHub::changed`] tells when). A host serves at
    /// once, whatever its MCP servers do. Call it within a tokio runtime.
    ///
    /// # Errors
    /// As [`McpHub::start_with_tokens`]; nothing is started then.
    pub fn launch_with_tokens(
        servers: Vec<McpServerConfig>,
        ledger: ToolLedger,
        options: McpHubOptions,
        tokens: Option<Arc<dyn DelegatedTokens>>,
    ) -> Result<Self> {
        Self::spawn(servers, ledger, options, tokens, None)
    }

    fn spawn(
        servers: Vec<McpServerConfig>,
        ledger: ToolLedger,
        options: McpHubOptions,
        tokens: Option<Arc<dyn DelegatedTokens>>,
        ready: Option<mpsc::Sender<()>>,
    ) -> Result<Self> {
        validate_all(&servers, tokens.is_some())?;
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let changed = Arc::new(Notify::new());
        let progress = Arc::new(ProgressRoutes::default());
        let slots: Vec<Arc<ServerSlot>> = servers
            .into_iter()
            .map(|config| Arc::new(ServerSlot::new(config, Arc::clone(&changed))))
            .collect();
        for slot in &slots {
            tracing::info!(component = "mcp", server = %slot.config.name, "starting MCP server");
            tasks.spawn(supervise(
                Arc::clone(slot),
                options,
                (shutdown.clone(), tasks.clone()),
                Arc::clone(&progress),
                ready.clone(),
            ));
        }
        tasks.close();
        Ok(Self {
            servers: slots,
            ledger,
            tokens,
            shutdown,
            tasks,
            changed,
            progress,
        })
    }

    /// Resolves once a server's status or tools changed since the last call resolved (or since
    /// the hub started). Meant for one waiter, the host's health reporter.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Every server's health, in configuration order.
    pub fn health(&self) -> Vec<ServerHealth> {
        self.servers.iter().map(|slot| slot.health()).collect()
    }

    /// Stops every server and waits for the supervisors to end: a stdio child gets SIGTERM, and
    /// SIGKILL if it has not exited 2 s later, so this returns within about 2.5 s.
    /// Sends the progress servers report for running calls to `sink` (the host's streams,
    /// extensions §11); without it, progress is dropped. The first sink set stays.
    pub fn report_progress(&self, sink: Arc<dyn ProgressSink>) {
        self.progress.report_to(sink);
    }

    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tasks.wait().await;
    }

    /// The server and its own tool name for a model-facing name.
    fn resolve(&self, offered: &str) -> Option<(&Arc<ServerSlot>, String)> {
        let (server, tool) = offered.split_once(NAME_SEPARATOR)?;
        let slot = self.servers.iter().find(|s| s.config.name == server)?;
        Some((slot, tool.to_owned()))
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        // Supervisors end (and their children are killed) even if shutdown was never awaited.
        self.shutdown.cancel();
    }
}

impl ToolCatalog for McpHub {
    fn offered(&self) -> Vec<OfferedTool> {
        self.servers
            .iter()
            .flat_map(|slot| {
                slot.tools().into_iter().map(|tool| OfferedTool {
                    definition: ToolDefinition {
                        name: slot.config.offered_name(&tool.name),
                        description: tool.description.as_deref().unwrap_or_default().to_owned(),
                        input_schema: Some((*tool.input_schema).clone()),
                    },
                    mediation: slot.config.approval.mediation(&tool.name),
                })
            })
            .collect()
    }
}

fn ledger_failure(e: &crate::McpError) -> ApiError {
    ApiError::Status {
        code: StatusCode::Unavailable,
        message: e.to_string(),
    }
}

/// What became of a `tools/call` that was sent.
enum Sent {
    Answered(CallToolResult),
    Failed(ServiceError),
    TimedOut,
}

/// Sends `params` to `peer`, with `token` in its `Authorization` header when there is one,
/// waiting at most `limit`; the call's progress goes where `progress` routes it while it runs.
async fn send(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    token: Option<DelegatedToken>,
    limit: std::time::Duration,
    (server, routes, route): (&str, &Arc<ProgressRoutes>, CallRoute),
) -> Sent {
    // A token rides in this request's extensions to the transport's client, which moves it to
    // the header (`crate::delegation`). rmcp's timeout decides (it also tells the server to
    // cancel); the outer one only bounds a send that never reaches the transport.
    let mut request = CallToolRequest::new(params);
    if let Some(token) = token {
        request.extensions.insert(token);
    }
    let backstop = limit.saturating_add(std::time::Duration::from_secs(1));
    let answered = tokio::time::timeout(backstop, async {
        let handle = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(request),
                PeerRequestOptions::with_timeout(limit),
            )
            .await?;
        // rmcp stamps every request with a progress token of its own; routed until the answer.
        let _routed = routes.route(server, handle.progress_token.clone(), route);
        handle.await_response().await
    })
    .await;
    match answered {
        Ok(Ok(ServerResult::CallToolResult(answer))) => Sent::Answered(answer),
        Ok(Ok(_)) => Sent::Failed(ServiceError::UnexpectedResponse),
        Ok(Err(ServiceError::Timeout { .. })) | Err(_) => Sent::TimedOut,
        Ok(Err(e)) => Sent::Failed(e),
    }
}

impl McpHub {
    /// The token for `call` to `server` when its entry asks for one: `Ok(None)` when it does
    /// not, `Err(text)` (the model's error result) when none could be minted.
    async fn delegated_token(
        &self,
        slot: &ServerSlot,
        call_context: &ToolCallContext<'_>,
        call: &ToolCall,
    ) -> std::result::Result<Option<DelegatedToken>, String> {
        let Some(delegated) = &slot.config.delegated_token else {
            return Ok(None);
        };
        let server = slot.config.name.as_str();
        let Some(tokens) = &self.tokens else {
            // Startup refuses this configuration; kept closed should a hub be built otherwise.
            return Err(format!(
                "MCP server {server:?} needs a delegated token but the host mints none; tool \
                 {:?} was not called",
                call.tool
            ));
        };
        match tokens
            .token_for(
                &delegated.audience,
                call_context.session_uid,
                call_context.execution_id,
                &call.id,
            )
            .await
        {
            Ok(token) => Ok(Some(DelegatedToken(token))),
            Err(e) if e.is(ApiErrorKind::PermissionDenied) => Err(format!(
                "the host's policy refused a delegated token for {:?} (MCP server {server:?}); \
                 tool {:?} was not called",
                delegated.audience, call.tool
            )),
            Err(e) => Err(format!(
                "no delegated token could be minted for {:?} (MCP server {server:?}): {e}; tool \
                 {:?} was not called",
                delegated.audience, call.tool
            )),
        }
    }
}

#[async_trait::async_trait]
impl ToolExecutor for McpHub {
    /// A tool of a configured server, whether or not that server is up right now.
    fn runs(&self, tool: &str) -> bool {
        self.resolve(tool).is_some()
    }

    async fn execute(
        &self,
        session_uid: &str,
        call: &ToolCall,
    ) -> agentsessions_api::Result<ToolResult> {
        // No execution is known: a `delegated_token` server's calls are refused (nothing to
        // mint for), the others run as usual.
        self.execute_for(&ToolCallContext::new(session_uid, ""), call)
            .await
    }

    async fn execute_for(
        &self,
        call_context: &ToolCallContext<'_>,
        call: &ToolCall,
    ) -> agentsessions_api::Result<ToolResult> {
        let session_uid = call_context.session_uid;
        let Some((slot, tool)) = self.resolve(&call.tool) else {
            return Ok(error_result(format!(
                "unknown tool {:?}: no configured MCP server offers it",
                call.tool
            )));
        };
        let server = slot.config.name.as_str();
        let key = if call.idempotency_key.is_empty() {
            call.id.as_str()
        } else {
            call.idempotency_key.as_str()
        };
        // The ledger is consulted first: a call already sent is answered from it even while its
        // server is down.
        match self
            .ledger
            .claim(session_uid, key, &call.tool)
            .await
            .map_err(|e| ledger_failure(&e))?
        {
            Claim::Finished(outcome) => return Ok(from_outcome(&outcome)),
            Claim::Interrupted => {
                return Ok(error_result(format!(
                    "tool {:?} was sent before an interruption and its outcome is unknown; it was \
                     not run again (check its effects before retrying)",
                    call.tool
                )));
            }
            Claim::Fresh => {}
        }
        let reachable = match slot.peer() {
            Ok(peer) if slot.tools().iter().any(|t| t.name == tool) => Ok(peer),
            Ok(_) => Err(format!(
                "unknown tool {:?}: MCP server {server:?} does not offer {tool:?}",
                call.tool
            )),
            Err(why) => Err(format!(
                "MCP server {server:?} is unavailable ({why}); tool {tool:?} was not called"
            )),
        };
        // A token is minted only for a call about to be sent, and a refused one sends nothing.
        let sendable = match reachable {
            Ok(peer) => self
                .delegated_token(slot, call_context, call)
                .await
                .map(|token| (peer, token)),
            Err(text) => Err(text),
        };
        let (peer, token) = match sendable {
            Ok(sendable) => sendable,
            Err(text) => {
                // Nothing was sent: the claim would otherwise turn a later retry into "unknown".
                self.ledger
                    .release(session_uid, key)
                    .await
                    .map_err(|e| ledger_failure(&e))?;
                return Ok(error_result(text));
            }
        };
        let mut params = CallToolRequestParams::new(tool.clone());
        params.arguments.clone_from(&call.args);
        crate::trace_context::stamp(&mut params);
        let limit = slot.config.timeout(&tool);
        let route = CallRoute {
            session_uid: session_uid.to_owned(),
            execution_id: call_context.execution_id.to_owned(),
            tool_call_id: call.id.clone(),
            tool: call.tool.clone(),
        };
        let progress = (server, &self.progress, route);
        let outcome = match send(&peer, params, token, limit, progress).await {
            Sent::Answered(answer) => StoredOutcome::Answered(answer),
            Sent::Failed(e) => {
                if matches!(
                    e,
                    rmcp::ServiceError::TransportSend(_) | rmcp::ServiceError::TransportClosed
                ) {
                    slot.transport_failed();
                }
                StoredOutcome::Unanswered(format!(
                    "MCP server {server:?} failed during the call to {tool:?} ({e}); the tool may \
                 have run, its outcome is unknown"
                ))
            }
            Sent::TimedOut => StoredOutcome::Unanswered(format!(
                "tool {tool:?} on MCP server {server:?} timed out after {}s; it may still be \
                 running, its outcome is unknown",
                limit.as_secs()
            )),
        };
        if let StoredOutcome::Unanswered(text) = &outcome {
            tracing::warn!(component = "mcp", server, tool, error = %text, "MCP tool call failed");
        }
        self.ledger
            .finish(session_uid, key, &outcome)
            .await
            .map_err(|e| ledger_failure(&e))?;
        Ok(from_outcome(&outcome))
    }
}
