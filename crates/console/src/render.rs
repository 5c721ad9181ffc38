//! The JSON the API answers with. Sessions and events are their canonical proto3-JSON (proto
//! field names, enum names, `int64` as strings: the form the chain's hashes are defined on), so
//! what a script reads here is what `agentctl --json` prints and what an auditor hashes.

use agentsessions_api::{Action, JsonObject, Part};
use agentsessions_wire::canonical::{Canonical, canonical_event, canonical_message};
use agentsessions_wire::pb;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// A message as canonical JSON, `fallback` when it cannot be represented.
pub(crate) fn canonical<T: Canonical>(message: &T, fallback: &str) -> Box<RawValue> {
    raw(canonical_message(message).ok(), fallback)
}

fn raw(bytes: Option<Vec<u8>>, fallback: &str) -> Box<RawValue> {
    bytes
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| RawValue::from_string(text).ok())
        .or_else(|| RawValue::from_string(fallback.to_owned()).ok())
        .unwrap_or_default()
}

/// A wire time as RFC 3339 UTC text; `None` when unset or out of range.
pub(crate) fn time_text(time: Option<&prost_types::Timestamp>) -> Option<String> {
    let quoted = canonical_message(time?).ok()?;
    let text = String::from_utf8(quoted).ok()?;
    Some(text.trim_matches('"').to_owned())
}

/// One record: its envelope around the canonical JSON of its event.
#[derive(Debug, Serialize)]
pub(crate) struct RecordJson {
    pub(crate) seq: i64,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
    /// When it was committed (RFC 3339 UTC); absent for a record stored without a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) commit_time: Option<String>,
    pub(crate) event: Box<RawValue>,
    /// For a TOOL_RESULT: its content as the console draws it (extensions §10).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tool_content: Vec<ContentView>,
}

impl From<&pb::LogRecord> for RecordJson {
    fn from(record: &pb::LogRecord) -> Self {
        let event = record
            .event
            .as_ref()
            .and_then(|event| canonical_event(event).ok());
        Self {
            seq: record.seq,
            prev_hash: record.prev_hash.clone(),
            hash: record.content_hash.clone(),
            commit_time: time_text(record.commit_time.as_ref()),
            event: raw(event, "null"),
            tool_content: match record.event.as_ref().and_then(|e| e.body.as_ref()) {
                Some(pb::event::Body::Result(result)) => content_views(result),
                _ => Vec::new(),
            },
        }
    }
}

/// The largest image the console shows inline, as a `data:` URL in the record's JSON; a larger
/// one is listed with its type and size.
pub(crate) const MAX_SHOWN_IMAGE_BYTES: usize = 256 * 1024;

/// The image types the console shows inline (raster formats only).
const SHOWN_IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// How much of an embedded text resource the console shows.
const SHOWN_RESOURCE_TEXT_BYTES: usize = 64 * 1024;

/// One piece of a tool result as the console draws it (extensions §10).
#[derive(Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum ContentView {
    /// Text.
    Text { text: String },
    /// An image: `src` is a `data:` URL when it is a raster type within
    /// [`MAX_SHOWN_IMAGE_BYTES`], absent otherwise.
    Image {
        mime: String,
        bytes: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        src: Option<String>,
    },
    /// Another file (audio, a document), inline or by URI: never its bytes.
    File {
        mime: String,
        name: String,
        uri: String,
        bytes: usize,
    },
    /// A link to a resource, with its MIME type.
    ResourceLink {
        name: String,
        uri: String,
        mime: String,
        description: String,
    },
    /// An embedded resource: its text (cut at [`SHOWN_RESOURCE_TEXT_BYTES`]), or the size of its
    /// binary content.
    Resource {
        uri: String,
        mime: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        bytes: usize,
    },
    /// Structured content (the result's output, or a data part of no known kind), drawn as
    /// collapsible JSON.
    Json { label: &'static str, value: Value },
}

/// The pieces of a tool result, in order, then its structured output.
fn content_views(result: &pb::ToolResult) -> Vec<ContentView> {
    let Ok(result) = agentsessions_api::ToolResult::try_from(result.clone()) else {
        return Vec::new();
    };
    let mut views: Vec<ContentView> = result.content.iter().filter_map(part_view).collect();
    if let Some(output) = result.output {
        views.push(ContentView::Json {
            label: "structured content",
            value: Value::Object(output),
        });
    }
    views
}

fn part_view(part: &Part) -> Option<ContentView> {
    Some(match part {
        Part::Text(text) => ContentView::Text {
            text: text.text.clone(),
        },
        Part::File(file) if file.mime.starts_with("image/") && !file.bytes.is_empty() => {
            image_view(&file.mime, &file.bytes)
        }
        Part::File(file) => ContentView::File {
            mime: file.mime.clone(),
            name: file.name.clone(),
            uri: file.uri.clone(),
            bytes: file.bytes.len(),
        },
        Part::Data(data) => data_view(data),
        Part::Reasoning(_) | Part::ToolCall(_) | Part::ToolResult(_) | Part::Empty => return None,
    })
}

fn image_view(mime: &str, bytes: &[u8]) -> ContentView {
    let shown = SHOWN_IMAGE_TYPES.contains(&mime) && bytes.len() <= MAX_SHOWN_IMAGE_BYTES;
    ContentView::Image {
        mime: mime.to_owned(),
        bytes: bytes.len(),
        src: shown.then(|| format!("data:{mime};base64,{}", STANDARD.encode(bytes))),
    }
}

/// A data part: an MCP content block kept whole (a resource, a link, an annotated block) by its
/// `type`; anything else as JSON.
fn data_view(data: &JsonObject) -> ContentView {
    let field = |object: &JsonObject, name: &str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match data.get("type").and_then(Value::as_str) {
        Some("text") => ContentView::Text {
            text: field(data, "text"),
        },
        Some("image") => match STANDARD.decode(field(data, "data")) {
            Ok(bytes) => image_view(&field(data, "mimeType"), &bytes),
            Err(_) => json_view(data),
        },
        Some("resource_link") => ContentView::ResourceLink {
            name: field(data, "name"),
            uri: field(data, "uri"),
            mime: field(data, "mimeType"),
            description: field(data, "description"),
        },
        Some("resource") => match data.get("resource") {
            Some(Value::Object(resource)) => {
                let text = resource.get("text").and_then(Value::as_str).map(|text| {
                    let mut end = text.len().min(SHOWN_RESOURCE_TEXT_BYTES);
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text[..end].to_owned()
                });
                let bytes = match &text {
                    Some(_) => resource
                        .get("text")
                        .and_then(Value::as_str)
                        .map_or(0, str::len),
                    None => STANDARD
                        .decode(field(resource, "blob"))
                        .map_or(0, |blob| blob.len()),
                };
                ContentView::Resource {
                    uri: field(resource, "uri"),
                    mime: field(resource, "mimeType"),
                    text,
                    bytes,
                }
            }
            _ => json_view(data),
        },
        _ => json_view(data),
    }
}

fn json_view(data: &JsonObject) -> ContentView {
    ContentView::Json {
        label: "data",
        value: Value::Object(data.clone()),
    }
}

/// A session and what the caller may do to it.
#[derive(Debug, Serialize)]
pub(crate) struct SessionView {
    pub(crate) session: Box<RawValue>,
    /// The actions the caller may take (`read`, `approve`, `cancel` …), by their policy names.
    pub(crate) permissions: Vec<&'static str>,
    /// For a turn that has not ended, what state it is in and what moves it on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_step: Option<NextStep>,
}

impl SessionView {
    pub(crate) fn new(session: &pb::Session, permissions: &[Action]) -> Self {
        Self {
            session: canonical(session, "{}"),
            permissions: permissions.iter().map(|action| action.as_str()).collect(),
            next_step: NextStep::of(session),
        }
    }
}

/// What a session whose turn has not ended is waiting for, and the one action that moves it on
/// (extensions §9). The console draws it above the session's records.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub(crate) struct NextStep {
    /// `RUNNING`, `AWAITING` or `INTERRUPTED`.
    pub(crate) state: &'static str,
    /// What the state means, in a sentence.
    pub(crate) says: &'static str,
    /// The action that moves the turn on: `cancel`, `decide` or `resume`.
    pub(crate) action: &'static str,
    /// The way to drop the turn instead, when there is one: `abandon` (a Cancel: its open tool
    /// calls are recorded as outcome unknown, or not run, and it ends CANCELED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) instead: Option<&'static str>,
}

impl NextStep {
    /// The next step of `session`; `None` when its last turn has ended (or none began).
    pub(crate) fn of(session: &pb::Session) -> Option<Self> {
        match pb::ExecState::try_from(session.exec_state).ok()? {
            pb::ExecState::ExecRunning => Some(Self {
                state: "RUNNING",
                says: "A turn is running on the host.",
                action: "cancel",
                instead: None,
            }),
            pb::ExecState::ExecAwaiting => Some(Self {
                state: "AWAITING",
                says: "The turn waits for a decision on a tool call: approve or deny it (the turn \
                       then runs on), or abandon the turn (the call does not run).",
                action: "decide",
                instead: Some("abandon"),
            }),
            pb::ExecState::ExecInterrupted => Some(Self {
                state: "INTERRUPTED",
                says: "The turn stopped before it ended (its host went away, it failed, or its \
                       approval was decided and it was not run on yet): resume runs it on, \
                       calling no recorded effect twice; abandon closes it, recording its open \
                       tool calls as outcome unknown.",
                action: "resume",
                instead: Some("abandon"),
            }),
            pb::ExecState::Unspecified
            | pb::ExecState::ExecPending
            | pb::ExecState::ExecCompleted
            | pb::ExecState::ExecFailed
            | pb::ExecState::ExecCanceled => None,
        }
    }
}

/// A pending approval, and whether the caller may decide it.
#[derive(Debug, Serialize)]
pub(crate) struct ApprovalJson {
    pub(crate) session_uid: String,
    pub(crate) execution_id: String,
    pub(crate) tool_call_id: String,
    pub(crate) request_seq: i64,
    pub(crate) tool: String,
    /// The tool call's arguments as JSON.
    pub(crate) args: Box<RawValue>,
    pub(crate) reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) requested_at: Option<String>,
    pub(crate) project: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<Box<RawValue>>,
    pub(crate) can_decide: bool,
}

impl ApprovalJson {
    pub(crate) fn new(approval: pb::PendingApproval, can_decide: bool) -> Self {
        let args = approval
            .args
            .as_ref()
            .map_or_else(|| raw(None, "{}"), |args| canonical(args, "{}"));
        Self {
            args,
            requested_at: time_text(approval.requested_at.as_ref()),
            owner: approval
                .owner
                .as_ref()
                .filter(|owner| !owner.subject.is_empty())
                .map(|owner| canonical(owner, "null")),
            session_uid: approval.session_uid,
            execution_id: approval.execution_id,
            tool_call_id: approval.tool_call_id,
            request_seq: approval.request_seq,
            tool: approval.tool,
            reason: approval.reason,
            project: approval.project,
            can_decide,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_carry_their_commit_time_and_canonical_event() {
        let record = pb::LogRecord {
            seq: 3,
            prev_hash: "aa".into(),
            content_hash: "bb".into(),
            event: Some(pb::Event {
                kind: pb::EventKind::EventOutput as i32,
                ..pb::Event::default()
            }),
            commit_time: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 5_000_000,
            }),
            ..pb::LogRecord::default()
        };
        let json = serde_json::to_value(RecordJson::from(&record)).unwrap();
        assert_eq!(json["seq"], 3);
        assert_eq!(json["commit_time"], "2023-11-14T22:13:20.005Z");
        assert_eq!(json["event"]["kind"], "EVENT_OUTPUT");
    }

    // extensions §10: a TOOL_RESULT record carries its content as the console draws it: text,
    // an image as a data URL (raster types within the cap only), a resource link with its MIME
    // type, an embedded resource, structured content as JSON.
    #[test]
    fn tool_results_carry_their_content_views() {
        let data = |value: serde_json::Value| Part::Data(value.as_object().cloned().unwrap());
        let image = |mime: &str, len: usize| {
            Part::File(agentsessions_api::FilePart {
                mime: mime.into(),
                bytes: vec![7; len],
                ..agentsessions_api::FilePart::default()
            })
        };
        let result = agentsessions_api::ToolResult {
            id: "c1".into(),
            content: vec![
                Part::Text(agentsessions_api::TextPart {
                    text: "look".into(),
                }),
                image("image/png", 3),
                image("image/svg+xml", 3),
                image("image/png", MAX_SHOWN_IMAGE_BYTES + 1),
                data(
                    serde_json::json!({"type": "resource_link", "uri": "test://r/1",
                    "name": "r1", "mimeType": "application/gzip"}),
                ),
                data(serde_json::json!({"type": "resource", "resource":
                    {"uri": "test://r/2", "mimeType": "text/plain", "text": "hello"}})),
                data(serde_json::json!({"type": "text", "text": "annotated",
                    "annotations": {"priority": 1}})),
            ],
            output: serde_json::json!({"temp": 21}).as_object().cloned(),
            ..agentsessions_api::ToolResult::default()
        };
        let record = pb::LogRecord {
            seq: 5,
            event: Some(pb::Event {
                kind: pb::EventKind::EventToolResult as i32,
                body: Some(pb::event::Body::Result(result.into())),
                ..pb::Event::default()
            }),
            ..pb::LogRecord::default()
        };
        let json = serde_json::to_value(RecordJson::from(&record)).unwrap();
        let views = json["tool_content"].as_array().unwrap();
        let kinds: Vec<&str> = views.iter().map(|v| v["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "text",
                "image",
                "image",
                "image",
                "resource_link",
                "resource",
                "text",
                "json"
            ]
        );
        assert_eq!(views[1]["src"], "data:image/png;base64,BwcH");
        assert!(views[2].get("src").is_none(), "not a raster type");
        assert!(views[3].get("src").is_none(), "over the cap");
        assert_eq!(views[3]["bytes"], MAX_SHOWN_IMAGE_BYTES + 1);
        assert_eq!(views[4]["mime"], "application/gzip");
        assert_eq!(views[4]["uri"], "test://r/1");
        assert_eq!(views[5]["text"], "hello");
        assert_eq!(views[6]["text"], "annotated");
        assert_eq!(
            views[7]["value"]["temp"], 21.0,
            "numbers are doubles on the wire"
        );
        let other = pb::LogRecord {
            event: Some(pb::Event::default()),
            ..pb::LogRecord::default()
        };
        let json = serde_json::to_value(RecordJson::from(&other)).unwrap();
        assert!(json.get("tool_content").is_none());
    }

    // extensions §9: a session whose turn has not ended says what it
    // waits for and the action that moves it on; one whose turn ended says nothing.
    #[test]
    fn unfinished_turns_name_their_next_step() {
        let step = |state: pb::ExecState| {
            NextStep::of(&pb::Session {
                exec_state: state as i32,
                ..pb::Session::default()
            })
            .map(|step| (step.state, step.action, step.instead))
        };
        assert_eq!(
            step(pb::ExecState::ExecAwaiting),
            Some(("AWAITING", "decide", Some("abandon")))
        );
        assert_eq!(
            step(pb::ExecState::ExecInterrupted),
            Some(("INTERRUPTED", "resume", Some("abandon")))
        );
        assert_eq!(
            step(pb::ExecState::ExecRunning),
            Some(("RUNNING", "cancel", None))
        );
        for ended in [
            pb::ExecState::ExecCompleted,
            pb::ExecState::ExecCanceled,
            pb::ExecState::ExecFailed,
            pb::ExecState::ExecPending,
        ] {
            assert_eq!(step(ended), None);
        }
        let view = SessionView::new(
            &pb::Session {
                exec_state: pb::ExecState::ExecInterrupted as i32,
                ..pb::Session::default()
            },
            &[Action::Resume],
        );
        let json = serde_json::to_value(view).unwrap();
        assert_eq!(json["next_step"]["action"], "resume");
    }
}
