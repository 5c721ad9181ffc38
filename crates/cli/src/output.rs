//! Human-readable lines for records and sessions (semantics §10.8), and proto-JSON for scripts.

use agentsessions_api::Part;
use agentsessions_client::{text_of, uid_of};
use agentsessions_wire::canonical::Canonical;
use agentsessions_wire::pb;
use agentsessions_wire::pb::event::Body;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

fn enum_name(name: Option<&str>, prefix: &str) -> String {
    name.map_or_else(
        || "UNKNOWN".to_owned(),
        |n| n.trim_start_matches(prefix).to_owned(),
    )
}

/// `COMPUTE_LIVE` → `LIVE`.
pub fn compute_name(session: &pb::Session) -> String {
    enum_name(
        pb::ComputeState::try_from(session.compute_state)
            .ok()
            .map(|s| s.as_str_name()),
        "COMPUTE_",
    )
}

/// `EXEC_COMPLETED` → `COMPLETED`.
pub fn exec_name(session: &pb::Session) -> String {
    enum_name(
        pb::ExecState::try_from(session.exec_state)
            .ok()
            .map(|s| s.as_str_name()),
        "EXEC_",
    )
}

/// A wire time as RFC 3339 UTC text (`2026-12-04T16:45:07.123Z`); `None` when unset or out of
/// range.
pub fn time_text<T: Canonical>(time: Option<&T>) -> Option<String> {
    let quoted = agentsessions_wire::canonical::canonical_message(time?).ok()?;
    let text = String::from_utf8(quoted).ok()?;
    Some(text.trim_matches('"').to_owned())
}

/// One record as `2026-12-04T16:45:07.123Z seq=0004 OUTPUT  assistant: echo:hello`, led by the
/// time it was committed when the server stored one; other kinds show their essentials (never
/// tool arguments).
pub fn record_line(record: &pb::LogRecord) -> String {
    let mut line = match time_text(record.commit_time.as_ref()) {
        Some(time) => format!("{time} {}", record_body_line(record)),
        None => record_body_line(record),
    };
    if let Some(event) = record.event.as_ref().filter(|e| !e.redacted.is_empty()) {
        line.push_str(&format!("  (redacted: {})", event.redacted.join(", ")));
    }
    line
}

fn record_body_line(record: &pb::LogRecord) -> String {
    let Some(event) = &record.event else {
        return format!("seq={:04} (no event)", record.seq);
    };
    let kind = enum_name(
        pb::EventKind::try_from(event.kind)
            .ok()
            .map(|k| k.as_str_name()),
        "EVENT_",
    );
    let detail = match &event.body {
        Some(Body::Message(m)) => message_line(m),
        Some(Body::Model(call)) => format!("model={}", call.model),
        Some(Body::Tool(call)) => format!("tool={} id={}", call.tool, call.id),
        Some(Body::Result(result)) => result_line(result),
        Some(Body::Approval(request)) => format!("tool_call={}", request.tool_call_id),
        Some(Body::ApprovalResult(result)) => format!(
            "{} request_seq={}{}",
            if result.approved {
                "approved"
            } else {
                "denied"
            },
            result.request_seq,
            if result.reason.is_empty() {
                String::new()
            } else {
                format!(" reason: {}", result.reason)
            }
        ),
        Some(Body::Usage(usage)) => format!(
            "model={} input={} output={}",
            usage.model, usage.input_tokens, usage.output_tokens
        ),
        Some(Body::Lifecycle(l)) => {
            let name = enum_name(
                pb::lifecycle::Kind::try_from(l.kind)
                    .ok()
                    .map(|k| k.as_str_name()),
                "LIFECYCLE_",
            );
            if l.detail.is_empty() {
                name
            } else {
                format!("{name} {}", l.detail)
            }
        }
        Some(Body::End(end)) => end.state.clone(),
        Some(Body::Error(err)) => format!("code={} {}", err.code, err.description),
        Some(Body::ExecutionStart(start)) => {
            format!("inputs={}", start.input_count.unwrap_or_default())
        }
        _ => String::new(),
    };
    format!("seq={:04} {kind}  {detail}", record.seq)
        .trim_end()
        .to_owned()
}

/// `role: text`, and for an answer that asks for tools, their names (`-> calls time__now`);
/// arguments stay out, as everywhere in these lines.
fn message_line(message: &pb::Message) -> String {
    let calls: Vec<&str> = message
        .parts
        .iter()
        .filter_map(|part| match &part.part {
            Some(pb::part::Part::ToolCall(call)) => Some(call.tool.as_str()),
            _ => None,
        })
        .collect();
    let text = text_of(message);
    match (calls.is_empty(), text.is_empty()) {
        (true, _) => format!("{}: {text}", message.role),
        (false, true) => format!("{}: -> calls {}", message.role, calls.join(", ")),
        (false, false) => format!("{}: {text} -> calls {}", message.role, calls.join(", ")),
    }
}

/// How much of a tool result's text a record line shows.
const RESULT_TEXT_CHARS: usize = 80;

/// `id=<call> ok: "<text>" [image image/png 3.1 KiB] [resource link <uri>] [structured]`: a short
/// summary of what the tool returned (extensions §10), or `id=<call> error: <error>` with the
/// parts that are not text.
fn result_line(result: &pb::ToolResult) -> String {
    let Ok(result) = agentsessions_api::ToolResult::try_from(result.clone()) else {
        return format!("id={} (unreadable result)", result.id);
    };
    let mut texts = Vec::new();
    let mut others = Vec::new();
    for part in &result.content {
        match part {
            Part::Text(text) => texts.push(text.text.clone()),
            Part::File(file) if file.bytes.is_empty() => {
                others.push(format!("[file {} {}]", file.mime, file.uri));
            }
            Part::File(file) => others.push(format!(
                "[{} {} {}]",
                if file.mime.starts_with("image/") {
                    "image"
                } else {
                    "file"
                },
                file.mime,
                size_text(file.bytes.len())
            )),
            Part::Data(data) => {
                let field = |name: &str| data.get(name).and_then(Value::as_str).unwrap_or_default();
                match field("type") {
                    "text" => texts.push(field("text").to_owned()),
                    "image" | "audio" => {
                        others.push(format!("[{} {}]", field("type"), field("mimeType")))
                    }
                    "resource_link" => others.push(format!("[resource link {}]", field("uri"))),
                    "resource" => {
                        let uri = data
                            .get("resource")
                            .and_then(|r| r.get("uri"))
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        others.push(format!("[resource {uri}]"));
                    }
                    _ => others.push("[data]".to_owned()),
                }
            }
            _ => {}
        }
    }
    if result.output.is_some() {
        others.push("[structured]".to_owned());
    }
    let text = texts
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut line = if result.is_error {
        format!("id={} error: {}", result.id, result.error)
    } else if text.is_empty() {
        format!("id={} ok", result.id)
    } else if text.chars().count() > RESULT_TEXT_CHARS {
        let cut: String = text.chars().take(RESULT_TEXT_CHARS).collect();
        format!("id={} ok: {:?}", result.id, format!("{cut}…"))
    } else {
        format!("id={} ok: {text:?}", result.id)
    };
    if !others.is_empty() {
        line.push(' ');
        line.push_str(&others.join(" "));
    }
    line
}

/// A byte count as `512 B`, `3.1 KiB`, `2.0 MiB`.
fn size_text(bytes: usize) -> String {
    #[expect(clippy::cast_precision_loss, reason = "a size shown to one decimal")]
    let size = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KiB", size / 1024.0)
    } else {
        format!("{:.1} MiB", size / (1024.0 * 1024.0))
    }
}

/// One session as `uid last_seq=N compute=LIVE harness=echo name=x` (the `list` line), with
/// ` owner=<subject>` for an owned session and ` deletion=PENDING` for one being deleted.
pub fn session_line(session: &pb::Session) -> String {
    let name = session.metadata.as_ref().map_or("", |m| m.name.as_str());
    let mut line = format!(
        "{} last_seq={} compute={} harness={} name={}",
        uid_of(session),
        session.last_seq,
        compute_name(session),
        session.harness,
        name
    );
    if let Some(owner) = session.owner.as_ref().filter(|o| !o.subject.is_empty()) {
        line.push_str(&format!(" owner={}", owner.subject));
    }
    if session.deletion_state == pb::DeletionState::DeletionPending as i32 {
        line.push_str(" deletion=PENDING");
    }
    line
}

/// A session in detail (the `get` view).
pub fn session_details(session: &pb::Session) -> String {
    let meta = session.metadata.clone().unwrap_or_default();
    let mut lines = vec![
        format!("session   {}", meta.uid),
        format!("project   {}", meta.project),
        format!("name      {}", meta.name),
        format!("harness   {}", session.harness),
        format!("model     {}", session.model),
        format!("exec      {}", exec_name(session)),
        format!("compute   {}", compute_name(session)),
        format!("last_seq  {}", session.last_seq),
    ];
    if !session.parent_uid.is_empty() {
        lines.push(format!(
            "parent    {} @ seq {}",
            session.parent_uid, session.fork_seq
        ));
    }
    if let Some(owner) = session.owner.as_ref().filter(|o| !o.subject.is_empty()) {
        lines.push(format!(
            "owner     {} (issuer {})",
            owner.subject, owner.issuer
        ));
    }
    if let Some(p) = &session.pending_approval {
        lines.push(format!(
            "pending   approval: execution={} tool_call={} request_seq={}",
            p.execution_id, p.tool_call_id, p.request_seq
        ));
    }
    if session.deletion_state == pb::DeletionState::DeletionPending as i32 {
        lines.push("deletion  PENDING".to_owned());
    }
    if let Some(usage) = &session.usage {
        lines.push(format!(
            "usage     input={} output={} cached_input={} reasoning={} tokens",
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens,
            usage.reasoning_tokens
        ));
    }
    lines.join("\n")
}

/// Canonical proto3-JSON of a session, embedded verbatim in `--json` output.
pub fn session_json(session: &pb::Session) -> Box<RawValue> {
    raw(
        agentsessions_wire::canonical::canonical_message(session).ok(),
        "{}",
    )
}

/// A record for `--json`: its envelope around the canonical proto3-JSON of its event.
#[derive(Debug, Serialize)]
pub struct RecordJson {
    /// Its seq.
    pub seq: i64,
    /// The hash of the record before it.
    pub prev_hash: String,
    /// Its content hash.
    pub hash: String,
    /// When it was committed (RFC 3339 UTC); absent for a record stored without a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_time: Option<String>,
    /// The secrets the host took out of the event before journaling it, by name (outside the
    /// hashed event, as the record stores it; absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    /// The event as canonical proto3-JSON (`null` if it has none).
    pub event: Box<RawValue>,
}

/// `record` for `--json`.
pub fn record_json(record: &pb::LogRecord) -> RecordJson {
    let event = record
        .event
        .as_ref()
        .and_then(|e| agentsessions_wire::canonical::canonical_event(e).ok());
    RecordJson {
        seq: record.seq,
        prev_hash: record.prev_hash.clone(),
        hash: record.content_hash.clone(),
        commit_time: time_text(record.commit_time.as_ref()),
        redacted: record
            .event
            .as_ref()
            .map(|e| e.redacted.clone())
            .unwrap_or_default(),
        event: raw(event, "null"),
    }
}

/// Canonical JSON bytes as a raw value, `fallback` when there are none or they are not JSON.
fn raw(bytes: Option<Vec<u8>>, fallback: &str) -> Box<RawValue> {
    bytes
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| RawValue::from_string(text).ok())
        .or_else(|| RawValue::from_string(fallback.to_owned()).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_line_names_the_owner_and_a_pending_deletion() {
        let mut session = pb::Session {
            metadata: Some(pb::ResourceMetadata {
                uid: "s1".into(),
                name: "notes".into(),
                ..pb::ResourceMetadata::default()
            }),
            harness: "echo".into(),
            last_seq: 5,
            ..pb::Session::default()
        };
        let plain = session_line(&session);
        assert!(plain.starts_with("s1 last_seq=5 "), "{plain}");
        assert!(plain.ends_with("harness=echo name=notes"), "{plain}");
        session.owner = Some(pb::CallerIdentity {
            issuer: "https://idp".into(),
            subject: "alice".into(),
        });
        session.deletion_state = pb::DeletionState::DeletionPending as i32;
        assert!(
            session_line(&session).ends_with("name=notes owner=alice deletion=PENDING"),
            "{}",
            session_line(&session)
        );
    }

    // extensions §10: a tool result's line summarizes its content: text (cut), images with
    // their type and size, resource links, structured output.
    #[test]
    fn a_result_line_summarizes_the_content() {
        let result = agentsessions_api::ToolResult {
            id: "c1".into(),
            content: vec![
                Part::Text(agentsessions_api::TextPart {
                    text: "Here's the image\nyou requested:".into(),
                }),
                Part::File(agentsessions_api::FilePart {
                    mime: "image/png".into(),
                    bytes: vec![0; 3200],
                    ..agentsessions_api::FilePart::default()
                }),
                Part::Data(
                    serde_json::json!({"type": "resource_link", "uri": "test://r/1", "name": "r"})
                        .as_object()
                        .cloned()
                        .unwrap(),
                ),
            ],
            output: serde_json::json!({"sum": 3}).as_object().cloned(),
            ..agentsessions_api::ToolResult::default()
        };
        let line = result_line(&pb::ToolResult::from(result));
        assert_eq!(
            line,
            "id=c1 ok: \"Here's the image you requested:\" [image image/png 3.1 KiB] [resource \
             link test://r/1] [structured]"
        );
        let long = agentsessions_api::ToolResult {
            id: "c2".into(),
            content: vec![Part::Text(agentsessions_api::TextPart {
                text: "x".repeat(200),
            })],
            ..agentsessions_api::ToolResult::default()
        };
        let line = result_line(&pb::ToolResult::from(long));
        assert!(
            line.ends_with(&format!("{}…\"", "x".repeat(RESULT_TEXT_CHARS))),
            "{line}"
        );
        let failed = agentsessions_api::ToolResult {
            id: "c3".into(),
            is_error: true,
            error: "nope".into(),
            ..agentsessions_api::ToolResult::default()
        };
        assert_eq!(
            result_line(&pb::ToolResult::from(failed)),
            "id=c3 error: nope"
        );
        assert_eq!(
            result_line(&pb::ToolResult {
                id: "c4".into(),
                ..pb::ToolResult::default()
            }),
            "id=c4 ok"
        );
    }

    #[test]
    fn a_record_line_starts_with_its_commit_time_and_details_show_usage_and_state() {
        let mut record = pb::LogRecord {
            seq: 4,
            event: Some(pb::Event::default()),
            ..pb::LogRecord::default()
        };
        assert!(record_line(&record).starts_with("seq=0004 "));
        let mut time = record.commit_time.unwrap_or_default();
        time.seconds = 1_700_000_000;
        time.nanos = 123_000_000;
        record.commit_time = Some(time);
        let line = record_line(&record);
        assert!(
            line.starts_with("2023-11-14T22:13:20.123Z seq=0004 "),
            "{line}"
        );
        assert_eq!(
            record_json(&record).commit_time.as_deref(),
            Some("2023-11-14T22:13:20.123Z")
        );
        let session = pb::Session {
            exec_state: pb::ExecState::ExecInterrupted as i32,
            usage: Some(pb::UsageTotals {
                input_tokens: 10,
                output_tokens: 5,
                reasoning_tokens: 2,
                cached_input_tokens: 1,
            }),
            ..pb::Session::default()
        };
        let details = session_details(&session);
        assert!(details.contains("exec      INTERRUPTED"), "{details}");
        assert!(
            details.contains("usage     input=10 output=5 cached_input=1 reasoning=2 tokens"),
            "{details}"
        );
    }
}
