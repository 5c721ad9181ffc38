//! The process's tracing subscriber: log lines on stderr (text or JSON, with colour only when
//! stderr is a terminal, filtered by `RUST_LOG`) and, when an OTLP endpoint is configured, every
//! span of this project's crates exported as OpenTelemetry traces.
//!
//! The two outputs filter apart: `RUST_LOG=warn` quiets the logs without losing the traces, and
//! the exporter never sees the spans of the libraries underneath (h2, hyper, tonic).

use std::io::IsTerminal as _;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::{Protocol, ResolvedTelemetry};
use crate::error::TelemetryError;

/// The target prefix shared by this project's crates (`agentsessions_server`, …): the spans
/// that are exported.
const OWN_TARGETS: &str = "agentsessions";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event, with the fields of the spans it is in.
    Text,
    /// One JSON object per event, with the current span and the list of spans it is in.
    Json,
}

/// The installed subscriber; [`Telemetry::shutdown`] flushes the spans not yet exported.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

type BoxedLayer = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

impl Telemetry {
    /// Installs the global subscriber: logs in `format`, traces to `telemetry.endpoint` when
    /// set (with W3C trace context as the propagator and content capture as configured). Must
    /// run inside the tokio runtime when traces go over gRPC.
    ///
    /// # Errors
    /// [`TelemetryError::Exporter`] when the exporter cannot be built,
    /// [`TelemetryError::Subscriber`] when a global subscriber is already set.
    pub fn install(
        format: LogFormat,
        telemetry: &ResolvedTelemetry,
    ) -> Result<Self, TelemetryError> {
        let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        // rmcp logs every notification it receives as a Debug dump at INFO; the MCP hub logs
        // them itself, as structured fields at the level they carry. RUST_LOG naming rmcp wins.
        let names_rmcp = std::env::var("RUST_LOG").is_ok_and(|spec| spec.contains("rmcp"));
        if !names_rmcp && let Ok(quiet) = "rmcp=warn".parse() {
            filter = filter.add_directive(quiet);
        }
        let logs = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal());
        let logs: BoxedLayer = match format {
            LogFormat::Text => logs.with_filter(filter).boxed(),
            LogFormat::Json => logs
                .json()
                .with_current_span(true)
                .with_span_list(true)
                .with_filter(filter)
                .boxed(),
        };
        let mut layers = vec![logs];
        crate::content::set_capture_content(telemetry.capture_content);
        let provider = match &telemetry.endpoint {
            Some(endpoint) => {
                let provider = tracer_provider(endpoint, telemetry)?;
                let tracer = provider.tracer("agentsessions");
                let own = tracing_subscriber::filter::Targets::new()
                    .with_target(OWN_TARGETS, tracing::Level::INFO);
                layers.push(
                    tracing_opentelemetry::layer()
                        .with_tracer(tracer)
                        // An instrumented future enters and leaves its span on every poll;
                        // these three would make each of those a clock read, an OpenTelemetry
                        // context switch and extra attributes. Propagation reads the span's
                        // context directly (`propagation.rs`), so none is needed.
                        .with_tracked_inactivity(false)
                        .with_context_activation(false)
                        .with_threads(false)
                        .with_filter(own)
                        .boxed(),
                );
                opentelemetry::global::set_text_map_propagator(
                    opentelemetry_sdk::propagation::TraceContextPropagator::new(),
                );
                Some(provider)
            }
            None => None,
        };
        tracing_subscriber::registry()
            .with(layers)
            .try_init()
            .map_err(|e| TelemetryError::Subscriber(e.to_string()))?;
        Ok(Self { provider })
    }

    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports what is still buffered and stops the exporter (off the async workers: the flush
    /// blocks until the collector answered or the export timed out).
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        match flushed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(component = "telemetry", error = %e, "flushing traces failed")
            }
            Err(e) => tracing::warn!(component = "telemetry", error = %e, "flushing traces failed"),
        }
    }
}

fn tracer_provider(
    endpoint: &str,
    telemetry: &ResolvedTelemetry,
) -> Result<SdkTracerProvider, TelemetryError> {
    let failed = |reason: String| TelemetryError::Exporter {
        endpoint: endpoint.to_owned(),
        reason,
    };
    let exporter = match telemetry.protocol {
        Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build(),
        Protocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(endpoint)
            .build(),
    }
    .map_err(|e| failed(e.to_string()))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(telemetry.service_name.clone())
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}
