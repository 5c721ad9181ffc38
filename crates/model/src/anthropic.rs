//! The Anthropic dialect of [`HttpProvider`]: [`AnthropicProvider`] speaks Anthropic's Messages
//! API (`POST {base}/v1/messages`). This module owns only the wire format: [`AnthropicConfig`]
//! (`x-api-key`, `anthropic-version`), the request body, and reading answers and stream events.
//!
//! Request mapping:
//!
//! | `ModelRequest`                  | Messages API body                                       |
//! |---------------------------------|---------------------------------------------------------|
//! | `model` `""` / `"echo"`         | the configured default model                            |
//! | `system` messages               | top-level `system` text blocks                          |
//! | `assistant` messages            | `assistant` turns; every other role is a `user` turn    |
//! | text parts                      | `text` blocks (empty ones are left out)                 |
//! | assistant `ToolCall` parts      | `tool_use` blocks                                       |
//! | `ToolResult` parts              | `tool_result` blocks, first in a `user` turn            |
//! | `Reasoning` parts from here     | the `thinking` / `redacted_thinking` block, verbatim    |
//! | `Reasoning` parts from others   | dropped                                                 |
//! | `File` / `Data` parts           | refused ([`ModelError::UnsupportedPart`])               |
//! | `tools`                         | `tools[{name,description,input_schema}]`                |
//! | `tool_choice`                   | `{type:"auto"}`, `"none"`, `"any"` or `{type:"tool",name}` |
//!
//! # Params
//!
//! `max_tokens` (default [`AnthropicConfig::max_tokens`]), `top_k` and `thinking_budget_tokens`
//! are sent as integers; `temperature` and `top_p` as numbers; `stop_sequences`, `metadata` and
//! `thinking` as the JSON their value holds. `thinking_budget_tokens: N` is shorthand for
//! `thinking: {"type":"enabled","budget_tokens":N}` and wins over `thinking`. Any other key is sent
//! as a string. `model`, `messages`, `system`, `tools`, `tool_choice` and `stream` are refused.
//!
//! # Answers
//!
//! Content blocks become parts in order: `thinking` and `redacted_thinking` blocks become
//! [`ReasoningPart`]s (provider `anthropic`) whose `opaque` bytes are the block's JSON, exactly
//! what a later request must send back, with the thinking text (a summary, on current models) as
//! the part's `summary`; `text` blocks become text parts (empty ones are left out); `tool_use`
//! blocks become `ToolCall` parts. Streamed text is reported with the index its part will have in
//! the final message.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use agentsessions_api::{
    DeltaSink, Message, ModelRequest, ModelResponse, Part, ReasoningPart, TextPart, ToolCall,
    ToolChoice, ToolChoiceMode, ToolDefinition, Usage,
};
use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::content::{
    WireError, inline_opaque, input_schema, kind, parse_arguments, tool_result_text, unsupported,
};
use crate::error::{ModelError, Result};
use crate::http::{HttpSettings, RetryPolicy};
use crate::params::{self, Kind, Rules};
use crate::provider::{Connection, Dialect, HttpProvider, StreamDecoder, api_key_from};
use crate::sse::Flow;

/// The provider name, also the `provider` of the reasoning parts it produces.
pub const PROVIDER: &str = "anthropic";

/// Where requests go unless configured otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The Messages API path under the base URL.
pub const MESSAGES_PATH: &str = "/v1/messages";

/// The `anthropic-version` header sent unless configured otherwise.
pub const DEFAULT_API_VERSION: &str = "2023-06-01";

/// `max_tokens` when the request's params give none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The environment variables [`AnthropicConfig::from_env`] reads the key from, first set one wins.
pub const API_KEY_VARS: [&str; 2] = ["ANTHROPIC_API_KEY", "MODEL_API_KEY"];

/// The keys only this dialect types or reserves; [`params::SHARED`] and [`params::RESERVED`]
/// hold the common ones.
const PARAMS: Rules = Rules {
    typed: &[
        ("top_k", Kind::Integer),
        ("thinking_budget_tokens", Kind::Integer),
        ("stop_sequences", Kind::Json),
        ("thinking", Kind::Json),
    ],
    reserved: &["system"],
};

/// How to reach the Anthropic Messages API.
#[derive(Clone, PartialEq, Eq)]
pub struct AnthropicConfig {
    /// API root, e.g. `https://api.anthropic.com`; a trailing `/` is ignored.
    pub base_url: String,
    /// Sent as `x-api-key`; empty sends no credential (a local proxy that adds its own).
    pub api_key: String,
    /// Sent as `anthropic-version`.
    pub api_version: String,
    /// The model used when a request names none (or names `echo`). Required.
    pub default_model: String,
    /// `max_tokens` when the request's params give none.
    pub max_tokens: u32,
    /// Limit for a whole call, from connecting until the last byte of the answer.
    pub timeout: Duration,
    /// Limit for opening the connection.
    pub connect_timeout: Duration,
    /// Retries for requests that never reached the model (connect failures, 429, 503, 529).
    pub retry: RetryPolicy,
}

impl AnthropicConfig {
    /// Defaults for `default_model`: Anthropic's endpoint, no key, API version `2023-06-01`,
    /// 4096 max tokens, a 2 minute call timeout, a 10 second connect timeout and
    /// [`RetryPolicy::default`].
    pub fn new(default_model: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: String::new(),
            api_version: DEFAULT_API_VERSION.to_owned(),
            default_model: default_model.into(),
            max_tokens: DEFAULT_MAX_TOKENS,
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
        }
    }

    /// [`AnthropicConfig::new`] with the key from `ANTHROPIC_API_KEY`, else `MODEL_API_KEY` (an
    /// empty variable counts as unset).
    pub fn from_env(default_model: impl Into<String>) -> Self {
        Self::from_lookup(default_model, |name| std::env::var(name).ok())
    }

    /// [`AnthropicConfig::from_env`] reading variables through `lookup`.
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

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}{MESSAGES_PATH}", self.base_url.trim_end_matches('/'))
    }
}

impl fmt::Debug for AnthropicConfig {
    // The key is a secret: show only whether one is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key_set", &!self.api_key.is_empty())
            .field("api_version", &self.api_version)
            .field("default_model", &self.default_model)
            .field("max_tokens", &self.max_tokens)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

/// A [`agentsessions_api::ModelProvider`] for the Anthropic Messages API. Cloning shares the
/// connection pool.
pub type AnthropicProvider = HttpProvider<AnthropicDialect>;

/// The Anthropic Messages wire format.
#[derive(Debug, Clone)]
pub struct AnthropicDialect {
    max_tokens: u32,
}

impl HttpProvider<AnthropicDialect> {
    /// A provider for `config`.
    ///
    /// # Errors
    ///
    /// [`ModelError::InvalidConfig`] when the default model is empty, the key or version cannot
    /// be sent as a header, or the TLS setup fails.
    pub fn new(config: AnthropicConfig) -> Result<Self> {
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
            connection.credential("x-api-key", &config.api_key)?;
        }
        let version =
            HeaderValue::from_str(&config.api_version).map_err(|_| ModelError::InvalidConfig {
                detail: format!("{:?} is not a valid api version", config.api_version),
            })?;
        connection.header(HeaderName::from_static("anthropic-version"), version);
        let dialect = AnthropicDialect {
            max_tokens: config.max_tokens,
        };
        Self::connect(connection, dialect)
    }
}

impl Dialect for AnthropicDialect {
    const NAME: &'static str = PROVIDER;

    type Stream = EventDecoder;

    fn request_body(&self, request: &ModelRequest, model: &str, stream: bool) -> Result<Vec<u8>> {
        request_body(request, model, self.max_tokens, stream)
    }

    fn read_response(&self, body: &[u8], model: &str) -> Result<ModelResponse> {
        Draft::from_body(body)?.into_response(model)
    }

    fn stream_decoder(&self) -> EventDecoder {
        EventDecoder::default()
    }
}

/// The JSON body for `request`.
fn request_body(
    request: &ModelRequest,
    model: &str,
    max_tokens: u32,
    stream: bool,
) -> Result<Vec<u8>> {
    let mut body = Map::new();
    params::apply(request.params.as_ref(), &PARAMS, &mut body)?;
    if let Some(budget) = body.remove("thinking_budget_tokens") {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    body.entry("max_tokens")
        .or_insert_with(|| max_tokens.into());
    body.insert("model".into(), model.into());
    let (system, messages) = messages(&request.messages)?;
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        body.insert("tools".into(), tools(&request.tools));
    }
    if let Some(choice) = request.tool_choice.as_ref().and_then(tool_choice) {
        body.insert("tool_choice".into(), choice);
    }
    if stream {
        body.insert("stream".into(), true.into());
    }
    Ok(Value::Object(body).to_string().into_bytes())
}

/// The `system` blocks and the `messages` turns.
fn messages(messages: &[Message]) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut system = Vec::new();
    let mut turns = Vec::new();
    for message in messages {
        let role = message.role.as_str();
        if role == "system" {
            system.extend(system_blocks(message)?);
            continue;
        }
        let assistant = role == "assistant";
        let mut blocks = Vec::new();
        let mut results = Vec::new();
        for part in &message.parts {
            match part {
                Part::Text(t) if t.text.is_empty() => {}
                Part::Text(t) => blocks.push(json!({"type": "text", "text": t.text})),
                Part::Reasoning(r) if r.provider == PROVIDER => {
                    if !assistant {
                        return Err(unsupported(role, "reasoning"));
                    }
                    blocks.push(thinking_block(r)?);
                }
                Part::Reasoning(_) | Part::Empty => {}
                Part::ToolCall(call) => {
                    if !assistant {
                        return Err(unsupported(role, "tool call"));
                    }
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.tool,
                        "input": call.args.clone().unwrap_or_default(),
                    }));
                }
                Part::ToolResult(result) => {
                    let mut block = Map::new();
                    block.insert("type".into(), "tool_result".into());
                    block.insert("tool_use_id".into(), result.id.clone().into());
                    let text = tool_result_text(result);
                    if !text.is_empty() {
                        block.insert("content".into(), text.into());
                    }
                    if result.is_error {
                        block.insert("is_error".into(), true.into());
                    }
                    results.push(Value::Object(block));
                }
                Part::File(_) => return Err(unsupported(role, "file")),
                Part::Data(_) => return Err(unsupported(role, "data")),
            }
        }
        if assistant {
            // Results of an assistant's own calls go back as the user turn that follows it.
            if !blocks.is_empty() {
                turns.push(json!({"role": "assistant", "content": blocks}));
            }
            if !results.is_empty() {
                turns.push(json!({"role": "user", "content": results}));
            }
        } else {
            // The API wants tool results before anything else in a user turn.
            results.append(&mut blocks);
            if !results.is_empty() {
                turns.push(json!({"role": "user", "content": results}));
            }
        }
    }
    Ok((system, turns))
}

fn system_blocks(message: &Message) -> Result<Vec<Value>> {
    let mut blocks = Vec::new();
    for part in &message.parts {
        match part {
            Part::Text(t) if t.text.is_empty() => {}
            Part::Text(t) => blocks.push(json!({"type": "text", "text": t.text})),
            Part::Empty | Part::Reasoning(_) => {}
            Part::File(_) => return Err(unsupported("system", "file")),
            Part::Data(_) => return Err(unsupported("system", "data")),
            Part::ToolCall(_) => return Err(unsupported("system", "tool call")),
            Part::ToolResult(_) => return Err(unsupported("system", "tool result")),
        }
    }
    Ok(blocks)
}

/// The block a reasoning part came from, checked to be one the API takes back.
fn thinking_block(part: &ReasoningPart) -> Result<Value> {
    let invalid = |detail: String| ModelError::InvalidReasoning { detail };
    let block: Value = serde_json::from_slice(inline_opaque(part)?)
        .map_err(|err| invalid(format!("anthropic reasoning bytes are not json: {err}")))?;
    match block.get("type").and_then(Value::as_str) {
        Some("thinking" | "redacted_thinking") => Ok(block),
        _ => Err(invalid(format!(
            "anthropic reasoning bytes hold {}, not a thinking block",
            kind(&block)
        ))),
    }
}

fn tools(tools: &[ToolDefinition]) -> Value {
    let tools = tools.iter().map(|tool| {
        let mut entry = Map::new();
        entry.insert("name".into(), tool.name.clone().into());
        if !tool.description.is_empty() {
            entry.insert("description".into(), tool.description.clone().into());
        }
        entry.insert("input_schema".into(), input_schema(tool));
        Value::Object(entry)
    });
    Value::Array(tools.collect())
}

fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    Some(match choice.mode {
        ToolChoiceMode::Unspecified => return None,
        ToolChoiceMode::Auto => json!({"type": "auto"}),
        ToolChoiceMode::None => json!({"type": "none"}),
        ToolChoiceMode::Required if choice.name.is_empty() => json!({"type": "any"}),
        ToolChoiceMode::Required => json!({"type": "tool", "name": choice.name}),
    })
}

/// A non-streaming answer (the fields read; the rest is ignored).
#[derive(Deserialize)]
struct WireMessage {
    model: Option<String>,
    content: Option<Vec<WireBlock>>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

/// A content block, whole or as a stream announces it.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Server-tool blocks and anything newer: not ours to interpret.
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Clone, Copy)]
struct WireUsage {
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cache_read_input_tokens: Option<i64>,
}

/// One streamed event's data.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta,
    },
    MessageDelta {
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: WireError,
    },
    /// `ping`, `content_block_stop` and event types added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    model: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        #[serde(default)]
        text: String,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    ThinkingDelta {
        #[serde(default)]
        thinking: String,
    },
    SignatureDelta {
        #[serde(default)]
        signature: String,
    },
    #[serde(other)]
    Other,
}

/// A content block being put together.
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    Other,
}

impl Block {
    fn from_wire(block: WireBlock) -> Self {
        match block {
            WireBlock::Text { text } => Self::Text(text),
            WireBlock::Thinking {
                thinking,
                signature,
            } => Self::Thinking {
                thinking,
                signature,
            },
            WireBlock::RedactedThinking { data } => Self::Redacted { data },
            WireBlock::ToolUse { id, name, input } => {
                // A stream announces `input: {}` and sends the real input as deltas.
                let input = match input {
                    Value::Null => String::new(),
                    Value::Object(map) if map.is_empty() => String::new(),
                    other => other.to_string(),
                };
                Self::ToolUse { id, name, input }
            }
            WireBlock::Other => Self::Other,
        }
    }

    /// Whether the block becomes a part of the final message.
    fn makes_part(&self) -> bool {
        match self {
            Self::Text(text) => !text.is_empty(),
            Self::Thinking { .. } | Self::Redacted { .. } | Self::ToolUse { .. } => true,
            Self::Other => false,
        }
    }
}

/// Puts a streamed message together from its events.
#[derive(Default)]
pub(crate) struct EventDecoder {
    draft: Draft,
}

impl StreamDecoder for EventDecoder {
    fn event(&mut self, data: &str, deltas: &dyn DeltaSink) -> Result<Flow> {
        let event: Event =
            serde_json::from_str(data).map_err(|err| ModelError::MalformedResponse {
                detail: format!("stream event is not valid json: {err}"),
            })?;
        let draft = &mut self.draft;
        match event {
            Event::MessageStart { message } => {
                draft.model = message.model.unwrap_or_default();
                draft.set_usage(message.usage);
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => {
                draft.blocks.insert(index, Block::from_wire(content_block));
            }
            Event::ContentBlockDelta { index, delta } => draft.apply(index, delta, deltas)?,
            Event::MessageDelta { usage } => draft.set_usage(usage),
            Event::MessageStop => return Ok(Flow::Stop),
            Event::Error { error } => return Err(error.into_model_error()),
            Event::Other => {}
        }
        Ok(Flow::Continue)
    }

    fn finish(self, stopped: bool, model: &str) -> Result<ModelResponse> {
        if !stopped {
            return Err(ModelError::TruncatedStream);
        }
        self.draft.into_response(model)
    }
}

/// A message being put together, from one body or from a stream; both paths end in
/// [`Draft::into_response`], so they cannot disagree on the message's shape.
#[derive(Default)]
struct Draft {
    model: String,
    /// Blocks by their index.
    blocks: BTreeMap<usize, Block>,
    input_tokens: i64,
    output_tokens: i64,
    cached_input_tokens: i64,
}

impl Draft {
    fn from_body(body: &[u8]) -> Result<Self> {
        let message: WireMessage =
            serde_json::from_slice(body).map_err(|err| ModelError::MalformedResponse {
                detail: format!("message is not valid json: {err}"),
            })?;
        if let Some(error) = message.error {
            return Err(error.into_model_error());
        }
        let content = message
            .content
            .ok_or_else(|| ModelError::MalformedResponse {
                detail: "message has no content".to_owned(),
            })?;
        let mut draft = Self {
            model: message.model.unwrap_or_default(),
            blocks: content
                .into_iter()
                .map(Block::from_wire)
                .enumerate()
                .collect(),
            ..Self::default()
        };
        draft.set_usage(message.usage);
        Ok(draft)
    }

    fn apply(&mut self, index: usize, delta: WireDelta, sink: &dyn DeltaSink) -> Result<()> {
        // Blocks stream one after another, so every earlier block is complete by now.
        let part_index = self
            .blocks
            .range(..index)
            .filter(|(_, block)| block.makes_part())
            .count();
        let block = self
            .blocks
            .get_mut(&index)
            .ok_or_else(|| ModelError::MalformedResponse {
                detail: format!("delta for content block {index}, which never started"),
            })?;
        let mismatch = || ModelError::MalformedResponse {
            detail: format!("delta does not fit content block {index}"),
        };
        match (block, delta) {
            (Block::Text(text), WireDelta::TextDelta { text: piece }) => {
                if !piece.is_empty() {
                    sink.chunk(i32::try_from(part_index).unwrap_or(i32::MAX), &piece);
                    text.push_str(&piece);
                }
            }
            (Block::ToolUse { input, .. }, WireDelta::InputJsonDelta { partial_json }) => {
                input.push_str(&partial_json);
            }
            (Block::Thinking { thinking, .. }, WireDelta::ThinkingDelta { thinking: piece }) => {
                thinking.push_str(&piece);
            }
            (Block::Thinking { signature, .. }, WireDelta::SignatureDelta { signature: piece }) => {
                signature.push_str(&piece);
            }
            (_, WireDelta::Other) | (Block::Other, _) => {}
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    /// Takes the counts a usage object carries; a stream's later counts replace earlier ones.
    fn set_usage(&mut self, usage: Option<WireUsage>) {
        if let Some(usage) = usage {
            if let Some(input) = usage.input_tokens {
                self.input_tokens = input;
            }
            if let Some(output) = usage.output_tokens {
                self.output_tokens = output;
            }
            if let Some(cached) = usage.cache_read_input_tokens {
                self.cached_input_tokens = cached;
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
        for (index, block) in self.blocks {
            let reasoning = |opaque: Value, summary: Vec<Part>| {
                Part::Reasoning(ReasoningPart {
                    provider: PROVIDER.to_owned(),
                    model_id: model.clone(),
                    opaque: opaque.to_string().into_bytes(),
                    summary,
                    ordinal: i32::try_from(index).unwrap_or(i32::MAX),
                    ..ReasoningPart::default()
                })
            };
            match block {
                Block::Text(text) if text.is_empty() => {}
                Block::Text(text) => parts.push(Part::Text(TextPart { text })),
                Block::Thinking {
                    thinking,
                    signature,
                } => {
                    let opaque = json!({
                        "type": "thinking",
                        "thinking": thinking,
                        "signature": signature,
                    });
                    let summary = if thinking.is_empty() {
                        Vec::new()
                    } else {
                        vec![Part::Text(TextPart { text: thinking })]
                    };
                    parts.push(reasoning(opaque, summary));
                }
                Block::Redacted { data } => {
                    let opaque = json!({"type": "redacted_thinking", "data": data});
                    parts.push(reasoning(opaque, Vec::new()));
                }
                Block::ToolUse { id, name, input } => {
                    let args = parse_arguments(&id, &name, &input)?;
                    parts.push(Part::ToolCall(ToolCall {
                        id,
                        tool: name,
                        args: Some(args),
                        ..ToolCall::default()
                    }));
                }
                Block::Other => {}
            }
        }
        Ok(ModelResponse {
            message: Message {
                role: "assistant".to_owned(),
                parts,
            },
            usage: Usage {
                model,
                input_tokens: self.input_tokens,
                output_tokens: self.output_tokens,
                reasoning_tokens: 0,
                cached_input_tokens: self.cached_input_tokens,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::ToolResult;

    use super::*;

    fn body_json(request: &ModelRequest) -> Value {
        serde_json::from_slice(&request_body(request, "claude", 4096, false).unwrap()).unwrap()
    }

    // brief: key from ANTHROPIC_API_KEY, else MODEL_API_KEY.
    #[test]
    fn key_lookup_order() {
        let only_model = |name: &str| (name == "MODEL_API_KEY").then(|| "m".to_owned());
        assert_eq!(AnthropicConfig::from_lookup("c", only_model).api_key, "m");
        let both = |name: &str| Some(name.to_owned());
        assert_eq!(
            AnthropicConfig::from_lookup("c", both).api_key,
            "ANTHROPIC_API_KEY"
        );
        assert_eq!(
            AnthropicConfig::new("c").endpoint(),
            "https://api.anthropic.com/v1/messages"
        );
    }

    // brief: system → top-level system; max_tokens default; params typed.
    #[test]
    fn system_and_params() {
        let request = ModelRequest {
            messages: vec![
                Message::text_message("system", "be brief"),
                Message::text_message("", "hi"),
            ],
            params: Some(
                [
                    ("temperature".to_owned(), "0.2".to_owned()),
                    ("thinking_budget_tokens".to_owned(), "1024".to_owned()),
                ]
                .into(),
            ),
            ..ModelRequest::default()
        };
        assert_eq!(
            body_json(&request),
            json!({
                "model": "claude",
                "max_tokens": 4096,
                "temperature": 0.2,
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "system": [{"type": "text", "text": "be brief"}],
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            })
        );
    }

    // Anthropic: tool_result blocks come first in a user turn; an error result is flagged.
    #[test]
    fn tool_results_lead_the_user_turn() {
        let request = ModelRequest {
            messages: vec![Message {
                role: "user".into(),
                parts: vec![
                    Part::Text(TextPart {
                        text: "next".into(),
                    }),
                    Part::ToolResult(ToolResult {
                        id: "toolu_1".into(),
                        is_error: true,
                        error: "boom".into(),
                        ..ToolResult::default()
                    }),
                ],
            }],
            ..ModelRequest::default()
        };
        assert_eq!(
            body_json(&request)["messages"],
            json!([{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": true},
                {"type": "text", "text": "next"},
            ]}])
        );
    }

    #[test]
    fn tool_choice_modes() {
        let choice = |mode, name: &str| ToolChoice {
            mode,
            name: name.into(),
        };
        assert_eq!(tool_choice(&choice(ToolChoiceMode::Unspecified, "x")), None);
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Auto, "")),
            Some(json!({"type": "auto"}))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::None, "")),
            Some(json!({"type": "none"}))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Required, "")),
            Some(json!({"type": "any"}))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Required, "f")),
            Some(json!({"type": "tool", "name": "f"}))
        );
    }

    // brief: reasoning bytes that are not a thinking block are refused, not sent.
    #[test]
    fn foreign_or_broken_reasoning() {
        let reasoning = |provider: &str, opaque: &[u8]| Message {
            role: "assistant".into(),
            parts: vec![Part::Reasoning(ReasoningPart {
                provider: provider.into(),
                opaque: opaque.to_vec(),
                ..ReasoningPart::default()
            })],
        };
        let request = |message| ModelRequest {
            messages: vec![message],
            ..ModelRequest::default()
        };
        // Another provider's reasoning is dropped, leaving an empty turn that is left out.
        assert_eq!(
            body_json(&request(reasoning("openai", b"x")))["messages"],
            json!([])
        );
        let err = request_body(&request(reasoning(PROVIDER, b"[1]")), "c", 1, false).unwrap_err();
        assert!(matches!(err, ModelError::InvalidReasoning { .. }), "{err}");
    }

    // The stream's event types parse, unknown ones included.
    #[test]
    fn events_parse() {
        for (data, ok) in [
            (r#"{"type":"message_stop"}"#, true),
            (r#"{"type":"ping"}"#, true),
            (r#"{"type":"content_block_stop","index":0}"#, true),
            (r#"{"type":"brand_new","x":1}"#, true),
            (
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta"}}"#,
                true,
            ),
            (r#"{"type":"content_block_start"}"#, false),
        ] {
            assert_eq!(serde_json::from_str::<Event>(data).is_ok(), ok, "{data}");
        }
    }
}
