//! Unfinished turns (extensions §9) driven through the controller in
//! process: a turn abandoned by the next one is closed in that turn's opening commit, a parked
//! or interrupted turn is closed by a Cancel, every open call is answered so the next history is
//! consistent, and the closed executions replay. The chat harness's next model request is
//! checked against both provider dialects over HTTP on 127.0.0.1.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

#[path = "../../model/tests/support/mod.rs"]
mod http_stub;

use std::sync::Arc;

use agentsessions_api::{
    ApiError, ApprovalDecision, EventBody, Harness, Mediation, ModelProvider, OfferedTool,
    StatusCode, Timestamp, ToolCall, ToolCatalog, ToolDefinition, ToolResult, ToolResultCode,
};
use agentsessions_controller::settlement::check_new_input;
use agentsessions_controller::{Controller, ControllerError, ExecRequest, LogView, ToolExecutor};
use agentsessions_harnesses::ChatHarness;
use agentsessions_journal::{Journal, LogRecord, verify_records};
use agentsessions_model::{AnthropicConfig, AnthropicProvider, OpenAiConfig, OpenAiProvider};
use async_trait::async_trait;
use http_stub::{Reply, TestServer};
use serde_json::{Value, json};
use support::{
    ApiResult, CountModel, IdempotentTool, ScriptHarness, Step, controller, gated_call, kinds,
    mediated_call, memory, read, user,
};

fn exec(text: &str) -> ExecRequest {
    ExecRequest {
        inputs: vec![user(text)],
        ..ExecRequest::default()
    }
}

fn abandoning(text: &str) -> ExecRequest {
    ExecRequest {
        abandon_unfinished: true,
        ..exec(text)
    }
}

fn results(records: &[LogRecord]) -> Vec<ToolResult> {
    records
        .iter()
        .filter_map(|r| match &r.event.body {
            Some(EventBody::Result(result)) => Some(result.clone()),
            _ => None,
        })
        .collect()
}

fn end_state(record: &LogRecord) -> String {
    match &record.event.body {
        Some(EventBody::End(end)) => end.state.clone(),
        other => panic!("not an END: {other:?}"),
    }
}

/// A host's check before new input, on the journal as it stands.
async fn host_refuses(journal: &Arc<dyn Journal>) -> Option<ControllerError> {
    check_new_input(&LogView::new(read(journal).await), false).err()
}

// extensions §9: a turn whose tool call lost its result (the executor
// failed, as a host killed mid-call leaves it) is unfinished; the host refuses new input naming
// the way forward; new input that abandons it closes it first, in the same commit as the new
// turn's opening: the open call answered "outcome unknown, not retried", CANCEL, END CANCELED.
// The new turn's history holds them, and a resume has nothing left to do.
#[tokio::test]
async fn new_input_that_abandons_a_turn_closes_it_in_its_opening_commit() {
    let journal = memory();
    let failing = Arc::new(IdempotentTool::failing("host went away"));
    let cut = Arc::new(ScriptHarness::new(vec![Step::Tool(mediated_call(
        "c1", "k1",
    ))]));
    controller(&journal, cut.clone(), Arc::new(CountModel::default()))
        .with_tools(failing)
        .exec(exec("charge me"))
        .await
        .unwrap_err();
    assert_eq!(
        kinds(&read(&journal).await),
        ["EXECUTION_START", "INPUT", "TOOL_CALL", "ERROR"]
    );
    let refused = host_refuses(&journal).await.unwrap();
    assert!(matches!(refused, ControllerError::UnfinishedTurn { .. }));
    assert_eq!(refused.status_code(), StatusCode::FailedPrecondition);

    let next = Arc::new(ScriptHarness::new(vec![Step::Output("fresh".into())]));
    let tool = Arc::new(IdempotentTool::default());
    let outcome = controller(&journal, next.clone(), Arc::new(CountModel::default()))
        .with_tools(tool.clone())
        .exec(abandoning("start over"))
        .await
        .unwrap();
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records[4..]),
        [
            "TOOL_RESULT",
            "LIFECYCLE",
            "END",
            "EXECUTION_START",
            "INPUT",
            "OUTPUT",
            "END"
        ]
    );
    let old = &records[0].event.execution_id;
    assert_eq!(&records[4].event.execution_id, old);
    assert_eq!(&records[6].event.execution_id, old);
    assert_eq!(end_state(&records[6]), "CANCELED");
    assert_ne!(&outcome.execution_id, old);
    let settled = &results(&records)[0];
    assert_eq!(settled, &ToolResult::outcome_unknown("c1"));
    assert_eq!(settled.code, ToolResultCode::ExecutorError);
    // One commit: the closing records and the new turn's opening share the fence.
    assert_eq!(records[4].fence, records[7].fence);
    assert_eq!(tool.attempts(), 0, "the abandoned call is never retried");
    // The new turn was told.
    let history = next.last_start().unwrap().history;
    assert!(history.iter().any(|event| matches!(
        &event.body,
        Some(EventBody::Result(result)) if result.settles_closed_turn()
    )));
    assert!(host_refuses(&journal).await.is_none());
    verify_records(&records).unwrap();

    // Resume has nothing to do: every turn ended.
    let resumed = controller(&journal, next, Arc::new(CountModel::default()))
        .resume()
        .await
        .unwrap();
    assert!(!resumed.resumed);
}

// extensions §9: a Cancel of a turn parked at an approval closes it
// without a decision: the gate is withdrawn with a "not run" result naming the request, then
// CANCEL and END CANCELED; a late decision is refused; the closed turn replays; new input goes on.
#[tokio::test]
async fn a_parked_turn_is_closed_without_a_decision() {
    let journal = memory();
    let tool = Arc::new(IdempotentTool::default());
    let harness = || Arc::new(ScriptHarness::new(vec![Step::Tool(gated_call("g1", "k"))]));
    let c =
        controller(&journal, harness(), Arc::new(CountModel::default())).with_tools(tool.clone());
    let ControllerError::Parked(park) = c.exec(exec("pay")).await.unwrap_err() else {
        panic!("expected a park")
    };
    assert!(matches!(
        host_refuses(&journal).await,
        Some(ControllerError::ApprovalBlocked { .. })
    ));
    let view = LogView::new(read(&journal).await);
    let closed = c
        .close_unfinished("not today", &view)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(closed.execution_id, park.execution_id);
    assert_eq!(kinds(&closed.records), ["TOOL_RESULT", "LIFECYCLE", "END"]);
    let records = read(&journal).await;
    assert_eq!(
        results(&records),
        [ToolResult {
            approval_request_seq: park.request_seq,
            ..ToolResult::not_run("g1")
        }]
    );
    assert_eq!(end_state(records.last().unwrap()), "CANCELED");
    let late = ApprovalDecision {
        execution_id: park.execution_id.clone(),
        tool_call_id: "g1".into(),
        request_seq: park.request_seq,
        approved: true,
        ..ApprovalDecision::default()
    };
    assert!(matches!(
        c.approve(&late, Timestamp::now()).await.unwrap_err(),
        ControllerError::InvalidApprovalDecision(_)
    ));
    // Nothing is left to close.
    let view = LogView::new(read(&journal).await);
    assert!(c.close_unfinished("again", &view).await.unwrap().is_none());
    controller(&journal, harness(), Arc::new(CountModel::default()))
        .replay()
        .await
        .unwrap();
    assert!(host_refuses(&journal).await.is_none());
    assert_eq!(tool.attempts(), 0);
    verify_records(&read(&journal).await).unwrap();
}

// extensions §9: an approved call whose turn was never run on (its host
// had no tool executor) is settled as its receipt, outcome unknown, by a Cancel; a denied one by
// its denial receipt. Both replay.
#[tokio::test]
async fn a_decided_gate_that_never_ran_is_settled_as_its_receipt() {
    for approved in [true, false] {
        let journal = memory();
        let harness = || Arc::new(ScriptHarness::new(vec![Step::Tool(gated_call("g1", "k"))]));
        let c = controller(&journal, harness(), Arc::new(CountModel::default()));
        let ControllerError::Parked(park) = c.exec(exec("pay")).await.unwrap_err() else {
            panic!("expected a park")
        };
        let decision = ApprovalDecision {
            execution_id: park.execution_id.clone(),
            tool_call_id: "g1".into(),
            request_seq: park.request_seq,
            approved,
            ..ApprovalDecision::default()
        };
        let decided = c.approve(&decision, Timestamp::now()).await.unwrap();
        // No tool executor here: the approved turn cannot run on, and says how to get out.
        if approved {
            let fence = journal.session_info("s").await.unwrap().fence;
            let err = controller(&journal, harness(), Arc::new(CountModel::default()))
                .with_fence(fence)
                .resume()
                .await
                .unwrap_err();
            assert!(matches!(err, ControllerError::MissingToolExecutor));
            assert!(err.to_string().contains("agentctl cancel"), "{err}");
        }
        assert!(host_refuses(&journal).await.is_some());
        let view = LogView::new(read(&journal).await);
        c.close_unfinished("stuck", &view).await.unwrap().unwrap();
        let records = read(&journal).await;
        let receipt = results(&records).pop().unwrap();
        assert_eq!(receipt.approval_request_seq, park.request_seq);
        assert_eq!(receipt.approval_decision_seq, decided.seq);
        if approved {
            assert!(receipt.settles_closed_turn());
            assert_eq!(receipt.code, ToolResultCode::ExecutorError);
        } else {
            assert_eq!(receipt.code, ToolResultCode::ApprovalDenied);
        }
        controller(&journal, harness(), Arc::new(CountModel::default()))
            .replay()
            .await
            .unwrap();
        assert!(host_refuses(&journal).await.is_none());
    }
}

// ---- the next model request, in both provider dialects -----------------------------------------

#[derive(Debug)]
struct WeatherCatalog;

impl ToolCatalog for WeatherCatalog {
    fn offered(&self) -> Vec<OfferedTool> {
        vec![OfferedTool {
            definition: ToolDefinition {
                name: "weather".into(),
                description: "Current weather in a city".into(),
                input_schema: json!({"type": "object"}).as_object().cloned(),
            },
            mediation: Mediation::ControllerMediated,
        }]
    }
}

/// Answers Paris; fails (no result) for Rome, as a host that went away mid-call leaves it.
#[derive(Debug)]
struct CutWeather;

#[async_trait]
impl ToolExecutor for CutWeather {
    async fn execute(&self, _session: &str, call: &ToolCall) -> ApiResult<ToolResult> {
        let city = call
            .args
            .as_ref()
            .and_then(|args| args.get("city"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if city == "Rome" {
            return Err(ApiError::status(StatusCode::Unavailable, "host went away"));
        }
        Ok(ToolResult {
            output: json!({"sky": "sunny"}).as_object().cloned(),
            ..ToolResult::default()
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum Dialect {
    OpenAi,
    Anthropic,
}

impl Dialect {
    /// An answer asking for the weather in Paris, Rome and Oslo, then a text answer.
    fn replies(self) -> Vec<Reply> {
        let cities = ["Paris", "Rome", "Oslo"];
        match self {
            Self::OpenAi => {
                let calls: Vec<Value> = cities
                    .iter()
                    .enumerate()
                    .map(|(i, city)| {
                        json!({"id": format!("call_{i}"), "type": "function", "function":
                            {"name": "weather", "arguments": json!({"city": city}).to_string()}})
                    })
                    .collect();
                vec![
                    Reply::json(
                        200,
                        &json!({"model": "m", "choices": [{"index": 0,
                            "finish_reason": "tool_calls", "message": {"role": "assistant",
                            "content": null, "tool_calls": calls}}]}),
                    ),
                    Reply::json(
                        200,
                        &json!({"model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "noted"}}]}),
                    ),
                ]
            }
            Self::Anthropic => {
                let uses: Vec<Value> = cities
                    .iter()
                    .enumerate()
                    .map(|(i, city)| {
                        json!({"type": "tool_use", "id": format!("toolu_{i}"),
                            "name": "weather", "input": {"city": city}})
                    })
                    .collect();
                let message = |content: Value, stop: &str| {
                    Reply::json(
                        200,
                        &json!({"type": "message", "role": "assistant", "model": "m",
                            "content": content, "stop_reason": stop,
                            "usage": {"input_tokens": 1, "output_tokens": 1}}),
                    )
                };
                vec![
                    message(json!(uses), "tool_use"),
                    message(json!([{"type": "text", "text": "noted"}]), "end_turn"),
                ]
            }
        }
    }

    fn provider(self, server: &TestServer) -> Arc<dyn ModelProvider> {
        match self {
            Self::OpenAi => {
                let mut config = OpenAiConfig::new("gpt-test");
                config.base_url = format!("{}/v1", server.url());
                Arc::new(OpenAiProvider::new(config).unwrap())
            }
            Self::Anthropic => {
                let mut config = AnthropicConfig::new("claude-test");
                config.base_url = server.url();
                config.api_key = "sk-ant-test".into();
                Arc::new(AnthropicProvider::new(config).unwrap())
            }
        }
    }

    /// Every tool call the body's history asks for, each with the answer the dialect requires
    /// right after it: `(call id, answer text)`. Panics on a call without its answer.
    fn answered_calls(self, body: &Value) -> Vec<(String, String)> {
        let messages = body["messages"].as_array().unwrap();
        let mut answered = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            match self {
                // OpenAI chat: every assistant `tool_calls` id has a `tool` message among the
                // ones that follow it directly.
                Self::OpenAi => {
                    let Some(calls) = message["tool_calls"].as_array() else {
                        continue;
                    };
                    let tools: Vec<&Value> = messages[i + 1..]
                        .iter()
                        .take_while(|m| m["role"] == "tool")
                        .collect();
                    for call in calls {
                        let id = call["id"].as_str().unwrap();
                        let answer = tools
                            .iter()
                            .find(|t| t["tool_call_id"] == id)
                            .unwrap_or_else(|| {
                                panic!("tool call {id} has no tool message: {body}")
                            });
                        answered.push((id.to_owned(), answer["content"].to_string()));
                    }
                }
                // Anthropic: every `tool_use` has a `tool_result` in the user turn that follows.
                Self::Anthropic => {
                    let Some(blocks) = message["content"].as_array() else {
                        continue;
                    };
                    let next = messages.get(i + 1);
                    for block in blocks.iter().filter(|b| b["type"] == "tool_use") {
                        let id = block["id"].as_str().unwrap();
                        let answer = next
                            .filter(|n| n["role"] == "user")
                            .and_then(|n| n["content"].as_array())
                            .and_then(|c| {
                                c.iter()
                                    .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
                            })
                            .unwrap_or_else(|| panic!("tool_use {id} has no tool_result: {body}"));
                        answered.push((id.to_owned(), answer["content"].to_string()));
                    }
                }
            }
        }
        answered
    }
}

// extensions §9: after a turn cut mid-call is abandoned, the model's next
// request is valid in both dialects (every tool call it sees has its answer) and tells the
// model: the call that ran has its result, the cut one "outcome unknown, not retried", the one
// never made "not run".
#[tokio::test]
async fn the_next_request_answers_every_call_in_both_dialects() {
    for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
        let server = TestServer::start(dialect.replies()).await;
        let journal = memory();
        let chat: Arc<dyn Harness> = Arc::new(
            ChatHarness::new("test-model")
                .unwrap()
                .with_tools(Arc::new(WeatherCatalog)),
        );
        let turn = || {
            Controller::new(
                Arc::clone(&journal),
                Arc::clone(&chat),
                dialect.provider(&server),
                "s",
            )
            .with_tools(Arc::new(CutWeather))
        };
        turn().exec(exec("Paris, Rome, Oslo?")).await.unwrap_err();
        assert!(host_refuses(&journal).await.is_some(), "{dialect:?}");
        turn().exec(abandoning("never mind")).await.unwrap();
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{dialect:?}");
        let answered = dialect.answered_calls(&requests[1].json());
        assert_eq!(answered.len(), 3, "{dialect:?}: {answered:?}");
        assert!(answered[0].1.contains("sunny"), "{dialect:?}: {answered:?}");
        assert!(
            answered[1].1.contains("outcome unknown, not retried"),
            "{dialect:?}: {answered:?}"
        );
        assert!(
            answered[2].1.contains("not run"),
            "{dialect:?}: {answered:?}"
        );
        // The same history replays: its model input hashes match the recorded ones.
        Controller::new(
            Arc::clone(&journal),
            Arc::clone(&chat),
            dialect.provider(&server),
            "s",
        )
        .replay()
        .await
        .unwrap();
        assert_eq!(server.requests().len(), 2, "replay calls no model");
    }
}
