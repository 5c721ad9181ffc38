//! Canonical writers for `common.proto`: the event and every message that can appear in it.
//!
//! Each writer lists its fields in JCS order (ascending byte order of the ASCII field names).
//! A oneof member is written at the position its own name sorts to, which is why some writers
//! split a oneof into slots around the other fields.

use super::Canonical;
use super::fields::{
    boolean, bytes, enumeration, int32, int64, member, message, optional_int64, repeated, string,
    string_map,
};
use super::jcs::JcsWriter;
use crate::error::Result;
use crate::pb;
use crate::pb::event::Body;

fn event_kind(v: i32) -> Option<&'static str> {
    pb::EventKind::try_from(v).ok().map(|k| k.as_str_name())
}

fn mediation(v: i32) -> Option<&'static str> {
    pb::Mediation::try_from(v).ok().map(|m| m.as_str_name())
}

fn tool_choice_mode(v: i32) -> Option<&'static str> {
    pb::tool_choice::Mode::try_from(v)
        .ok()
        .map(|m| m.as_str_name())
}

fn tool_result_code(v: i32) -> Option<&'static str> {
    pb::tool_result::Code::try_from(v)
        .ok()
        .map(|c| c.as_str_name())
}

fn lifecycle_kind(v: i32) -> Option<&'static str> {
    pb::lifecycle::Kind::try_from(v)
        .ok()
        .map(|k| k.as_str_name())
}

/// Where the body member of an event sorts among the event's other fields.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BodySlot {
    /// `approval`, `approval_result`, `end`, `error`: before `execution_id`.
    BeforeExecutionId,
    /// `execution_start`: between `execution_id` and `kind`.
    BeforeKind,
    /// `lifecycle`, `message`, `model`, `parked`, `result`: between `kind` and `schema_version`.
    BeforeSchemaVersion,
    /// `tool`: between `schema_version` and `ts`.
    BeforeTs,
    /// `usage`: last.
    Last,
}

fn body_slot(body: &Body) -> BodySlot {
    match body {
        Body::Approval(_) | Body::ApprovalResult(_) | Body::End(_) | Body::Error(_) => {
            BodySlot::BeforeExecutionId
        }
        Body::ExecutionStart(_) => BodySlot::BeforeKind,
        Body::Lifecycle(_)
        | Body::Message(_)
        | Body::Model(_)
        | Body::Parked(_)
        | Body::Result(_) => BodySlot::BeforeSchemaVersion,
        Body::Tool(_) => BodySlot::BeforeTs,
        Body::Usage(_) | Body::MintRequest(_) => BodySlot::Last,
    }
}

fn write_body(w: &mut JcsWriter, body: &Body) -> Result<()> {
    match body {
        Body::Message(m) => member(w, "message", m),
        Body::Model(m) => member(w, "model", m),
        Body::Tool(m) => member(w, "tool", m),
        Body::Result(m) => member(w, "result", m),
        Body::Approval(m) => member(w, "approval", m),
        Body::ApprovalResult(m) => member(w, "approval_result", m),
        Body::Usage(m) => member(w, "usage", m),
        Body::Lifecycle(m) => member(w, "lifecycle", m),
        Body::End(m) => member(w, "end", m),
        Body::Error(m) => member(w, "error", m),
        Body::ExecutionStart(m) => member(w, "execution_start", m),
        Body::Parked(m) => member(w, "parked", m),
        Body::MintRequest(_) => Err(crate::error::WireError::ConnectOnly {
            body: "mint_request",
        }),
    }
}

impl Canonical for pb::Event {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        let slot = self.body.as_ref().map(|b| (body_slot(b), b));
        let body_at = |w: &mut JcsWriter, here: BodySlot| match slot {
            Some((s, body)) if s == here => write_body(w, body),
            _ => Ok(()),
        };
        w.begin_object();
        message(w, "actor", self.actor.as_ref())?;
        body_at(w, BodySlot::BeforeExecutionId)?;
        string(w, "execution_id", &self.execution_id);
        body_at(w, BodySlot::BeforeKind)?;
        enumeration(w, "kind", self.kind, event_kind);
        body_at(w, BodySlot::BeforeSchemaVersion)?;
        int32(w, "schema_version", self.schema_version);
        body_at(w, BodySlot::BeforeTs)?;
        message(w, "ts", self.ts.as_ref())?;
        body_at(w, BodySlot::Last)?;
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::IdentityRef {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "issuer", &self.issuer);
        string(w, "principal", &self.principal);
        string(w, "subject", &self.subject);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::Message {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        repeated(w, "parts", &self.parts)?;
        string(w, "role", &self.role);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::Part {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        use pb::part::Part;
        w.begin_object();
        match &self.part {
            None => {}
            Some(Part::Text(p)) => member(w, "text", p)?,
            Some(Part::File(p)) => member(w, "file", p)?,
            Some(Part::Data(p)) => member(w, "data", p)?,
            Some(Part::Reasoning(p)) => member(w, "reasoning", p)?,
            Some(Part::ToolCall(p)) => member(w, "tool_call", p)?,
            Some(Part::ToolResult(p)) => member(w, "tool_result", p)?,
        }
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::TextPart {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "text", &self.text);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::FilePart {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        use pb::file_part::Source;
        w.begin_object();
        if let Some(Source::Bytes(b)) = &self.source {
            w.field("bytes");
            w.base64(b);
        }
        string(w, "digest", &self.digest);
        string(w, "mime", &self.mime);
        string(w, "name", &self.name);
        if let Some(Source::Uri(u)) = &self.source {
            w.field("uri");
            w.string(u);
        }
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::DataPart {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        message(w, "data", self.data.as_ref())?;
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ReasoningPart {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        use pb::reasoning_part::Opaque;
        w.begin_object();
        string(w, "item_id", &self.item_id);
        string(w, "model_id", &self.model_id);
        if let Some(Opaque::OpaqueBytes(b)) = &self.opaque {
            w.field("opaque_bytes");
            w.base64(b);
        }
        string(w, "opaque_digest", &self.opaque_digest);
        if let Some(Opaque::OpaqueUri(u)) = &self.opaque {
            w.field("opaque_uri");
            w.string(u);
        }
        int32(w, "ordinal", self.ordinal);
        string(w, "provider", &self.provider);
        repeated(w, "summary", &self.summary)?;
        string(w, "validity_scope", &self.validity_scope);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ModelCall {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "id", &self.id);
        string(w, "input_hash", &self.input_hash);
        repeated(w, "messages", &self.messages)?;
        string(w, "model", &self.model);
        string_map(w, "params", &self.params);
        message(w, "tool_choice", self.tool_choice.as_ref())?;
        repeated(w, "tools", &self.tools)?;
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ToolDefinition {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "description", &self.description);
        message(w, "input_schema", self.input_schema.as_ref())?;
        string(w, "name", &self.name);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ToolChoice {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        enumeration(w, "mode", self.mode, tool_choice_mode);
        string(w, "name", &self.name);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::Usage {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        int64(w, "cached_input_tokens", self.cached_input_tokens);
        int64(w, "input_tokens", self.input_tokens);
        string(w, "model", &self.model);
        int64(w, "output_tokens", self.output_tokens);
        int64(w, "reasoning_tokens", self.reasoning_tokens);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ToolCall {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        message(w, "args", self.args.as_ref())?;
        string(w, "id", &self.id);
        string(w, "idempotency_key", &self.idempotency_key);
        enumeration(w, "mediation", self.mediation, mediation);
        string(w, "tool", &self.tool);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ToolResult {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        int64(w, "approval_decision_seq", self.approval_decision_seq);
        int64(w, "approval_request_seq", self.approval_request_seq);
        enumeration(w, "code", self.code, tool_result_code);
        repeated(w, "content", &self.content)?;
        string(w, "error", &self.error);
        string(w, "id", &self.id);
        boolean(w, "is_error", self.is_error);
        message(w, "output", self.output.as_ref())?;
        string(w, "output_digest", &self.output_digest);
        string(w, "output_uri", &self.output_uri);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ApprovalRequest {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "reason", &self.reason);
        string(w, "tool_call_id", &self.tool_call_id);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ApprovalResult {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        boolean(w, "approved", self.approved);
        string(w, "reason", &self.reason);
        int64(w, "request_seq", self.request_seq);
        string(w, "tool_call_id", &self.tool_call_id);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ApprovalRef {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "execution_id", &self.execution_id);
        int64(w, "request_seq", self.request_seq);
        string(w, "tool_call_id", &self.tool_call_id);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::Lifecycle {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "compute_instance", &self.compute_instance);
        string(w, "detail", &self.detail);
        enumeration(w, "kind", self.kind, lifecycle_kind);
        string(w, "snapshot_external_uri", &self.snapshot_external_uri);
        string(w, "snapshot_local", &self.snapshot_local);
        boolean(w, "snapshot_memory", self.snapshot_memory);
        boolean(w, "snapshot_sealed", self.snapshot_sealed);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::HarnessEnd {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        message(w, "error", self.error.as_ref())?;
        string(w, "state", &self.state);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::Error {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        int32(w, "code", self.code);
        string(w, "description", &self.description);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ExecutionStart {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "compute_instance", &self.compute_instance);
        bytes(w, "config", &self.config);
        string(w, "harness", &self.harness);
        string(w, "harness_version", &self.harness_version);
        optional_int64(w, "input_count", self.input_count);
        string(w, "model", &self.model);
        int64(w, "resume_from_seq", self.resume_from_seq);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::Origin {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string_map(w, "attributes", &self.attributes);
        string(w, "source", &self.source);
        string(w, "subject", &self.subject);
        string(w, "uri", &self.uri);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ResourceMetadata {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        message(w, "create_time", self.create_time.as_ref())?;
        string(w, "name", &self.name);
        string(w, "project", &self.project);
        string(w, "uid", &self.uid);
        message(w, "update_time", self.update_time.as_ref())?;
        int64(w, "version", self.version);
        w.end_object();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::canonical_message;

    fn text<M: Canonical>(m: &M) -> String {
        String::from_utf8(canonical_message(m).unwrap()).unwrap()
    }

    fn event(body: Body) -> pb::Event {
        pb::Event {
            body: Some(body),
            ..Default::default()
        }
    }

    #[test]
    fn default_event_is_an_empty_object() {
        assert_eq!(text(&pb::Event::default()), "{}");
    }

    // hashing (a) step 2: a set message is written even when all its fields are default.
    #[test]
    fn set_empty_messages_are_written_as_empty_objects() {
        assert_eq!(
            text(&event(Body::ExecutionStart(pb::ExecutionStart::default()))),
            r#"{"execution_start":{}}"#
        );
        let part = pb::Part {
            part: Some(pb::part::Part::Text(pb::TextPart::default())),
        };
        let message = pb::Message {
            role: String::new(),
            parts: vec![part, pb::Part::default()],
        };
        assert_eq!(text(&message), r#"{"parts":[{"text":{}},{}]}"#);
        let call = pb::ToolCall {
            args: Some(prost_types::Struct::default()),
            ..Default::default()
        };
        assert_eq!(text(&call), r#"{"args":{}}"#);
        let end = pb::HarnessEnd {
            error: Some(pb::Error::default()),
            ..Default::default()
        };
        assert_eq!(text(&end), r#"{"error":{}}"#);
        let ev = pb::Event {
            actor: Some(pb::IdentityRef::default()),
            ts: Some(prost_types::Timestamp::default()),
            ..Default::default()
        };
        assert_eq!(text(&ev), r#"{"actor":{},"ts":"1970-01-01T00:00:00Z"}"#);
    }

    // hashing (a) step 2: a proto3 `optional` scalar is written whenever set, zero included.
    #[test]
    fn optional_zero_is_written() {
        let start = |input_count| pb::ExecutionStart {
            input_count,
            ..Default::default()
        };
        assert_eq!(text(&start(None)), "{}");
        assert_eq!(text(&start(Some(0))), r#"{"input_count":"0"}"#);
        assert_eq!(text(&start(Some(-1))), r#"{"input_count":"-1"}"#);
    }

    // Implicit-presence scalars at their defaults are omitted.
    #[test]
    fn default_scalars_are_omitted() {
        let result = pb::ToolResult {
            is_error: false,
            code: 0,
            approval_request_seq: 0,
            ..Default::default()
        };
        assert_eq!(text(&result), "{}");
        assert_eq!(text(&pb::Error::default()), "{}");
        assert_eq!(text(&pb::ReasoningPart::default()), "{}");
    }

    // A set oneof member has presence, so even its default value is written.
    #[test]
    fn set_oneof_members_are_written_even_when_default() {
        use pb::file_part::Source;
        use pb::reasoning_part::Opaque;
        let file = |source| pb::FilePart {
            source,
            ..Default::default()
        };
        assert_eq!(
            text(&file(Some(Source::Bytes(Vec::new())))),
            r#"{"bytes":""}"#
        );
        assert_eq!(
            text(&file(Some(Source::Uri(String::new())))),
            r#"{"uri":""}"#
        );
        let reasoning = |opaque| pb::ReasoningPart {
            opaque,
            opaque_digest: "d".into(),
            ..Default::default()
        };
        assert_eq!(
            text(&reasoning(Some(Opaque::OpaqueBytes(vec![0xff])))),
            r#"{"opaque_bytes":"/w==","opaque_digest":"d"}"#
        );
        assert_eq!(
            text(&reasoning(Some(Opaque::OpaqueUri("u".into())))),
            r#"{"opaque_digest":"d","opaque_uri":"u"}"#
        );
    }

    // proto3-JSON: an enum number without a name in this build is written as a number.
    #[test]
    fn unknown_enum_numbers_are_written_as_numbers() {
        let ev = pb::Event {
            kind: 99,
            ..Default::default()
        };
        assert_eq!(text(&ev), r#"{"kind":99}"#);
        let call = pb::ToolCall {
            mediation: -4,
            ..Default::default()
        };
        assert_eq!(text(&call), r#"{"mediation":-4}"#);
        let result = pb::ToolResult {
            code: 3,
            ..Default::default()
        };
        assert_eq!(text(&result), r#"{"code":3}"#);
        let lifecycle = pb::Lifecycle {
            kind: pb::lifecycle::Kind::LifecycleDelete as i32,
            ..Default::default()
        };
        assert_eq!(text(&lifecycle), r#"{"kind":"LIFECYCLE_DELETE"}"#);
    }

    // Each body member lands at its own sorted position among the event's fields (the writer's
    // debug assertion checks the order; this pins a few positions explicitly).
    #[test]
    fn body_members_sort_among_event_fields() {
        let ev = |body| pb::Event {
            execution_id: "x".into(),
            kind: 1,
            schema_version: 1,
            ts: Some(prost_types::Timestamp::default()),
            body: Some(body),
            actor: None,
            redacted: Vec::new(),
        };
        assert_eq!(
            text(&ev(Body::End(pb::HarnessEnd::default()))),
            r#"{"end":{},"execution_id":"x","kind":"EVENT_INPUT","schema_version":1,"ts":"1970-01-01T00:00:00Z"}"#
        );
        assert_eq!(
            text(&ev(Body::Tool(pb::ToolCall::default()))),
            r#"{"execution_id":"x","kind":"EVENT_INPUT","schema_version":1,"tool":{},"ts":"1970-01-01T00:00:00Z"}"#
        );
        assert_eq!(
            text(&ev(Body::Usage(pb::Usage::default()))),
            r#"{"execution_id":"x","kind":"EVENT_INPUT","schema_version":1,"ts":"1970-01-01T00:00:00Z","usage":{}}"#
        );
    }
}
