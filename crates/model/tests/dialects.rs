//! The dialect seam: one HTTP provider, one dialect per vendor. The same scenarios run through
//! every dialect against the local stub server, so what the shared provider owns (retries,
//! streaming, error mapping) is shown to behave the same whatever the wire format, and each
//! dialect's answer reads the same whole or streamed.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use agentsessions_api::{
    ApiError, Message, ModelProvider, ModelRequest, Part, StatusCode, ToolCall, ToolDefinition,
};
use agentsessions_model::{
    AnthropicConfig, AnthropicProvider, OpenAiConfig, OpenAiProvider, RetryPolicy,
};
use serde_json::{Value, json};
use support::{RecordingSink, Reply, TestServer};

/// One vendor's wire format, as the stub server must speak it.
#[derive(Debug, Clone, Copy)]
enum Vendor {
    OpenAi,
    Anthropic,
}

const VENDORS: [Vendor; 2] = [Vendor::OpenAi, Vendor::Anthropic];

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(10),
        max_wait: Duration::from_secs(5),
    }
}

impl Vendor {
    fn provider(self, server: &TestServer) -> Box<dyn ModelProvider> {
        match self {
            Self::OpenAi => {
                let mut config = OpenAiConfig::new("model-test");
                config.base_url = format!("{}/v1", server.url());
                config.api_key = "k".into();
                config.retry = fast_retry();
                Box::new(OpenAiProvider::new(config).unwrap())
            }
            Self::Anthropic => {
                let mut config = AnthropicConfig::new("model-test");
                config.base_url = server.url();
                config.api_key = "k".into();
                config.retry = fast_retry();
                Box::new(AnthropicProvider::new(config).unwrap())
            }
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Self::OpenAi => "/v1/chat/completions",
            Self::Anthropic => "/v1/messages",
        }
    }

    /// A whole answer: `text`, then a call to `weather` with `{"city": "Paris"}`.
    fn whole(self, text: &str) -> Reply {
        let body = match self {
            Self::OpenAi => json!({
                "model": "model-test-1",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": text,
                    "tool_calls": [{"id": "c1", "type": "function", "function":
                        {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4,
                    "prompt_tokens_details": {"cached_tokens": 2}},
            }),
            Self::Anthropic => json!({
                "type": "message", "role": "assistant", "model": "model-test-1",
                "content": [
                    {"type": "text", "text": text},
                    {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Paris"}},
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 2},
            }),
        };
        Reply::json(200, &body)
    }

    /// The same answer streamed, the text in `pieces`; `cut` leaves out the end marker.
    fn streamed(self, pieces: &[&str], cut: bool) -> Reply {
        let mut events = Vec::new();
        match self {
            Self::OpenAi => {
                let chunk = |delta: Value, finish: Value| {
                    json!({"model": "model-test-1",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                };
                for piece in pieces {
                    events.push(chunk(json!({"content": piece}), Value::Null));
                }
                events.push(chunk(
                    json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                        "function": {"name": "weather", "arguments": "{\"city\":"}}]}),
                    Value::Null,
                ));
                events.push(chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}),
                    Value::Null,
                ));
                if !cut {
                    events.push(chunk(json!({}), json!("tool_calls")));
                    events.push(json!({"model": "model-test-1", "choices": [],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 4,
                            "prompt_tokens_details": {"cached_tokens": 2}}}));
                }
                let mut frames: Vec<String> =
                    events.iter().map(|e| format!("data: {e}\n\n")).collect();
                if !cut {
                    frames.push("data: [DONE]\n\n".into());
                }
                Reply::sse(&frames)
            }
            Self::Anthropic => {
                events.push(
                    json!({"type": "message_start", "message": {"model": "model-test-1",
                    "usage": {"input_tokens": 3, "output_tokens": 1,
                        "cache_read_input_tokens": 2}}}),
                );
                events.push(json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}));
                for piece in pieces {
                    events.push(json!({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": piece}}));
                }
                events.push(json!({"type": "content_block_start", "index": 1,
                    "content_block": {"type": "tool_use", "id": "c1", "name": "weather",
                        "input": {}}}));
                events.push(json!({"type": "content_block_delta", "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": "{\"city\":"}}));
                events.push(json!({"type": "content_block_delta", "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": "\"Paris\"}"}}));
                if !cut {
                    events.push(json!({"type": "message_delta",
                        "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 4}}));
                    events.push(json!({"type": "message_stop"}));
                }
                let frames: Vec<String> = events
                    .iter()
                    .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
                    .collect();
                Reply::sse(&frames)
            }
        }
    }
}

fn weather_request() -> ModelRequest {
    ModelRequest {
        messages: vec![Message::text_message("user", "Weather in Paris?")],
        tools: vec![ToolDefinition {
            name: "weather".into(),
            description: "Current weather".into(),
            ..ToolDefinition::default()
        }],
        ..ModelRequest::default()
    }
}

fn expected_message(text: &str) -> Message {
    let mut message = Message::text_message("assistant", text);
    message.parts.push(Part::ToolCall(ToolCall {
        id: "c1".into(),
        tool: "weather".into(),
        args: json!({"city": "Paris"}).as_object().cloned(),
        ..ToolCall::default()
    }));
    message
}

fn code_of(err: &ApiError) -> StatusCode {
    match err {
        ApiError::Status { code, .. } => *code,
        other => panic!("expected a status error, got {other:?}"),
    }
}

// brief: each dialect reads the same answer whole and streamed — text, tool call, usage — and
// the shared provider relays the streamed text chunks in order.
#[tokio::test]
async fn each_dialect_reads_whole_and_streamed_answers_alike() {
    for vendor in VENDORS {
        let server = TestServer::start(vec![
            vendor.whole("It is sunny."),
            vendor.streamed(&["It is ", "sunny."], false),
        ])
        .await;
        let provider = vendor.provider(&server);
        assert_eq!(provider.name(), vendor.name());
        assert_eq!(provider.default_model(), "model-test");

        let whole = provider.complete(&weather_request(), None).await.unwrap();
        let sink = RecordingSink::default();
        let streamed = provider
            .complete(&weather_request(), Some(&sink))
            .await
            .unwrap();

        assert_eq!(
            whole.message,
            expected_message("It is sunny."),
            "{vendor:?}"
        );
        assert_eq!(streamed.message, whole.message, "{vendor:?}");
        assert_eq!(streamed.usage, whole.usage, "{vendor:?}");
        assert_eq!(whole.usage.model, "model-test-1", "{vendor:?}");
        assert_eq!(
            (
                whole.usage.input_tokens,
                whole.usage.output_tokens,
                whole.usage.cached_input_tokens
            ),
            (3, 4, 2),
            "{vendor:?}"
        );
        let texts: Vec<String> = sink.chunks().into_iter().map(|(_, text)| text).collect();
        assert_eq!(texts, ["It is ", "sunny."], "{vendor:?}");

        let sent = server.requests();
        assert_eq!(sent.len(), 2, "{vendor:?}");
        for request in &sent {
            assert_eq!(request.path, vendor.path(), "{vendor:?}");
            assert_eq!(request.json()["model"], "model-test", "{vendor:?}");
        }
        assert_eq!(sent[0].json().get("stream"), None, "{vendor:?}");
        assert_eq!(sent[1].json()["stream"], true, "{vendor:?}");
    }
}

// brief: retrying is the provider's, not the dialect's — a 429 is sent again and answered, a
// 400 is not, whatever the vendor.
#[tokio::test]
async fn every_dialect_shares_the_retry_rule() {
    for vendor in VENDORS {
        let busy = json!({"error": {"type": "rate_limit_error", "message": "slow down"}});
        let server = TestServer::start(vec![
            Reply::json_with(429, &busy, &[("retry-after", "0")]),
            vendor.whole("ok"),
            Reply::json(
                400,
                &json!({"error": {"type": "invalid_request_error", "message": "boom"}}),
            ),
        ])
        .await;
        let provider = vendor.provider(&server);
        let answer = provider.complete(&weather_request(), None).await.unwrap();
        assert_eq!(answer.message, expected_message("ok"), "{vendor:?}");
        assert_eq!(server.requests().len(), 2, "{vendor:?}");

        let err = provider
            .complete(&weather_request(), None)
            .await
            .unwrap_err();
        assert_eq!(code_of(&err), StatusCode::InvalidArgument, "{vendor:?}");
        assert!(err.to_string().contains("boom"), "{vendor:?}: {err}");
        assert_eq!(server.requests().len(), 3, "{vendor:?}");
    }
}

// brief: a stream that ends before its end marker is an error in every dialect, never a
// silently short answer.
#[tokio::test]
async fn every_dialect_refuses_a_truncated_stream() {
    for vendor in VENDORS {
        let server = TestServer::start(vec![vendor.streamed(&["It is "], true)]).await;
        let provider = vendor.provider(&server);
        let sink = RecordingSink::default();
        let err = provider
            .complete(&weather_request(), Some(&sink))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("stream"), "{vendor:?}: {err}");
        assert_eq!(server.requests().len(), 1, "{vendor:?}");
    }
}
