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

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_client::StreamableHttpError;

use crate::outgoing::{Adjusted, Headers, PostAdjustment};

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
pub(crate) type DelegatingClient<C> = Adjusted<C, Delegation>;

/// The [`PostAdjustment`] of a [`DelegatingClient`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Delegation;

impl PostAdjustment for Delegation {
    fn adjust<E>(
        &self,
        message: &ClientJsonRpcMessage,
        auth_header: Option<String>,
        headers: Headers,
    ) -> Result<(Option<String>, Headers), StreamableHttpError<E>>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Ok((credential(message, auth_header)?, headers))
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
