//! Observability for agentsessions.
//!
//! - [`metrics`]: the process's Prometheus registry and the typed calls that record into it
//!   (turns, model and tool calls, approvals, the journal, runtime operations, RPCs); label values
//!   are bounded by [`bounded`].
//! - [`attributes`]: span attributes `tracing` fields cannot express (string arrays).
//! - [`propagation`]: W3C trace context taken from incoming gRPC/HTTP requests and put on
//!   outgoing ones (Harness.Connect, model providers, MCP servers over HTTP).
//! - [`content`]: whether prompt and completion content may go on spans (off unless enabled).
//! - [`exposition`]: the two text formats of `GET /metrics` (Prometheus text 0.0.4, the
//!   default, and OpenMetrics) and which one a request's `Accept` header gets.
//! - `config` and `subscriber` (feature `export`): the `[telemetry]` settings resolved against
//!   the standard `OTEL_*` variables, and the tracing subscriber with its OTLP exporter.
//! - `http` (feature `http`): `GET /metrics`, and the span of each request on the HTTP listener.
#![warn(missing_docs)]

pub mod attributes;
pub mod bounded;
#[cfg(feature = "export")]
pub mod config;
pub mod content;
pub mod error;
pub mod exposition;
#[cfg(feature = "http")]
pub mod http;
pub mod metrics;
pub mod propagation;
#[cfg(feature = "export")]
pub mod subscriber;

#[cfg(feature = "export")]
pub use config::{Protocol, ResolvedTelemetry, TelemetryConfig};
pub use error::TelemetryError;
pub use exposition::Exposition;
#[cfg(feature = "http")]
pub use http::{metrics_router, trace_requests};
pub use metrics::{GaugeSource, metrics};
#[cfg(feature = "export")]
pub use subscriber::{LogFormat, Telemetry};
