//! Observability through the real binaries on 127.0.0.1: `agentsessionsd` exports its spans to
//! an OTLP receiver started here (a tonic TraceService, or an HTTP endpoint decoding the OTLP
//! protobuf), runs a chat turn against a stub OpenAI-format model that asks for a real MCP tool
//! (the mcp crate's fixture server), and the test reads back the span tree, the GenAI
//! attributes and the W3C trace context the model provider and a remote harness received.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use common::{Daemon, fixture_server};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};

const KEY_VARIABLE: &str = "TELEMETRY_TEST_MODEL_KEY";
/// A prompt the stub model answers with 503.
const PROVIDER_DOWN: &str = "provider down";

/// Spans received so far, from every export.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Span>>>);

impl Received {
    fn take(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.0.lock().unwrap();
        for resource in request.resource_spans {
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
    }

    fn spans(&self) -> Vec<Span> {
        self.0.lock().unwrap().clone()
    }

    /// Waits until `ready` holds of the spans received (or fails after 30 s).
    fn wait_for(&self, what: &str, ready: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let spans = self.spans();
            if ready(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "{what} never arrived; got {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.take(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A tokio runtime for the test's servers; they stop with it.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn bind(runtime: &tokio::runtime::Runtime) -> (tokio::net::TcpListener, u16) {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// An OTLP/gRPC receiver; its endpoint.
fn grpc_receiver(runtime: &tokio::runtime::Runtime, received: &Received) -> String {
    let (listener, port) = bind(runtime);
    let service = TraceServiceServer::new(received.clone());
    runtime.spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let _ = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming)
            .await;
    });
    format!("http://127.0.0.1:{port}")
}

/// An OTLP/HTTP receiver (protobuf bodies on `POST /v1/traces`); its base endpoint.
fn http_receiver(runtime: &tokio::runtime::Runtime, received: &Received) -> String {
    let (listener, port) = bind(runtime);
    let received = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let received = received.clone();
            async move {
                let request: ExportTraceServiceRequest = prost::Message::decode(body).unwrap();
                received.take(request);
                let response = ExportTraceServiceResponse {
                    partial_success: None,
                };
                (
                    [(header::CONTENT_TYPE, "application/x-protobuf")],
                    prost::Message::encode_to_vec(&response),
                )
            }
        }),
    );
    runtime.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://127.0.0.1:{port}")
}

/// The stub model's answer: a tool call for `call NAME {json}`, text after a tool result.
fn answer(request: &Value) -> Value {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let usage = json!({"prompt_tokens": 11, "completion_tokens": 7});
    let text = last["content"].as_str().unwrap_or_default().to_owned();
    let message = match text.strip_prefix("call ") {
        Some(directive) if last["role"] != "tool" => {
            let (name, arguments) = directive.split_once(' ').unwrap_or((directive, "{}"));
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
            ]})
        }
        _ => json!({"role": "assistant", "content": format!("done: {}", last["content"])}),
    };
    let finish = if message["tool_calls"].is_array() {
        "tool_calls"
    } else {
        "stop"
    };
    json!({"model": "stub-model-2025", "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})
}

/// `answer` as an event stream, for a request that asks to stream.
fn as_stream(whole: &Value) -> String {
    let choice = &whole["choices"][0];
    let mut delta = choice["message"].clone();
    if let Some(calls) = delta["tool_calls"].as_array_mut() {
        for (i, call) in calls.iter_mut().enumerate() {
            call["index"] = json!(i);
        }
    }
    let chunk = json!({"model": whole["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}]});
    let usage = json!({"choices": [], "usage": whole["usage"]});
    format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n")
}

/// The stub model on 127.0.0.1; remembers the `traceparent` of each request.
fn stub_model(runtime: &tokio::runtime::Runtime, traceparents: &Arc<Mutex<Vec<String>>>) -> String {
    let (listener, port) = bind(runtime);
    let seen = Arc::clone(traceparents);
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let seen = Arc::clone(&seen);
            async move {
                let traceparent = headers
                    .get("traceparent")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().unwrap().push(traceparent);
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let last = request["messages"].as_array().and_then(|m| m.last());
                if last.is_some_and(|m| m["content"] == PROVIDER_DOWN) {
                    return (
                        StatusCode::SERVICE_UNAVAILABLE,
                        [(header::CONTENT_TYPE, "application/json")],
                        json!({"error": {"message": "overloaded", "type": "server_error"}})
                            .to_string(),
                    )
                        .into_response();
                }
                let whole = answer(&request);
                if request["stream"] == true {
                    (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, "text/event-stream")],
                        as_stream(&whole),
                    )
                        .into_response()
                } else {
                    (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, "application/json")],
                        whole.to_string(),
                    )
                        .into_response()
                }
            }
        }),
    );
    runtime.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// Writes the daemon's config: the stub model, the fixture MCP server, and `telemetry`.
fn write_config(dir: &Path, model_url: &str, telemetry: &str) -> PathBuf {
    write_config_with(dir, model_url, "\"never\"", "", telemetry)
}

/// [`write_config`] with the fixture's `approval` and `extra` top-level settings.
fn write_config_with(
    dir: &Path,
    model_url: &str,
    approval: &str,
    extra: &str,
    telemetry: &str,
) -> PathBuf {
    let config = dir.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = \"agents.db\"\n\
             model = \"stub-model\"\n\
             model_provider = \"openai\"\n\
             model_base_url = \"{model_url}\"\n\
             model_api_key_env = \"{KEY_VARIABLE}\"\n\
             {extra}\n\
             [[mcp_servers]]\n\
             name = \"fixture\"\n\
             command = \"{server}\"\n\
             env = {{ MCP_FIXTURE_COUNT_FILE = \"{count}\", MCP_FIXTURE_TRACE_FILE = \"{traces}\" }}\n\
             approval = {approval}\n\
             [telemetry]\n\
             {telemetry}\n",
            server = fixture_server().display(),
            count = dir.join("count").display(),
            traces = dir.join("traceparents").display(),
        ),
    )
    .unwrap();
    config
}

/// The daemon with `config`, exporting spans without waiting out the default batch delay.
fn start(dir: &Path, config: &Path, env: &[(&str, &str)]) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--config"])
        .arg(config)
        .current_dir(dir)
        .env(KEY_VARIABLE, "stub-key")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .stderr(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    Daemon::spawn(command, false)
}

fn attributes(span: &Span) -> HashMap<String, Any> {
    span.attributes
        .iter()
        .filter_map(|kv| Some((kv.key.clone(), kv.value.clone()?.value?)))
        .collect()
}

fn text(span: &Span, key: &str) -> String {
    match attributes(span).get(key) {
        Some(Any::StringValue(s)) => s.clone(),
        other => panic!("{} has {key} = {other:?}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attributes(span).get(key) {
        Some(Any::IntValue(i)) => *i,
        other => panic!("{} has {key} = {other:?}", span.name),
    }
}

/// A string-array attribute of `span`.
fn strings(span: &Span, key: &str) -> Vec<String> {
    match attributes(span).get(key) {
        Some(Any::ArrayValue(array)) => array
            .values
            .iter()
            .map(|v| match &v.value {
                Some(Any::StringValue(s)) => s.clone(),
                other => panic!("{} has {key} holding {other:?}", span.name),
            })
            .collect(),
        other => panic!("{} has {key} = {other:?}", span.name),
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one {name} span: {:?}", found);
    found[0]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The trace id and parent span id of a W3C `traceparent` (`00-TRACE-PARENT-FLAGS`).
fn trace_and_parent(traceparent: &str) -> (String, String) {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "a W3C traceparent: {traceparent:?}");
    (parts[1].to_owned(), parts[2].to_owned())
}

/// Whether `span` is `ancestor` or runs, at any depth, inside it.
fn descends_from(spans: &[Span], span: &Span, ancestor: &Span) -> bool {
    let mut current = span;
    for _ in 0..spans.len() {
        if current.span_id == ancestor.span_id {
            return true;
        }
        match spans.iter().find(|s| s.span_id == current.parent_span_id) {
            Some(parent) => current = parent,
            None => return false,
        }
    }
    false
}

const TURN: &str = "invoke_agent chat";
const MODEL_CALL: &str = "chat stub-model";
const TOOL_CALL: &str = "execute_tool fixture__count";
const EXEC: &str = "agentsessions.v1.Sessions/Exec";
const JOURNAL_COMMIT: &str = "journal commit";

fn turn_is_exported(spans: &[Span]) -> bool {
    named(spans, MODEL_CALL).len() == 2
        && named(spans, TOOL_CALL).len() == 1
        && named(spans, TURN).len() == 1
        && named(spans, EXEC).len() == 1
}

// Tracing: one trace per RPC — Exec, inside it the turn, inside that both model calls and the
// tool call, with their GenAI attributes; the provider sees the model call's trace context;
// content stays off the spans unless enabled.
#[test]
fn a_turn_is_one_trace_with_genai_spans_over_otlp_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = runtime();
    let received = Received::default();
    let endpoint = grpc_receiver(&rt, &received);
    let traceparents = Arc::new(Mutex::new(Vec::new()));
    let model_url = stub_model(&rt, &traceparents);
    let config = write_config(
        d,
        &model_url,
        &format!("otlp_endpoint = \"{endpoint}\"\notlp_protocol = \"grpc\""),
    );
    let daemon = start(d, &config, &[]);
    daemon.wait_for_mcp(&["fixture"]);

    let out = daemon.ok(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]);
    assert!(out.contains("END  COMPLETED"), "{out}");
    let spans = received.wait_for("the turn's spans", turn_is_exported);

    let exec = one(&spans, EXEC);
    let turn = one(&spans, TURN);
    let tool = one(&spans, TOOL_CALL);
    let models = named(&spans, MODEL_CALL);
    assert!(exec.parent_span_id.is_empty(), "Exec is the trace's root");
    assert_eq!(text(exec, "rpc.system"), "grpc");
    assert_eq!(turn.parent_span_id, exec.span_id, "the turn runs in Exec");
    for span in models.iter().copied().chain([tool]) {
        assert_eq!(
            span.trace_id, exec.trace_id,
            "{} is in the RPC's trace",
            span.name
        );
        assert_eq!(
            span.parent_span_id, turn.span_id,
            "{} is the turn's child",
            span.name
        );
    }

    let uid = out
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap();
    assert_eq!(text(turn, "session_uid"), uid);
    assert_eq!(text(turn, "gen_ai.conversation.id"), uid);
    assert_eq!(text(turn, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(turn, "gen_ai.agent.name"), "chat");
    assert!(!text(turn, "execution_id").is_empty());

    for model in &models {
        assert_eq!(text(model, "gen_ai.operation.name"), "chat");
        assert_eq!(text(model, "gen_ai.provider.name"), "openai");
        assert_eq!(text(model, "gen_ai.request.model"), "stub-model");
        assert_eq!(int(model, "gen_ai.usage.input_tokens"), 11);
        assert_eq!(int(model, "gen_ai.usage.output_tokens"), 7);
        assert!(!matches!(
            attributes(model).get("agentsessions.replayed"),
            Some(Any::BoolValue(true))
        ));
        let attrs = attributes(model);
        assert!(
            !attrs.contains_key("gen_ai.input.messages"),
            "content is off by default"
        );
        assert!(
            !attrs.contains_key("gen_ai.output.messages"),
            "content is off by default"
        );
    }
    // A string array, as the GenAI conventions type it.
    let reasons: Vec<Vec<String>> = models
        .iter()
        .map(|m| strings(m, "gen_ai.response.finish_reasons"))
        .collect();
    assert!(
        reasons.contains(&vec!["tool_calls".to_owned()]),
        "{reasons:?}"
    );
    assert!(reasons.contains(&vec!["stop".to_owned()]), "{reasons:?}");

    assert_eq!(text(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(text(tool, "gen_ai.tool.name"), "fixture__count");
    assert!(!text(tool, "gen_ai.tool.call.id").is_empty());
    assert_eq!(
        text(tool, "agentsessions.tool.mediation"),
        "CONTROLLER_MEDIATED"
    );

    // Each journal commit of the turn is a span of its trace, under the turn.
    let commits: Vec<&Span> = named(&spans, JOURNAL_COMMIT)
        .into_iter()
        .filter(|c| c.trace_id == exec.trace_id)
        .collect();
    assert!(
        commits.len() >= 2,
        "the turn's commits are traced: {commits:?}"
    );
    for commit in &commits {
        assert!(int(commit, "agentsessions.journal.records") >= 1);
        // Only commits the turn waited for are spans; deferred appends ride the next one.
        assert_eq!(
            attributes(commit).get("agentsessions.journal.durable"),
            Some(&Any::BoolValue(true)),
            "{commit:?}"
        );
        assert!(
            descends_from(&spans, commit, turn),
            "a commit of the turn runs inside it"
        );
    }

    // The stdio MCP server got the tool call's context in the request's `_meta` (SEP-414).
    let recorded = std::fs::read_to_string(d.join("traceparents")).unwrap();
    let recorded: Vec<&str> = recorded.lines().collect();
    assert_eq!(recorded.len(), 1, "one tools/call: {recorded:?}");
    assert_eq!(
        trace_and_parent(recorded[0]),
        (hex(&exec.trace_id), hex(&tool.span_id)),
        "the server's _meta names the tool-call span"
    );

    // The provider received each model call's context: the trace, and the model span as parent.
    let seen = traceparents.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (traceparent, model) in seen.iter().zip(&models) {
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "a W3C traceparent: {traceparent:?}");
        assert_eq!(parts[1], hex(&exec.trace_id), "{traceparent}");
        assert!(
            models.iter().any(|m| hex(&m.span_id) == parts[2]),
            "the parent is a model-call span: {traceparent} ({})",
            model.name
        );
    }
}

// Tracing: prompt and completion content go on model spans when enabled (here through the
// standard variable), over OTLP/HTTP with protobuf bodies.
#[test]
fn content_is_captured_only_when_enabled_over_otlp_http() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = runtime();
    let received = Received::default();
    let endpoint = http_receiver(&rt, &received);
    let traceparents = Arc::new(Mutex::new(Vec::new()));
    let model_url = stub_model(&rt, &traceparents);
    let config = write_config(d, &model_url, "");
    let daemon = start(
        d,
        &config,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ],
    );
    let out = daemon.ok(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]);
    assert!(out.contains("END  COMPLETED"), "{out}");
    let spans = received.wait_for("the turn's spans", turn_is_exported);
    let models = named(&spans, MODEL_CALL);
    let inputs: Vec<String> = models
        .iter()
        .map(|m| text(m, "gen_ai.input.messages"))
        .collect();
    assert!(
        inputs.iter().any(|i| i.contains("call fixture__count")),
        "the prompt is on the span: {inputs:?}"
    );
    let outputs: Vec<String> = models
        .iter()
        .map(|m| text(m, "gen_ai.output.messages"))
        .collect();
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("fixture__count") && o.contains("tool_call")),
        "the completion is on the span: {outputs:?}"
    );
}

// Trace propagation: a remote harness continues the turn's trace — Harness.Connect carries the W3C
// trace context of the RPC that runs the turn.
#[test]
fn a_remote_harness_receives_the_trace_context() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = runtime();
    let received = Received::default();
    let endpoint = grpc_receiver(&rt, &received);

    let connects = Arc::new(Mutex::new(Vec::<String>::new()));
    let (listener, port) = bind(&rt);
    let seen = Arc::clone(&connects);
    let harness = agentsessions_harnesswire::HarnessService::new(Arc::new(
        agentsessions_harnesses::EchoHarness::new(),
    ))
    .into_server();
    let recording = tonic::service::interceptor::InterceptedService::new(
        harness,
        move |request: tonic::Request<()>| {
            if let Some(traceparent) = request.metadata().get("traceparent") {
                seen.lock()
                    .unwrap()
                    .push(traceparent.to_str().unwrap_or_default().to_owned());
            }
            Ok(request)
        },
    );
    rt.spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(recording)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await;
    });

    let config = d.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = \"j.db\"\nmodel = \"echo\"\nharness = [\"far=127.0.0.1:{port}\"]\n\
             [telemetry]\notlp_endpoint = \"{endpoint}\"\notlp_protocol = \"grpc\"\n"
        ),
    )
    .unwrap();
    let daemon = start(d, &config, &[]);
    let out = daemon.ok(&["exec", "--harness", "far", "hello"]);
    assert!(out.contains("END  COMPLETED"), "{out}");
    let spans = received.wait_for("the remote turn", |spans| {
        named(spans, EXEC).len() == 1
            && named(spans, "invoke_agent far").len() == 1
            && !named(spans, "runtime create").is_empty()
    });
    let exec = one(&spans, EXEC);
    let trace = hex(&exec.trace_id);
    // Placing the harness is a runtime operation of the RPC's trace.
    let create = named(&spans, "runtime create");
    assert!(
        create
            .iter()
            .any(|c| c.trace_id == exec.trace_id && text(c, "operation") == "create"),
        "runtime create in the Exec trace: {create:?}"
    );
    let seen = connects.lock().unwrap().clone();
    assert!(
        seen.iter()
            .any(|t| t.split('-').nth(1) == Some(trace.as_str())),
        "the harness saw the Exec trace {trace}: {seen:?}"
    );
}

/// What the MCP server over HTTP saw: the `traceparent` header of every POST, and the
/// `traceparent` in each `tools/call`'s `_meta`.
#[derive(Clone, Default)]
struct SeenByMcp {
    headers: Arc<Mutex<Vec<String>>>,
    metas: Arc<Mutex<Vec<String>>>,
}

/// An rmcp server offering `ping`, recording the trace context of each call.
#[derive(Clone)]
struct Pinger(SeenByMcp);

impl rmcp::ServerHandler for Pinger {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let schema = json!({"type": "object"});
        Ok(rmcp::model::ListToolsResult::with_all_items(vec![
            rmcp::model::Tool::new(
                "ping",
                "Answers pong",
                schema.as_object().cloned().unwrap_or_default(),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        _request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        self.0.metas.lock().unwrap().push(
            context
                .meta
                .get_traceparent()
                .unwrap_or_default()
                .to_owned(),
        );
        Ok(rmcp::model::CallToolResponse::Complete(
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text("pong")]),
        ))
    }
}

/// The MCP server over streamable HTTP on 127.0.0.1; its URL.
fn mcp_over_http(runtime: &tokio::runtime::Runtime, seen: &SeenByMcp) -> String {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let (listener, port) = bind(runtime);
    let handler = Pinger(seen.clone());
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let headers = Arc::clone(&seen.headers);
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let headers = Arc::clone(&headers);
                async move {
                    if request.method() == axum::http::Method::POST {
                        let traceparent = request
                            .headers()
                            .get("traceparent")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned();
                        headers.lock().unwrap().push(traceparent);
                    }
                    next.run(request).await
                }
            },
        ));
    runtime.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://127.0.0.1:{port}/mcp")
}

// Trace propagation: an MCP server reached over streamable HTTP continues the turn's trace — the
// POST carrying the tools/call has the tool-call span's `traceparent` header, the request's `_meta`
// the same value; discovery, which belongs to no turn, carries none.
#[test]
fn an_mcp_server_over_http_receives_the_tool_calls_trace_context() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = runtime();
    let received = Received::default();
    let endpoint = grpc_receiver(&rt, &received);
    let traceparents = Arc::new(Mutex::new(Vec::new()));
    let model_url = stub_model(&rt, &traceparents);
    let seen = SeenByMcp::default();
    let mcp_url = mcp_over_http(&rt, &seen);
    let config = d.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = \"agents.db\"\nmodel = \"stub-model\"\nmodel_provider = \"openai\"\n\
             model_base_url = \"{model_url}\"\nmodel_api_key_env = \"{KEY_VARIABLE}\"\n\
             [[mcp_servers]]\nname = \"web\"\nurl = \"{mcp_url}\"\napproval = \"never\"\n\
             [telemetry]\notlp_endpoint = \"{endpoint}\"\notlp_protocol = \"grpc\"\n"
        ),
    )
    .unwrap();
    let daemon = start(d, &config, &[]);
    daemon.wait_for_mcp(&["web"]);
    let out = daemon.ok(&["exec", "--harness", "chat", "call", "web__ping", "{}"]);
    assert!(out.contains("END  COMPLETED"), "{out}");
    assert!(out.contains("pong"), "the tool answered: {out}");
    let tool_call = "execute_tool web__ping";
    let spans = received.wait_for("the turn's spans", |spans| {
        named(spans, tool_call).len() == 1 && named(spans, EXEC).len() == 1
    });
    let exec = one(&spans, EXEC);
    let tool = one(&spans, tool_call);
    let expected = (hex(&exec.trace_id), hex(&tool.span_id));

    let headers = seen.headers.lock().unwrap().clone();
    let traced: Vec<&String> = headers.iter().filter(|h| !h.is_empty()).collect();
    assert!(
        headers.len() > 1,
        "initialize and tools/list came first: {headers:?}"
    );
    assert_eq!(
        traced.len(),
        1,
        "only the tools/call is traced: {headers:?}"
    );
    assert_eq!(
        trace_and_parent(traced[0]),
        expected,
        "the header names the tool-call span"
    );
    let metas = seen.metas.lock().unwrap().clone();
    assert_eq!(metas, [traced[0].clone()], "_meta carries the same context");
}

fn session_of(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned()
}

fn duration_nanos(span: &Span) -> u64 {
    span.end_time_unix_nano
        .saturating_sub(span.start_time_unix_nano)
}

// Tracing: a turn resumed after an approval replays the model call made before it parked:
// that call gets a span marked replayed, which sends nothing to the provider and carries no
// provider latency; the call after the tool is live.
#[test]
fn replayed_model_calls_are_marked_and_carry_no_provider_latency() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = runtime();
    let received = Received::default();
    let endpoint = grpc_receiver(&rt, &received);
    let traceparents = Arc::new(Mutex::new(Vec::new()));
    let model_url = stub_model(&rt, &traceparents);
    let config = write_config_with(
        d,
        &model_url,
        "[\"count\"]",
        "",
        &format!("otlp_endpoint = \"{endpoint}\"\notlp_protocol = \"grpc\""),
    );
    let daemon = start(d, &config, &[]);
    daemon.wait_for_mcp(&["fixture"]);
    let parked = daemon.ctl(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]);
    let parked = String::from_utf8_lossy(&parked.stdout).into_owned();
    assert!(parked.contains("APPROVAL_REQUEST"), "{parked}");
    let uid = session_of(&parked);
    assert_eq!(
        traceparents.lock().unwrap().len(),
        1,
        "one live call before the park"
    );

    let approved = daemon.ok(&["approve", "--session", &uid]);
    assert!(approved.contains("resumed"), "{approved}");
    let spans = received.wait_for("the resumed turn", |spans| {
        named(spans, MODEL_CALL).len() == 3
            && named(spans, TOOL_CALL).len() == 1
            && named(spans, TURN).len() == 2
    });
    assert_eq!(
        traceparents.lock().unwrap().len(),
        2,
        "the replayed call never reached the provider"
    );
    let models = named(&spans, MODEL_CALL);
    let replayed: Vec<&Span> = models
        .iter()
        .copied()
        .filter(|m| {
            matches!(
                attributes(m).get("agentsessions.replayed"),
                Some(Any::BoolValue(true))
            )
        })
        .collect();
    assert_eq!(replayed.len(), 1, "one replayed call: {models:?}");
    let replayed = replayed[0];
    // The recorded usage is on it, and it closed at once: no provider latency.
    assert_eq!(int(replayed, "gen_ai.usage.input_tokens"), 11);
    assert_eq!(
        strings(replayed, "gen_ai.response.finish_reasons"),
        ["tool_calls"]
    );
    assert!(
        duration_nanos(replayed) < 5_000_000,
        "a replayed call lasts no provider round trip: {} ns",
        duration_nanos(replayed)
    );
    let resumed = named(&spans, TURN)
        .into_iter()
        .find(|s| text(s, "operation") == "resume")
        .unwrap_or_else(|| panic!("a resume turn: {:?}", named(&spans, TURN)));
    assert_eq!(
        replayed.parent_span_id, resumed.span_id,
        "replayed inside the resume"
    );
    // The approved tool ran in the resume, with how long the approval took.
    let tool = one(&spans, TOOL_CALL);
    assert_eq!(tool.parent_span_id, resumed.span_id);
    assert!(int(tool, "agentsessions.approval.wait_ms") >= 0);
}

/// The lines of the daemon log at `path`.
fn log_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

// Logs: logs an operator can use — no colour codes in a file, the effective configuration
// first with secrets left out, every line inside a turn naming its session uid and execution id,
// and provider and tool failures at WARN with their kind.
#[test]
fn logs_name_the_session_and_warn_on_failures_without_colour() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = runtime();
    let traceparents = Arc::new(Mutex::new(Vec::new()));
    let model_url = stub_model(&rt, &traceparents);
    let with_password = model_url.replace("http://", "http://user:sk-hush@");
    let config = write_config_with(d, &with_password, "\"never\"", "model_retries = 0", "");
    let secret_env = std::fs::read_to_string(&config).unwrap().replace(
        "MCP_FIXTURE_COUNT_FILE",
        "FIXTURE_SECRET = \"tok-hush\", MCP_FIXTURE_COUNT_FILE",
    );
    std::fs::write(&config, secret_env).unwrap();
    let log = d.join("daemon.log");
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--config"])
        .arg(&config)
        .current_dir(d)
        .env(KEY_VARIABLE, "stub-key")
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stderr(std::fs::File::create(&log).unwrap());
    let daemon = Daemon::spawn(command, false);

    let failed_tool = daemon.ok(&["exec", "--harness", "chat", "call", "fixture__fail", "{}"]);
    assert!(failed_tool.contains("END  COMPLETED"), "{failed_tool}");
    let tool_session = session_of(&failed_tool);
    let down = daemon.ctl(&["exec", "--harness", "chat", PROVIDER_DOWN]);
    let down = String::from_utf8_lossy(&down.stdout).into_owned();
    let model_session = session_of(&down);
    drop(daemon);

    let lines = log_lines(&log);
    let all = lines.join("\n");
    assert!(!all.contains('\u{1b}'), "no colour codes in a file:\n{all}");
    assert!(
        lines[0].contains("effective configuration"),
        "the first line is the configuration: {}",
        lines[0]
    );
    for secret in ["sk-hush", "tok-hush", "stub-key"] {
        assert!(!all.contains(secret), "{secret} leaked:\n{all}");
    }
    assert!(
        lines[0].contains("FIXTURE_SECRET"),
        "variable names stay: {}",
        lines[0]
    );
    assert!(lines[0].contains(KEY_VARIABLE), "{}", lines[0]);

    let in_turn: Vec<&String> = lines.iter().filter(|l| l.contains("turn{")).collect();
    assert!(!in_turn.is_empty(), "{all}");
    for line in &in_turn {
        assert!(
            line.contains("session_uid=sess-") && line.contains("execution_id="),
            "a line inside a turn names its session and execution: {line}"
        );
        assert!(!line.contains("execution_id= "), "{line}");
    }
    let warned = |what: &str| {
        lines
            .iter()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} line:\n{all}"))
            .clone()
    };
    let tool = warned("tool call failed");
    assert!(tool.contains(" WARN "), "{tool}");
    assert!(
        tool.contains("kind=\"tool_error\"") || tool.contains("kind=tool_error"),
        "{tool}"
    );
    assert!(
        tool.contains(&format!("session_uid={tool_session}")),
        "{tool}"
    );
    let model = warned("model call failed");
    assert!(model.contains(" WARN "), "{model}");
    assert!(model.contains("kind="), "{model}");
    assert!(
        model.contains(&format!("session_uid={model_session}")),
        "{model}"
    );
}

/// `GET path` on `addr` with `headers`; the status line.
fn http_get(addr: &str, path: &str, headers: &[(&str, &str)]) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

// Trace propagation: W3C trace context is taken from incoming HTTP requests too — a JSON API call
// with a `traceparent` is a server span of the caller's trace, and the Sessions RPC it makes runs
// inside it.
#[test]
fn an_http_api_request_continues_the_callers_trace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = runtime();
    let received = Received::default();
    let endpoint = grpc_receiver(&rt, &received);
    let config = d.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = \"j.db\"\nmodel = \"echo\"\n\
             [telemetry]\notlp_endpoint = \"{endpoint}\"\notlp_protocol = \"grpc\"\n"
        ),
    )
    .unwrap();
    let mut command = Daemon::command();
    command
        .args([
            "--addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&config)
        .current_dir(d)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .stderr(Stdio::null());
    let daemon = Daemon::spawn(command, false);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let status = http_get(
        &daemon.http,
        "/api/v1/sessions",
        &[("traceparent", &format!("00-{trace}-{caller_span}-01"))],
    );
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let list = "agentsessions.v1.Sessions/ListSessions";
    let spans = received.wait_for("the API request's spans", |spans| {
        let in_trace = |name: &str| {
            spans
                .iter()
                .any(|s| s.name == name && hex(&s.trace_id) == trace)
        };
        in_trace(list) && in_trace("GET")
    });
    let request = spans
        .iter()
        .find(|s| s.name == "GET" && hex(&s.trace_id) == trace)
        .unwrap_or_else(|| panic!("a GET span in the caller's trace: {spans:?}"));
    assert_eq!(
        hex(&request.parent_span_id),
        caller_span,
        "the caller's span is its parent"
    );
    assert_eq!(text(request, "url.path"), "/api/v1/sessions");
    assert_eq!(int(request, "http.response.status_code"), 200);
    let rpc = spans
        .iter()
        .find(|s| s.name == list && hex(&s.trace_id) == trace)
        .unwrap();
    assert_eq!(
        rpc.parent_span_id, request.span_id,
        "the RPC runs in the request"
    );
}

/// `GET /metrics` from the daemon's HTTP listener, parsed.
fn scrape(addr: &str) -> prometheus_parse::Scrape {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // With no Accept header the answer is the Prometheus text format 0.0.4.
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// The value of `name` with `labels` (a histogram's count); 0 when absent.
fn value(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| {
            s.metric == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(k).is_some_and(|got| got == *v))
        })
        .map(|s| match &s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(buckets) => {
                buckets.iter().map(|b| b.count).fold(0.0, f64::max)
            }
            prometheus_parse::Value::Summary(_) => 0.0,
        })
        .sum()
}

// Metrics: /metrics after known work — two chat turns, each two model calls and one tool call —
// moves the counters and histogram counts by exactly that work.
#[test]
fn metrics_move_by_exactly_the_work_done() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = runtime();
    let traceparents = Arc::new(Mutex::new(Vec::new()));
    let model_url = stub_model(&rt, &traceparents);
    let config = write_config(d, &model_url, "");
    let mut command = Daemon::command();
    command
        .args([
            "--addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&config)
        .current_dir(d)
        .env(KEY_VARIABLE, "stub-key")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stderr(Stdio::null());
    let daemon = Daemon::spawn(command, false);

    let before = scrape(&daemon.http);
    for _ in 0..2 {
        let out = daemon.ok(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]);
        assert!(out.contains("END  COMPLETED"), "{out}");
    }
    // The stored-state gauges are re-read at most once a second; wait past that so this scrape
    // reads the journal again.
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    let after = scrape(&daemon.http);
    let moved = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels) - value(&before, name, labels)
    };
    let chat = [("harness", "chat")];
    let model = [("provider", "openai"), ("model", "stub-model")];
    let tool = [("tool", "fixture__count")];
    assert_eq!(
        moved(
            "agentsessions_turns_total",
            &[("harness", "chat"), ("outcome", "completed")]
        ),
        2.0
    );
    assert_eq!(moved("agentsessions_turn_duration_seconds", &chat), 2.0);
    assert_eq!(
        moved(
            "agentsessions_model_calls_total",
            &[
                ("provider", "openai"),
                ("model", "stub-model"),
                ("outcome", "success")
            ]
        ),
        4.0
    );
    assert_eq!(
        moved("agentsessions_model_call_duration_seconds", &model),
        4.0
    );
    assert_eq!(
        moved(
            "agentsessions_model_tokens_total",
            &[("model", "stub-model"), ("type", "input")]
        ),
        44.0
    );
    assert_eq!(
        moved(
            "agentsessions_model_tokens_total",
            &[("model", "stub-model"), ("type", "output")]
        ),
        28.0
    );
    assert_eq!(moved("agentsessions_model_errors_total", &model), 0.0);
    assert_eq!(
        moved(
            "agentsessions_tool_calls_total",
            &[("tool", "fixture__count"), ("outcome", "success")]
        ),
        2.0
    );
    assert_eq!(
        moved("agentsessions_tool_call_duration_seconds", &tool),
        2.0
    );
    assert_eq!(
        moved(
            "agentsessions_rpc_requests_total",
            &[("method", "Exec"), ("code", "OK")]
        ),
        2.0
    );
    assert!(moved("agentsessions_journal_append_duration_seconds", &[]) >= 2.0);
    assert!(moved("agentsessions_journal_batch_size", &[("backend", "sqlite")]) >= 1.0);
    assert!(moved("agentsessions_journal_fsync_duration_seconds", &[]) >= 1.0);
    // Read from the journal at scrape time: the two sessions this test made, no approvals.
    let sessions: f64 = value(&after, "agentsessions_sessions", &[]);
    assert_eq!(sessions, 2.0);
    assert_eq!(value(&after, "agentsessions_approvals_pending", &[]), 0.0);
}
