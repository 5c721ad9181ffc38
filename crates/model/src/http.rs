//! The HTTP plumbing both network providers share: one reqwest client with its timeouts, the
//! retry loop, capped body reads, and how a provider's error body becomes a message.
//!
//! Retrying is the one place where a provider could silently cause a second completion, so the
//! rule lives here only: a request is sent again only after a failure that handed no completion
//! over, before any answer body is read ([`ModelError::is_retryable`]), so nothing was streamed
//! to the harness yet.

use std::error::Error as _;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::error::{ModelError, Result};

/// Largest response body read into memory (a whole non-streaming completion).
pub(crate) const MAX_BODY_BYTES: usize = 32 << 20;

/// How much of an error body is read to find the provider's message.
const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// How much of a non-JSON error body is quoted back.
const ERROR_SNIPPET_CHARS: usize = 200;

/// When and how often a request that never reached the model is sent again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Requests made at most, the first included; `0` and `1` both mean no retry.
    pub max_attempts: u32,
    /// The wait before the first retry when the provider names none; doubles per retry.
    pub initial_backoff: Duration,
    /// The longest wait before one retry, whatever `Retry-After` asks for.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    /// Three attempts, 500 ms then 1 s apart unless the provider says otherwise, never more than
    /// 30 s.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(500),
            max_wait: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based): the provider's `Retry-After` when it gave
    /// one, else exponential backoff, capped either way.
    fn wait(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = || {
            let factor = 1u32
                .checked_shl(retry.saturating_sub(1))
                .unwrap_or(u32::MAX);
            self.initial_backoff.saturating_mul(factor)
        };
        retry_after.unwrap_or_else(backoff).min(self.max_wait)
    }
}

/// Timeouts and retry settings for [`HttpClient::new`].
#[derive(Debug, Clone)]
pub(crate) struct HttpSettings {
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry: RetryPolicy,
}

/// A reqwest client plus the retry policy; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    timeout: Duration,
    retry: RetryPolicy,
}

impl HttpClient {
    pub(crate) fn new(settings: HttpSettings) -> Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.connect_timeout)
            .build()
            .map_err(|err| ModelError::InvalidConfig {
                detail: format!("cannot build the http client: {}", error_chain(&err)),
            })?;
        Ok(Self {
            client,
            timeout: settings.timeout,
            retry: settings.retry,
        })
    }

    /// POSTs a JSON `body`, retrying only failures the model never saw, and returns the first
    /// success response with its body still unread.
    ///
    /// Nothing is spawned: dropping the returned future (or the [`Response`]) drops the request
    /// and closes its connection.
    pub(crate) async fn post_json(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Response> {
        // The provider sees the model call's W3C trace context (nothing when tracing is off).
        let mut headers = headers.clone();
        agentsessions_telemetry::propagation::inject_http(&mut headers);
        let mut attempt: u32 = 1;
        loop {
            let sent = self
                .client
                .post(url)
                .headers(headers.clone())
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.to_vec())
                .send()
                .await;
            let (failure, retry_after) = match sent {
                Ok(response) if response.status().is_success() => {
                    return Ok(Response {
                        inner: response,
                        timeout: self.timeout,
                    });
                }
                Ok(response) => {
                    let retry_after = retry_after(response.headers());
                    let status = response.status().as_u16();
                    let mut response = Response {
                        inner: response,
                        timeout: self.timeout,
                    };
                    let message = match response.read_up_to(MAX_ERROR_BODY_BYTES).await {
                        Ok((body, _)) => provider_message(&body),
                        Err(err) => format!("(error body unreadable: {err})"),
                    };
                    let failure = ModelError::HttpStatus {
                        status,
                        message,
                        attempts: attempt,
                    };
                    (failure, retry_after)
                }
                Err(err) => (self.send_error(&err, url), None),
            };
            if !failure.is_retryable() || attempt >= self.retry.max_attempts {
                return Err(failure);
            }
            tokio::time::sleep(self.retry.wait(attempt, retry_after)).await;
            attempt += 1;
        }
    }

    fn send_error(&self, err: &reqwest::Error, url: &str) -> ModelError {
        if err.is_connect() {
            ModelError::Connect {
                url: url.split('?').next().unwrap_or(url).to_owned(),
                detail: error_chain(err),
            }
        } else {
            transfer_error(err, self.timeout)
        }
    }
}

/// A success response whose body has not been read yet.
#[derive(Debug)]
pub(crate) struct Response {
    inner: reqwest::Response,
    timeout: Duration,
}

impl Response {
    /// The next piece of the body; `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Result<Option<impl AsRef<[u8]> + use<>>> {
        self.inner
            .chunk()
            .await
            .map_err(|err| transfer_error(&err, self.timeout))
    }

    /// The whole body, refused with [`ModelError::BodyTooLarge`] past `limit` bytes.
    pub(crate) async fn read_capped(mut self, limit: usize) -> Result<Vec<u8>> {
        // A declared length past the cap is refused before reading any of it.
        if let Some(declared) = self.inner.content_length()
            && declared > u64::try_from(limit).unwrap_or(u64::MAX)
        {
            return Err(ModelError::BodyTooLarge { limit });
        }
        match self.read_up_to(limit).await? {
            (body, true) => Ok(body),
            (_, false) => Err(ModelError::BodyTooLarge { limit }),
        }
    }

    /// Up to `limit` bytes of the body, and whether that was all of it.
    async fn read_up_to(&mut self, limit: usize) -> Result<(Vec<u8>, bool)> {
        let mut body = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            let chunk = chunk.as_ref();
            if body.len() + chunk.len() > limit {
                let room = limit - body.len();
                body.extend_from_slice(&chunk[..room]);
                return Ok((body, false));
            }
            body.extend_from_slice(chunk);
        }
        Ok((body, true))
    }
}

/// Classifies a failure after the request may have been sent.
fn transfer_error(err: &reqwest::Error, timeout: Duration) -> ModelError {
    if err.is_timeout() {
        ModelError::Timeout { after: timeout }
    } else {
        ModelError::Transport {
            detail: error_chain(err),
        }
    }
}

/// The error and its causes, without the URL reqwest puts in its own text.
fn error_chain(err: &reqwest::Error) -> String {
    let mut text = String::new();
    let mut next: Option<&dyn std::error::Error> = err.source();
    while let Some(cause) = next {
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    if text.is_empty() {
        text = "request failed".to_owned();
    }
    text
}

/// `Retry-After` in seconds; the HTTP-date form falls back to backoff.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: f64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// The provider's own error message: `error.message` (both OpenAI and Anthropic put it there), a
/// bare string `error`, or else the start of the body.
pub(crate) fn provider_message(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        let error = value.get("error");
        let message = error
            .and_then(|e| e.get("message"))
            .and_then(serde_json::Value::as_str)
            .or_else(|| error.and_then(serde_json::Value::as_str));
        if let Some(message) = message {
            return message.to_owned();
        }
    }
    String::from_utf8_lossy(body)
        .trim()
        .chars()
        .take(ERROR_SNIPPET_CHARS)
        .collect()
}

/// A header for a credential, marked sensitive so it never shows in debug output.
pub(crate) fn credential_header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue)> {
    let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| ModelError::InvalidConfig {
        detail: format!("{name:?} is not a valid header name"),
    })?;
    let mut value = HeaderValue::from_str(value).map_err(|_| ModelError::InvalidConfig {
        detail: format!("the value for header {name} has characters a header cannot carry"),
    })?;
    value.set_sensitive(true);
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    // brief: honor Retry-After seconds, cap the wait; otherwise back off exponentially.
    #[test]
    fn wait_honors_retry_after_and_caps_it() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.wait(1, None), Duration::from_millis(500));
        assert_eq!(policy.wait(2, None), Duration::from_secs(1));
        assert_eq!(policy.wait(40, None), Duration::from_secs(30));
        assert_eq!(
            policy.wait(1, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(
            policy.wait(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_ignores_dates() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("-1"));
        assert_eq!(retry_after(&headers), None);
    }

    // semantics §10.6: the provider's error.message, else the first 200 characters of the body.
    #[test]
    fn provider_message_prefers_error_message() {
        assert_eq!(
            provider_message(br#"{"error":{"message":"bad key","type":"invalid_request_error"}}"#),
            "bad key"
        );
        assert_eq!(provider_message(br#"{"error":"plain"}"#), "plain");
        let long = "x".repeat(500);
        assert_eq!(provider_message(long.as_bytes()), "x".repeat(200));
    }
}
