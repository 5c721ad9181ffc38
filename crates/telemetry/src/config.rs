//! The `[telemetry]` settings and how they combine with the standard OpenTelemetry environment
//! variables: a variable, when set, wins over the file (as a flag's environment variable does),
//! and traces are exported only when an endpoint is configured one way or the other.
//!
//! | file key          | environment (first set wins)                                            | default          |
//! |-------------------|-------------------------------------------------------------------------|------------------|
//! | `otlp_endpoint`   | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`     | none: no export  |
//! | `otlp_protocol`   | `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL`     | `http/protobuf`  |
//! | `service_name`    | `OTEL_SERVICE_NAME`                                                     | `agentsessionsd` |
//! | `capture_content` | `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`                    | `false`          |
//!
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn export off whatever else is set;
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT` and `OTEL_RESOURCE_ATTRIBUTES` are
//! read by the exporter and the resource as the specification says.

use serde::Deserialize;

use crate::error::TelemetryError;

/// The `[telemetry]` table of the daemon's config file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Where to send traces: `http://host:4317` for gRPC, `http://host:4318` for HTTP (the
    /// `/v1/traces` path is added to a base endpoint); empty: traces are not exported.
    pub otlp_endpoint: String,
    /// `grpc` or `http/protobuf` (the default).
    pub otlp_protocol: String,
    /// `service.name` of the exported resource (default `agentsessionsd`).
    pub service_name: String,
    /// Put prompt and completion content on model-call spans (off by default: it is sensitive
    /// and large).
    pub capture_content: bool,
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP over gRPC.
    Grpc,
    /// OTLP over HTTP with protobuf bodies.
    HttpProtobuf,
}

impl Protocol {
    fn parse(text: &str) -> Result<Self, TelemetryError> {
        match text {
            "grpc" => Ok(Self::Grpc),
            "http/protobuf" | "http" => Ok(Self::HttpProtobuf),
            other => Err(TelemetryError::UnknownProtocol(other.to_owned())),
        }
    }

    /// The name the specification uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::HttpProtobuf => "http/protobuf",
        }
    }
}

/// Where and how traces go, once the file and the environment are combined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTelemetry {
    /// The full endpoint traces are sent to; `None`: no export.
    pub endpoint: Option<String>,
    /// The transport.
    pub protocol: Protocol,
    /// `service.name`.
    pub service_name: String,
    /// Whether content goes on spans.
    pub capture_content: bool,
}

impl TelemetryConfig {
    /// Combines the file's settings with the process environment.
    ///
    /// # Errors
    /// [`TelemetryError::UnknownProtocol`].
    pub fn resolve(&self) -> Result<ResolvedTelemetry, TelemetryError> {
        self.resolve_with(|name| std::env::var(name).ok())
    }

    /// [`TelemetryConfig::resolve`] with `env` in place of the process environment.
    ///
    /// # Errors
    /// [`TelemetryError::UnknownProtocol`].
    pub fn resolve_with(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ResolvedTelemetry, TelemetryError> {
        let var = |name: &str| env(name).filter(|value| !value.trim().is_empty());
        let protocol = match var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        {
            Some(text) => Protocol::parse(text.trim())?,
            None if self.otlp_protocol.is_empty() => Protocol::HttpProtobuf,
            None => Protocol::parse(&self.otlp_protocol)?,
        };
        // A signal-specific endpoint is used as given; a base endpoint gets the signal's path
        // under HTTP (OTLP exporter specification).
        let endpoint = match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Some(full) => Some(full),
            None => var("OTEL_EXPORTER_OTLP_ENDPOINT")
                .or_else(|| (!self.otlp_endpoint.is_empty()).then(|| self.otlp_endpoint.clone()))
                .map(|base| match protocol {
                    Protocol::Grpc => base,
                    Protocol::HttpProtobuf => traces_path(&base),
                }),
        };
        let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
        let service_name = var("OTEL_SERVICE_NAME").unwrap_or_else(|| {
            if self.service_name.is_empty() {
                "agentsessionsd".to_owned()
            } else {
                self.service_name.clone()
            }
        });
        let capture_content = match var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
            Some(value) => value.eq_ignore_ascii_case("true"),
            None => self.capture_content,
        };
        Ok(ResolvedTelemetry {
            endpoint: endpoint.filter(|_| !disabled),
            protocol,
            service_name,
            capture_content,
        })
    }
}

fn traces_path(base: &str) -> String {
    if base.ends_with("/v1/traces") {
        return base.to_owned();
    }
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn resolve(file: &TelemetryConfig, env: &[(&str, &str)]) -> ResolvedTelemetry {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        file.resolve_with(|name| env.get(name).cloned()).unwrap()
    }

    #[test]
    fn nothing_configured_exports_nothing() {
        let resolved = resolve(&TelemetryConfig::default(), &[]);
        assert_eq!(resolved.endpoint, None);
        assert_eq!(resolved.service_name, "agentsessionsd");
        assert!(!resolved.capture_content);
    }

    #[test]
    fn environment_wins_over_the_file_and_http_gets_the_traces_path() {
        let file = TelemetryConfig {
            otlp_endpoint: "http://file:4317".into(),
            otlp_protocol: "grpc".into(),
            service_name: "from-file".into(),
            capture_content: true,
        };
        let resolved = resolve(&file, &[]);
        assert_eq!(resolved.endpoint.as_deref(), Some("http://file:4317"));
        assert_eq!(resolved.protocol, Protocol::Grpc);
        let resolved = resolve(
            &file,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318/"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_SERVICE_NAME", "svc"),
                (
                    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                    "false",
                ),
            ],
        );
        assert_eq!(
            resolved.endpoint.as_deref(),
            Some("http://env:4318/v1/traces")
        );
        assert_eq!(resolved.service_name, "svc");
        assert!(!resolved.capture_content);
        let resolved = resolve(
            &file,
            &[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://exact:1/custom",
            )],
        );
        assert_eq!(resolved.endpoint.as_deref(), Some("http://exact:1/custom"));
    }

    #[test]
    fn the_sdk_switches_turn_export_off() {
        let file = TelemetryConfig {
            otlp_endpoint: "http://file:4318".into(),
            ..TelemetryConfig::default()
        };
        assert_eq!(
            resolve(&file, &[("OTEL_SDK_DISABLED", "true")]).endpoint,
            None
        );
        assert_eq!(
            resolve(&file, &[("OTEL_TRACES_EXPORTER", "none")]).endpoint,
            None
        );
    }

    #[test]
    fn an_unknown_protocol_is_refused() {
        let file = TelemetryConfig {
            otlp_protocol: "carrier-pigeon".into(),
            ..TelemetryConfig::default()
        };
        assert!(matches!(
            file.resolve_with(|_| None),
            Err(TelemetryError::UnknownProtocol(_))
        ));
    }
}
