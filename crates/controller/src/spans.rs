//! The spans and metrics of a turn's work: the turn itself (an `invoke_agent` span carrying the
//! session uid, execution id and harness, so every log line inside names them), each model call
//! (a `chat` span with the OpenTelemetry GenAI attributes) and each tool the host executes (an
//! `execute_tool` span). Replayed model calls get a span marked replayed with no provider
//! latency. Prompt and completion content goes on spans only when content capture is on.

use std::time::{Duration, Instant};

use agentsessions_api::{
    Message, ModelRequest, ModelResponse, Part, Timestamp, ToolCall, ToolResult,
};
use agentsessions_journal::LogRecord;
use agentsessions_telemetry::content::capture_content;
use agentsessions_telemetry::metrics;
use serde_json::{Value, json};
use tracing::Span;
use tracing::field::Empty;

use crate::error::{ControllerError, Result, code_kind};

/// The span of one turn (`operation` is `exec` or `resume`); the execution id and the harness
/// are recorded once known ([`turn_identified`]).
pub(crate) fn turn(session: &str, harness: &str, operation: &'static str) -> Span {
    tracing::info_span!(
        "turn",
        operation,
        session_uid = %session,
        execution_id = Empty,
        harness = %harness,
        otel.name = %format!("invoke_agent {harness}"),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = %harness,
        gen_ai.conversation.id = %session,
        otel.status_code = Empty,
        error.r#type = Empty,
    )
}

/// Names the execution and the harness on the current turn span.
pub(crate) fn turn_identified(execution_id: &str, harness: &str) {
    let span = Span::current();
    span.record("execution_id", execution_id);
    span.record("harness", harness);
    span.record("gen_ai.agent.name", harness);
}

/// Records how a turn ended on `span` and in the turn metrics; `outcome` of a parked turn is
/// `parked`, of a failed one its error kind.
pub(crate) fn turn_ended<T>(span: &Span, harness: &str, started: Instant, result: &Result<T>) {
    let outcome = match result {
        Ok(_) => "completed",
        Err(ControllerError::Parked(_)) => "parked",
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", e.kind());
            e.kind()
        }
    };
    metrics().turn(harness, outcome, started.elapsed());
}

/// One live model call, from the request sent to the provider until it answered or failed.
pub(crate) struct ModelCallTrace {
    span: Span,
    provider: String,
    model: String,
    started: Instant,
}

fn model_span(provider: &str, model: &str, messages: &[Message], replayed: bool) -> Span {
    let span = tracing::info_span!(
        "model_call",
        otel.name = %format!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = %provider,
        gen_ai.request.model = %model,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        agentsessions.replayed = replayed,
        error.r#type = Empty,
    );
    if capture_content() {
        span.record("gen_ai.input.messages", messages_json(messages).as_str());
    }
    span
}

fn record_response(span: &Span, response: &ModelResponse) {
    if !response.usage.model.is_empty() {
        span.record("gen_ai.response.model", response.usage.model.as_str());
    }
    span.record("gen_ai.usage.input_tokens", response.usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", response.usage.output_tokens);
    // A string array, as the conventions type it (a `tracing` field could only be a string).
    agentsessions_telemetry::attributes::set_string_array(
        span,
        "gen_ai.response.finish_reasons",
        &[finish_reason(&response.message)],
    );
    if capture_content() {
        span.record(
            "gen_ai.output.messages",
            messages_json(std::slice::from_ref(&response.message)).as_str(),
        );
    }
}

impl ModelCallTrace {
    /// Opens the span of a call to `provider` with `request`, whose model is resolved.
    pub(crate) fn start(provider: &str, request: &ModelRequest) -> Self {
        Self {
            span: model_span(provider, &request.model, &request.messages, false),
            provider: provider.to_owned(),
            model: request.model.clone(),
            started: Instant::now(),
        }
    }

    /// The span the provider call runs in.
    pub(crate) fn span(&self) -> Span {
        self.span.clone()
    }

    /// The provider answered.
    pub(crate) fn answered(self, response: &ModelResponse) {
        record_response(&self.span, response);
        metrics().model_call(
            &self.provider,
            &self.model,
            self.started.elapsed(),
            response.usage.input_tokens,
            response.usage.output_tokens,
        );
    }

    /// The provider failed with `error`: logged at WARN with its kind.
    pub(crate) fn failed(self, error: &ControllerError) {
        let kind = error.kind();
        self.span.record("otel.status_code", "ERROR");
        self.span.record("error.type", kind);
        tracing::warn!(
            parent: &self.span,
            provider = %self.provider,
            model = %self.model,
            kind,
            error = %error,
            "model call failed"
        );
        metrics().model_error(&self.provider, &self.model, self.started.elapsed(), kind);
    }
}

/// A model call served from the journal: a span marked replayed that closes at once (no
/// provider latency), with the recorded usage.
pub(crate) fn model_replayed(
    provider: &str,
    model: &str,
    request: &ModelRequest,
    response: &ModelResponse,
) {
    let span = model_span(provider, model, &request.messages, true);
    record_response(&span, response);
    metrics().model_replayed(provider, model);
}

/// The finish reason a completion implies: `tool_calls` when it asks for tools, else `stop`.
fn finish_reason(message: &Message) -> &'static str {
    if message.parts.iter().any(|p| matches!(p, Part::ToolCall(_))) {
        "tool_calls"
    } else {
        "stop"
    }
}

/// Messages as the GenAI conventions' JSON: role and parts (text, tool calls, tool results).
fn messages_json(messages: &[Message]) -> String {
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| {
            let parts: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|part| match part {
                    Part::Text(t) => Some(json!({"type": "text", "content": t.text})),
                    Part::ToolCall(c) => Some(json!({
                        "type": "tool_call", "id": c.id, "name": c.tool, "arguments": c.args,
                    })),
                    Part::ToolResult(r) => Some(json!({
                        "type": "tool_call_response", "id": r.id, "response": r.output,
                    })),
                    Part::File(_) | Part::Data(_) | Part::Reasoning(_) | Part::Empty => None,
                })
                .collect();
            json!({"role": m.role, "parts": parts})
        })
        .collect();
    Value::Array(messages).to_string()
}

/// One tool call the host executes, until its result.
pub(crate) struct ToolCallTrace {
    span: Span,
    tool: String,
    started: Instant,
}

impl ToolCallTrace {
    /// Opens the span of `call`; `approval_wait` is how long a person took to approve it.
    pub(crate) fn start(call: &ToolCall, approval_wait: Option<Duration>) -> Self {
        let span = tracing::info_span!(
            "tool_call",
            otel.name = %format!("execute_tool {}", call.tool),
            otel.status_code = Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %call.tool,
            gen_ai.tool.call.id = %call.id,
            agentsessions.tool.mediation = call.mediation.as_str(),
            agentsessions.approval.wait_ms = Empty,
            error.r#type = Empty,
        );
        if let Some(wait) = approval_wait {
            // As i64: tracing-opentelemetry exports unsigned fields as strings.
            span.record(
                "agentsessions.approval.wait_ms",
                i64::try_from(wait.as_millis()).unwrap_or(i64::MAX),
            );
        }
        Self {
            span,
            tool: call.tool.clone(),
            started: Instant::now(),
        }
    }

    /// The span the execution runs in.
    pub(crate) fn span(&self) -> Span {
        self.span.clone()
    }

    /// The executor answered (`Ok`, possibly with a result marked as an error) or failed.
    pub(crate) fn ended(self, result: &agentsessions_api::Result<ToolResult>) {
        let failure = match result {
            Ok(result) if result.is_error => Some(("tool_error", result.error.clone())),
            Ok(_) => None,
            Err(e) => Some((code_kind(e.status_code()), e.to_string())),
        };
        let kind = failure.as_ref().map(|(kind, _)| *kind);
        if let Some((kind, error)) = &failure {
            self.span.record("otel.status_code", "ERROR");
            self.span.record("error.type", *kind);
            tracing::warn!(parent: &self.span, tool = %self.tool, kind, %error, "tool call failed");
        }
        metrics().tool_call(&self.tool, self.started.elapsed(), kind);
    }
}

/// How long passed between `earlier` and `later` (zero when the clock went back).
pub(crate) fn between(earlier: Timestamp, later: Timestamp) -> Duration {
    let nanos = later.unix_nanos().saturating_sub(earlier.unix_nanos());
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
}

/// When the record at `seq` of `records` was committed.
pub(crate) fn committed_at(records: &[LogRecord], seq: i64) -> Option<Timestamp> {
    records
        .iter()
        .find(|r| r.seq == seq)
        .and_then(|r| r.committed_at.or(r.event.timestamp))
}

/// A new approval decision was recorded at `decided_at` for the request at `request_seq`.
pub(crate) fn approval_decided(
    records: &[LogRecord],
    request_seq: i64,
    approved: bool,
    decided_at: Timestamp,
) {
    let waited = committed_at(records, request_seq)
        .map(|requested| between(requested, decided_at))
        .unwrap_or_default();
    tracing::info!(
        approved,
        wait_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        "approval decided"
    );
    metrics().approval_decided(approved, waited);
}
