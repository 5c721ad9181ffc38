//! The Anthropic dialect of [`HttpProvider`]: [`AnthropicProvider`] speaks Anthropic's Messages
//! API (`POST {base}/v1/messages`). This module owns only the wire format: `config`
//! ([`AnthropicConfig`]: `x-api-key`, `anthropic-version`), `encode` (the request body) and
//! `decode` (answers and stream events into the shared draft of `crate::assembly`).
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
//! | `File` / `Data` parts (outside tool results) | refused ([`ModelError::UnsupportedPart`]) |
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
//!
//! [`ReasoningPart`]: agentsessions_api::ReasoningPart
//! [`ModelError::UnsupportedPart`]: crate::ModelError::UnsupportedPart

mod config;
mod decode;
mod encode;

use agentsessions_api::ModelRequest;

use crate::error::Result;
use crate::provider::{Dialect, HttpProvider};

pub use self::config::AnthropicConfig;

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

/// A [`agentsessions_api::ModelProvider`] for the Anthropic Messages API. Cloning shares the
/// connection pool.
pub type AnthropicProvider = HttpProvider<AnthropicDialect>;

/// The Anthropic Messages wire format.
#[derive(Debug, Clone)]
pub struct AnthropicDialect {
    max_tokens: u32,
    text_only_models: Vec<String>,
}

impl Dialect for AnthropicDialect {
    const NAME: &'static str = PROVIDER;

    type Decode = decode::Decoder;

    fn request_body(&self, request: &ModelRequest, model: &str, stream: bool) -> Result<Vec<u8>> {
        let encoding = encode::Encoding {
            max_tokens: self.max_tokens,
            images: !self.text_only_models.iter().any(|m| m == model),
            stream,
        };
        encode::request_body(request, model, encoding)
    }
}
