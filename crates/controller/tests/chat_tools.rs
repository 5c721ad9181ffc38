//! The chat harness's tool loop (model → tool calls → results → model) driven by the controller
//! against a scripted provider that speaks each vendor's wire format over HTTP on 127.0.0.1, with a
//! fixed tool catalog and a counting tool executor.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

#[path = "../../model/tests/support/mod.rs"]
mod http_stub;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentsessions_api::{
    ApprovalDecision, EventBody, EventKind, Harness, Mediation, ModelProvider, OfferedTool,
    Timestamp, ToolCall, ToolCatalog, ToolDefinition, ToolResult,
};
use agentsessions_controller::{Controller, ControllerError, ExecRequest, ToolExecutor};
use agentsessions_harnesses::ChatHarness;
use agentsessions_journal::{Journal, LogRecord};
use agentsessions_model::{AnthropicConfig, AnthropicProvider, OpenAiConfig, OpenAiProvider};
use async_trait::async_trait;
use http_stub::{Reply, TestServer};
use serde_json::{Value, json};
use support::{ApiResult, Recorder, kinds, memory, read, user};

#[derive(Debug)]
struct FixedCatalog(Vec<OfferedTool>);

impl ToolCatalog for FixedCatalog {
    fn offered(&self) -> Vec<OfferedTool> {
        self.0.clone()
    }
}

fn weather_catalog(mediation: Mediation) -> Arc<dyn ToolCatalog> {
    Arc::new(FixedCatalog(vec![OfferedTool {
        definition: ToolDefinition {
            name: "weather".into(),
            description: "Current weather in a city".into(),
            input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}})
                .as_object()
                .cloned(),
        },
        mediation,
    }]))
}

/// Counts executions; answers `{"city", "sky": "sunny"}`, or an error result for Atlantis.
#[derive(Debug, Default)]
struct WeatherTool {
    calls: AtomicU64,
    keys: std::sync::Mutex<Vec<String>>,
}

impl WeatherTool {
    fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ToolExecutor for WeatherTool {
    async fn execute(&self, _session: &str, call: &ToolCall) -> ApiResult<ToolResult> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut keys) = self.keys.lock() {
            keys.push(call.idempotency_key.clone());
        }
        let city = call
            .args
            .as_ref()
            .and_then(|args| args.get("city"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if city == "Atlantis" {
            return Ok(ToolResult {
                is_error: true,
                error: "no such city: Atlantis".into(),
                ..ToolResult::default()
            });
        }
        Ok(ToolResult {
            output: json!({"city": city, "sky": "sunny"}).as_object().cloned(),
            ..ToolResult::default()
        })
    }
}

const OPENAI_USAGE: &str =
    r#"{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}"#;

fn openai_usage() -> Value {
    serde_json::from_str(OPENAI_USAGE).unwrap()
}

/// An OpenAI answer asking for `weather` once per `(call id, city)`.
fn openai_tool_calls(calls: &[(&str, &str)]) -> Reply {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, city)| {
            json!({"id": id, "type": "function", "function":
                {"name": "weather", "arguments": json!({"city": city}).to_string()}})
        })
        .collect();
    Reply::json(
        200,
        &json!({"model": "gpt-test-1", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
            "usage": openai_usage()}),
    )
}

/// The same kind of answer as an OpenAI stream (what a delta-streaming turn asks for).
fn openai_streamed_tool_calls(calls: &[(&str, &str)]) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        json!({"model": "gpt-test-1", "choices": [{"index": 0, "delta": delta,
            "finish_reason": finish}]})
    };
    let mut events: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (id, city))| {
            chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                    "function": {"name": "weather",
                        "arguments": json!({"city": city}).to_string()}}]}),
                Value::Null,
            )
        })
        .collect();
    events.push(chunk(json!({}), json!("tool_calls")));
    events.push(json!({"model": "gpt-test-1", "choices": [], "usage": openai_usage()}));
    let mut frames: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    frames.push("data: [DONE]\n\n".into());
    Reply::sse(&frames)
}

fn openai_streamed_text(text: &str) -> Reply {
    let frames = [
        json!({"model": "gpt-test-1", "choices": [{"index": 0, "delta": {"content": text},
            "finish_reason": null}]}),
        json!({"model": "gpt-test-1", "choices": [{"index": 0, "delta": {},
            "finish_reason": "stop"}]}),
        json!({"model": "gpt-test-1", "choices": [], "usage": openai_usage()}),
    ];
    let mut frames: Vec<String> = frames.iter().map(|e| format!("data: {e}\n\n")).collect();
    frames.push("data: [DONE]\n\n".into());
    Reply::sse(&frames)
}

fn openai_text(text: &str) -> Reply {
    Reply::json(
        200,
        &json!({"model": "gpt-test-1", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}], "usage": openai_usage()}),
    )
}

fn anthropic_message(content: &Value, stop: &str) -> Reply {
    Reply::json(
        200,
        &json!({"type": "message", "role": "assistant", "model": "claude-test-1",
            "content": content, "stop_reason": stop,
            "usage": {"input_tokens": 7, "output_tokens": 3, "cache_read_input_tokens": 2}}),
    )
}

fn openai(server: &TestServer) -> Arc<dyn ModelProvider> {
    let mut config = OpenAiConfig::new("gpt-test");
    config.base_url = format!("{}/v1", server.url());
    Arc::new(OpenAiProvider::new(config).unwrap())
}

fn anthropic(server: &TestServer) -> Arc<dyn ModelProvider> {
    let mut config = AnthropicConfig::new("claude-test");
    config.base_url = server.url();
    config.api_key = "sk-ant-test".into();
    Arc::new(AnthropicProvider::new(config).unwrap())
}

fn chat(catalog: &Arc<dyn ToolCatalog>, max_steps: u32) -> Arc<dyn Harness> {
    Arc::new(
        ChatHarness::new("test-model")
            .unwrap()
            .with_tools(Arc::clone(catalog))
            .with_max_steps(max_steps),
    )
}

fn turn(
    journal: &Arc<dyn Journal>,
    harness: Arc<dyn Harness>,
    model: Arc<dyn ModelProvider>,
    tool: &Arc<WeatherTool>,
) -> Controller {
    Controller::new(Arc::clone(journal), harness, model, "s").with_tools(tool.clone())
}

fn ask(text: &str) -> ExecRequest {
    ExecRequest {
        inputs: vec![user(text)],
        ..ExecRequest::default()
    }
}

fn tool_calls(records: &[LogRecord]) -> Vec<ToolCall> {
    records
        .iter()
        .filter_map(|r| match &r.event.body {
            Some(EventBody::ToolCall(call)) => Some(call.clone()),
            _ => None,
        })
        .collect()
}

/// Replays the session with fresh instances: no model request, no tool call, nothing appended,
/// and every recorded effect regenerated byte for byte.
async fn assert_replays(
    journal: &Arc<dyn Journal>,
    harness: Arc<dyn Harness>,
    model: Arc<dyn ModelProvider>,
    server: &TestServer,
    tool: &Arc<WeatherTool>,
    outputs: &[String],
) {
    let before = read(journal).await;
    let (requests, calls) = (server.requests().len(), tool.calls());
    let report = turn(journal, harness, model, tool).replay().await.unwrap();
    assert_eq!(report.model_calls, 0);
    assert_eq!(report.outputs, outputs);
    assert_eq!(report.reproduced, report.effects, "{report:?}");
    assert_eq!(
        server.requests().len(),
        requests,
        "replay reached the model"
    );
    assert_eq!(tool.calls(), calls, "replay ran a tool");
    assert_eq!(read(journal).await, before);
}

// Tool loop: one tool call, its result fed back, then a text answer; usage per answer; replay.
#[tokio::test]
async fn one_tool_call_then_an_answer_and_replay() {
    let server = TestServer::start(vec![
        openai_tool_calls(&[("call_a", "Paris")]),
        openai_text("Sunny in Paris."),
    ])
    .await;
    let catalog = weather_catalog(Mediation::ControllerMediated);
    let tool = Arc::new(WeatherTool::default());
    let journal = memory();
    let outcome = turn(&journal, chat(&catalog, 4), openai(&server), &tool)
        .exec(ask("Weather in Paris?"))
        .await
        .unwrap();
    assert_eq!(tool.calls(), 1);
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records),
        [
            "EXECUTION_START",
            "INPUT",
            "MODEL_CALL",
            "OUTPUT",
            "USAGE",
            "TOOL_CALL",
            "TOOL_RESULT",
            "MODEL_CALL",
            "OUTPUT",
            "USAGE",
            "END"
        ]
    );
    let execution = &records[0].event.execution_id;
    let call = &tool_calls(&records)[0];
    assert_eq!(call.id, format!("{execution}/tool/0/0"));
    assert_eq!(call.idempotency_key, format!("chat:{execution}:0:0"));
    assert_eq!(call.mediation, Mediation::ControllerMediated);
    assert_eq!(call.args, json!({"city": "Paris"}).as_object().cloned());
    let Some(EventBody::Usage(usage)) = &records[4].event.body else {
        panic!("no usage record")
    };
    assert_eq!(
        (
            usage.model.as_str(),
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens
        ),
        ("gpt-test-1", 7, 3, 2)
    );

    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    let first = sent[0].json();
    assert_eq!(first["tools"][0]["function"]["name"], "weather");
    let second = sent[1].json();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{second}");
    assert_eq!(messages[1]["tool_calls"][0]["id"], "call_a");
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], "call_a");
    assert_eq!(messages[2]["content"], r#"{"city":"Paris","sky":"sunny"}"#);

    assert_replays(
        &journal,
        chat(&catalog, 4),
        openai(&server),
        &server,
        &tool,
        &outcome.outputs,
    )
    .await;
}

// Tool loop: two calls in one (streamed) answer run in order, each with its own id and key; both
// results go back in one round.
#[tokio::test]
async fn two_calls_in_one_streamed_answer() {
    let server = TestServer::start(vec![
        openai_streamed_tool_calls(&[("call_a", "Paris"), ("call_b", "Rome")]),
        openai_streamed_text("Sunny in both."),
    ])
    .await;
    let catalog = weather_catalog(Mediation::ControllerMediated);
    let tool = Arc::new(WeatherTool::default());
    let journal = memory();
    let recorder = Arc::new(Recorder::default());
    let outcome = turn(&journal, chat(&catalog, 4), openai(&server), &tool)
        .with_observer(recorder.clone())
        .with_stream_deltas(true)
        .exec(ask("Paris and Rome?"))
        .await
        .unwrap();
    assert_eq!(tool.calls(), 2);
    let records = read(&journal).await;
    let execution = &records[0].event.execution_id;
    let ids: Vec<String> = tool_calls(&records).into_iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        [
            format!("{execution}/tool/0/0"),
            format!("{execution}/tool/0/1")
        ]
    );
    let keys = tool.keys.lock().unwrap().clone();
    assert_eq!(
        keys,
        [
            format!("chat:{execution}:0:0"),
            format!("chat:{execution}:0:1")
        ]
    );
    assert_eq!(server.requests()[0].json()["stream"], true);
    assert!(recorder.delta_count() > 0, "the text answer streamed");
    let second = server.requests()[1].json();
    let messages = second["messages"].as_array().unwrap();
    let tool_ids: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| &m["tool_call_id"])
        .collect();
    assert_eq!(tool_ids, [&json!("call_a"), &json!("call_b")]);
    assert_eq!(
        outcome.outputs.last().map(String::as_str),
        Some("Sunny in both.")
    );
    assert_replays(
        &journal,
        chat(&catalog, 4),
        openai(&server),
        &server,
        &tool,
        &outcome.outputs,
    )
    .await;
}

// Tool loop: a tool's error result is recorded and given back to the model, which answers.
#[tokio::test]
async fn a_tool_error_goes_back_to_the_model() {
    let server = TestServer::start(vec![
        openai_tool_calls(&[("call_a", "Atlantis")]),
        openai_text("I could not find Atlantis."),
    ])
    .await;
    let catalog = weather_catalog(Mediation::ControllerMediated);
    let tool = Arc::new(WeatherTool::default());
    let journal = memory();
    turn(&journal, chat(&catalog, 4), openai(&server), &tool)
        .exec(ask("Weather in Atlantis?"))
        .await
        .unwrap();
    let records = read(&journal).await;
    let result = records
        .iter()
        .find_map(|r| match &r.event.body {
            Some(EventBody::Result(result)) => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert!(result.is_error);
    let second = server.requests()[1].json();
    let tool_message = &second["messages"][2];
    assert_eq!(tool_message["role"], "tool");
    assert_eq!(tool_message["content"], "no such city: Atlantis");
    assert_eq!(records.last().unwrap().event.kind, EventKind::End);
}

// Tool loop: a model that keeps asking for tools fails the turn at the step limit, which the
// ERROR record names.
#[tokio::test]
async fn the_step_limit_fails_the_turn_with_an_error_record() {
    let server = TestServer::start(vec![openai_tool_calls(&[("call_a", "Paris")])]).await;
    let catalog = weather_catalog(Mediation::ControllerMediated);
    let tool = Arc::new(WeatherTool::default());
    let journal = memory();
    let err = turn(&journal, chat(&catalog, 2), openai(&server), &tool)
        .exec(ask("Loop forever"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("after 2 model calls"), "{err}");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(tool.calls(), 1, "the last answer's calls are not run");
    let records = read(&journal).await;
    let last = records.last().unwrap();
    assert_eq!(last.event.kind, EventKind::Error);
    let Some(EventBody::Error(info)) = &last.event.body else {
        panic!("no error body")
    };
    assert!(info.description.contains("step limit"), "{info:?}");
}

// Tool loop, semantics §5: a call that requires approval parks the turn (APPROVAL_REQUEST
// recorded, no tool run); after the decision the resume runs it and the loop finishes.
#[tokio::test]
async fn a_gated_call_parks_then_resumes_after_approval() {
    let server = TestServer::start(vec![
        openai_tool_calls(&[("call_a", "Paris")]),
        openai_text("Sunny in Paris."),
    ])
    .await;
    let catalog = weather_catalog(Mediation::RequiresApproval);
    let tool = Arc::new(WeatherTool::default());
    let journal = memory();
    let c = turn(&journal, chat(&catalog, 4), openai(&server), &tool);
    let ControllerError::Parked(park) = c.exec(ask("Weather in Paris?")).await.unwrap_err() else {
        panic!("no park")
    };
    assert_eq!(tool.calls(), 0);
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records),
        [
            "EXECUTION_START",
            "INPUT",
            "MODEL_CALL",
            "OUTPUT",
            "USAGE",
            "TOOL_CALL",
            "APPROVAL_REQUEST"
        ]
    );
    let execution = &records[0].event.execution_id;
    assert_eq!(park.tool_call_id, format!("{execution}/tool/0/0"));

    c.approve(
        &ApprovalDecision {
            execution_id: park.execution_id.clone(),
            tool_call_id: park.tool_call_id.clone(),
            request_seq: park.request_seq,
            approved: true,
            reason: "fine".into(),
            identity: Default::default(),
        },
        Timestamp::now(),
    )
    .await
    .unwrap();
    let fence = journal.session_info("s").await.unwrap().fence;
    let outcome = turn(&journal, chat(&catalog, 4), openai(&server), &tool)
        .with_fence(fence)
        .resume()
        .await
        .unwrap();
    assert!(outcome.resumed);
    assert_eq!(tool.calls(), 1);
    assert_eq!(server.requests().len(), 2, "the first answer was served");
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records[7..]),
        [
            "APPROVAL_RESULT",
            "TOOL_RESULT",
            "MODEL_CALL",
            "OUTPUT",
            "USAGE",
            "END"
        ]
    );
}

// Tool loop: the same loop through the Anthropic dialect: tool_use in, tool_result back.
#[tokio::test]
async fn the_loop_speaks_the_anthropic_dialect() {
    let server = TestServer::start(vec![
        anthropic_message(
            &json!([{"type": "tool_use", "id": "toolu_1", "name": "weather",
                "input": {"city": "Paris"}}]),
            "tool_use",
        ),
        anthropic_message(
            &json!([{"type": "text", "text": "Sunny in Paris."}]),
            "end_turn",
        ),
    ])
    .await;
    let catalog = weather_catalog(Mediation::ControllerMediated);
    let tool = Arc::new(WeatherTool::default());
    let journal = memory();
    let outcome = turn(&journal, chat(&catalog, 4), anthropic(&server), &tool)
        .exec(ask("Weather in Paris?"))
        .await
        .unwrap();
    assert_eq!(tool.calls(), 1);
    assert_eq!(
        outcome.outputs.last().map(String::as_str),
        Some("Sunny in Paris.")
    );
    let first = server.requests()[0].json();
    assert_eq!(first["tools"][0]["name"], "weather");
    let second = server.requests()[1].json();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    let usage = read(&journal)
        .await
        .into_iter()
        .find_map(|r| match r.event.body {
            Some(EventBody::Usage(usage)) => Some(usage),
            _ => None,
        })
        .unwrap();
    assert_eq!(usage.cached_input_tokens, 2);
    assert_replays(
        &journal,
        chat(&catalog, 4),
        anthropic(&server),
        &server,
        &tool,
        &outcome.outputs,
    )
    .await;
}

// Provider errors: a provider's 429 fails the turn as RESOURCE_EXHAUSTED and a provider timeout as
// DEADLINE_EXCEEDED (not the INTERNAL of other harness failures); the ERROR record carries it.
#[tokio::test]
async fn provider_failures_keep_their_codes() {
    use agentsessions_api::StatusCode;
    use std::time::Duration;

    let busy = Reply::json_with(
        429,
        &json!({"error": {"message": "slow down"}}),
        &[("retry-after", "0")],
    );
    let held = Reply::Stream {
        content_type: "application/json".into(),
        pieces: vec![b"{".to_vec()],
        pause: Duration::from_millis(1),
        hold_open: true,
    };
    for (reply, code) in [
        (busy, StatusCode::ResourceExhausted),
        (held, StatusCode::DeadlineExceeded),
    ] {
        let server = TestServer::start(vec![reply]).await;
        let mut config = OpenAiConfig::new("gpt-test");
        config.base_url = format!("{}/v1", server.url());
        config.retry.max_attempts = 1;
        config.timeout = Duration::from_millis(300);
        let model: Arc<dyn ModelProvider> = Arc::new(OpenAiProvider::new(config).unwrap());
        let catalog = weather_catalog(Mediation::ControllerMediated);
        let tool = Arc::new(WeatherTool::default());
        let journal = memory();
        let err = turn(&journal, chat(&catalog, 4), model, &tool)
            .exec(ask("hi"))
            .await
            .unwrap_err();
        assert!(matches!(err, ControllerError::ModelFailed(_)), "{err}");
        assert_eq!(err.status_code(), code, "{err}");
        let records = read(&journal).await;
        let Some(EventBody::Error(info)) = &records.last().unwrap().event.body else {
            panic!("no ERROR record")
        };
        assert_eq!(info.code, code.number(), "{info:?}");
    }
}

// semantics §3.3: a chat turn recorded without USAGE (the shape before usage was reported)
// replays without divergence: the served completion carries no usage, so none is reported.
#[tokio::test]
async fn a_chat_turn_recorded_without_usage_replays() {
    let journal = memory();
    let harness = || Arc::new(ChatHarness::new("test-model").unwrap()) as Arc<dyn Harness>;
    let model = Arc::new(support::CountModel::default());
    Controller::new(Arc::clone(&journal), harness(), model.clone(), "s")
        .exec(ask("hi"))
        .await
        .unwrap();
    assert_eq!(
        kinds(&read(&journal).await),
        ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "END"]
    );
    let report = Controller::new(Arc::clone(&journal), harness(), model.clone(), "s")
        .replay()
        .await
        .unwrap();
    assert_eq!((report.model_calls, model.calls()), (0, 1));
    assert_eq!(report.reproduced, report.effects);
}

/// An Anthropic stream: one tool_use block, or one text block.
fn anthropic_streamed(tool_use: Option<(&str, &str)>, text: &str) -> Reply {
    let mut events = vec![
        json!({"type": "message_start", "message": {"model": "claude-test-1",
        "usage": {"input_tokens": 7, "output_tokens": 1, "cache_read_input_tokens": 2}}}),
    ];
    match tool_use {
        Some((id, city)) => {
            events.push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": id, "name": "weather", "input": {}}}));
            events.push(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta",
                    "partial_json": json!({"city": city}).to_string()}}));
        }
        None => {
            events.push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}));
            events.push(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}));
        }
    }
    events.push(json!({"type": "content_block_stop", "index": 0}));
    let stop = if tool_use.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop},
        "usage": {"output_tokens": 3}}),
    );
    events.push(json!({"type": "message_stop"}));
    let frames: Vec<String> = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    Reply::sse(&frames)
}

// Tool loop: the Anthropic dialect streamed: tool_use assembled from deltas, run, answered.
#[tokio::test]
async fn the_loop_streams_in_the_anthropic_dialect() {
    let server = TestServer::start(vec![
        anthropic_streamed(Some(("toolu_1", "Paris")), ""),
        anthropic_streamed(None, "Sunny in Paris."),
    ])
    .await;
    let catalog = weather_catalog(Mediation::ControllerMediated);
    let tool = Arc::new(WeatherTool::default());
    let journal = memory();
    let recorder = Arc::new(Recorder::default());
    let outcome = turn(&journal, chat(&catalog, 4), anthropic(&server), &tool)
        .with_observer(recorder.clone())
        .with_stream_deltas(true)
        .exec(ask("Weather in Paris?"))
        .await
        .unwrap();
    assert_eq!(tool.calls(), 1);
    assert!(recorder.delta_count() > 0);
    assert_eq!(
        outcome.outputs.last().map(String::as_str),
        Some("Sunny in Paris.")
    );
    let call = &tool_calls(&read(&journal).await)[0];
    assert_eq!(call.args, json!({"city": "Paris"}).as_object().cloned());
    let second = server.requests()[1].json();
    assert_eq!(
        second["messages"][2]["content"][0]["tool_use_id"],
        "toolu_1"
    );
    assert_replays(
        &journal,
        chat(&catalog, 4),
        anthropic(&server),
        &server,
        &tool,
        &outcome.outputs,
    )
    .await;
}
