//! Domain values to compact Go JSON.
//!
//! Writing is split in two: [`check_event`] first walks an event looking for anything the
//! requested shape has no key for, and the writers below then only decide which keys a shape has.
//! The writers themselves never fail except on an unwritable timestamp, which keeps the
//! model-request writer (always the newest shape, no timestamps) infallible.

use agentsessions_api::{
    ApprovalRef, ApprovalRequest, ApprovalResult, ErrorInfo, Event, EventBody, ExecutionStart,
    FilePart, HarnessEnd, IdentityRef, JsonObject, Lifecycle, Message, ModelCall, ModelRequest,
    Part, ReasoningPart, SnapshotRef, ToolCall, ToolChoice, ToolChoiceMode, ToolDefinition,
    ToolResult, ToolResultCode, Usage,
};

use super::GoShape;
use super::write::{
    write_bool, write_bytes, write_int, write_json_object, write_string, write_time,
};
use crate::error::{Result, WireError};

/// The Go JSON (`json.Marshal`, compact) of an event in `shape`.
///
/// # Errors
///
/// - [`WireError::GoShape`] when the event holds something `shape` has no key for (an
///   `ExecutionStart` body in [`GoShape::V012`], a tool-call part before [`GoShape::V030`] …);
///   the path names the field, e.g. `Message.Parts[1].ToolCall`.
/// - [`WireError::InvalidTimestamp`] when the timestamp is outside what Go can write (years
///   0..=9999, nanoseconds below one second).
pub fn event_to_json(event: &Event, shape: GoShape) -> Result<String> {
    let mut out = String::new();
    write_event(&mut out, event, shape)?;
    Ok(out)
}

/// Appends the Go JSON of an event in `shape` to `out` (see [`event_to_json`]). On error, `out`
/// is left as it was.
///
/// # Errors
///
/// As [`event_to_json`].
pub fn write_event(out: &mut String, event: &Event, shape: GoShape) -> Result<()> {
    check_event(event, shape)?;
    let start = out.len();
    let written = write_event_unchecked(out, event, shape);
    if written.is_err() {
        out.truncate(start);
    }
    written
}

/// The Go JSON (`json.Marshal`, compact) of a model request, as the reference host hashes it for
/// the model-input hash: `Model`, `Messages`, `Params`, then `Tools` and `ToolChoice` only when
/// set. Every part carries the four original keys (`Text`, `File`, `Data`, `Reasoning`) and
/// `ToolCall` / `ToolResult` only when it is one.
pub fn model_request_to_json(request: &ModelRequest) -> String {
    let mut out = String::new();
    write_model_request(&mut out, request);
    out
}

/// Appends the Go JSON of a model request to `out` (see [`model_request_to_json`]).
pub fn write_model_request(out: &mut String, request: &ModelRequest) {
    let shape = GoShape::V030;
    out.push_str("{\"Model\":");
    write_string(out, &request.model);
    out.push_str(",\"Messages\":");
    write_list(out, &request.messages, |out, m| {
        write_message(out, m, shape)
    });
    out.push_str(",\"Params\":");
    match &request.params {
        None => out.push_str("null"),
        Some(params) => write_string_map(out, params),
    }
    if !request.tools.is_empty() {
        out.push_str(",\"Tools\":");
        write_list(out, &request.tools, write_tool_definition);
    }
    if let Some(choice) = &request.tool_choice {
        out.push_str(",\"ToolChoice\":");
        write_tool_choice(out, choice);
    }
    out.push('}');
}

// ---- shape check ---------------------------------------------------------------------------------

fn lacks(shape: GoShape, path: &str) -> WireError {
    WireError::GoShape {
        path: path.to_owned(),
        shape: shape.name(),
    }
}

/// Fails on the first value of `event` that `shape` has no key for. Keys a shape lacks are fine
/// when their value is empty: the older writer simply did not have them.
fn check_event(event: &Event, shape: GoShape) -> Result<()> {
    if shape.is_v030() {
        return Ok(());
    }
    match &event.body {
        Some(EventBody::ExecutionStart(start)) => {
            if !shape.has_execution_start() {
                return Err(lacks(shape, "ExecutionStart"));
            }
            for (field, value) in [
                ("Model", &start.model),
                ("Harness", &start.harness),
                ("HarnessVersion", &start.harness_version),
                ("ComputeInstance", &start.compute_instance),
            ] {
                if !value.is_empty() {
                    return Err(lacks(shape, &format!("ExecutionStart.{field}")));
                }
            }
            Ok(())
        }
        Some(EventBody::Parked(_)) => Err(lacks(shape, "Parked")),
        Some(EventBody::Message(m)) => {
            check_parts(&m.parts, shape).map_err(|e| e.within("Parts").within("Message"))
        }
        Some(EventBody::Result(r)) => check_tool_result(r, shape).map_err(|e| e.within("Result")),
        Some(EventBody::ApprovalResult(a)) if a.request_seq != 0 => {
            Err(lacks(shape, "ApprovalResult.RequestSeq"))
        }
        Some(EventBody::Lifecycle(l)) if !l.compute_instance.is_empty() => {
            Err(lacks(shape, "Lifecycle.ComputeInstance"))
        }
        _ => Ok(()),
    }
}

fn check_parts(parts: &[Part], shape: GoShape) -> Result<()> {
    for (i, part) in parts.iter().enumerate() {
        let checked = match part {
            Part::ToolCall(_) => Err(lacks(shape, "ToolCall")),
            Part::ToolResult(_) => Err(lacks(shape, "ToolResult")),
            Part::Reasoning(r) => {
                check_parts(&r.summary, shape).map_err(|e| e.within("Summary").within("Reasoning"))
            }
            Part::Text(_) | Part::File(_) | Part::Data(_) | Part::Empty => Ok(()),
        };
        checked.map_err(|e| e.within(&format!("[{i}]")))?;
    }
    Ok(())
}

fn check_tool_result(result: &ToolResult, shape: GoShape) -> Result<()> {
    if !result.content.is_empty() {
        Err(lacks(shape, "Content"))
    } else if result.code != ToolResultCode::Unspecified {
        Err(lacks(shape, "Code"))
    } else if result.approval_request_seq != 0 {
        Err(lacks(shape, "ApprovalRequestSeq"))
    } else if result.approval_decision_seq != 0 {
        Err(lacks(shape, "ApprovalDecisionSeq"))
    } else {
        Ok(())
    }
}

// ---- writers -------------------------------------------------------------------------------------

/// Writes `items` as a Go slice: `null` when empty (Go's nil slice), else an array.
fn write_list<T>(out: &mut String, items: &[T], mut write: impl FnMut(&mut String, &T)) {
    if items.is_empty() {
        out.push_str("null");
        return;
    }
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write(out, item);
    }
    out.push(']');
}

/// Writes an optional pointer: `null` for `None`.
fn write_opt<T>(out: &mut String, value: Option<&T>, write: impl FnOnce(&mut String, &T)) {
    match value {
        Some(v) => write(out, v),
        None => out.push_str("null"),
    }
}

/// Writes a Go `map[string]any` held as an optional JSON object.
fn write_opt_object(out: &mut String, object: Option<&JsonObject>) {
    write_opt(out, object, write_json_object);
}

/// Writes a Go `map[string]string` (keys sorted, as the `BTreeMap` iterates).
fn write_string_map(out: &mut String, map: &std::collections::BTreeMap<String, String>) {
    out.push('{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, key);
        out.push(':');
        write_string(out, value);
    }
    out.push('}');
}

/// The Go field names of the event body members, in Go field order.
const BODY_KEYS: [&str; 12] = [
    "Message",
    "ModelCall",
    "ToolCall",
    "Result",
    "Approval",
    "ApprovalResult",
    "Usage",
    "Lifecycle",
    "End",
    "Err",
    "ExecutionStart",
    "Parked",
];

/// The position in [`BODY_KEYS`] of the member that holds `body`.
fn body_slot(body: &EventBody) -> usize {
    match body {
        EventBody::Message(_) => 0,
        EventBody::ModelCall(_) => 1,
        EventBody::ToolCall(_) => 2,
        EventBody::Result(_) => 3,
        EventBody::Approval(_) => 4,
        EventBody::ApprovalResult(_) => 5,
        EventBody::Usage(_) => 6,
        EventBody::Lifecycle(_) => 7,
        EventBody::End(_) => 8,
        EventBody::Error(_) => 9,
        EventBody::ExecutionStart(_) => 10,
        EventBody::Parked(_) => 11,
    }
}

fn write_body(out: &mut String, body: &EventBody, shape: GoShape) {
    match body {
        EventBody::Message(m) => write_message(out, m, shape),
        EventBody::ModelCall(m) => write_model_call(out, m),
        EventBody::ToolCall(t) => write_tool_call(out, t),
        EventBody::Result(r) => write_tool_result(out, r, shape),
        EventBody::Approval(a) => write_approval_request(out, a),
        EventBody::ApprovalResult(a) => write_approval_result(out, a, shape),
        EventBody::Usage(u) => write_usage(out, u),
        EventBody::Lifecycle(l) => write_lifecycle(out, l, shape),
        EventBody::End(e) => write_harness_end(out, e),
        EventBody::Error(e) => write_error_info(out, e),
        EventBody::ExecutionStart(s) => write_execution_start(out, s, shape),
        EventBody::Parked(p) => write_approval_ref(out, p),
    }
}

fn write_event_unchecked(out: &mut String, event: &Event, shape: GoShape) -> Result<()> {
    out.push_str("{\"ExecutionID\":");
    write_string(out, &event.execution_id);
    out.push_str(",\"Timestamp\":");
    write_time(out, event.timestamp)?;
    out.push_str(",\"SchemaVersion\":");
    write_int(out, event.schema_version);
    out.push_str(",\"Kind\":");
    write_string(out, event.kind.as_str());

    // Every body member is a pointer: the one holding the body is written, the others are null.
    // `ExecutionStart` exists only from the execution-start shape on, and `Parked` is omitempty
    // (so written only when it is the body, which [`check_event`] allows only in v0.3.0).
    let slot = event.body.as_ref().map(body_slot);
    for (i, key) in BODY_KEYS.into_iter().enumerate() {
        let holds_body = slot == Some(i);
        let omitted = match key {
            "ExecutionStart" => !shape.has_execution_start(),
            "Parked" => !holds_body,
            _ => false,
        };
        if omitted {
            continue;
        }
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":");
        match &event.body {
            Some(body) if holds_body => write_body(out, body, shape),
            _ => out.push_str("null"),
        }
    }

    out.push_str(",\"Actor\":");
    write_identity(out, &event.actor);
    out.push('}');
    Ok(())
}

fn write_message(out: &mut String, message: &Message, shape: GoShape) {
    out.push_str("{\"Role\":");
    write_string(out, &message.role);
    out.push_str(",\"Parts\":");
    write_list(out, &message.parts, |out, p| write_part(out, p, shape));
    out.push('}');
}

fn write_part(out: &mut String, part: &Part, shape: GoShape) {
    out.push_str("{\"Text\":");
    match part {
        Part::Text(t) => {
            out.push_str("{\"Text\":");
            write_string(out, &t.text);
            out.push('}');
        }
        _ => out.push_str("null"),
    }
    out.push_str(",\"File\":");
    match part {
        Part::File(f) => write_file_part(out, f),
        _ => out.push_str("null"),
    }
    out.push_str(",\"Data\":");
    match part {
        Part::Data(d) => write_json_object(out, d),
        _ => out.push_str("null"),
    }
    out.push_str(",\"Reasoning\":");
    match part {
        Part::Reasoning(r) => write_reasoning_part(out, r, shape),
        _ => out.push_str("null"),
    }
    // Both later members are omitempty pointers: present only when set.
    if shape.is_v030() {
        match part {
            Part::ToolCall(call) => {
                out.push_str(",\"ToolCall\":");
                write_tool_call(out, call);
            }
            Part::ToolResult(result) => {
                out.push_str(",\"ToolResult\":");
                write_tool_result(out, result, shape);
            }
            _ => {}
        }
    }
    out.push('}');
}

fn write_file_part(out: &mut String, file: &FilePart) {
    out.push_str("{\"MIME\":");
    write_string(out, &file.mime);
    out.push_str(",\"Bytes\":");
    write_bytes(out, &file.bytes);
    out.push_str(",\"URI\":");
    write_string(out, &file.uri);
    out.push_str(",\"Digest\":");
    write_string(out, &file.digest);
    out.push_str(",\"Name\":");
    write_string(out, &file.name);
    out.push('}');
}

fn write_reasoning_part(out: &mut String, reasoning: &ReasoningPart, shape: GoShape) {
    out.push_str("{\"Provider\":");
    write_string(out, &reasoning.provider);
    out.push_str(",\"ModelID\":");
    write_string(out, &reasoning.model_id);
    out.push_str(",\"Opaque\":");
    write_bytes(out, &reasoning.opaque);
    out.push_str(",\"OpaqueURI\":");
    write_string(out, &reasoning.opaque_uri);
    out.push_str(",\"OpaqueDigest\":");
    write_string(out, &reasoning.opaque_digest);
    out.push_str(",\"Summary\":");
    write_list(out, &reasoning.summary, |out, p| write_part(out, p, shape));
    out.push_str(",\"ItemID\":");
    write_string(out, &reasoning.item_id);
    out.push_str(",\"Ordinal\":");
    write_int(out, reasoning.ordinal);
    out.push_str(",\"ValidityScope\":");
    write_string(out, &reasoning.validity_scope);
    out.push('}');
}

fn write_tool_call(out: &mut String, call: &ToolCall) {
    out.push_str("{\"ID\":");
    write_string(out, &call.id);
    out.push_str(",\"Tool\":");
    write_string(out, &call.tool);
    out.push_str(",\"Args\":");
    write_opt_object(out, call.args.as_ref());
    out.push_str(",\"Mediation\":");
    write_string(out, call.mediation.as_str());
    out.push_str(",\"IdempotencyKey\":");
    write_string(out, &call.idempotency_key);
    out.push('}');
}

fn write_tool_result(out: &mut String, result: &ToolResult, shape: GoShape) {
    out.push_str("{\"ID\":");
    write_string(out, &result.id);
    out.push_str(",\"Output\":");
    write_opt_object(out, result.output.as_ref());
    out.push_str(",\"OutputURI\":");
    write_string(out, &result.output_uri);
    out.push_str(",\"OutputDigest\":");
    write_string(out, &result.output_digest);
    out.push_str(",\"IsError\":");
    write_bool(out, result.is_error);
    out.push_str(",\"Error\":");
    write_string(out, &result.error);
    // The receipt fields are omitempty; `Approval` is `json:"-"` and never written.
    if shape.is_v030() {
        if !result.content.is_empty() {
            out.push_str(",\"Content\":");
            write_list(out, &result.content, |out, p| write_part(out, p, shape));
        }
        if result.code != ToolResultCode::Unspecified {
            out.push_str(",\"Code\":");
            write_int(out, result.code.number());
        }
        if result.approval_request_seq != 0 {
            out.push_str(",\"ApprovalRequestSeq\":");
            write_int(out, result.approval_request_seq);
        }
        if result.approval_decision_seq != 0 {
            out.push_str(",\"ApprovalDecisionSeq\":");
            write_int(out, result.approval_decision_seq);
        }
    }
    out.push('}');
}

fn write_model_call(out: &mut String, call: &ModelCall) {
    out.push_str("{\"Model\":");
    write_string(out, &call.model);
    out.push_str(",\"Params\":");
    if call.params.is_empty() {
        out.push_str("null");
    } else {
        write_string_map(out, &call.params);
    }
    out.push_str(",\"InputHash\":");
    write_string(out, &call.input_hash);
    out.push_str(",\"ID\":");
    write_string(out, &call.id);
    out.push('}');
}

fn write_usage(out: &mut String, usage: &Usage) {
    out.push_str("{\"Model\":");
    write_string(out, &usage.model);
    out.push_str(",\"InputTokens\":");
    write_int(out, usage.input_tokens);
    out.push_str(",\"OutputTokens\":");
    write_int(out, usage.output_tokens);
    out.push_str(",\"ReasoningTokens\":");
    write_int(out, usage.reasoning_tokens);
    // A project extension the Go struct lacks: written only when set, so exports of records
    // without it stay byte-identical to the Go reference.
    if usage.cached_input_tokens != 0 {
        out.push_str(",\"CachedInputTokens\":");
        write_int(out, usage.cached_input_tokens);
    }
    out.push('}');
}

fn write_approval_request(out: &mut String, request: &ApprovalRequest) {
    out.push_str("{\"ToolCallID\":");
    write_string(out, &request.tool_call_id);
    out.push_str(",\"Reason\":");
    write_string(out, &request.reason);
    out.push('}');
}

fn write_approval_result(out: &mut String, result: &ApprovalResult, shape: GoShape) {
    out.push_str("{\"ToolCallID\":");
    write_string(out, &result.tool_call_id);
    out.push_str(",\"Approved\":");
    write_bool(out, result.approved);
    out.push_str(",\"Reason\":");
    write_string(out, &result.reason);
    if shape.is_v030() && result.request_seq != 0 {
        out.push_str(",\"RequestSeq\":");
        write_int(out, result.request_seq);
    }
    out.push('}');
}

fn write_approval_ref(out: &mut String, parked: &ApprovalRef) {
    out.push_str("{\"ExecutionID\":");
    write_string(out, &parked.execution_id);
    out.push_str(",\"ToolCallID\":");
    write_string(out, &parked.tool_call_id);
    out.push_str(",\"RequestSeq\":");
    write_int(out, parked.request_seq);
    out.push('}');
}

fn write_lifecycle(out: &mut String, lifecycle: &Lifecycle, shape: GoShape) {
    out.push_str("{\"Kind\":");
    write_string(out, lifecycle.kind.as_str());
    out.push_str(",\"Detail\":");
    write_string(out, &lifecycle.detail);
    out.push_str(",\"Snapshot\":");
    write_opt(out, lifecycle.snapshot.as_ref(), write_snapshot);
    if shape.is_v030() {
        out.push_str(",\"ComputeInstance\":");
        write_string(out, &lifecycle.compute_instance);
    }
    out.push('}');
}

fn write_snapshot(out: &mut String, snapshot: &SnapshotRef) {
    out.push_str("{\"Local\":");
    write_string(out, &snapshot.local);
    out.push_str(",\"ExternalURI\":");
    write_string(out, &snapshot.external_uri);
    out.push_str(",\"Memory\":");
    write_bool(out, snapshot.memory);
    out.push_str(",\"Sealed\":");
    write_bool(out, snapshot.sealed);
    out.push('}');
}

fn write_harness_end(out: &mut String, end: &HarnessEnd) {
    out.push_str("{\"State\":");
    write_string(out, &end.state);
    out.push_str(",\"Error\":");
    write_opt(out, end.error.as_ref(), write_error_info);
    out.push('}');
}

fn write_error_info(out: &mut String, error: &ErrorInfo) {
    out.push_str("{\"Code\":");
    write_int(out, error.code);
    out.push_str(",\"Description\":");
    write_string(out, &error.description);
    out.push('}');
}

fn write_execution_start(out: &mut String, start: &ExecutionStart, shape: GoShape) {
    out.push('{');
    if shape.is_v030() && !start.model.is_empty() {
        out.push_str("\"Model\":");
        write_string(out, &start.model);
        out.push(',');
    }
    out.push_str("\"Config\":");
    write_bytes(out, &start.config);
    out.push_str(",\"ResumeFromSeq\":");
    write_int(out, start.resume_from_seq);
    out.push_str(",\"InputCount\":");
    write_opt(out, start.input_count.as_ref(), |out, n| write_int(out, *n));
    if shape.is_v030() {
        out.push_str(",\"Harness\":");
        write_string(out, &start.harness);
        out.push_str(",\"HarnessVersion\":");
        write_string(out, &start.harness_version);
        out.push_str(",\"ComputeInstance\":");
        write_string(out, &start.compute_instance);
    }
    out.push('}');
}

fn write_identity(out: &mut String, identity: &IdentityRef) {
    out.push_str("{\"Principal\":");
    write_string(out, &identity.principal);
    out.push_str(",\"Issuer\":");
    write_string(out, &identity.issuer);
    out.push_str(",\"Subject\":");
    write_string(out, &identity.subject);
    out.push('}');
}

/// The Go string constant of a tool-choice mode; empty for the provider default.
pub(super) fn tool_choice_mode_name(mode: ToolChoiceMode) -> &'static str {
    match mode {
        ToolChoiceMode::Unspecified => "",
        ToolChoiceMode::Auto => "AUTO",
        ToolChoiceMode::None => "NONE",
        ToolChoiceMode::Required => "REQUIRED",
    }
}

fn write_tool_definition(out: &mut String, tool: &ToolDefinition) {
    out.push_str("{\"Name\":");
    write_string(out, &tool.name);
    out.push_str(",\"Description\":");
    write_string(out, &tool.description);
    out.push_str(",\"InputSchema\":");
    write_opt_object(out, tool.input_schema.as_ref());
    out.push('}');
}

fn write_tool_choice(out: &mut String, choice: &ToolChoice) {
    out.push_str("{\"Mode\":");
    write_string(out, tool_choice_mode_name(choice.mode));
    out.push_str(",\"Name\":");
    write_string(out, &choice.name);
    out.push('}');
}
