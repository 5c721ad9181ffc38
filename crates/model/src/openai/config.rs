//! [`OpenAiConfig`]: where an OpenAI-compatible endpoint is and how to authenticate to it, and
//! the provider built from it.

use std::fmt;
use std::time::Duration;

use super::{API_KEY_VARS, DEFAULT_BASE_URL, DEFAULT_PATH, OpenAiDialect};
use crate::error::Result;
use crate::http::{HttpSettings, RetryPolicy};
use crate::provider::{Connection, HttpProvider, api_key_from};

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
    /// Models that take text only: the images of tool results are described in text to them
    /// (extensions §10). Every other model is sent the images.
    pub text_only_models: Vec<String>,
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
            text_only_models: Vec::new(),
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
            .field("text_only_models", &self.text_only_models)
            .finish()
    }
}

impl HttpProvider<OpenAiDialect> {
    /// A provider for `config`.
    ///
    /// # Errors
    ///
    /// [`ModelError::InvalidConfig`] when the default model is empty, the auth header name or key
    /// cannot be sent as a header, or the TLS setup fails.
    ///
    /// [`ModelError::InvalidConfig`]: crate::ModelError::InvalidConfig
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
            text_only_models: config.text_only_models,
        };
        Self::connect(connection, dialect)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ModelError;
    use crate::openai::OpenAiProvider;

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
}
