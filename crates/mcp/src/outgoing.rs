//! One HTTP-client wrapper for everything the hub adds to an outgoing MCP message's POST (a
//! delegated token, trace headers): a [`PostAdjustment`] says what changes for each message, and
//! [`Adjusted`] applies it on every POST and passes everything else to the client it wraps.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use futures_core::Stream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// The custom headers of a POST.
pub(crate) type Headers = HashMap<HeaderName, HeaderValue>;

/// What one wrapper changes on the POST that carries `message`.
pub(crate) trait PostAdjustment: Send + Sync {
    /// The `Authorization` credential and custom headers `message` goes out with, given the
    /// transport's; an error stops the message from being sent.
    ///
    /// # Errors
    /// A refusal to send `message` at all.
    fn adjust<E>(
        &self,
        message: &ClientJsonRpcMessage,
        auth_header: Option<String>,
        headers: Headers,
    ) -> Result<(Option<String>, Headers), StreamableHttpError<E>>
    where
        E: std::error::Error + Send + Sync + 'static;
}

/// `inner`, with `adjustment` applied to every message it POSTs.
#[derive(Debug, Clone)]
pub(crate) struct Adjusted<C, A> {
    inner: C,
    adjustment: A,
}

impl<C, A: Default> Adjusted<C, A> {
    pub(crate) fn new(inner: C) -> Self {
        Self {
            inner,
            adjustment: A::default(),
        }
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<Sse, SseError>> + Send + 'static>>;

impl<C, A> StreamableHttpClient for Adjusted<C, A>
where
    C: StreamableHttpClient + Sync,
    A: PostAdjustment + Clone + 'static,
{
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let (auth_header, custom_headers) =
            self.adjustment
                .adjust(&message, auth_header, custom_headers)?;
        self.inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let (auth_header, custom_headers) =
            self.adjustment
                .adjust(&message, auth_header, custom_headers)?;
        self.inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let (auth_header, custom_headers) =
            self.adjustment
                .adjust(&message, auth_header, custom_headers)?;
        self.inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<EventStream, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<EventStream, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
