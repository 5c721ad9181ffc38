//! A small MCP server over stdio for this crate's tests, built on rmcp's server side.
//!
//! Tools: `add` (structured sum), `count` (increments a counter in the file named by
//! `MCP_FIXTURE_COUNT_FILE`, so tests count calls across restarts, then answers after `hold_ms`), `fail` (an error result),
//! `sleep` (waits `ms`), `crash` (exits the process), `garbage` (writes a line that is not
//! JSON-RPC to stdout and never answers), `grow` (adds the tool `extra` and announces
//! `notifications/tools/list_changed`), `env` (its whole environment, `NAME=value` a line),
//! `echo_env` (the value of the variable `name`, as a tool that echoes a secret it was given
//! would), `slow` (`steps` steps of `step_ms` each, a `notifications/progress` "step n" after
//! each), `log` (sends `notifications/message` at `level` with `text`, and writes `text` to
//! stderr).
//!
//! With `MCP_FIXTURE_TRACE_FILE` set, the `traceparent` in each `tools/call`'s `_meta` (SEP-414)
//! is appended to that file, one line per call (empty when the call carried none).
#![allow(clippy::print_stdout, reason = "stdout is the MCP transport")]
#![allow(
    deprecated,
    reason = "rmcp marks MCP logging deprecated; servers still send it"
)]

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};

#[derive(Debug, Clone, Default)]
struct Fixture {
    grown: Arc<AtomicBool>,
}

fn schema(properties: &Value) -> serde_json::Map<String, Value> {
    match json!({"type": "object", "properties": properties}) {
        Value::Object(object) => object,
        _ => serde_json::Map::new(),
    }
}

fn number(args: Option<&serde_json::Map<String, Value>>, name: &str) -> f64 {
    args.and_then(|a| a.get(name))
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

impl Fixture {
    fn tools(&self) -> Vec<Tool> {
        let number = json!({"type": "number"});
        let mut tools = vec![
            Tool::new(
                "add",
                "Adds a and b",
                schema(&json!({"a": number, "b": number})),
            ),
            Tool::new(
                "count",
                "Counts its calls; answers hold_ms milliseconds after counting",
                schema(&json!({"hold_ms": number})),
            ),
            Tool::new("fail", "Always fails", schema(&json!({}))),
            Tool::new(
                "sleep",
                "Sleeps ms milliseconds",
                schema(&json!({"ms": number})),
            ),
            Tool::new("crash", "Exits the server", schema(&json!({}))),
            Tool::new("garbage", "Writes invalid JSON-RPC", schema(&json!({}))),
            Tool::new("grow", "Adds the tool extra", schema(&json!({}))),
            Tool::new("env", "Its environment", schema(&json!({}))),
            Tool::new(
                "echo_env",
                "The value of the environment variable name",
                schema(&json!({"name": {"type": "string"}})),
            ),
            Tool::new(
                "slow",
                "Takes steps steps of step_ms milliseconds, reporting progress after each",
                schema(&json!({"steps": number, "step_ms": number})),
            ),
            Tool::new(
                "log",
                "Logs text at level (debug, info, warning, error) and writes it to stderr",
                schema(&json!({"level": {"type": "string"}, "text": {"type": "string"}})),
            ),
        ];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(Tool::new("extra", "Added at runtime", schema(&json!({}))));
        }
        tools
    }

    fn count() -> Result<u64, String> {
        let path = std::env::var("MCP_FIXTURE_COUNT_FILE")
            .map_err(|_| "MCP_FIXTURE_COUNT_FILE is not set".to_owned())?;
        let before = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let now = before + 1;
        std::fs::write(&path, now.to_string()).map_err(|e| e.to_string())?;
        Ok(now)
    }
}

/// Appends `traceparent` to the file `MCP_FIXTURE_TRACE_FILE` names, when it names one.
fn record_traceparent(traceparent: Option<&str>) {
    let Ok(path) = std::env::var("MCP_FIXTURE_TRACE_FILE") else {
        return;
    };
    let line = format!("{}\n", traceparent.unwrap_or_default());
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| file.write_all(line.as_bytes()));
    if let Err(e) = appended {
        // stderr: stdout is the transport.
        eprintln!("mcp-fixture-server: cannot record the traceparent in {path}: {e}");
    }
}

fn write_garbage() {
    let mut out = std::io::stdout().lock();
    let _ignored = out.write_all(b"this is {not json-rpc\n");
    let _ignored = out.flush();
}

fn text(value: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(value)])
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        record_traceparent(context.meta.get_traceparent());
        let args = request.arguments.as_ref();
        let result = match request.name.as_ref() {
            "add" => {
                let sum = number(args, "a") + number(args, "b");
                let mut result = text(sum.to_string());
                result.structured_content = Some(json!({"sum": sum}));
                result
            }
            "count" => match Self::count() {
                Ok(n) => {
                    // Counted before the answer, so a test can kill the host while the call is
                    // in flight and still see that the tool ran.
                    let hold = number(args, "hold_ms").max(0.0);
                    tokio::time::sleep(Duration::from_secs_f64(hold / 1000.0)).await;
                    text(n.to_string())
                }
                Err(e) => CallToolResult::error(vec![ContentBlock::text(e)]),
            },
            "fail" => {
                CallToolResult::error(vec![ContentBlock::text("the fixture failed on purpose")])
            }
            "sleep" => {
                let ms = number(args, "ms").max(0.0);
                tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
                text("slept")
            }
            "crash" => {
                #[allow(clippy::exit, reason = "the fixture's crash tool")]
                std::process::exit(3);
            }
            "garbage" => {
                write_garbage();
                // Its answer never comes: the client sees only the bad line.
                std::future::pending::<()>().await;
                text("unreachable")
            }
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                let _ignored = context.peer.notify_tool_list_changed().await;
                text("grown")
            }
            "extra" if self.grown.load(Ordering::SeqCst) => text("extra"),
            "env" => {
                let mut lines: Vec<String> = std::env::vars_os()
                    .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                    .collect();
                lines.sort();
                let mut result = text(lines.join("\n"));
                let names: Vec<String> = std::env::vars_os()
                    .map(|(k, _)| k.to_string_lossy().into_owned())
                    .collect();
                result.structured_content = Some(json!({"names": names}));
                result
            }
            "echo_env" => {
                let name = args
                    .and_then(|a| a.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match std::env::var(name) {
                    Ok(value) => {
                        let mut result = text(format!("{name} is {value}"));
                        result.structured_content = Some(json!({"value": value}));
                        result
                    }
                    Err(_) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "{name} is not set"
                    ))]),
                }
            }
            "slow" => {
                let steps = number(args, "steps").clamp(0.0, 1000.0);
                let step =
                    Duration::from_secs_f64(number(args, "step_ms").clamp(0.0, 60_000.0) / 1000.0);
                let token = context.meta.get_progress_token();
                let mut done = 0.0;
                while done < steps {
                    tokio::time::sleep(step).await;
                    done += 1.0;
                    if let Some(token) = &token {
                        let mut progress = ProgressNotificationParam::new(token.clone(), done);
                        progress.total = Some(steps);
                        progress.message = Some(format!("step {done}"));
                        let _ignored = context.peer.notify_progress(progress).await;
                    }
                }
                text(format!("{done} steps"))
            }
            "log" => {
                let text_arg = args
                    .and_then(|a| a.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let level = match args.and_then(|a| a.get("level")).and_then(Value::as_str) {
                    Some("debug") => LoggingLevel::Debug,
                    Some("warning") => LoggingLevel::Warning,
                    Some("error") => LoggingLevel::Error,
                    _ => LoggingLevel::Info,
                };
                eprintln!("{text_arg}");
                let mut message =
                    LoggingMessageNotificationParam::new(level, json!({"text": text_arg}));
                message.logger = Some("fixture".to_owned());
                let _ignored = context.peer.notify_logging_message(message).await;
                text("logged")
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other}"),
                    None,
                ));
            }
        };
        Ok(CallToolResponse::Complete(result))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = Fixture::default().serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
