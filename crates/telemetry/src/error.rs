//! [`TelemetryError`]: why telemetry could not be set up.

/// Why telemetry could not be set up. Each names the setting to fix.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `otlp_protocol` / `OTEL_EXPORTER_OTLP_PROTOCOL` names no protocol this build speaks.
    #[error("OTLP protocol {0:?}: expected \"grpc\" or \"http/protobuf\"")]
    UnknownProtocol(String),
    /// The OTLP exporter could not be built from the endpoint.
    #[error("OTLP exporter for {endpoint}: {reason}")]
    Exporter {
        /// The endpoint it was built for.
        endpoint: String,
        /// Why.
        reason: String,
    },
    /// A global subscriber was already installed.
    #[error("tracing subscriber: {0}")]
    Subscriber(String),
    /// The metrics registry could not be written out.
    #[error("encoding metrics: {0}")]
    Encode(#[from] std::fmt::Error),
}

impl TelemetryError {
    /// The gRPC code of this error, should it ever answer a call (it is a startup failure).
    pub fn status_code(&self) -> tonic::Code {
        match self {
            Self::UnknownProtocol(_) | Self::Exporter { .. } => tonic::Code::InvalidArgument,
            Self::Subscriber(_) | Self::Encode(_) => tonic::Code::Internal,
        }
    }
}
