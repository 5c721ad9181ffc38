//! Span attributes a `tracing` field cannot carry: string arrays (the GenAI conventions'
//! `gen_ai.response.finish_reasons`), set on the exported span directly. Without an exporter the
//! span has no OpenTelemetry data and nothing is done.

use opentelemetry::{Array, StringValue, Value};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Sets `key` to the string array `values` on `span`'s exported form.
pub fn set_string_array(span: &tracing::Span, key: &'static str, values: &[&'static str]) {
    let values: Vec<StringValue> = values.iter().map(|v| StringValue::from(*v)).collect();
    span.set_attribute(key, Value::Array(Array::String(values)));
}
