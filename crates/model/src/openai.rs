//! The OpenAI-compatible dialect of [`HttpProvider`]: [`OpenAiProvider`] speaks to any server
//! that speaks OpenAI's chat completions API (OpenAI, DeepSeek, vLLM, llama.cpp, Ollama…), over
//! plain HTTP with no vendor SDK. This module owns only the wire format: [`OpenAiConfig`] (auth
//! header), the request body, and reading answers and stream chunks.
//!
//! Request mapping:
//!
//! | `ModelRequest`                 | chat completions body                                     |
//! |--------------------------------|-----------------------------------------------------------|
//! | `model` `""` / `"echo"`        | the configured default model                              |
//! | message role `""`              | `"user"`                                                  |
//! | text parts                     | concatenated into `content`                               |
//! | assistant `ToolCall` parts     | `tool_calls[]`, arguments as a JSON string                |
//! | `ToolResult` parts             | one `{"role":"tool","tool_call_id"}` message each         |
//! | `Reasoning` parts              | dropped, unless [`OpenAiConfig::send_reasoning`]          |
//! | `File` / `Data` parts          | refused ([`ModelError::UnsupportedPart`])                 |
//! | `tools`                        | `tools[{type:"function",function:{name,description,parameters}}]` |
//! | `tool_choice`                  | `"auto"`, `"none"`, `"required"` or `{type:"function",…}` |
//! | `params`                       | see [Params](#params) below                               |
//!
//! # Params
//!
//! `temperature`, `top_p`, `frequency_penalty` and `presence_penalty` are sent as numbers;
//! `max_tokens`, `max_completion_tokens`, `seed` and `top_logprobs` as integers; `logprobs`,
//! `parallel_tool_calls` and `store` as booleans; `response_format`, `logit_bias` and `metadata`
//! as the JSON their value holds. Any other key (`reasoning_effort`, `user`, `stop`…) is sent as a
//! string. `model`, `messages`, `stream`, `stream_options`, `tools`, `tool_choice` and `n` are
//! refused: the provider sets them, and it reads one choice only.
//!
//! The answer's message is assistant-role with, in order: a [`ReasoningPart`] holding
//! `reasoning_content` (only when non-empty), a text part (only when non-empty), and one
//! `ToolCall` part per tool call. Streaming (when the caller passes a [`DeltaSink`]) produces the
//! same message, reporting each text chunk as part 0.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use agentsessions_api::{
    DeltaSink, Message, ModelRequest, ModelResponse, Part, ReasoningPart, TextPart, ToolCall,
    ToolChoice, ToolChoiceMode, ToolDefinition, Usage,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::content::{
    WireError, inline_opaque, input_schema, parse_arguments, tool_result_text, unsupported,
};
use crate::error::{ModelError, Result};
use crate::http::{HttpSettings, RetryPolicy};
use crate::params::{self, Kind, Rules};
use crate::provider::{Connection, Dialect, HttpProvider, StreamDecoder, api_key_from};
use crate::sse::Flow;

/// The provider name, also the `provider` of the reasoning parts it produces.
pub const PROVIDER: &str = "openai";

/// Where requests go unless configured otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The chat completions path under the base URL.
pub const DEFAULT_PATH: &str = "/chat/completions";

/// The environment variables [`OpenAiConfig::from_env`] reads the key from, first set one wins.
pub const API_KEY_VARS: [&str; 2] = ["MODEL_API_KEY", "OPENAI_API_KEY"];

/// The keys only this dialect types or reserves; [`params::SHARED`] and [`params::RESERVED`]
/// hold the common ones.
const PARAMS: Rules = Rules {
    typed: &[
        ("frequency_penalty", Kind::Float),
        ("presence_penalty", Kind::Float),
        ("max_completion_tokens", Kind::Integer),
        ("seed", Kind::Integer),
        ("top_logprobs", Kind::Integer),
        ("logprobs", Kind::Bool),
        ("parallel_tool_calls", Kind::Bool),
        ("store", Kind::Bool),
        ("response_format", Kind::Json),
        ("logit_bias", Kind::Json),
    ],
    reserved: &["stream_options", "n"],
};

/// How to reach an OpenAI-compatible endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// API root, e.g. `https://api.openai.com/v1`; a trailing `/` is ignored.
    pub base_url: String,
    /// Path under the root, e.g. `/chat/completions`; may carry a query (`?api-version=…`). A
    /// missing leading `/` is added.
    pub path: String,
    /// The header that carries the key: `Authorization` (any case) sends `Bearer <key>`, any
    /// other header (`api-key`, `x-api-key`) sends the key as is.
    pub auth_header: String,
    /// The API key; empty sends no credential (local servers).
    pub api_key: String,
    /// The model used when a request names none (or names `echo`). Required.
    pub default_model: String,
    /// Limit for a whole call, from connecting until the last byte of the answer.
    pub timeout: Duration,
    /// Limit for opening the connection.
    pub connect_timeout: Duration,
    /// Retries for requests that never reached the model.
    pub retry: RetryPolicy,
    /// Send this provider's reasoning parts back as `reasoning_content` on assistant messages.
    /// Off by default: DeepSeek, for one, rejects `reasoning_content` in requests, while some
    /// servers want it back during tool-call turns.
    pub send_reasoning: bool,
}

impl OpenAiConfig {
    /// Defaults for `default_model`: OpenAI's endpoint, bearer auth with no key, a 2 minute call
    /// timeout, a 10 second connect timeout and [`RetryPolicy::default`].
    pub fn new(default_model: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            path: DEFAULT_PATH.to_owned(),
            auth_header: "Authorization".to_owned(),
            api_key: String::new(),
            default_model: default_model.into(),
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            send_reasoning: false,
        }
    }

    /// [`OpenAiConfig::new`] with the key from `MODEL_API_KEY`, else `OPENAI_API_KEY` (an empty
    /// variable counts as unset). Keys come from the environment, never from flags, so they stay
    /// out of process listings.
    pub fn from_env(default_model: impl Into<String>) -> Self {
        Self::from_lookup(default_model, |name| std::env::var(name).ok())
    }

    /// [`OpenAiConfig::from_env`] reading variables through `lookup`, so callers and tests need
    /// not touch the process environment.
    pub fn from_lookup(
        default_model: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let api_key = api_key_from(&API_KEY_VARS, lookup);
        Self {
            api_key,
            ..Self::new(default_model)
        }
    }

    /// The URL requests are posted to: the base URL without trailing `/`, then the path with a
    /// leading `/`.
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if self.path.starts_with('/') {
            format!("{base}{}", self.path)
        } else {
            format!("{base}/{}", self.path)
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    // The key is a secret: show only whether one is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("path", &self.path)
            .field("auth_header", &self.auth_header)
            .field("api_key_set", &!self.api_key.is_empty())
            .field("default_model", &self.default_model)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &self.retry)
            .field("send_reasoning", &self.send_reasoning)
            .finish()
    }
}

/// A [`agentsessions_api::ModelProvider`] for an OpenAI-compatible chat completions endpoint.
/// Cloning shares the connection pool.
pub type OpenAiProvider = HttpProvider<OpenAiDialect>;

/// The OpenAI chat completions wire format.
#[derive(Debug, Clone)]
pub struct OpenAiDialect {
    send_reasoning: bool,
}

impl HttpProvider<OpenAiDialect> {
    /// A provider for `config`.
    ///
    /// # Errors
    ///
    /// [`ModelError::InvalidConfig`] when the default model is empty, the auth header name or key
    /// cannot be sent as a header, or the TLS setup fails.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let mut connection = Connection::new(
            config.endpoint(),
            config.default_model,
            HttpSettings {
                timeout: config.timeout,
                connect_timeout: config.connect_timeout,
                retry: config.retry,
            },
        )?;
        if !config.api_key.is_empty() {
            let value = if config.auth_header.eq_ignore_ascii_case("authorization") {
                format!("Bearer {}", config.api_key)
            } else {
                config.api_key
            };
            connection.credential(&config.auth_header, &value)?;
        }
        let dialect = OpenAiDialect {
            send_reasoning: config.send_reasoning,
        };
        Self::connect(connection, dialect)
    }
}

impl Dialect for OpenAiDialect {
    const NAME: &'static str = PROVIDER;

    type Stream = ChunkDecoder;

    fn request_body(&self, request: &ModelRequest, model: &str, stream: bool) -> Result<Vec<u8>> {
        request_body(request, model, self.send_reasoning, stream)
    }

    fn read_response(&self, body: &[u8], model: &str) -> Result<ModelResponse> {
        Draft::from_body(body)?.into_response(model)
    }

    fn stream_decoder(&self) -> ChunkDecoder {
        ChunkDecoder::default()
    }
}

/// The JSON body for `request`.
fn request_body(
    request: &ModelRequest,
    model: &str,
    send_reasoning: bool,
    stream: bool,
) -> Result<Vec<u8>> {
    let mut body = Map::new();
    params::apply(request.params.as_ref(), &PARAMS, &mut body)?;
    body.insert("model".into(), model.into());
    body.insert(
        "messages".into(),
        Value::Array(messages(&request.messages, send_reasoning)?),
    );
    if !request.tools.is_empty() {
        body.insert("tools".into(), tools(&request.tools));
    }
    if let Some(choice) = request.tool_choice.as_ref().and_then(tool_choice) {
        body.insert("tool_choice".into(), choice);
    }
    if stream {
        body.insert("stream".into(), true.into());
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(body).to_string().into_bytes())
}

fn messages(messages: &[Message], send_reasoning: bool) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for message in messages {
        let role = if message.role.is_empty() {
            "user"
        } else {
            message.role.as_str()
        };
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls = Vec::new();
        let mut results = Vec::new();
        for part in &message.parts {
            match part {
                Part::Text(t) => text.push_str(&t.text),
                Part::Reasoning(r) if send_reasoning && r.provider == PROVIDER => {
                    let bytes = inline_opaque(r)?;
                    let chunk =
                        std::str::from_utf8(bytes).map_err(|_| ModelError::InvalidReasoning {
                            detail: "openai reasoning bytes are not utf-8".to_owned(),
                        })?;
                    reasoning.push_str(chunk);
                }
                // Opaque reasoning is for the provider that made it, and only when asked.
                Part::Reasoning(_) | Part::Empty => {}
                Part::ToolCall(call) => {
                    if role != "assistant" {
                        return Err(unsupported(role, "tool call"));
                    }
                    let args = Value::Object(call.args.clone().unwrap_or_default());
                    calls.push(json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.tool, "arguments": args.to_string()},
                    }));
                }
                Part::ToolResult(result) => results.push(json!({
                    "role": "tool",
                    "tool_call_id": result.id,
                    "content": tool_result_text(result),
                })),
                Part::File(_) => return Err(unsupported(role, "file")),
                Part::Data(_) => return Err(unsupported(role, "data")),
            }
        }
        let has_head =
            results.is_empty() || !text.is_empty() || !calls.is_empty() || !reasoning.is_empty();
        let head = has_head.then(|| {
            // Text beside tool results is the user's; OpenAI has no text-only tool message.
            let head_role = if results.is_empty() || role != "tool" {
                role
            } else {
                "user"
            };
            let mut head = Map::new();
            head.insert("role".into(), head_role.into());
            let content = if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                Value::String(std::mem::take(&mut text))
            };
            head.insert("content".into(), content);
            if !calls.is_empty() {
                head.insert(
                    "tool_calls".into(),
                    Value::Array(std::mem::take(&mut calls)),
                );
            }
            if !reasoning.is_empty() {
                head.insert("reasoning_content".into(), reasoning.clone().into());
            }
            Value::Object(head)
        });
        // Tool messages must directly follow the assistant message that called them, and come
        // before any new user text.
        let calls_first = head.as_ref().is_some_and(|h| h.get("tool_calls").is_some());
        match head {
            Some(head) if calls_first => {
                out.push(head);
                out.append(&mut results);
            }
            Some(head) => {
                out.append(&mut results);
                out.push(head);
            }
            None => out.append(&mut results),
        }
    }
    Ok(out)
}

fn tools(tools: &[ToolDefinition]) -> Value {
    let tools = tools.iter().map(|tool| {
        let mut function = Map::new();
        function.insert("name".into(), tool.name.clone().into());
        if !tool.description.is_empty() {
            function.insert("description".into(), tool.description.clone().into());
        }
        function.insert("parameters".into(), input_schema(tool));
        json!({"type": "function", "function": function})
    });
    Value::Array(tools.collect())
}

fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    Some(match choice.mode {
        ToolChoiceMode::Unspecified => return None,
        ToolChoiceMode::Auto => "auto".into(),
        ToolChoiceMode::None => "none".into(),
        ToolChoiceMode::Required if choice.name.is_empty() => "required".into(),
        ToolChoiceMode::Required => {
            json!({"type": "function", "function": {"name": choice.name}})
        }
    })
}

/// A non-streaming answer (the fields read; the rest is ignored).
#[derive(Deserialize)]
struct Completion {
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<ChoiceMessage>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    /// Only streamed calls carry it; a whole answer lists calls in order.
    index: Option<usize>,
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
struct WireUsage {
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    prompt_tokens_details: Option<WirePromptDetails>,
    completion_tokens_details: Option<WireUsageDetails>,
}

#[derive(Deserialize, Clone, Copy)]
struct WirePromptDetails {
    cached_tokens: Option<i64>,
}

#[derive(Deserialize, Clone, Copy)]
struct WireUsageDetails {
    reasoning_tokens: Option<i64>,
}

/// One streamed `chat.completion.chunk`.
#[derive(Deserialize)]
struct Chunk {
    model: Option<String>,
    choices: Option<Vec<ChunkChoice>>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    delta: Option<ChunkDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

/// Puts a streamed completion together from its `chat.completion.chunk`s.
#[derive(Default)]
pub(crate) struct ChunkDecoder {
    draft: Draft,
    saw_choice: bool,
    finished: bool,
}

impl StreamDecoder for ChunkDecoder {
    fn event(&mut self, data: &str, deltas: &dyn DeltaSink) -> Result<Flow> {
        if data.trim() == "[DONE]" {
            return Ok(Flow::Stop);
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|err| ModelError::MalformedResponse {
                detail: format!("stream chunk is not valid json: {err}"),
            })?;
        if let Some(error) = chunk.error {
            return Err(error.into_model_error());
        }
        let draft = &mut self.draft;
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            draft.model = model;
        }
        if chunk.usage.is_some() {
            draft.usage = chunk.usage;
        }
        let Some(choice) = chunk.choices.into_iter().flatten().next() else {
            return Ok(Flow::Continue);
        };
        self.saw_choice = true;
        self.finished |= choice.finish_reason.is_some();
        let Some(delta) = choice.delta else {
            return Ok(Flow::Continue);
        };
        if let Some(content) = delta.content.filter(|c| !c.is_empty()) {
            deltas.chunk(0, &content);
            draft.text.push_str(&content);
        }
        if let Some(reasoning) = delta.reasoning_content {
            draft.reasoning.push_str(&reasoning);
        }
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            draft.merge_call(position, call);
        }
        Ok(Flow::Continue)
    }

    fn finish(self, stopped: bool, model: &str) -> Result<ModelResponse> {
        // Without [DONE] the only proof of a complete answer is a finish reason.
        if !stopped && !self.finished {
            return Err(ModelError::TruncatedStream);
        }
        if !self.saw_choice {
            return Err(ModelError::NoChoices);
        }
        self.draft.into_response(model)
    }
}

/// A completion being put together, from one body or from many chunks; both paths end in
/// [`Draft::into_response`], so they cannot disagree on the message's shape.
#[derive(Default)]
struct Draft {
    model: String,
    text: String,
    reasoning: String,
    /// Tool calls by their index.
    calls: BTreeMap<usize, DraftCall>,
    usage: Option<WireUsage>,
}

#[derive(Default)]
struct DraftCall {
    id: String,
    name: String,
    arguments: String,
}

impl Draft {
    fn from_body(body: &[u8]) -> Result<Self> {
        let completion: Completion =
            serde_json::from_slice(body).map_err(|err| ModelError::MalformedResponse {
                detail: format!("chat completion is not valid json: {err}"),
            })?;
        let choices = completion.choices.unwrap_or_default();
        let Some(choice) = choices.into_iter().next() else {
            return Err(completion
                .error
                .map_or(ModelError::NoChoices, WireError::into_model_error));
        };
        let message = choice
            .message
            .ok_or_else(|| ModelError::MalformedResponse {
                detail: "choice has no message".to_owned(),
            })?;
        let mut draft = Self {
            model: completion.model.unwrap_or_default(),
            text: message.content.unwrap_or_default(),
            reasoning: message.reasoning_content.unwrap_or_default(),
            usage: completion.usage,
            ..Self::default()
        };
        for (position, call) in message.tool_calls.into_iter().flatten().enumerate() {
            draft.merge_call(position, call);
        }
        Ok(draft)
    }

    /// Adds a whole call, or a streamed fragment of one: ids and names arrive once (some servers
    /// repeat them), arguments arrive in pieces.
    fn merge_call(&mut self, position: usize, call: WireToolCall) {
        let slot = self
            .calls
            .entry(call.index.unwrap_or(position))
            .or_default();
        if let Some(id) = call.id.filter(|id| !id.is_empty()) {
            slot.id = id;
        }
        if let Some(function) = call.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                slot.name = name;
            }
            if let Some(arguments) = function.arguments {
                slot.arguments.push_str(&arguments);
            }
        }
    }

    fn into_response(self, requested_model: &str) -> Result<ModelResponse> {
        let model = if self.model.is_empty() {
            requested_model.to_owned()
        } else {
            self.model
        };
        let mut parts = Vec::new();
        if !self.reasoning.is_empty() {
            parts.push(Part::Reasoning(ReasoningPart {
                provider: PROVIDER.to_owned(),
                model_id: model.clone(),
                opaque: self.reasoning.into_bytes(),
                ..ReasoningPart::default()
            }));
        }
        if !self.text.is_empty() {
            parts.push(Part::Text(TextPart { text: self.text }));
        }
        for call in self.calls.into_values() {
            if call.name.is_empty() {
                return Err(ModelError::MalformedResponse {
                    detail: format!("tool call {:?} has no function name", call.id),
                });
            }
            let args = parse_arguments(&call.id, &call.name, &call.arguments)?;
            parts.push(Part::ToolCall(ToolCall {
                id: call.id,
                tool: call.name,
                args: Some(args),
                ..ToolCall::default()
            }));
        }
        let usage = self.usage.map_or_else(
            || Usage {
                model: model.clone(),
                ..Usage::default()
            },
            |u| Usage {
                model: model.clone(),
                input_tokens: u.prompt_tokens.unwrap_or(0),
                output_tokens: u.completion_tokens.unwrap_or(0),
                reasoning_tokens: u
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or(0),
                cached_input_tokens: u
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
            },
        );
        Ok(ModelResponse {
            message: Message {
                role: "assistant".to_owned(),
                parts,
            },
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::ToolResult;

    use super::*;

    fn body_json(request: &ModelRequest, send_reasoning: bool) -> Value {
        let bytes = request_body(request, "m", send_reasoning, false).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    // semantics §10.6: trailing `/` trimmed from the base, leading `/` added to the path.
    #[test]
    fn endpoint_joins_base_and_path() {
        let mut config = OpenAiConfig::new("m");
        config.base_url = "http://h/v1/".into();
        config.path = "chat/completions?api-version=1".into();
        assert_eq!(
            config.endpoint(),
            "http://h/v1/chat/completions?api-version=1"
        );
        assert_eq!(
            OpenAiConfig::new("m").endpoint(),
            "https://api.openai.com/v1/chat/completions"
        );
    }

    // brief: key from MODEL_API_KEY, falling back to OPENAI_API_KEY; empty counts as unset.
    #[test]
    fn key_lookup_order() {
        let both = |name: &str| Some(format!("{name}-value"));
        assert_eq!(
            OpenAiConfig::from_lookup("m", both).api_key,
            "MODEL_API_KEY-value"
        );
        let fallback = |name: &str| match name {
            "MODEL_API_KEY" => Some(String::new()),
            _ => Some("k2".to_owned()),
        };
        assert_eq!(OpenAiConfig::from_lookup("m", fallback).api_key, "k2");
        assert_eq!(OpenAiConfig::from_lookup("m", |_| None).api_key, "");
        let debug = format!("{:?}", OpenAiConfig::from_lookup("m", both));
        assert!(!debug.contains("MODEL_API_KEY-value"), "{debug}");
    }

    #[test]
    fn default_model_is_required() {
        assert!(matches!(
            OpenAiProvider::new(OpenAiConfig::new("")),
            Err(ModelError::InvalidConfig { .. })
        ));
    }

    // semantics §10.6: empty role → user; text parts concatenated; reasoning dropped by default.
    #[test]
    fn messages_map_roles_text_and_drop_reasoning() {
        let mut assistant = Message::text_message("assistant", "a");
        assistant.parts.insert(
            0,
            Part::Reasoning(ReasoningPart {
                provider: PROVIDER.into(),
                opaque: b"thought".to_vec(),
                ..ReasoningPart::default()
            }),
        );
        let mut user = Message::text_message("", "x");
        user.parts.push(Part::Text(TextPart { text: "y".into() }));
        let request = ModelRequest {
            messages: vec![user, assistant],
            ..ModelRequest::default()
        };
        assert_eq!(
            body_json(&request, false)["messages"],
            json!([{"role": "user", "content": "xy"}, {"role": "assistant", "content": "a"}])
        );
        assert_eq!(
            body_json(&request, true)["messages"][1]["reasoning_content"],
            "thought"
        );
    }

    // brief: file and data parts are refused, not silently dropped.
    #[test]
    fn unsupported_parts_are_refused() {
        let request = ModelRequest {
            messages: vec![Message {
                role: "user".into(),
                parts: vec![Part::Data(Map::new())],
            }],
            ..ModelRequest::default()
        };
        let err = request_body(&request, "m", false, false).unwrap_err();
        assert_eq!(
            err.status_code(),
            agentsessions_api::StatusCode::InvalidArgument
        );
    }

    // brief: tool results become tool messages; text beside them follows as a user message.
    #[test]
    fn tool_results_precede_user_text() {
        let request = ModelRequest {
            messages: vec![Message {
                role: "tool".into(),
                parts: vec![
                    Part::Text(TextPart {
                        text: "and now?".into(),
                    }),
                    Part::ToolResult(ToolResult {
                        id: "c1".into(),
                        content: vec![Part::Text(TextPart { text: "ok".into() })],
                        ..ToolResult::default()
                    }),
                ],
            }],
            ..ModelRequest::default()
        };
        assert_eq!(
            body_json(&request, false)["messages"],
            json!([
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "user", "content": "and now?"},
            ])
        );
    }

    #[test]
    fn tool_choice_modes() {
        let choice = |mode, name: &str| ToolChoice {
            mode,
            name: name.into(),
        };
        assert_eq!(tool_choice(&choice(ToolChoiceMode::Unspecified, "")), None);
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Auto, "")),
            Some(json!("auto"))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::None, "")),
            Some(json!("none"))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Required, "")),
            Some(json!("required"))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Required, "f")),
            Some(json!({"type": "function", "function": {"name": "f"}}))
        );
    }

    // semantics §10.6: no choices → error; a body error object is reported as the provider's.
    #[test]
    fn empty_choices_are_an_error() {
        assert!(matches!(
            Draft::from_body(br#"{"choices":[]}"#),
            Err(ModelError::NoChoices)
        ));
        assert!(matches!(
            Draft::from_body(br#"{"error":{"message":"busy","type":"server_error"}}"#),
            Err(ModelError::ProviderError { .. })
        ));
    }
}
