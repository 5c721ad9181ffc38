//! W3C trace context on MCP requests, so a server's own spans join the turn's trace.
//!
//! A `tools/call` sent inside a traced tool call carries that call's `traceparent` (and
//! `tracestate`) in its `params._meta`, the carrier SEP-414 and the OpenTelemetry MCP semantic
//! conventions name, on every transport: over stdio it is the only one there is. For a server
//! reached over streamable HTTP, [`TraceHeaders`] also puts the same values in the headers of
//! the POST that carries the request, for HTTP middleware that reads only headers.
//!
//! The values are taken on the caller's task, inside the tool-call span: rmcp sends from its own
//! task, where the current span is not the call's. With traces not exported the propagator is a
//! no-op and nothing is added.

use http::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, GetMeta as _, JsonRpcMessage,
    RequestParamsMeta as _,
};
use rmcp::transport::streamable_http_client::StreamableHttpError;

use crate::outgoing::{Adjusted, Headers, PostAdjustment};

const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// Puts the current span's trace context in `params._meta`.
pub(crate) fn stamp(params: &mut CallToolRequestParams) {
    for (name, value) in agentsessions_telemetry::propagation::current_headers() {
        match name.as_str() {
            TRACEPARENT => params.set_traceparent(&value),
            TRACESTATE => params.set_tracestate(&value),
            _ => {}
        }
    }
}

/// The trace context `message` carries in its `_meta`, as header pairs (none for a message
/// sent outside a traced tool call).
fn carried(message: &ClientJsonRpcMessage) -> Vec<(HeaderName, HeaderValue)> {
    let JsonRpcMessage::Request(request) = message else {
        return Vec::new();
    };
    let envelope = request.request.get_meta();
    let params = match &request.request {
        ClientRequest::CallToolRequest(call) => call.params.meta(),
        _ => None,
    };
    // The envelope's `_meta` wins over the params' one on the wire, so it wins here too.
    let traceparent = envelope
        .get_traceparent()
        .or_else(|| params.and_then(|meta| meta.get_traceparent()));
    let tracestate = envelope
        .get_tracestate()
        .or_else(|| params.and_then(|meta| meta.get_tracestate()));
    [(TRACEPARENT, traceparent), (TRACESTATE, tracestate)]
        .into_iter()
        .filter_map(|(name, value)| {
            Some((
                HeaderName::from_static(name),
                HeaderValue::from_str(value?).ok()?,
            ))
        })
        .collect()
}

/// An HTTP client that sends each request's trace context (from its `_meta`) as the W3C
/// headers too; everything else is `inner`'s.
pub(crate) type TraceHeaders<C> = Adjusted<C, TraceCarrier>;

/// The [`PostAdjustment`] of [`TraceHeaders`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TraceCarrier;

impl PostAdjustment for TraceCarrier {
    fn adjust<E>(
        &self,
        message: &ClientJsonRpcMessage,
        auth_header: Option<String>,
        mut headers: Headers,
    ) -> Result<(Option<String>, Headers), StreamableHttpError<E>>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        headers.extend(carried(message));
        Ok((auth_header, headers))
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolRequest, ListToolsRequest, NumberOrString, RequestId, RequestMetaObject,
        RequestParamsMeta as _,
    };

    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn request(request: ClientRequest) -> ClientJsonRpcMessage {
        JsonRpcMessage::request(request, RequestId::from(NumberOrString::Number(1)))
    }

    fn names(headers: &[(HeaderName, HeaderValue)]) -> Vec<(&str, &str)> {
        headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.to_str().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn a_tools_call_with_trace_context_sends_it_as_headers() {
        let mut params = CallToolRequestParams::new("ping");
        params.set_traceparent(PARENT);
        params.set_tracestate("vendor=1");
        let message = request(ClientRequest::CallToolRequest(CallToolRequest::new(params)));
        assert_eq!(
            names(&carried(&message)),
            [(TRACEPARENT, PARENT), (TRACESTATE, "vendor=1")]
        );
    }

    #[test]
    fn the_envelope_meta_wins_and_a_request_without_context_adds_nothing() {
        let mut params = CallToolRequestParams::new("ping");
        params.set_traceparent("00-00000000000000000000000000000001-0000000000000001-01");
        let mut call = CallToolRequest::new(params);
        let mut envelope = RequestMetaObject::new();
        envelope.set_traceparent(PARENT);
        call.extensions.insert(envelope);
        let message = request(ClientRequest::CallToolRequest(call));
        assert_eq!(names(&carried(&message)), [(TRACEPARENT, PARENT)]);

        let list = request(ClientRequest::ListToolsRequest(ListToolsRequest::default()));
        assert!(carried(&list).is_empty());
        let bare = request(ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("ping"),
        )));
        assert!(carried(&bare).is_empty());
    }

    #[test]
    fn without_an_exported_trace_nothing_is_stamped() {
        // No propagator is installed in this process: tracing off adds no `_meta`.
        let mut params = CallToolRequestParams::new("ping");
        stamp(&mut params);
        assert!(params.meta.is_none(), "{:?}", params.meta);
    }
}
