//! Go JSON ([`GoValue`]) to domain values, following Go's `json.Unmarshal` rules (see the module
//! documentation of [`super`]).
//!
//! Every decoder returns errors whose path is relative to the value it was given; callers prefix
//! the field or index they passed down with [`WireError::within`].

use std::collections::BTreeMap;

use agentsessions_api::{
    ApprovalRef, ApprovalRequest, ApprovalResult, ErrorInfo, Event, EventBody, EventKind,
    ExecutionStart, FilePart, HarnessEnd, IdentityRef, JsonObject, Lifecycle, LifecycleKind,
    Mediation, Message, ModelCall, ModelRequest, Part, ReasoningPart, SnapshotRef, TextPart,
    Timestamp, ToolCall, ToolChoice, ToolChoiceMode, ToolDefinition, ToolResult, ToolResultCode,
    Usage,
};
use base64::Engine as _;
use serde_json::Value as Json;

use super::GoShape;
use super::encode::tool_choice_mode_name;
use super::value::GoValue;
use super::write::{GO_BASE64, GO_ZERO_TIME_UNIX, days_from_civil};
use crate::error::{Result, WireError};

// ---- public entry points -------------------------------------------------------------------------

/// Decodes a Go `api.Event`.
///
/// `seen` is raised to the newest [`GoShape`] whose keys appear anywhere in the event (an
/// `ExecutionStart` key, even `null`, means at least [`GoShape::V012ExecutionStart`]; a key only
/// v0.3.0 has means [`GoShape::V030`]); it is never lowered, so one variable can collect the
/// evidence of a whole document.
///
/// # Errors
///
/// [`WireError::GoJson`] naming the path below the event (`Message.Parts[0].File.Bytes`) when a
/// value does not decode into its Go type, or an enum string or number is not one this build
/// knows.
pub fn decode_event(value: &GoValue, seen: &mut GoShape) -> Result<Event> {
    let f = Fields::of(value)?;
    if f.has("ExecutionStart") {
        seen.raise(GoShape::V012ExecutionStart);
    }
    if f.has("Parked") {
        seen.raise(GoShape::V030);
    }
    let execution_id = f.value("ExecutionID", string)?;
    let timestamp = f.value("Timestamp", time)?;
    let schema_version = f.value("SchemaVersion", int32)?;
    let kind = f.value("Kind", event_kind)?;

    // Go keeps every member; the domain keeps one. Each is still decoded so a malformed member
    // fails as it would in Go, and the first set one in field order becomes the body.
    let members = [
        f.pointer("Message", |v| message(v, seen))?
            .map(EventBody::Message),
        f.pointer("ModelCall", model_call)?
            .map(EventBody::ModelCall),
        f.pointer("ToolCall", tool_call)?.map(EventBody::ToolCall),
        f.pointer("Result", |v| tool_result(v, seen))?
            .map(EventBody::Result),
        f.pointer("Approval", approval_request)?
            .map(EventBody::Approval),
        f.pointer("ApprovalResult", |v| approval_result(v, seen))?
            .map(EventBody::ApprovalResult),
        f.pointer("Usage", usage)?.map(EventBody::Usage),
        f.pointer("Lifecycle", |v| lifecycle(v, seen))?
            .map(EventBody::Lifecycle),
        f.pointer("End", harness_end)?.map(EventBody::End),
        f.pointer("Err", error_info)?.map(EventBody::Error),
        f.pointer("ExecutionStart", |v| execution_start(v, seen))?
            .map(EventBody::ExecutionStart),
        f.pointer("Parked", approval_ref)?.map(EventBody::Parked),
    ];
    let body = members.into_iter().flatten().next();

    let actor = f.value("Actor", identity)?;
    Ok(Event {
        execution_id,
        timestamp,
        schema_version,
        kind,
        body,
        actor,
        redacted: Vec::new(),
    })
}

/// Decodes a Go `api.ModelRequest`. `Params` keeps Go's distinction between `null` (`None`) and
/// `{}` (`Some` of an empty map).
///
/// # Errors
///
/// As [`decode_event`].
pub fn decode_model_request(value: &GoValue) -> Result<ModelRequest> {
    let mut seen = GoShape::V030;
    let f = Fields::of(value)?;
    Ok(ModelRequest {
        model: f.value("Model", string)?,
        messages: f.value("Messages", |v| list(v, |v| message(v, &mut seen)))?,
        params: f.pointer("Params", string_map)?,
        tools: f.value("Tools", |v| list(v, tool_definition))?,
        tool_choice: f.pointer("ToolChoice", tool_choice)?,
    })
}

/// Decodes a Go `int64`: a number literal without fraction or exponent, in range. `null` is 0.
///
/// # Errors
///
/// [`WireError::GoJson`] with an empty path for anything else.
pub fn decode_int64(value: &GoValue) -> Result<i64> {
    int(value, "an int64")
}

/// Decodes a Go `string`. `null` is the empty string.
///
/// # Errors
///
/// [`WireError::GoJson`] with an empty path for anything but a string or `null`.
pub fn decode_string(value: &GoValue) -> Result<String> {
    string(value)
}

/// The elements of a Go slice: an array's items, none for `null`.
///
/// # Errors
///
/// [`WireError::GoJson`] with an empty path for anything but an array or `null`.
pub fn decode_array(value: &GoValue) -> Result<&[GoValue]> {
    match value {
        GoValue::Null => Ok(&[]),
        GoValue::Array(items) => Ok(items),
        other => Err(mismatch("an array", other)),
    }
}

/// Checks that a value can decode into a Go struct: an object, or `null` (which leaves the zero
/// struct). Read its members with [`GoValue::field`].
///
/// # Errors
///
/// [`WireError::GoJson`] with an empty path for anything else.
pub fn check_struct(value: &GoValue) -> Result<()> {
    Fields::of(value).map(|_| ())
}

// ---- errors --------------------------------------------------------------------------------------

fn invalid(reason: String) -> WireError {
    WireError::GoJson {
        path: String::new(),
        reason,
    }
}

fn mismatch(expected: &str, found: &GoValue) -> WireError {
    let found = match found {
        GoValue::Number(n) => format!("number {n}"),
        GoValue::Bool(b) => format!("{b}"),
        other => format!("{} {}", article(other.type_name()), other.type_name()),
    };
    invalid(format!("expected {expected}, found {found}"))
}

fn article(noun: &str) -> &'static str {
    if noun.starts_with(['a', 'o']) {
        "an"
    } else {
        "a"
    }
}

// ---- structs -------------------------------------------------------------------------------------

/// A Go struct being decoded: an object, or `null` for the zero struct (no members).
struct Fields<'a>(&'a GoValue);

impl<'a> Fields<'a> {
    fn of(value: &'a GoValue) -> Result<Self> {
        match value {
            GoValue::Object(_) | GoValue::Null => Ok(Self(value)),
            other => Err(mismatch("an object", other)),
        }
    }

    fn has(&self, name: &str) -> bool {
        self.0.field(name).is_some()
    }

    /// A value field: decoded with `decode` when present (`null` included: the scalar decoders
    /// treat it as Go does, as "leave the zero value"), the zero value when missing.
    fn value<T: Default>(
        &self,
        name: &str,
        decode: impl FnOnce(&'a GoValue) -> Result<T>,
    ) -> Result<T> {
        match self.0.field(name) {
            Some(v) => decode(v).map_err(|e| e.within(name)),
            None => Ok(T::default()),
        }
    }

    /// A pointer, map or other nil-able field: `None` when missing or `null`.
    fn pointer<T>(
        &self,
        name: &str,
        decode: impl FnOnce(&'a GoValue) -> Result<T>,
    ) -> Result<Option<T>> {
        match self.0.field(name) {
            Some(GoValue::Null) | None => Ok(None),
            Some(v) => decode(v).map(Some).map_err(|e| e.within(name)),
        }
    }
}

fn list<'a, T>(
    value: &'a GoValue,
    mut decode: impl FnMut(&'a GoValue) -> Result<T>,
) -> Result<Vec<T>> {
    decode_array(value)?
        .iter()
        .enumerate()
        .map(|(i, v)| decode(v).map_err(|e| e.within(&format!("[{i}]"))))
        .collect()
}

fn message(value: &GoValue, seen: &mut GoShape) -> Result<Message> {
    let f = Fields::of(value)?;
    Ok(Message {
        role: f.value("Role", string)?,
        parts: f.value("Parts", |v| list(v, |v| part(v, seen)))?,
    })
}

fn part(value: &GoValue, seen: &mut GoShape) -> Result<Part> {
    let f = Fields::of(value)?;
    if f.has("ToolCall") || f.has("ToolResult") {
        seen.raise(GoShape::V030);
    }
    let text = f.pointer("Text", text_part)?.map(Part::Text);
    let file = f.pointer("File", file_part)?.map(Part::File);
    let data = f.pointer("Data", json_object)?.map(Part::Data);
    let reasoning = f
        .pointer("Reasoning", |v| reasoning_part(v, seen))?
        .map(Part::Reasoning);
    let call = f.pointer("ToolCall", tool_call)?.map(Part::ToolCall);
    let result = f
        .pointer("ToolResult", |v| tool_result(v, seen))?
        .map(Part::ToolResult);
    Ok(text
        .or(file)
        .or(data)
        .or(reasoning)
        .or(call)
        .or(result)
        .unwrap_or(Part::Empty))
}

fn text_part(value: &GoValue) -> Result<TextPart> {
    let f = Fields::of(value)?;
    Ok(TextPart {
        text: f.value("Text", string)?,
    })
}

fn file_part(value: &GoValue) -> Result<FilePart> {
    let f = Fields::of(value)?;
    Ok(FilePart {
        mime: f.value("MIME", string)?,
        bytes: f.value("Bytes", bytes)?,
        uri: f.value("URI", string)?,
        digest: f.value("Digest", string)?,
        name: f.value("Name", string)?,
    })
}

fn reasoning_part(value: &GoValue, seen: &mut GoShape) -> Result<ReasoningPart> {
    let f = Fields::of(value)?;
    Ok(ReasoningPart {
        provider: f.value("Provider", string)?,
        model_id: f.value("ModelID", string)?,
        opaque: f.value("Opaque", bytes)?,
        opaque_uri: f.value("OpaqueURI", string)?,
        opaque_digest: f.value("OpaqueDigest", string)?,
        summary: f.value("Summary", |v| list(v, |v| part(v, seen)))?,
        item_id: f.value("ItemID", string)?,
        ordinal: f.value("Ordinal", int32)?,
        validity_scope: f.value("ValidityScope", string)?,
    })
}

fn tool_call(value: &GoValue) -> Result<ToolCall> {
    let f = Fields::of(value)?;
    Ok(ToolCall {
        id: f.value("ID", string)?,
        tool: f.value("Tool", string)?,
        args: f.pointer("Args", json_object)?,
        mediation: f.value("Mediation", mediation)?,
        idempotency_key: f.value("IdempotencyKey", string)?,
    })
}

fn tool_result(value: &GoValue, seen: &mut GoShape) -> Result<ToolResult> {
    let f = Fields::of(value)?;
    if [
        "Content",
        "Code",
        "ApprovalRequestSeq",
        "ApprovalDecisionSeq",
    ]
    .iter()
    .any(|k| f.has(k))
    {
        seen.raise(GoShape::V030);
    }
    // `Approval` is `json:"-"` in Go: a key of that name is ignored like any unknown key.
    Ok(ToolResult {
        id: f.value("ID", string)?,
        output: f.pointer("Output", json_object)?,
        output_uri: f.value("OutputURI", string)?,
        output_digest: f.value("OutputDigest", string)?,
        is_error: f.value("IsError", boolean)?,
        error: f.value("Error", string)?,
        content: f.value("Content", |v| list(v, |v| part(v, seen)))?,
        code: f.value("Code", tool_result_code)?,
        approval_request_seq: f.value("ApprovalRequestSeq", decode_int64)?,
        approval_decision_seq: f.value("ApprovalDecisionSeq", decode_int64)?,
        approval: None,
    })
}

fn model_call(value: &GoValue) -> Result<ModelCall> {
    let f = Fields::of(value)?;
    Ok(ModelCall {
        model: f.value("Model", string)?,
        params: f.pointer("Params", string_map)?.unwrap_or_default(),
        input_hash: f.value("InputHash", string)?,
        id: f.value("ID", string)?,
    })
}

fn usage(value: &GoValue) -> Result<Usage> {
    let f = Fields::of(value)?;
    Ok(Usage {
        model: f.value("Model", string)?,
        input_tokens: f.value("InputTokens", decode_int64)?,
        output_tokens: f.value("OutputTokens", decode_int64)?,
        reasoning_tokens: f.value("ReasoningTokens", decode_int64)?,
        cached_input_tokens: f.value("CachedInputTokens", decode_int64)?,
    })
}

fn approval_request(value: &GoValue) -> Result<ApprovalRequest> {
    let f = Fields::of(value)?;
    Ok(ApprovalRequest {
        tool_call_id: f.value("ToolCallID", string)?,
        reason: f.value("Reason", string)?,
    })
}

fn approval_result(value: &GoValue, seen: &mut GoShape) -> Result<ApprovalResult> {
    let f = Fields::of(value)?;
    if f.has("RequestSeq") {
        seen.raise(GoShape::V030);
    }
    Ok(ApprovalResult {
        tool_call_id: f.value("ToolCallID", string)?,
        approved: f.value("Approved", boolean)?,
        reason: f.value("Reason", string)?,
        request_seq: f.value("RequestSeq", decode_int64)?,
    })
}

fn approval_ref(value: &GoValue) -> Result<ApprovalRef> {
    let f = Fields::of(value)?;
    Ok(ApprovalRef {
        execution_id: f.value("ExecutionID", string)?,
        tool_call_id: f.value("ToolCallID", string)?,
        request_seq: f.value("RequestSeq", decode_int64)?,
    })
}

fn lifecycle(value: &GoValue, seen: &mut GoShape) -> Result<Lifecycle> {
    let f = Fields::of(value)?;
    if f.has("ComputeInstance") {
        seen.raise(GoShape::V030);
    }
    Ok(Lifecycle {
        kind: f.value("Kind", lifecycle_kind)?,
        detail: f.value("Detail", string)?,
        snapshot: f.pointer("Snapshot", snapshot)?,
        compute_instance: f.value("ComputeInstance", string)?,
    })
}

fn snapshot(value: &GoValue) -> Result<SnapshotRef> {
    let f = Fields::of(value)?;
    Ok(SnapshotRef {
        local: f.value("Local", string)?,
        external_uri: f.value("ExternalURI", string)?,
        memory: f.value("Memory", boolean)?,
        sealed: f.value("Sealed", boolean)?,
    })
}

fn harness_end(value: &GoValue) -> Result<HarnessEnd> {
    let f = Fields::of(value)?;
    Ok(HarnessEnd {
        state: f.value("State", string)?,
        error: f.pointer("Error", error_info)?,
    })
}

fn error_info(value: &GoValue) -> Result<ErrorInfo> {
    let f = Fields::of(value)?;
    Ok(ErrorInfo {
        code: f.value("Code", int32)?,
        description: f.value("Description", string)?,
    })
}

fn execution_start(value: &GoValue, seen: &mut GoShape) -> Result<ExecutionStart> {
    let f = Fields::of(value)?;
    if ["Model", "Harness", "HarnessVersion", "ComputeInstance"]
        .iter()
        .any(|k| f.has(k))
    {
        seen.raise(GoShape::V030);
    }
    Ok(ExecutionStart {
        model: f.value("Model", string)?,
        config: f.value("Config", bytes)?,
        resume_from_seq: f.value("ResumeFromSeq", decode_int64)?,
        input_count: f.pointer("InputCount", decode_int64)?,
        harness: f.value("Harness", string)?,
        harness_version: f.value("HarnessVersion", string)?,
        compute_instance: f.value("ComputeInstance", string)?,
    })
}

fn identity(value: &GoValue) -> Result<IdentityRef> {
    let f = Fields::of(value)?;
    Ok(IdentityRef {
        principal: f.value("Principal", string)?,
        issuer: f.value("Issuer", string)?,
        subject: f.value("Subject", string)?,
    })
}

fn tool_definition(value: &GoValue) -> Result<ToolDefinition> {
    let f = Fields::of(value)?;
    Ok(ToolDefinition {
        name: f.value("Name", string)?,
        description: f.value("Description", string)?,
        input_schema: f.pointer("InputSchema", json_object)?,
    })
}

fn tool_choice(value: &GoValue) -> Result<ToolChoice> {
    let f = Fields::of(value)?;
    Ok(ToolChoice {
        mode: f.value("Mode", tool_choice_mode)?,
        name: f.value("Name", string)?,
    })
}

// ---- enumerations --------------------------------------------------------------------------------

fn event_kind(value: &GoValue) -> Result<EventKind> {
    let name = string(value)?;
    match EventKind::from_name(&name) {
        EventKind::Unspecified if !name.is_empty() => {
            Err(invalid(format!("unknown event kind {name:?}")))
        }
        kind => Ok(kind),
    }
}

fn mediation(value: &GoValue) -> Result<Mediation> {
    let name = string(value)?;
    Mediation::parse(&name).ok_or_else(|| invalid(format!("unknown mediation {name:?}")))
}

fn lifecycle_kind(value: &GoValue) -> Result<LifecycleKind> {
    let name = string(value)?;
    LifecycleKind::parse(&name).ok_or_else(|| invalid(format!("unknown lifecycle kind {name:?}")))
}

fn tool_choice_mode(value: &GoValue) -> Result<ToolChoiceMode> {
    let name = string(value)?;
    [
        ToolChoiceMode::Unspecified,
        ToolChoiceMode::Auto,
        ToolChoiceMode::None,
        ToolChoiceMode::Required,
    ]
    .into_iter()
    .find(|m| tool_choice_mode_name(*m) == name)
    .ok_or_else(|| invalid(format!("unknown tool choice mode {name:?}")))
}

fn tool_result_code(value: &GoValue) -> Result<ToolResultCode> {
    let n = int32(value)?;
    ToolResultCode::from_number(n).ok_or_else(|| invalid(format!("unknown tool result code {n}")))
}

// ---- scalars -------------------------------------------------------------------------------------

fn string(value: &GoValue) -> Result<String> {
    match value {
        GoValue::Null => Ok(String::new()),
        GoValue::String(s) => Ok(s.clone()),
        other => Err(mismatch("a string", other)),
    }
}

fn boolean(value: &GoValue) -> Result<bool> {
    match value {
        GoValue::Null => Ok(false),
        GoValue::Bool(b) => Ok(*b),
        other => Err(mismatch("a bool", other)),
    }
}

/// A Go integer of the type `T`, named `what` in messages: the literal must be a plain decimal
/// integer in range, as Go's `strconv.ParseInt` requires.
fn int<T: std::str::FromStr + Default>(value: &GoValue, what: &str) -> Result<T> {
    match value {
        GoValue::Null => Ok(T::default()),
        GoValue::Number(n) => n.parse().map_err(|_| mismatch(what, value)),
        other => Err(mismatch(what, other)),
    }
}

fn int32(value: &GoValue) -> Result<i32> {
    int(value, "an int32")
}

/// A Go `[]byte`: padded standard base64 in a string (line breaks ignored, as Go's decoder
/// does), or an array of byte values; `null` is nil.
fn bytes(value: &GoValue) -> Result<Vec<u8>> {
    match value {
        GoValue::Null => Ok(Vec::new()),
        GoValue::String(s) => {
            let cleaned: String = s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
            GO_BASE64
                .decode(cleaned.as_bytes())
                .map_err(|e| invalid(format!("invalid base64: {e}")))
        }
        GoValue::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| int::<u8>(v, "a uint8").map_err(|e| e.within(&format!("[{i}]"))))
            .collect(),
        other => Err(mismatch("a base64 string", other)),
    }
}

/// A Go `map[string]string`.
fn string_map(value: &GoValue) -> Result<BTreeMap<String, String>> {
    match value {
        GoValue::Object(members) => members
            .iter()
            .map(|(k, v)| Ok((k.clone(), string(v).map_err(|e| e.within(k))?)))
            .collect(),
        other => Err(mismatch("an object", other)),
    }
}

/// A Go `map[string]any`. Duplicate keys: the last one wins, as in Go.
fn json_object(value: &GoValue) -> Result<JsonObject> {
    match value {
        GoValue::Object(members) => {
            let mut map = JsonObject::new();
            for (k, v) in members {
                map.insert(k.clone(), json_value(v).map_err(|e| e.within(k))?);
            }
            Ok(map)
        }
        other => Err(mismatch("an object", other)),
    }
}

/// A Go `any`: numbers become `float64`.
fn json_value(value: &GoValue) -> Result<Json> {
    Ok(match value {
        GoValue::Null => Json::Null,
        GoValue::Bool(b) => Json::Bool(*b),
        GoValue::Number(n) => {
            let number = n
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .ok_or_else(|| invalid(format!("number {n} is out of range for a float64")))?;
            Json::Number(number)
        }
        GoValue::String(s) => Json::String(s.clone()),
        GoValue::Array(items) => Json::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| json_value(v).map_err(|e| e.within(&format!("[{i}]"))))
                .collect::<Result<_>>()?,
        ),
        GoValue::Object(_) => Json::Object(json_object(value)?),
    })
}

/// A Go `time.Time`: an RFC 3339 string (any UTC offset, 1 to 9 fraction digits, more are
/// truncated as Go does). Go's zero time, and `null`, are `None`.
fn time(value: &GoValue) -> Result<Option<Timestamp>> {
    match value {
        GoValue::Null => Ok(None),
        GoValue::String(s) => {
            let ts =
                parse_rfc3339(s).ok_or_else(|| invalid(format!("invalid RFC 3339 time {s:?}")))?;
            Ok((ts.seconds != GO_ZERO_TIME_UNIX || ts.nanos != 0).then_some(ts))
        }
        other => Err(mismatch("an RFC 3339 time string", other)),
    }
}

fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        if digits.iter().all(u8::is_ascii_digit) {
            Some(
                digits
                    .iter()
                    .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')),
            )
        } else {
            None
        }
    };
    let punct = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(punct(4, b'-') && punct(7, b'-') && punct(10, b'T') && punct(13, b':') && punct(16, b':'))
    {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day < 1 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if punct(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let kept = (i - start).min(9);
        nanos = num(start..start + kept)? * 10i64.pow(u32::try_from(9 - kept).ok()?);
    }
    let offset = match b.get(i)? {
        b'Z' => {
            i += 1;
            0
        }
        sign @ (b'+' | b'-') => {
            if !punct(i + 3, b':') {
                return None;
            }
            let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            i += 6;
            let magnitude = h * 3600 + m * 60;
            if *sign == b'-' { -magnitude } else { magnitude }
        }
        _ => return None,
    };
    if i != b.len() {
        return None;
    }
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some(Timestamp {
        seconds,
        nanos: i32::try_from(nanos).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> GoValue {
        GoValue::parse(text).unwrap()
    }

    fn error(result: Result<impl std::fmt::Debug>) -> (String, String) {
        match result {
            Err(WireError::GoJson { path, reason }) => (path, reason),
            other => panic!("expected a go json error, got {other:?}"),
        }
    }

    #[test]
    fn integers_follow_strconv() {
        assert_eq!(decode_int64(&parse("-0")).unwrap(), 0);
        assert_eq!(decode_int64(&parse("null")).unwrap(), 0);
        assert_eq!(
            decode_int64(&parse("9223372036854775807")).unwrap(),
            i64::MAX
        );
        for bad in ["1.0", "1e3", "9223372036854775808", "\"1\"", "true"] {
            assert!(decode_int64(&parse(bad)).is_err(), "{bad}");
        }
        assert_eq!(
            error(decode_int64(&parse("\"1\""))).1,
            "expected an int64, found a string"
        );
        assert_eq!(
            error(decode_int64(&parse("1.5"))).1,
            "expected an int64, found number 1.5"
        );
        int32(&parse("2147483648")).unwrap_err();
    }

    #[test]
    fn times_parse_rfc3339_with_offsets() {
        let t = |s: &str| time(&GoValue::String(s.into()));
        assert_eq!(t("0001-01-01T00:00:00Z").unwrap(), None);
        assert_eq!(t("0001-01-01T01:00:00+01:00").unwrap(), None);
        assert_eq!(
            t("2023-11-14T22:13:20Z").unwrap(),
            Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 0
            })
        );
        assert_eq!(
            t("2023-11-14T23:13:20.5+01:00").unwrap(),
            Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 500_000_000
            })
        );
        assert_eq!(
            t("1970-01-01T00:00:00.0000000019Z").unwrap(),
            Some(Timestamp {
                seconds: 0,
                nanos: 1
            })
        );
        for bad in [
            "2023-11-14 22:13:20Z",
            "2023-11-14T22:13:20",
            "2023-02-29T00:00:00Z",
            "2023-11-14T24:00:00Z",
            "2023-11-14T22:13:20.Z",
            "2023-11-14T22:13:20+0100",
            "2023-11-14T22:13:20Zx",
        ] {
            assert!(t(bad).is_err(), "{bad}");
        }
        assert_eq!(time(&GoValue::Null).unwrap(), None);
    }

    #[test]
    fn bytes_accept_base64_and_byte_arrays() {
        assert_eq!(
            bytes(&parse("\"AP8gCgk=\"")).unwrap(),
            [0, 0xff, 0x20, 0x0a, 0x09]
        );
        assert_eq!(
            bytes(&parse("\"AP8g\\nCgk=\"")).unwrap(),
            [0, 0xff, 0x20, 0x0a, 0x09]
        );
        assert_eq!(bytes(&parse("[1,2]")).unwrap(), [1, 2]);
        assert_eq!(bytes(&parse("null")).unwrap(), Vec::<u8>::new());
        bytes(&parse("\"AP8gCgk\"")).unwrap_err();
        assert_eq!(error(bytes(&parse("[1,256]"))).0, "[1]");
    }

    #[test]
    fn data_numbers_become_doubles() {
        let v = json_value(&parse(r#"{"a":1,"b":[1.5,null,"x"],"a":2}"#)).unwrap();
        assert_eq!(v, serde_json::json!({"a": 2.0, "b": [1.5, null, "x"]}));
        assert_eq!(
            error(json_value(&parse(r#"{"x":[1e999]}"#))),
            (
                "x[0]".into(),
                "number 1e999 is out of range for a float64".into()
            )
        );
    }

    #[test]
    fn unknown_enum_names_are_errors() {
        let mut seen = GoShape::V012;
        let (path, reason) = error(decode_event(&parse(r#"{"Kind":"CREDENTIAL"}"#), &mut seen));
        assert_eq!(
            (path.as_str(), reason.as_str()),
            ("Kind", "unknown event kind \"CREDENTIAL\"")
        );
        let (path, _) = error(decode_event(
            &parse(r#"{"ToolCall":{"Mediation":"SOMETIMES"}}"#),
            &mut seen,
        ));
        assert_eq!(path, "ToolCall.Mediation");
        let (path, reason) = error(decode_event(&parse(r#"{"Result":{"Code":7}}"#), &mut seen));
        assert_eq!(
            (path.as_str(), reason.as_str()),
            ("Result.Code", "unknown tool result code 7")
        );
    }
}
