//! Delegated tokens on the wire: the HTTP client of a server configured with `delegated_token`
//! puts each `tools/call`'s own token in its `Authorization` header.
//!
//! The hub mints the token before the call is sent (so a refused mint fails the call before
//! anything leaves the host) and hands it to [`DelegatingClient`] inside the outgoing request's
//! extensions, which travel with that one message to the transport and are never serialized.
//! Concurrent calls on one connection therefore each carry their own token, and no token is ever
//! in a request body or shared between calls. Other requests (`initialize`, `tools/list`,
//! notifications, the server's event stream) carry no delegated token: a token is minted for a
//! tool call of a turn, and discovery belongs to no turn.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use futures_core::Stream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// The token minted for one `tools/call`, riding in that request's extensions.
#[derive(Clone)]
pub(crate) struct DelegatedToken(pub(crate) String);

impl std::fmt::Debug for DelegatedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DelegatedToken(..)")
    }
}

/// An HTTP client for a `delegated_token` server: each `tools/call` is sent with the bearer
/// token its request carries, and one without a token is never sent.
#[derive(Debug, Clone)]
pub(crate) struct DelegatingClient<C> {
    inner: C,
}

impl<C> DelegatingClient<C> {
    pub(crate) fn new(inner: C) -> Self {
        Self { inner }
    }
}

/// The bearer credential `message` goes out with: its own delegated token for a `tools/call`,
/// what the transport configured (nothing, for these servers) for anything else.
fn credential<E>(
    message: &ClientJsonRpcMessage,
    configured: Option<String>,
) -> Result<Option<String>, StreamableHttpError<E>>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let JsonRpcMessage::Request(request) = message else {
        return Ok(configured);
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return Ok(configured);
    };
    match call.extensions.get::<DelegatedToken>() {
        Some(token) => Ok(Some(token.0.clone())),
        // Failing closed: this server's tools are only ever called with a delegated token.
        None => Err(StreamableHttpError::Io(std::io::Error::other(
            "a tools/call to a delegated_token server has no delegated token; it was not sent",
        ))),
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<Sse, SseError>> + Send + 'static>>;

impl<C> StreamableHttpClient for DelegatingClient<C>
where
    C: StreamableHttpClient + Sync,
{
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let auth_header = credential(&message, auth_header)?;
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
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let auth_header = credential(&message, auth_header)?;
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
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let auth_header = credential(&message, auth_header)?;
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
        custom_headers: HashMap<HeaderName, HeaderValue>,
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
        custom_headers: HashMap<HeaderName, HeaderValue>,
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
        custom_headers: HashMap<HeaderName, HeaderValue>,
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

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ListToolsRequest, NumberOrString, RequestId,
    };

    use super::*;

    type Refusal = StreamableHttpError<std::io::Error>;

    fn request(request: ClientRequest) -> ClientJsonRpcMessage {
        JsonRpcMessage::request(request, RequestId::from(NumberOrString::Number(1)))
    }

    #[test]
    fn a_tools_call_goes_out_with_its_own_token_and_never_without_one() {
        let mut call = CallToolRequest::new(CallToolRequestParams::new("ping"));
        call.extensions.insert(DelegatedToken("t-1".to_owned()));
        let with_token = request(ClientRequest::CallToolRequest(call));
        assert_eq!(
            credential::<std::io::Error>(&with_token, None).ok(),
            Some(Some("t-1".to_owned()))
        );
        let bare = request(ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("ping"),
        )));
        let refused: Result<_, Refusal> = credential(&bare, Some("configured".to_owned()));
        assert!(matches!(refused, Err(StreamableHttpError::Io(_))));
        // Discovery carries what the transport was configured with, never a delegated token.
        let list = request(ClientRequest::ListToolsRequest(ListToolsRequest::default()));
        assert_eq!(credential::<std::io::Error>(&list, None).ok(), Some(None));
    }

    #[test]
    fn a_token_is_not_printed() {
        assert_eq!(
            format!("{:?}", DelegatedToken("secret".to_owned())),
            "DelegatedToken(..)"
        );
    }
}
