//! Model providers: the implementations of [`agentsessions_api::ModelProvider`] that the host calls
//! models through.
//!
//! - [`HttpProvider`]: the one HTTP provider (retries, timeouts, streaming, error mapping),
//!   speaking one dialect per vendor:
//!   - [`OpenAiProvider`]: any OpenAI-compatible chat completions endpoint, with streaming, tool
//!     calls and `reasoning_content`.
//!   - [`AnthropicProvider`]: Anthropic's Messages API, with streaming, tool use and thinking
//!     blocks that are sent back verbatim.
//! - [`EchoModel`] and [`RandomTextModel`]: offline providers for the demo and for tests.
//! - [`CountingProvider`]: counts calls, to prove that replay calls no model.
//!
//! Every provider returns the complete assistant message whether or not the caller streams, and
//! reports failures as [`agentsessions_api::ApiError::Status`] with the provider's own message
//! (see [`ModelError::status_code`] for the codes). Cancelling is dropping the future: nothing is
//! spawned, so the HTTP request goes with it. Requests are retried only when the model cannot
//! have seen them (a failed connect, HTTP 429/503/529), never after a timeout, a 500 or a broken
//! stream, so one call never yields two completions.
//!
//! ```no_run
//! use agentsessions_api::{Message, ModelProvider, ModelRequest};
//! use agentsessions_model::{OpenAiConfig, OpenAiProvider};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // The key comes from MODEL_API_KEY or OPENAI_API_KEY.
//! let mut config = OpenAiConfig::from_env("gpt-4o-mini");
//! config.base_url = "http://127.0.0.1:8000/v1".into();
//! let provider = OpenAiProvider::new(config)?;
//! let request = ModelRequest {
//!     messages: vec![Message::text_message("user", "Say hi")],
//!     ..ModelRequest::default()
//! };
//! let response = provider.complete(&request, None).await?;
//! println!("{}", response.message.text());
//! # Ok(())
//! # }
//! ```
//!
//! Module map:
//! - `provider`: [`HttpProvider`] and the dialect seam (what a vendor's wire format decides).
//! - `assembly`: the answer both dialects put together — the draft of the message (text,
//!   reasoning, tool calls from argument fragments, usage, finish), a whole answer or a stream of
//!   events read into it, and the errors both share.
//! - [`openai`]: the OpenAI-compatible dialect, [`OpenAiConfig`] and [`OpenAiProvider`], with the
//!   request mapping table; `config`, `encode` (the request body), `decode` (into the draft).
//! - [`anthropic`]: the Anthropic dialect, [`AnthropicConfig`] and [`AnthropicProvider`], with
//!   the request mapping table; `config`, `encode`, `decode` likewise.
//! - [`offline`]: [`EchoModel`] and [`RandomTextModel`].
//! - [`directive`]: [`DirectiveModel`], an offline model that calls the tool a person names.
//! - `counting`: [`CountingProvider`].
//! - `error`: [`ModelError`], its retry rule and its status codes.
//! - `http`: the shared client, [`RetryPolicy`] and the retry loop, capped body reads.
//! - `sse`: server-sent event decoding with a line cap.
//! - `params`: typing the string `params` map for each provider.
//! - `content`: content rules both HTTP providers share (model choice, schemas, arguments).
//! - `tool_output`: what a model reads of a tool result, text and images in content order, before
//!   a dialect wraps it (extensions §10).
#![warn(missing_docs)]

pub mod anthropic;
mod assembly;
mod content;
mod counting;
pub mod directive;
mod error;
mod http;
pub mod offline;
pub mod openai;
mod params;
mod provider;
mod sse;
mod tool_output;

pub use anthropic::{AnthropicConfig, AnthropicDialect, AnthropicProvider};
pub use counting::CountingProvider;
pub use directive::DirectiveModel;
pub use error::{ModelError, Result};
pub use http::RetryPolicy;
pub use offline::{EchoModel, RandomTextModel};
pub use openai::{OpenAiConfig, OpenAiDialect, OpenAiProvider};
pub use provider::HttpProvider;
