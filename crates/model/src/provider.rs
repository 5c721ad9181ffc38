//! [`HttpProvider`]: the one HTTP model provider. It owns what every vendor shares — the
//! endpoint and headers, the timeouts, the retry loop, reading a whole answer or its server-sent
//! events, and turning failures into [`agentsessions_api::ApiError`]s — and is parameterised by a
//! dialect that owns only what differs: the request body, and how its answers and stream events
//! feed the shared draft of `crate::assembly`, which puts the message together. The dialects are
//! [`crate::openai::OpenAiDialect`] and [`crate::anthropic::AnthropicDialect`]; their configs
//! build the headers and auth.
//!
//! ```text
//!   ModelRequest --dialect.request_body--> POST (retry only what the model never saw)
//!     whole answer: read capped --> assembly::read_answer::<D::Decode> ---------> ModelResponse
//!     streamed:     SSE events ---> assembly::Stream::<D::Decode>: event.. finish -^
//! ```

use agentsessions_api::{self as api, DeltaSink, ModelProvider, ModelRequest, ModelResponse};
use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::assembly::{self, Decode, Stream};
use crate::content::resolve_model;
use crate::error::{ModelError, Result};
use crate::http::{self, HttpClient, HttpSettings, MAX_BODY_BYTES};
use crate::sse::{self, MAX_LINE_BYTES};

/// What one vendor's wire format decides; everything else is the provider's.
pub(crate) trait Dialect: Send + Sync {
    /// The provider name, also the `provider` of the reasoning parts the dialect produces.
    const NAME: &'static str;

    /// How the dialect's answers, whole or streamed, feed the shared draft.
    type Decode: Decode;

    /// The JSON body asking `model` for `request`; `stream` asks for server-sent events.
    ///
    /// # Errors
    /// [`ModelError::InvalidParam`], [`ModelError::ReservedParam`],
    /// [`ModelError::UnsupportedPart`], [`ModelError::InvalidReasoning`] for a request the
    /// dialect cannot send.
    fn request_body(&self, request: &ModelRequest, model: &str, stream: bool) -> Result<Vec<u8>>;
}

/// Where and how a provider sends its requests, as its config describes them.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) url: String,
    pub(crate) headers: HeaderMap,
    pub(crate) default_model: String,
    pub(crate) settings: HttpSettings,
}

impl Connection {
    /// A connection to `url` with no headers yet.
    ///
    /// # Errors
    /// [`ModelError::InvalidConfig`] when `default_model` is empty.
    pub(crate) fn new(url: String, default_model: String, settings: HttpSettings) -> Result<Self> {
        if default_model.is_empty() {
            return Err(ModelError::InvalidConfig {
                detail: "a default model is required".to_owned(),
            });
        }
        Ok(Self {
            url,
            headers: HeaderMap::new(),
            default_model,
            settings,
        })
    }

    /// Sends `value` in header `name`, marked sensitive so it never shows in debug output.
    ///
    /// # Errors
    /// [`ModelError::InvalidConfig`] when either cannot be sent as a header.
    pub(crate) fn credential(&mut self, name: &str, value: &str) -> Result<()> {
        let (name, value) = http::credential_header(name, value)?;
        self.headers.insert(name, value);
        Ok(())
    }

    /// Sends `value` in header `name` (not a secret).
    pub(crate) fn header(&mut self, name: HeaderName, value: HeaderValue) {
        self.headers.insert(name, value);
    }
}

/// The first of `vars` that `lookup` finds set and non-empty, else no key. Keys come from the
/// environment, never from flags, so they stay out of process listings.
pub(crate) fn api_key_from(vars: &[&str], lookup: impl Fn(&str) -> Option<String>) -> String {
    vars.iter()
        .find_map(|name| lookup(name).filter(|key| !key.is_empty()))
        .unwrap_or_default()
}

/// A [`ModelProvider`] over HTTP speaking dialect `D`. Cloning shares the connection pool.
#[derive(Debug, Clone)]
pub struct HttpProvider<D> {
    url: String,
    headers: HeaderMap,
    default_model: String,
    http: HttpClient,
    dialect: D,
}

impl<D> HttpProvider<D> {
    /// A provider for `connection` speaking `dialect`.
    ///
    /// # Errors
    /// [`ModelError::InvalidConfig`] when the TLS setup fails.
    pub(crate) fn connect(connection: Connection, dialect: D) -> Result<Self> {
        let http = HttpClient::new(connection.settings)?;
        Ok(Self {
            url: connection.url,
            headers: connection.headers,
            default_model: connection.default_model,
            http,
            dialect,
        })
    }
}

/// One call: the dialect's body, posted with retries, its answer read whole or as a stream.
async fn call<D: Dialect>(
    provider: &HttpProvider<D>,
    request: &ModelRequest,
    deltas: Option<&dyn DeltaSink>,
) -> Result<ModelResponse> {
    let dialect = &provider.dialect;
    let model = resolve_model(&request.model, &provider.default_model);
    let body = dialect.request_body(request, model, deltas.is_some())?;
    let mut response = provider
        .http
        .post_json(&provider.url, &provider.headers, &body)
        .await?;
    match deltas {
        None => {
            let body = response.read_capped(MAX_BODY_BYTES).await?;
            assembly::read_answer::<D::Decode>(&body, model)
        }
        Some(sink) => {
            let mut stream = Stream::<D::Decode>::default();
            let stopped = sse::read_events(&mut response, MAX_LINE_BYTES, |data| {
                stream.event(data, sink)
            })
            .await?;
            stream.finish(stopped, model)
        }
    }
}

#[async_trait]
impl<D: Dialect> ModelProvider for HttpProvider<D> {
    fn name(&self) -> &str {
        D::NAME
    }

    fn default_model(&self) -> &str {
        &self.default_model
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: Option<&dyn DeltaSink>,
    ) -> api::Result<ModelResponse> {
        call(self, request, deltas)
            .await
            .map_err(|err| err.into_api_error(D::NAME))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::http::RetryPolicy;

    fn settings() -> HttpSettings {
        HttpSettings {
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            retry: RetryPolicy::default(),
        }
    }

    // brief: every dialect needs a default model; credentials never show in debug output.
    #[test]
    fn connection_requires_a_model_and_hides_credentials() {
        assert!(matches!(
            Connection::new("http://h".into(), String::new(), settings()),
            Err(ModelError::InvalidConfig { .. })
        ));
        let mut connection = Connection::new("http://h".into(), "m".into(), settings()).unwrap();
        connection.credential("x-api-key", "secret-key").unwrap();
        assert!(connection.headers["x-api-key"].is_sensitive());
        assert!(connection.credential("bad header", "v").is_err());
    }

    // brief: the first non-empty variable wins; none set sends no key.
    #[test]
    fn api_key_takes_the_first_set_variable() {
        let lookup = |name: &str| match name {
            "A" => Some(String::new()),
            "B" => Some("b".to_owned()),
            _ => None,
        };
        assert_eq!(api_key_from(&["A", "B"], lookup), "b");
        assert_eq!(api_key_from(&["C"], lookup), "");
    }
}
