//! What a connected MCP server tells the host unasked: its tool list changed (the supervisor
//! lists again), a running call's progress (forwarded to the session's streams, never
//! journaled: extensions §11) and its log messages (logged at the level they carry, as fields).
// rmcp marks MCP logging deprecated (SEP-2577); servers still send notifications/message.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use agentsessions_controller::{ProgressSink, ToolProgress};
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::mpsc;

/// Most bytes of a log message's data kept in one log line.
const MAX_LOG_DATA: usize = 4096;

/// The call a progress token was sent with.
#[derive(Debug, Clone)]
pub(crate) struct CallRoute {
    pub(crate) session_uid: String,
    pub(crate) execution_id: String,
    pub(crate) tool_call_id: String,
    /// The tool as the model sees it.
    pub(crate) tool: String,
}

/// The calls in flight by `(server, progress token)` (each connection numbers its own tokens),
/// and where their progress goes.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    calls: Mutex<HashMap<(String, ProgressToken), CallRoute>>,
    sink: OnceLock<Arc<dyn ProgressSink>>,
}

impl std::fmt::Debug for ProgressRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressRoutes")
            .field("in_flight", &self.lock().len())
            .field("reported", &self.sink.get().is_some())
            .finish()
    }
}

impl ProgressRoutes {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, ProgressToken), CallRoute>> {
        // Inserts and removals only: a panic elsewhere cannot leave the map inconsistent.
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends progress to `sink` from now on; the first sink set stays.
    pub(crate) fn report_to(&self, sink: Arc<dyn ProgressSink>) {
        let _kept = self.sink.set(sink);
    }

    /// Notes the call sent to `server` with `token` until the returned guard is dropped; `None`
    /// when nobody takes progress.
    pub(crate) fn route(
        self: &Arc<Self>,
        server: &str,
        token: ProgressToken,
        call: CallRoute,
    ) -> Option<RouteGuard> {
        self.sink.get()?;
        let key = (server.to_owned(), token);
        self.lock().insert(key.clone(), call);
        Some(RouteGuard {
            routes: Arc::clone(self),
            key,
        })
    }

    fn report(&self, server: &str, params: ProgressNotificationParam) {
        let Some(sink) = self.sink.get() else {
            return;
        };
        let route = self
            .lock()
            .get(&(server.to_owned(), params.progress_token.clone()))
            .cloned();
        let Some(route) = route else {
            // A call that already ended, or a token this host never sent.
            tracing::debug!(component = "mcp", server, "progress for no call in flight");
            return;
        };
        sink.progress(ToolProgress {
            session_uid: route.session_uid,
            execution_id: route.execution_id,
            tool_call_id: route.tool_call_id,
            tool: route.tool,
            progress: params.progress,
            total: params.total,
            message: params.message.unwrap_or_default(),
        });
    }
}

/// Forgets a call's progress token once the call ended.
#[derive(Debug)]
pub(crate) struct RouteGuard {
    routes: Arc<ProgressRoutes>,
    key: (String, ProgressToken),
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        self.routes.lock().remove(&self.key);
    }
}

/// One connection's handler of what its server tells the host.
#[derive(Debug, Clone)]
pub(crate) struct ServerNotifications {
    pub(crate) server: String,
    /// Asks the supervisor to list the tools again.
    pub(crate) list_changed: mpsc::Sender<()>,
    pub(crate) progress: Arc<ProgressRoutes>,
}

impl ClientHandler for ServerNotifications {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // A full channel already holds a pending refresh, which will see this change too.
        let _pending = self.list_changed.try_send(());
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.report(&self.server, params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        log_message(&self.server, &params);
    }
}

/// Logs a server's `notifications/message` at its level: the server, its logger and its data
/// as fields (a string as it is, anything else as JSON), bounded.
pub(crate) fn log_message(server: &str, params: &LoggingMessageNotificationParam) {
    let data = match &params.data {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let data = bounded(&data, MAX_LOG_DATA);
    let logger = params.logger.as_deref().unwrap_or_default();
    let level = level_name(&params.level);
    match params.level {
        LoggingLevel::Debug => {
            tracing::debug!(
                component = "mcp",
                server,
                logger,
                mcp_level = level,
                data,
                "MCP server log"
            );
        }
        LoggingLevel::Info | LoggingLevel::Notice => {
            tracing::info!(
                component = "mcp",
                server,
                logger,
                mcp_level = level,
                data,
                "MCP server log"
            );
        }
        LoggingLevel::Warning => {
            tracing::warn!(
                component = "mcp",
                server,
                logger,
                mcp_level = level,
                data,
                "MCP server log"
            );
        }
        LoggingLevel::Error
        | LoggingLevel::Critical
        | LoggingLevel::Alert
        | LoggingLevel::Emergency => {
            tracing::error!(
                component = "mcp",
                server,
                logger,
                mcp_level = level,
                data,
                "MCP server log"
            );
        }
    }
}

fn level_name(level: &LoggingLevel) -> &'static str {
    match level {
        LoggingLevel::Debug => "debug",
        LoggingLevel::Info => "info",
        LoggingLevel::Notice => "notice",
        LoggingLevel::Warning => "warning",
        LoggingLevel::Error => "error",
        LoggingLevel::Critical => "critical",
        LoggingLevel::Alert => "alert",
        LoggingLevel::Emergency => "emergency",
    }
}

/// `text` cut to at most `max` bytes on a character boundary, saying so.
pub(crate) fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}
