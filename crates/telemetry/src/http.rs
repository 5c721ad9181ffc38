//! `GET /metrics`: the registry in the text exposition format, for Prometheus to scrape from the
//! daemon's HTTP listener.

use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::metrics::{GaugeSource, metrics};

/// The content type of the OpenMetrics text format `prometheus-client` writes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A router serving `GET /metrics`; with `gauges`, the stored-state gauges are read right
/// before each scrape.
pub fn metrics_router(gauges: Option<Arc<dyn GaugeSource>>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || scrape(gauges.clone())),
    )
}

async fn scrape(gauges: Option<Arc<dyn GaugeSource>>) -> Response {
    let metrics = metrics();
    if let Some(gauges) = gauges {
        gauges.refresh(metrics).await;
    }
    match metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
