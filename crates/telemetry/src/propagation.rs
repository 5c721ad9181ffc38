//! W3C trace context (`traceparent`, `tracestate`) across process boundaries: taken from
//! incoming gRPC metadata and HTTP headers to parent a span, and put on outgoing gRPC metadata
//! (Harness.Connect and Describe) and HTTP headers (model providers, MCP servers over HTTP) from
//! the current span. Both go through the global propagator, which is a no-op until the
//! subscriber installs W3C trace context (only when traces are exported), so with tracing off nothing is read or written.

use opentelemetry::propagation::{Extractor, Injector};
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Parents `span` on the trace context `metadata` carries, if any.
pub fn parent_from_grpc(span: &tracing::Span, metadata: &MetadataMap) {
    let context = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&GrpcExtractor(metadata))
    });
    set_remote_parent(span, context);
}

/// Parents `span` on the trace context `headers` carry, if any.
pub fn parent_from_http(span: &tracing::Span, headers: &http::HeaderMap) {
    let context = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HttpExtractor(headers))
    });
    set_remote_parent(span, context);
}

fn set_remote_parent(span: &tracing::Span, context: opentelemetry::Context) {
    use opentelemetry::trace::TraceContextExt as _;
    if context.span().span_context().is_valid() {
        // Only fails when the span has no OpenTelemetry layer beneath it: nothing to parent.
        let _unparented = span.set_parent(context);
    }
}

/// Puts the current span's trace context on outgoing gRPC `metadata`.
pub fn inject_grpc(metadata: &mut MetadataMap) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut GrpcInjector(metadata));
    });
}

/// Puts the current span's trace context on outgoing HTTP `headers`.
pub fn inject_http(headers: &mut http::HeaderMap) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut HttpInjector(headers));
    });
}

/// The current span's trace context as header pairs (for clients that take a map of strings).
pub fn current_headers() -> Vec<(String, String)> {
    let mut headers = http::HeaderMap::new();
    inject_http(&mut headers);
    headers
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
        .collect()
}

struct GrpcExtractor<'a>(&'a MetadataMap);

impl Extractor for GrpcExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|key| match key {
                tonic::metadata::KeyRef::Ascii(key) => Some(key.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

struct GrpcInjector<'a>(&'a mut MetadataMap);

impl Injector for GrpcInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(key, value);
        }
    }
}

struct HttpExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HttpExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct HttpInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HttpInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}
