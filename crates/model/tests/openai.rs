//! The OpenAI-compatible provider against a local server speaking the chat completions wire
//! format (shapes from OpenAI's API reference, `reasoning_content` as DeepSeek sends it).
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use agentsessions_api::{
    ApiError, Message, ModelProvider, ModelRequest, ModelResponse, Part, ReasoningPart, StatusCode,
    TextPart, ToolCall, ToolChoice, ToolChoiceMode, ToolDefinition, ToolResult, Usage,
};
use agentsessions_model::{OpenAiConfig, OpenAiProvider, RetryPolicy};
use serde_json::{Value, json};
use support::{RecordingSink, Reply, TestServer, closed_port_url};

fn config(base: &str) -> OpenAiConfig {
    let mut config = OpenAiConfig::new("gpt-test");
    config.base_url = format!("{base}/v1/");
    config.api_key = "sk-test".into();
    config.timeout = Duration::from_secs(10);
    config.retry = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(10),
        max_wait: Duration::from_secs(5),
    };
    config
}

fn provider(server: &TestServer) -> OpenAiProvider {
    OpenAiProvider::new(config(&server.url())).unwrap()
}

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![Message::text_message("user", text)],
        ..ModelRequest::default()
    }
}

/// A `chat.completion` object around `message`.
fn completion(message: &Value, usage: &Value) -> Value {
    json!({
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1_677_652_288,
        "model": "gpt-test-0613",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": "stop"}],
        "usage": usage,
    })
}

fn usage(prompt: i64, completion: i64, reasoning: i64) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    })
}

/// One `chat.completion.chunk` with a delta for choice 0.
fn chunk(delta: &Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1_694_268_190,
        "model": "gpt-test-0613",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
    })
}

/// The final usage chunk `stream_options.include_usage` asks for: no choices.
fn usage_chunk(usage: &Value) -> Value {
    json!({
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1_694_268_190,
        "model": "gpt-test-0613",
        "choices": [],
        "usage": usage,
    })
}

fn data(frames: &[Value], done: bool) -> Vec<String> {
    let mut events: Vec<String> = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
    if done {
        events.push("data: [DONE]\n\n".into());
    }
    events
}

fn status_of(err: &ApiError) -> (StatusCode, &str) {
    match err {
        ApiError::Status { code, message } => (*code, message.as_str()),
        other => panic!("expected a status error, got {other:?}"),
    }
}

// semantics §10.6: POST {base}/chat/completions with bearer auth and JSON; `""` and `"echo"` mean the
// default model; the answer's text and usage are read.
#[tokio::test]
async fn plain_text_completion() {
    let server = TestServer::start(vec![Reply::json(
        200,
        &completion(
            &json!({"role": "assistant", "content": "Hello there, how may I assist you today?"}),
            &usage(9, 12, 0),
        ),
    )])
    .await;
    let mut request = ask("Hello!");
    request.model = "echo".into();
    request.params = Some(
        [
            ("temperature".to_owned(), "0.7".to_owned()),
            ("max_tokens".to_owned(), "100".to_owned()),
            ("user".to_owned(), "u-1".to_owned()),
        ]
        .into(),
    );
    let response = provider(&server).complete(&request, None).await.unwrap();

    assert_eq!(
        response,
        ModelResponse {
            message: Message::text_message("assistant", "Hello there, how may I assist you today?"),
            usage: Usage {
                model: "gpt-test-0613".into(),
                input_tokens: 9,
                output_tokens: 12,
                reasoning_tokens: 0,
                cached_input_tokens: 0,
            },
        }
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.headers["authorization"], "Bearer sk-test");
    assert_eq!(sent.headers["content-type"], "application/json");
    assert_eq!(
        sent.json(),
        json!({
            "model": "gpt-test",
            "messages": [{"role": "user", "content": "Hello!"}],
            "temperature": 0.7,
            "max_tokens": 100,
            "user": "u-1",
        })
    );
}

// semantics §10.6: another auth header carries the raw key; no key sends no credential; the path may
// carry a query.
#[tokio::test]
async fn auth_header_and_path_are_configurable() {
    let reply = Reply::json(
        200,
        &completion(
            &json!({"role": "assistant", "content": "ok"}),
            &usage(1, 1, 0),
        ),
    );
    let server = TestServer::start(vec![reply]).await;
    let mut azure = config(&server.url());
    azure.auth_header = "api-key".into();
    azure.path = "openai/deployments/d/chat/completions?api-version=2024-10-21".into();
    OpenAiProvider::new(azure)
        .unwrap()
        .complete(&ask("x"), None)
        .await
        .unwrap();
    let mut local = config(&server.url());
    local.api_key = String::new();
    OpenAiProvider::new(local)
        .unwrap()
        .complete(&ask("x"), None)
        .await
        .unwrap();

    let requests = server.requests();
    assert_eq!(
        requests[0].path,
        "/v1/openai/deployments/d/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(requests[0].headers["api-key"], "sk-test");
    assert!(!requests[0].headers.contains_key("authorization"));
    assert!(!requests[1].headers.contains_key("authorization"));
    assert!(!requests[1].headers.contains_key("api-key"));
}

// semantics §10.6 + semantics §2.7: streaming asks for usage, reports each non-empty content chunk
// in order as part 0, and ends with the same message a non-streaming call returns.
#[tokio::test]
async fn streaming_matches_non_streaming() {
    let whole = Reply::json(
        200,
        &completion(
            &json!({"role": "assistant", "content": "Hello world", "reasoning_content": "The user greets."}),
            &usage(5, 7, 3),
        ),
    );
    let streamed = Reply::sse(&data(
        &[
            chunk(&json!({"role": "assistant", "content": ""}), None),
            chunk(&json!({"reasoning_content": "The user "}), None),
            chunk(&json!({"reasoning_content": "greets."}), None),
            chunk(&json!({"content": "Hel"}), None),
            chunk(&json!({"content": "lo"}), None),
            chunk(&json!({"content": " world"}), None),
            chunk(&json!({}), Some("stop")),
            usage_chunk(&usage(5, 7, 3)),
        ],
        true,
    ));
    let server = TestServer::start(vec![whole, streamed]).await;
    let provider = provider(&server);
    let plain = provider.complete(&ask("hi"), None).await.unwrap();
    let sink = RecordingSink::default();
    let live = provider.complete(&ask("hi"), Some(&sink)).await.unwrap();

    assert_eq!(live, plain);
    assert_eq!(
        sink.chunks(),
        vec![
            (0, "Hel".to_owned()),
            (0, "lo".to_owned()),
            (0, " world".to_owned())
        ]
    );
    assert_eq!(
        plain.message.parts,
        vec![
            Part::Reasoning(ReasoningPart {
                provider: "openai".into(),
                model_id: "gpt-test-0613".into(),
                opaque: b"The user greets.".to_vec(),
                ..ReasoningPart::default()
            }),
            Part::Text(TextPart {
                text: "Hello world".into()
            }),
        ]
    );
    assert_eq!(plain.usage.reasoning_tokens, 3);
    let requests = server.requests();
    assert_eq!(requests[0].json().get("stream"), None);
    let body = requests[1].json();
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_current_weather".into(),
        description: "Get the current weather in a given location".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"],
        })
        .as_object()
        .cloned(),
    }
}

fn tool_call_part(id: &str, args: &Value) -> Part {
    Part::ToolCall(ToolCall {
        id: id.into(),
        tool: "get_current_weather".into(),
        args: args.as_object().cloned(),
        ..ToolCall::default()
    })
}

// brief (tools, unlike the reference): definitions, choice, earlier calls and results are sent
// in OpenAI's shape; the answer's tool calls come back as ToolCall parts with parsed arguments.
#[tokio::test]
async fn tool_calls_round_trip() {
    let answer = completion(
        &json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [
                {"id": "call_2", "type": "function", "function": {
                    "name": "get_current_weather", "arguments": "{\n\"location\": \"Paris\"\n}"}},
                {"id": "call_3", "type": "function", "function": {
                    "name": "get_current_weather", "arguments": "{\"location\": \"Oslo\"}"}},
            ],
        }),
        &usage(80, 20, 0),
    );
    let server = TestServer::start(vec![Reply::json(200, &answer)]).await;
    let request = ModelRequest {
        messages: vec![
            Message::text_message("system", "You are helpful."),
            Message::text_message("user", "Weather in Boston, then Paris and Oslo?"),
            Message {
                role: "assistant".into(),
                parts: vec![tool_call_part("call_1", &json!({"location": "Boston, MA"}))],
            },
            Message {
                role: "tool".into(),
                parts: vec![Part::ToolResult(ToolResult {
                    id: "call_1".into(),
                    output: json!({"temperature": 22, "unit": "celsius"})
                        .as_object()
                        .cloned(),
                    ..ToolResult::default()
                })],
            },
        ],
        tools: vec![weather_tool()],
        tool_choice: Some(ToolChoice {
            mode: ToolChoiceMode::Required,
            name: "get_current_weather".into(),
        }),
        ..ModelRequest::default()
    };
    let response = provider(&server).complete(&request, None).await.unwrap();

    assert_eq!(
        response.message.parts,
        vec![
            tool_call_part("call_2", &json!({"location": "Paris"})),
            tool_call_part("call_3", &json!({"location": "Oslo"})),
        ]
    );
    let body = server.requests()[0].json();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Weather in Boston, then Paris and Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_current_weather", "arguments": "{\"location\":\"Boston, MA\"}"},
            }]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\":22,\"unit\":\"celsius\"}"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
        }}])
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "get_current_weather"}})
    );
}

// brief: streamed tool calls are assembled by index, even interleaved, into the same parts a
// whole answer gives.
#[tokio::test]
async fn streamed_tool_calls_are_assembled_by_index() {
    let call = |index: u32, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut function = json!({"arguments": args});
        if let Some(name) = name {
            function["name"] = json!(name);
        }
        let mut entry = json!({"index": index, "function": function});
        if let Some(id) = id {
            entry["id"] = json!(id);
            entry["type"] = json!("function");
        }
        chunk(&json!({"tool_calls": [entry]}), None)
    };
    let streamed = Reply::sse(&data(
        &[
            chunk(&json!({"role": "assistant", "content": null}), None),
            call(0, Some("call_2"), Some("get_current_weather"), ""),
            call(0, None, None, "{\"location\""),
            call(
                1,
                Some("call_3"),
                Some("get_current_weather"),
                "{\"location\": ",
            ),
            call(0, None, None, ": \"Paris\"}"),
            call(1, None, None, "\"Oslo\"}"),
            chunk(&json!({}), Some("tool_calls")),
            usage_chunk(&usage(80, 20, 0)),
        ],
        true,
    ));
    let server = TestServer::start(vec![streamed]).await;
    let sink = RecordingSink::default();
    let response = provider(&server)
        .complete(&ask("weather?"), Some(&sink))
        .await
        .unwrap();
    assert_eq!(
        response.message.parts,
        vec![
            tool_call_part("call_2", &json!({"location": "Paris"})),
            tool_call_part("call_3", &json!({"location": "Oslo"})),
        ]
    );
    assert!(sink.chunks().is_empty());
    assert_eq!(response.usage.input_tokens, 80);
}

// brief: reasoning stays opaque; it is not sent back unless the endpoint is configured to want
// it, and then as the `reasoning_content` it came from.
#[tokio::test]
async fn reasoning_is_sent_back_only_when_configured() {
    let answer = completion(
        &json!({"role": "assistant", "content": "4", "reasoning_content": "2+2 is 4."}),
        &usage(10, 5, 4),
    );
    let server = TestServer::start(vec![Reply::json(200, &answer)]).await;
    let first = provider(&server)
        .complete(&ask("2+2?"), None)
        .await
        .unwrap();
    let mut follow_up = ask("2+2?");
    follow_up.messages.push(first.message.clone());
    follow_up
        .messages
        .push(Message::text_message("user", "and 3+3?"));

    provider(&server).complete(&follow_up, None).await.unwrap();
    let mut replaying = config(&server.url());
    replaying.send_reasoning = true;
    OpenAiProvider::new(replaying)
        .unwrap()
        .complete(&follow_up, None)
        .await
        .unwrap();

    let requests = server.requests();
    assert_eq!(
        requests[1].json()["messages"][1],
        json!({"role": "assistant", "content": "4"})
    );
    assert_eq!(
        requests[2].json()["messages"][1],
        json!({"role": "assistant", "content": "4", "reasoning_content": "2+2 is 4."})
    );
}

// semantics §10.6: non-200 → error with the provider's error.message; 401 → UNAUTHENTICATED, sent
// once.
#[tokio::test]
async fn unauthorized_carries_the_provider_message() {
    let body = json!({"error": {
        "message": "Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
    let server = TestServer::start(vec![Reply::json(401, &body)]).await;
    let err = provider(&server)
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::Unauthenticated);
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert!(message.starts_with("openai: "), "{message}");
    assert_eq!(server.requests().len(), 1);
}

// semantics §10.6: without a JSON error, the first 200 characters of the body are quoted.
#[tokio::test]
async fn non_json_error_quotes_the_body() {
    let server = TestServer::start(vec![Reply::Full {
        status: 403,
        headers: vec![],
        body: format!("<html>{}</html>", "denied ".repeat(100)).into_bytes(),
    }])
    .await;
    let err = provider(&server)
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::PermissionDenied);
    let quoted = message.split_once("403: ").unwrap().1;
    assert_eq!(quoted.chars().count(), 200);
    assert!(quoted.starts_with("<html>denied"));
}

fn rate_limited(retry_after: &str) -> Reply {
    Reply::json_with(
        429,
        &json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}),
        &[("retry-after", retry_after)],
    )
}

// brief: 429 is retried after the Retry-After the provider asks for; the second try succeeds.
#[tokio::test]
async fn rate_limit_then_success_honors_retry_after() {
    let ok = Reply::json(
        200,
        &completion(
            &json!({"role": "assistant", "content": "ok"}),
            &usage(1, 1, 0),
        ),
    );
    let server = TestServer::start(vec![rate_limited("1"), ok]).await;
    let started = Instant::now();
    let response = provider(&server).complete(&ask("hi"), None).await.unwrap();
    assert_eq!(response.message.text(), "ok");
    assert_eq!(server.requests().len(), 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After ignored"
    );
}

// brief: 429 that outlasts the attempts → RESOURCE_EXHAUSTED with the provider's message, after
// exactly max_attempts requests.
#[tokio::test]
async fn rate_limit_exhausted() {
    let server = TestServer::start(vec![rate_limited("0")]).await;
    let err = provider(&server)
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::ResourceExhausted);
    assert!(message.contains("Rate limit reached"), "{message}");
    assert!(message.contains("after 3 attempts"), "{message}");
    assert_eq!(server.requests().len(), 3);
}

// brief: 503 means the model never ran: retried, then UNAVAILABLE.
#[tokio::test]
async fn unavailable_is_retried_then_reported() {
    let server = TestServer::start(vec![Reply::json(
        503,
        &json!({"error": {"message": "The engine is currently overloaded"}}),
    )])
    .await;
    let err = provider(&server)
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    assert_eq!(status_of(&err).0, StatusCode::Unavailable);
    assert!(err.is_retryable());
    assert_eq!(server.requests().len(), 3);
}

// Provider retries: a 5xx answer carries no completion: retried with backoff, and the next
// answer is the result (one completion reaches the caller).
#[tokio::test]
async fn server_error_is_retried_before_any_output() {
    let server = TestServer::start(vec![
        Reply::json(
            500,
            &json!({"error": {"message": "The server had an error while processing your request."}}),
        ),
        Reply::json(
            200,
            &completion(
                &json!({"role": "assistant", "content": "recovered"}),
                &usage(1, 1, 0),
            ),
        ),
    ])
    .await;
    let response = provider(&server).complete(&ask("hi"), None).await.unwrap();
    assert_eq!(response.message.text(), "recovered");
    assert_eq!(server.requests().len(), 2);
}

// brief: a 500 that persists is reported as INTERNAL with the provider's message.
#[tokio::test]
async fn a_persistent_server_error_is_reported() {
    let server = TestServer::start(vec![Reply::json(
        500,
        &json!({"error": {"message": "The server had an error while processing your request."}}),
    )])
    .await;
    let err = provider(&server)
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::Internal);
    assert!(message.contains("The server had an error"), "{message}");
    assert_eq!(server.requests().len(), 3);
}

// brief: a connect failure is retried (the request never left) and reported as UNAVAILABLE.
#[tokio::test]
async fn connect_failure_is_unavailable() {
    let mut config = config(&closed_port_url().await);
    config.retry.initial_backoff = Duration::from_millis(100);
    let started = Instant::now();
    let err = OpenAiProvider::new(config)
        .unwrap()
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::Unavailable);
    assert!(message.contains("cannot connect"), "{message}");
    // Two backoffs (100 ms, 200 ms) prove the two retries.
    assert!(started.elapsed() >= Duration::from_millis(300));
}

// brief: a timeout after sending may hide a completion: DEADLINE_EXCEEDED, never retried.
#[tokio::test]
async fn timeout_is_not_retried() {
    let server = TestServer::start(vec![Reply::Stream {
        content_type: "application/json".into(),
        pieces: vec![],
        pause: Duration::ZERO,
        hold_open: true,
    }])
    .await;
    let mut config = config(&server.url());
    config.timeout = Duration::from_millis(300);
    let err = OpenAiProvider::new(config)
        .unwrap()
        .complete(&ask("hi"), None)
        .await
        .unwrap_err();
    assert_eq!(status_of(&err).0, StatusCode::DeadlineExceeded);
    assert_eq!(server.requests().len(), 1);
}

// brief: malformed answers are INTERNAL, and so are arguments that are not a JSON object.
#[tokio::test]
async fn malformed_answers_are_internal() {
    let bad_args = completion(
        &json!({"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_current_weather", "arguments": "[\"Paris\"]"}}]}),
        &usage(1, 1, 0),
    );
    let server = TestServer::start(vec![
        Reply::Full {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"{\"id\": \"chatcmpl-123\", \"choices\": [".to_vec(),
        },
        Reply::json(200, &json!({"id": "chatcmpl-123", "choices": []})),
        Reply::json(200, &bad_args),
    ])
    .await;
    let provider = provider(&server);
    for expected in ["malformed response", "no choices", "invalid arguments"] {
        let err = provider.complete(&ask("hi"), None).await.unwrap_err();
        let (code, message) = status_of(&err);
        assert_eq!(code, StatusCode::Internal, "{message}");
        assert!(message.contains(expected), "{message}");
    }
    assert_eq!(server.requests().len(), 3);
}

// brief: a stream that ends without [DONE] and without a finish reason is truncated (INTERNAL,
// not retried); one with a finish reason but no [DONE] is complete.
#[tokio::test]
async fn truncated_stream_is_an_error() {
    let cut = Reply::sse(&data(
        &[
            chunk(&json!({"role": "assistant", "content": "Hel"}), None),
            chunk(&json!({"content": "lo"}), None),
        ],
        false,
    ));
    let finished = Reply::sse(&data(
        &[
            chunk(&json!({"role": "assistant", "content": "Hello"}), None),
            chunk(&json!({}), Some("stop")),
        ],
        false,
    ));
    let server = TestServer::start(vec![cut, finished]).await;
    let provider = provider(&server);
    let sink = RecordingSink::default();
    let err = provider
        .complete(&ask("hi"), Some(&sink))
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::Internal);
    assert!(message.contains("stream ended"), "{message}");
    assert_eq!(server.requests().len(), 1);
    let response = provider.complete(&ask("hi"), Some(&sink)).await.unwrap();
    assert_eq!(response.message.text(), "Hello");
}

// brief: an error frame mid-stream is the provider's error.
#[tokio::test]
async fn error_frame_mid_stream() {
    let server = TestServer::start(vec![Reply::sse(&data(
        &[
            chunk(&json!({"role": "assistant", "content": "Hel"}), None),
            json!({"error": {"message": "upstream model crashed", "type": "server_error"}}),
        ],
        false,
    ))])
    .await;
    let sink = RecordingSink::default();
    let err = provider(&server)
        .complete(&ask("hi"), Some(&sink))
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::Internal);
    assert!(message.contains("upstream model crashed"), "{message}");
}

// provider contract: cancellation is dropping the future, which must abort the HTTP request;
// the server sees the connection close while it still holds the stream open.
#[tokio::test]
async fn dropping_the_future_closes_the_connection() {
    let server = TestServer::start(vec![Reply::Stream {
        content_type: "text/event-stream".into(),
        pieces: data(
            &[chunk(&json!({"role": "assistant", "content": "Hel"}), None)],
            false,
        )
        .into_iter()
        .map(String::into_bytes)
        .collect(),
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
        // `call` is dropped here, mid-stream.
    }
    tokio::time::timeout(Duration::from_secs(5), server.hung_up())
        .await
        .expect("the server saw the connection close");
    assert_eq!(sink.chunks(), vec![(0, "Hel".to_owned())]);
}

// semantics §10.6: the body read is capped at 32 MiB, whether or not the length is declared.
#[tokio::test]
async fn oversized_bodies_are_refused() {
    let huge = vec![b' '; (32 << 20) + 1];
    let server = TestServer::start(vec![
        Reply::Full {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: huge.clone(),
        },
        Reply::Stream {
            content_type: "application/json".into(),
            pieces: huge.chunks(1 << 20).map(<[u8]>::to_vec).collect(),
            pause: Duration::ZERO,
            hold_open: false,
        },
    ])
    .await;
    let provider = provider(&server);
    for _ in 0..2 {
        let err = provider.complete(&ask("hi"), None).await.unwrap_err();
        let (code, message) = status_of(&err);
        assert_eq!(code, StatusCode::Internal);
        assert!(message.contains("exceeds 33554432 bytes"), "{message}");
    }
}

// semantics §10.6: the stream's line buffer is capped at 8 MiB.
#[tokio::test]
async fn oversized_stream_line_is_refused() {
    let mut line = b"data: ".to_vec();
    line.resize((8 << 20) + 16, b'x');
    let server = TestServer::start(vec![Reply::Stream {
        content_type: "text/event-stream".into(),
        pieces: line.chunks(1 << 20).map(<[u8]>::to_vec).collect(),
        pause: Duration::ZERO,
        hold_open: false,
    }])
    .await;
    let sink = RecordingSink::default();
    let err = provider(&server)
        .complete(&ask("hi"), Some(&sink))
        .await
        .unwrap_err();
    let (code, message) = status_of(&err);
    assert_eq!(code, StatusCode::Internal);
    assert!(message.contains("stream line exceeds"), "{message}");
}

// brief: parts the endpoint cannot express are refused before anything is sent.
#[tokio::test]
async fn unsupported_part_is_invalid_argument() {
    let server = TestServer::start(vec![Reply::json(200, &json!({}))]).await;
    let mut request = ask("look");
    request.messages[0]
        .parts
        .push(Part::File(agentsessions_api::FilePart {
            mime: "image/png".into(),
            bytes: vec![1, 2, 3],
            ..Default::default()
        }));
    let err = provider(&server)
        .complete(&request, None)
        .await
        .unwrap_err();
    assert_eq!(status_of(&err).0, StatusCode::InvalidArgument);
    assert!(server.requests().is_empty());
}
