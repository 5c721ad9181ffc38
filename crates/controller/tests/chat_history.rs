//! The chat harness's history across turns, as each vendor's wire format carries it (extensions
//! §10): a second turn's provider request holds the first turn's tool call and its answer (an
//! image included), replay calls nothing, and a resumed turn's model call hashes as the live one.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

#[path = "../../model/tests/support/mod.rs"]
mod http_stub;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentsessions_api::{
    EventBody, FilePart, Harness, Mediation, ModelProvider, OfferedTool, Part, TextPart, ToolCall,
    ToolCatalog, ToolDefinition, ToolResult,
};
use agentsessions_controller::{Controller, ExecRequest, ToolExecutor};
use agentsessions_harnesses::ChatHarness;
use agentsessions_journal::{Journal, LogRecord};
use agentsessions_model::{AnthropicConfig, AnthropicProvider, OpenAiConfig, OpenAiProvider};
use async_trait::async_trait;
use http_stub::{Reply, TestServer};
use serde_json::{Value, json};
use support::{ApiResult, memory, read, truncated, user};

#[derive(Debug)]
struct FixedCatalog(Vec<OfferedTool>);

impl ToolCatalog for FixedCatalog {
    fn offered(&self) -> Vec<OfferedTool> {
        self.0.clone()
    }
}

fn catalog() -> Arc<dyn ToolCatalog> {
    Arc::new(FixedCatalog(vec![OfferedTool {
        definition: ToolDefinition {
            name: "snapshot".into(),
            description: "A picture of the sky".into(),
            input_schema: None,
        },
        mediation: Mediation::ControllerMediated,
    }]))
}

/// Answers every call with a text, a PNG and a text; counts the calls.
#[derive(Debug, Default)]
struct SnapshotTool {
    calls: AtomicU64,
}

#[async_trait]
impl ToolExecutor for SnapshotTool {
    async fn execute(&self, _session: &str, _call: &ToolCall) -> ApiResult<ToolResult> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let text = |t: &str| Part::Text(TextPart { text: t.into() });
        Ok(ToolResult {
            content: vec![
                text("The sky now:"),
                Part::File(FilePart {
                    mime: "image/png".into(),
                    bytes: b"png!".to_vec(),
                    ..FilePart::default()
                }),
                text("Mostly blue."),
            ],
            ..ToolResult::default()
        })
    }
}

fn chat() -> Arc<dyn Harness> {
    Arc::new(
        ChatHarness::new("test-model")
            .unwrap()
            .with_tools(catalog()),
    )
}

fn turn(
    journal: &Arc<dyn Journal>,
    model: Arc<dyn ModelProvider>,
    tool: &Arc<SnapshotTool>,
) -> Controller {
    Controller::new(Arc::clone(journal), chat(), model, "s").with_tools(tool.clone())
}

fn ask(text: &str) -> ExecRequest {
    ExecRequest {
        inputs: vec![user(text)],
        ..ExecRequest::default()
    }
}

fn openai(server: &TestServer) -> Arc<dyn ModelProvider> {
    let mut config = OpenAiConfig::new("gpt-test");
    config.base_url = format!("{}/v1", server.url());
    Arc::new(OpenAiProvider::new(config).unwrap())
}

fn anthropic(server: &TestServer) -> Arc<dyn ModelProvider> {
    let mut config = AnthropicConfig::new("claude-test");
    config.base_url = server.url();
    Arc::new(AnthropicProvider::new(config).unwrap())
}

fn openai_call(id: &str) -> Reply {
    Reply::json(
        200,
        &json!({"model": "gpt-test-1", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [{"id": id,
                "type": "function", "function": {"name": "snapshot", "arguments": "{}"}}]}}]}),
    )
}

fn openai_text(text: &str) -> Reply {
    Reply::json(
        200,
        &json!({"model": "gpt-test-1", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}]}),
    )
}

fn anthropic_reply(content: &Value, stop: &str) -> Reply {
    Reply::json(
        200,
        &json!({"type": "message", "role": "assistant", "model": "claude-test-1",
            "content": content, "stop_reason": stop,
            "usage": {"input_tokens": 7, "output_tokens": 3}}),
    )
}

/// The input hashes of the MODEL_CALL records, in order.
fn model_hashes(records: &[LogRecord]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match &r.event.body {
            Some(EventBody::ModelCall(call)) => Some(call.input_hash.clone()),
            _ => None,
        })
        .collect()
}

// extensions §10: the second turn's OpenAI request holds the first turn's question, its
// tool_calls, the tool message (text with the image's stand-in), the user message carrying the
// image, the answer, then the new question; replay calls no model and no tool; a turn resumed
// before its model call sends the request the live one sent.
#[tokio::test]
async fn a_second_turn_reads_the_first_turns_tool_round_in_openai_form() {
    let server = TestServer::start(vec![
        openai_call("call_a"),
        openai_text("Blue sky."),
        openai_text("Still blue."),
        openai_text("Still blue."),
    ])
    .await;
    let tool = Arc::new(SnapshotTool::default());
    let journal = memory();
    turn(&journal, openai(&server), &tool)
        .exec(ask("How is the sky?"))
        .await
        .unwrap();
    turn(&journal, openai(&server), &tool)
        .exec(ask("And now?"))
        .await
        .unwrap();
    assert_eq!(tool.calls.load(Ordering::SeqCst), 1);
    let sent = server.requests();
    assert_eq!(sent.len(), 3);
    let messages = sent[2].json()["messages"].clone();
    assert_eq!(
        messages,
        json!([
            {"role": "user", "content": "How is the sky?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_a",
                "type": "function", "function": {"name": "snapshot", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_a", "content":
                "The sky now:\n[image 1: image/png, 4 bytes, in the next user message]\nMostly blue."},
            {"role": "user", "content": [
                {"type": "text", "text": "Images from tool call call_a:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,cG5nIQ=="}},
            ]},
            {"role": "assistant", "content": "Blue sky."},
            {"role": "user", "content": "And now?"},
        ])
    );
    // The second turn's history reads the first turn's round as its own next step did.
    assert_eq!(
        sent[1].json()["messages"],
        Value::Array(messages.as_array().unwrap()[..4].to_vec())
    );

    let before = read(&journal).await;
    let report = turn(&journal, openai(&server), &tool)
        .replay()
        .await
        .unwrap();
    assert_eq!(report.model_calls, 0);
    assert_eq!(report.reproduced, report.effects, "{report:?}");
    assert_eq!(server.requests().len(), 3, "replay reached the model");
    assert_eq!(tool.calls.load(Ordering::SeqCst), 1, "replay ran a tool");
    assert_eq!(read(&journal).await, before);

    // The second turn lost everything after its input: resume makes the model call again.
    let second_start = before
        .iter()
        .rposition(|r| r.event.kind.as_str() == "EXECUTION_START")
        .unwrap();
    let crashed = truncated(&journal, before[second_start].seq + 2).await;
    let outcome = turn(&crashed, openai(&server), &tool)
        .resume()
        .await
        .unwrap();
    assert!(outcome.resumed);
    assert_eq!(server.requests().len(), 4);
    assert_eq!(server.requests()[3].json(), sent[2].json());
    assert_eq!(model_hashes(&read(&crashed).await), model_hashes(&before));
    assert_eq!(tool.calls.load(Ordering::SeqCst), 1);
}

// extensions §10: in Anthropic form the first turn's round is a tool_use block and a
// tool_result holding text and image blocks.
#[tokio::test]
async fn a_second_turn_reads_the_first_turns_tool_round_in_anthropic_form() {
    let server = TestServer::start(vec![
        anthropic_reply(
            &json!([{"type": "tool_use", "id": "toolu_1", "name": "snapshot", "input": {}}]),
            "tool_use",
        ),
        anthropic_reply(&json!([{"type": "text", "text": "Blue sky."}]), "end_turn"),
        anthropic_reply(
            &json!([{"type": "text", "text": "Still blue."}]),
            "end_turn",
        ),
    ])
    .await;
    let tool = Arc::new(SnapshotTool::default());
    let journal = memory();
    for question in ["How is the sky?", "And now?"] {
        turn(&journal, anthropic(&server), &tool)
            .exec(ask(question))
            .await
            .unwrap();
    }
    let sent = server.requests();
    assert_eq!(sent.len(), 3);
    assert_eq!(
        sent[2].json()["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "How is the sky?"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "snapshot", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                "content": [
                    {"type": "text", "text": "The sky now:"},
                    {"type": "image", "source":
                        {"type": "base64", "media_type": "image/png", "data": "cG5nIQ=="}},
                    {"type": "text", "text": "Mostly blue."},
                ]}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Blue sky."}]},
            {"role": "user", "content": [{"type": "text", "text": "And now?"}]},
        ])
    );
}
