//! The daemon's HTTP listener, observed: `GET /metrics` (the registry in the text exposition
//! format the scraper accepts, for Prometheus to scrape) and [`trace_requests`], the server span of each request.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::exposition::Exposition;
use crate::metrics::{GaugeSource, metrics};

/// A router serving `GET /metrics` in the format the request's `Accept` header asks for
/// ([`Exposition::negotiate`]); with `gauges`, the stored-state gauges are read right before each
/// scrape.
pub fn metrics_router(gauges: Option<Arc<dyn GaugeSource>>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move |headers: HeaderMap| scrape(gauges.clone(), headers)),
    )
}

async fn scrape(gauges: Option<Arc<dyn GaugeSource>>, headers: HeaderMap) -> Response {
    let format = Exposition::negotiate(
        headers
            .get(header::ACCEPT)
            .and_then(|accept| accept.to_str().ok()),
    );
    let metrics = metrics();
    if let Some(gauges) = gauges {
        gauges.refresh(metrics).await;
    }
    match metrics.encode(format) {
        Ok(text) => ([(header::CONTENT_TYPE, format.content_type())], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Middleware running each HTTP request in a server span that continues the caller's W3C trace
/// context, so the Sessions RPC an API request makes joins the caller's trace. The span is named
/// by the method only (HTTP semantic conventions, when no route template is known): the path
/// holds session uids and goes in an attribute.
pub async fn trace_requests(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let span = tracing::info_span!(
        "http_request",
        component = "http",
        otel.name = %method,
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = %method,
        url.path = %request.uri().path(),
        http.response.status_code = Empty,
    );
    crate::propagation::parent_from_http(&span, request.headers());
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    // As i64: tracing-opentelemetry exports unsigned fields as strings.
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    response
}
