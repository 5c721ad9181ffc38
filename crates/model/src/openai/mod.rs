//! The OpenAI-compatible dialect of [`HttpProvider`]: [`OpenAiProvider`] speaks to any server
//! that speaks OpenAI's chat completions API (OpenAI, DeepSeek, vLLM, llama.cpp, Ollama…), over
//! plain HTTP with no vendor SDK. This module owns only the wire format: `config`
//! ([`OpenAiConfig`], the auth header), `encode` (the request body) and `decode` (answers and
//! stream chunks into the shared draft of `crate::assembly`).
//!
//! Request mapping:
//!
//! | `ModelRequest`                 | chat completions body                                     |
//! |--------------------------------|-----------------------------------------------------------|
//! | `model` `""` / `"echo"`        | the configured default model                              |
//! | message role `""`              | `"user"`                                                  |
//! | text parts                     | concatenated into `content`                               |
//! | assistant `ToolCall` parts     | `tool_calls[]`, arguments as a JSON string                |
//! | `ToolResult` parts             | one `{"role":"tool","tool_call_id"}` message each, its text as extensions §10 says |
//! | images in tool results         | after the tool messages, one `user` message: per call, `Images from tool call <id>:` then `image_url` data URLs |
//! | `Reasoning` parts              | dropped, unless [`OpenAiConfig::send_reasoning`]          |
//! | `File` / `Data` parts (outside tool results) | refused ([`ModelError::UnsupportedPart`]) |
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
//!
//! [`ReasoningPart`]: agentsessions_api::ReasoningPart
//! [`DeltaSink`]: agentsessions_api::DeltaSink
//! [`ModelError::UnsupportedPart`]: crate::ModelError::UnsupportedPart

mod config;
mod decode;
mod encode;

use agentsessions_api::ModelRequest;

use crate::error::Result;
use crate::provider::{Dialect, HttpProvider};

pub use self::config::OpenAiConfig;

/// The provider name, also the `provider` of the reasoning parts it produces.
pub const PROVIDER: &str = "openai";

/// Where requests go unless configured otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The chat completions path under the base URL.
pub const DEFAULT_PATH: &str = "/chat/completions";

/// The environment variables [`OpenAiConfig::from_env`] reads the key from, first set one wins.
pub const API_KEY_VARS: [&str; 2] = ["MODEL_API_KEY", "OPENAI_API_KEY"];

/// A [`agentsessions_api::ModelProvider`] for an OpenAI-compatible chat completions endpoint.
/// Cloning shares the connection pool.
pub type OpenAiProvider = HttpProvider<OpenAiDialect>;

/// The OpenAI chat completions wire format.
#[derive(Debug, Clone)]
pub struct OpenAiDialect {
    send_reasoning: bool,
    text_only_models: Vec<String>,
}

impl Dialect for OpenAiDialect {
    const NAME: &'static str = PROVIDER;

    type Decode = decode::Decoder;

    fn request_body(&self, request: &ModelRequest, model: &str, stream: bool) -> Result<Vec<u8>> {
        let encoding = encode::Encoding {
            send_reasoning: self.send_reasoning,
            images: !self.text_only_models.iter().any(|m| m == model),
            stream,
        };
        encode::request_body(request, model, encoding)
    }
}
