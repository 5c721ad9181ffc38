//! [`AnthropicConfig`]: where the Messages API is, its key and version, and the provider built
//! from it.

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};

use super::{
    API_KEY_VARS, AnthropicDialect, DEFAULT_API_VERSION, DEFAULT_BASE_URL, DEFAULT_MAX_TOKENS,
    MESSAGES_PATH,
};
use crate::error::{ModelError, Result};
use crate::http::{HttpSettings, RetryPolicy};
use crate::provider::{Connection, HttpProvider, api_key_from};

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
    /// Models that take text only: the images of tool results are described in text to them
    /// (extensions §10). Every other model is sent the images.
    pub text_only_models: Vec<String>,
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
            text_only_models: Vec::new(),
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
            .field("text_only_models", &self.text_only_models)
            .finish()
    }
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
            text_only_models: config.text_only_models,
        };
        Self::connect(connection, dialect)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
