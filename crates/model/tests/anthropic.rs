//! The Anthropic provider against a local server speaking the Messages API wire format (shapes
//! from Anthropic's API reference and streaming guide).
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::time::Duration;

use agentsessions_api::{
    ApiError, Message, ModelProvider, ModelRequest, Part, ReasoningPart, StatusCode, TextPart,
    ToolCall, ToolChoice, ToolChoiceMode, ToolDefinition, ToolResult, Usage,
};
use agentsessions_model::{AnthropicConfig, AnthropicProvider, RetryPolicy};
use serde_json::{Value, json};
use support::{RecordingSink, Reply, TestServer};

const SIGNATURE: &str =
    "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL";
const REDACTED: &str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP";

fn provider(server: &TestServer) -> AnthropicProvider {
    let mut config = AnthropicConfig::new("claude-test");
    config.base_url = format!("{}/", server.url());
    config.api_key = "sk-ant-test".into();
    config.timeout = Duration::from_secs(10);
    config.retry = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(10),
        max_wait: Duration::from_secs(5),
    };
    AnthropicProvider::new(config).unwrap()
}

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![Message::text_message("user", text)],
        ..ModelRequest::default()
    }
}

/// A `message` object with `content` blocks.
fn message(content: &Value, stop_reason: &str) -> Value {
    json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-20250101",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": 25, "output_tokens": 15},
    })
}

/// An SSE event as the API sends it: the `event:` line, then the data.
fn event(data: &Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

/// A whole stream: `message_start`, the given events, `message_delta` and (unless `cut`)
/// `message_stop`.
fn stream(events: &[Value], stop_reason: &str, cut: bool) -> Reply {
    let mut all = vec![event(&json!({"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "content": [], "model": "claude-test-20250101", "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}))];
    all.push(event(&json!({"type": "ping"})));
    all.extend(events.iter().map(event));
    if !cut {
        all.push(event(&json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 15}})));
        all.push(event(&json!({"type": "message_stop"})));
    }
    Reply::sse(&all)
}

fn block_start(index: u32, block: &Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: u32, delta: &Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn block_stop(index: u32) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn status_of(err: &ApiError) -> (StatusCode, &str) {
    match err {
        ApiError::Status { code, message } => (*code, message.as_str()),
        other => panic!("expected a status error, got {other:?}"),
    }
}

fn weather_call(id: &str, location: &str) -> Part {
    Part::ToolCall(ToolCall {
        id: id.into(),
        tool: "get_weather".into(),
        args: json!({"location": location}).as_object().cloned(),
        ..ToolCall::default()
    })
}

fn thinking_part(index: i32) -> Part {
    Part::Reasoning(ReasoningPart {
        provider: "anthropic".into(),
        model_id: "claude-test-20250101".into(),
        opaque:
            json!({"type": "thinking", "thinking": "Let me analyze this.", "signature": SIGNATURE})
                .to_string()
                .into_bytes(),
        summary: vec![Part::Text(TextPart {
            text: "Let me analyze this.".into(),
        })],
        ordinal: index,
        ..ReasoningPart::default()
    })
}

// brief: POST {base}/v1/messages with x-api-key and anthropic-version; system messages go to the
// top-level `system`; max_tokens defaults; the text and usage are read.
#[tokio::test]
async fn plain_text_message() {
    let server = TestServer::start(vec![Reply::json(
        200,
        &message(
            &json!([{"type": "text", "text": "Hi! My name is Claude."}]),
            "end_turn",
        ),
    )])
    .await;
    let mut request = ask("Hello, Claude");
    request
        .messages
        .insert(0, Message::text_message("system", "Be friendly."));
    let response = provider(&server).complete(&request, None).await.unwrap();

    assert_eq!(
        response.message,
        Message::text_message("assistant", "Hi! My name is Claude.")
    );
    assert_eq!(
        response.usage,
        Usage {
            model: "claude-test-20250101".into(),
            input_tokens: 25,
            output_tokens: 15,
            reasoning_tokens: 0,
            cached_input_tokens: 0,
        }
    );
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.headers["x-api-key"], "sk-ant-test");
    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
    assert!(!sent.headers.contains_key("authorization"));
    assert_eq!(
        sent.json(),
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "system": [{"type": "text", "text": "Be friendly."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello, Claude"}]}],
        })
    );
}

// brief + semantics §2.7: the stream's thinking, text and tool_use blocks give the same message
// as the whole answer; text chunks arrive in order with the index of their part.
#[tokio::test]
async fn streaming_matches_non_streaming() {
    let whole = Reply::json(
        200,
        &message(
            &json!([
                {"type": "thinking", "thinking": "Let me analyze this.", "signature": SIGNATURE},
                {"type": "text", "text": "Okay, checking."},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                 "input": {"location": "San Francisco, CA"}},
            ]),
            "tool_use",
        ),
    );
    let streamed = stream(
        &[
            block_start(0, &json!({"type": "thinking", "thinking": ""})),
            delta(0, &json!({"type": "thinking_delta", "thinking": "Let me "})),
            delta(
                0,
                &json!({"type": "thinking_delta", "thinking": "analyze this."}),
            ),
            delta(
                0,
                &json!({"type": "signature_delta", "signature": SIGNATURE}),
            ),
            block_stop(0),
            block_start(1, &json!({"type": "text", "text": ""})),
            delta(1, &json!({"type": "text_delta", "text": "Okay"})),
            delta(1, &json!({"type": "text_delta", "text": ", checking."})),
            block_stop(1),
            block_start(
                2,
                &json!({"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}),
            ),
            delta(2, &json!({"type": "input_json_delta", "partial_json": ""})),
            delta(
                2,
                &json!({"type": "input_json_delta", "partial_json": "{\"location\": \"San Fra"}),
            ),
            delta(
                2,
                &json!({"type": "input_json_delta", "partial_json": "ncisco, CA\"}"}),
            ),
            block_stop(2),
        ],
        "tool_use",
        false,
    );
    let server = TestServer::start(vec![whole, streamed]).await;
    let provider = provider(&server);
    let plain = provider.complete(&ask("weather?"), None).await.unwrap();
    let sink = RecordingSink::default();
    let live = provider
        .complete(&ask("weather?"), Some(&sink))
        .await
        .unwrap();

    assert_eq!(live, plain);
    assert_eq!(
        plain.message.parts,
        vec![
            thinking_part(0),
            Part::Text(TextPart {
                text: "Okay, checking.".into()
            }),
            weather_call("toolu_01", "San Francisco, CA"),
        ]
    );
    assert_eq!(
        sink.chunks(),
        vec![(1, "Okay".to_owned()), (1, ", checking.".to_owned())]
    );
    assert_eq!(live.usage.output_tokens, 15);
    assert_eq!(server.requests()[1].json()["stream"], json!(true));
}

// brief: tools, tool_choice, earlier tool_use blocks and tool_result blocks are sent in the
// Messages API's shape.
#[tokio::test]
async fn tool_use_round_trip() {
    let server = TestServer::start(vec![Reply::json(
        200,
        &message(
            &json!([{"type": "tool_use", "id": "toolu_02", "name": "get_weather",
                      "input": {"location": "Paris"}}]),
            "tool_use",
        ),
    )])
    .await;
    let request = ModelRequest {
        messages: vec![
            Message::text_message("user", "Weather in Boston, then Paris?"),
            Message {
                role: "assistant".into(),
                parts: vec![weather_call("toolu_01", "Boston")],
            },
            Message {
                role: "tool".into(),
                parts: vec![Part::ToolResult(ToolResult {
                    id: "toolu_01".into(),
                    content: vec![Part::Text(TextPart {
                        text: "15 degrees".into(),
                    })],
                    ..ToolResult::default()
                })],
            },
        ],
        tools: vec![ToolDefinition {
            name: "get_weather".into(),
            description: "Get the current weather in a given location".into(),
            input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}},
                                 "required": ["location"]})
            .as_object()
            .cloned(),
        }],
        tool_choice: Some(ToolChoice {
            mode: ToolChoiceMode::Required,
            name: String::new(),
        }),
        ..ModelRequest::default()
    };
    let response = provider(&server).complete(&request, None).await.unwrap();

    assert_eq!(
        response.message.parts,
        vec![weather_call("toolu_02", "Paris")]
    );
    let body = server.requests()[0].json();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather in Boston, then Paris?"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01",
                "name": "get_weather", "input": {"location": "Boston"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
                "content": "15 degrees"}]},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "get_weather", "description": "Get the current weather in a given location",
                "input_schema": {"type": "object", "properties": {"location": {"type": "string"}},
                                 "required": ["location"]}}])
    );
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
}

// brief: thinking and redacted_thinking blocks are kept opaque and sent back, in a later
// request, exactly as they came.
#[tokio::test]
async fn thinking_blocks_are_sent_back_verbatim() {
    let blocks = json!([
        {"type": "thinking", "thinking": "Let me analyze this.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "text", "text": "42"},
    ]);
    let server = TestServer::start(vec![Reply::json(200, &message(&blocks, "end_turn"))]).await;
    let provider = provider(&server);
    let first = provider.complete(&ask("question"), None).await.unwrap();
    assert!(matches!(
        &first.message.parts[1],
        Part::Reasoning(r) if r.summary.is_empty() && r.ordinal == 1
    ));

    let mut follow_up = ask("question");
    follow_up.messages.push(first.message);
    follow_up
        .messages
        .push(Message::text_message("user", "why?"));
    provider.complete(&follow_up, None).await.unwrap();

    let sent = server.requests()[1].json();
    assert_eq!(
        sent["messages"][1],
        json!({"role": "assistant", "content": blocks})
    );
}

// brief: 401 carries the provider's message as UNAUTHENTICATED and is not retried.
#[tokio::test]
async fn unauthorized_carries_the_provider_message() {
    let server = TestServer::start(vec![Reply::json(
        401,
        &json!({"type": "error", "error": {"type": "authentication_error",
                "message": "invalid x-api-key"}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}),
    )])
    .await;
    let err = provider(&server)
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::Unauthenticated);
    assert!(message.ends_with("invalid x-api-key"), "{message}");
    assert!(message.starts_with("anthropic: "), "{message}");
    assert_eq!(server.requests().len(), 1);
}

// brief: a 529 "overloaded" answer means the model never ran: retried, here with success.
#[tokio::test]
async fn overloaded_is_retried() {
    let overloaded = Reply::json(
        529,
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let ok = Reply::json(
        200,
        &message(&json!([{"type": "text", "text": "ok"}]), "end_turn"),
    );
    let server = TestServer::start(vec![overloaded, ok]).await;
    let response = provider(&server).complete(&ask("hi"), None).await.unwrap();
    assert_eq!(response.message.text(), "ok");
    assert_eq!(server.requests().len(), 2);
}

// Provider retries: a 500 carries no completion: retried with backoff, then INTERNAL.
#[tokio::test]
async fn server_error_is_retried_then_reported() {
    let server = TestServer::start(vec![Reply::json(
        500,
        &json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}),
    )])
    .await;
    let err = provider(&server)
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    assert_eq!(status_of(&err).0, StatusCode::Internal);
    assert_eq!(server.requests().len(), 3);
}

// brief: an error event mid-stream is the provider's error (overloaded → UNAVAILABLE), and it
// is not retried since text was already produced.
#[tokio::test]
async fn error_event_mid_stream() {
    let mut events = vec![
        block_start(0, &json!({"type": "text", "text": ""})),
        delta(0, &json!({"type": "text_delta", "text": "Hel"})),
    ];
    events.push(
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let server = TestServer::start(vec![stream(&events, "end_turn", true)]).await;
    let sink = RecordingSink::default();
    let err = provider(&server)
        .complete(&ask("hi"), Some(&sink))
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::Unavailable);
    assert!(message.contains("Overloaded"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

// brief: a stream without message_stop is truncated: INTERNAL, not retried.
#[tokio::test]
async fn truncated_stream_is_an_error() {
    let events = [
        block_start(0, &json!({"type": "text", "text": ""})),
        delta(0, &json!({"type": "text_delta", "text": "Hel"})),
    ];
    let server = TestServer::start(vec![stream(&events, "end_turn", true)]).await;
    let sink = RecordingSink::default();
    let err = provider(&server)
        .complete(&ask("hi"), Some(&sink))
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::Internal);
    assert!(message.contains("stream ended"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

// brief: malformed answers and tool input that is not an object are INTERNAL.
#[tokio::test]
async fn malformed_answers_are_internal() {
    let server = TestServer::start(vec![
        Reply::Full {
            status: 200,
            headers: vec![],
            body: b"{\"type\": \"message\", \"content\": [".to_vec(),
        },
        Reply::sse(&[
            event(&json!({"type": "message_start", "message": {"model": "m"}})),
            event(&block_start(
                0,
                &json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
            )),
            event(&delta(
                0,
                &json!({"type": "input_json_delta", "partial_json": "[1]"}),
            )),
            event(&json!({"type": "message_stop"})),
        ]),
    ])
    .await;
    let provider = provider(&server);
    let err = provider.complete(&ask("hi"), None).await.unwrap_err();
    assert_eq!(status_of(&err).0, StatusCode::Internal);
    assert!(status_of(&err).1.contains("malformed response"));
    let sink = RecordingSink::default();
    let err = provider
        .complete(&ask("hi"), Some(&sink))
        .await
        .unwrap_err();
    assert_eq!(status_of(&err).0, StatusCode::Internal);
    assert!(status_of(&err).1.contains("invalid arguments"));
}

// provider contract: dropping the future mid-stream closes the connection.
#[tokio::test]
async fn dropping_the_future_closes_the_connection() {
    let opening = [
        json!({"type": "message_start", "message": {"model": "claude-test", "content": [],
               "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        block_start(0, &json!({"type": "text", "text": ""})),
        delta(0, &json!({"type": "text_delta", "text": "Hel"})),
    ];
    let server = TestServer::start(vec![Reply::Stream {
        content_type: "text/event-stream".into(),
        pieces: opening.iter().map(|e| event(e).into_bytes()).collect(),
        pause: Duration::ZERO,
        hold_open: true,
    }])
    .await;
    let provider = provider(&server);
    let sink = RecordingSink::default();
    let request = ask("hi");
    {
        let call = provider.complete(&request, Some(&sink));
        tokio::select! {
            result = call => panic!("the stream never ends, yet the call returned {result:?}"),
            () = sink.first_chunk() => {}
        }
    }
    tokio::time::timeout(Duration::from_secs(5), server.hung_up())
        .await
        .expect("the server saw the connection close");
}
