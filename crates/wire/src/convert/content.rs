//! Content: messages, parts, tool calls and results, mediation, identity refs, approvals and
//! streaming deltas.

use agentsessions_api::{
    ApprovalDecision, ApprovalRef, ApprovalRequest, ApprovalResult, Delta, FilePart, IdentityRef,
    Mediation, Message, Part, ReasoningPart, TextPart, ToolCall, ToolResult, ToolResultCode,
};

use super::json::{opt_struct_from_pb, struct_from_pb, struct_to_pb};
use super::{enum_from_pb, vec_from_pb};
use crate::error::{Result, WireError};
use crate::pb;

// ---- Message and Part ----

impl From<Message> for pb::Message {
    fn from(m: Message) -> Self {
        Self {
            role: m.role,
            parts: m.parts.into_iter().map(Into::into).collect(),
        }
    }
}

impl TryFrom<pb::Message> for Message {
    type Error = WireError;

    fn try_from(m: pb::Message) -> Result<Self> {
        Ok(Self {
            role: m.role,
            parts: vec_from_pb(m.parts, "parts")?,
        })
    }
}

/// [`Part::Empty`] becomes a `Part` with no member; every other kind fills its one member.
impl From<Part> for pb::Part {
    fn from(p: Part) -> Self {
        use pb::part::Part as Member;
        let member = match p {
            Part::Text(t) => Some(Member::Text(t.into())),
            Part::File(f) => Some(Member::File(f.into())),
            Part::Data(data) => Some(Member::Data(pb::DataPart {
                data: Some(struct_to_pb(data)),
            })),
            Part::Reasoning(r) => Some(Member::Reasoning(r.into())),
            Part::ToolCall(c) => Some(Member::ToolCall(c.into())),
            Part::ToolResult(r) => Some(Member::ToolResult(r.into())),
            Part::Empty => None,
        };
        Self { part: member }
    }
}

/// A `Part` with no member, and a `DataPart` whose `data` is unset (the reference converter reads
/// both as a part with nothing set), become [`Part::Empty`].
impl TryFrom<pb::Part> for Part {
    type Error = WireError;

    fn try_from(p: pb::Part) -> Result<Self> {
        use pb::part::Part as Member;
        Ok(match p.part {
            None => Self::Empty,
            Some(Member::Text(t)) => Self::Text(t.into()),
            Some(Member::File(f)) => Self::File(f.into()),
            Some(Member::Data(pb::DataPart { data: None })) => Self::Empty,
            Some(Member::Data(pb::DataPart { data: Some(data) })) => {
                Self::Data(struct_from_pb(data).map_err(|e| e.within("data").within("data"))?)
            }
            Some(Member::Reasoning(r)) => {
                Self::Reasoning(ReasoningPart::try_from(r).map_err(|e| e.within("reasoning"))?)
            }
            Some(Member::ToolCall(c)) => {
                Self::ToolCall(ToolCall::try_from(c).map_err(|e| e.within("tool_call"))?)
            }
            Some(Member::ToolResult(r)) => {
                Self::ToolResult(ToolResult::try_from(r).map_err(|e| e.within("tool_result"))?)
            }
        })
    }
}

impl From<TextPart> for pb::TextPart {
    fn from(t: TextPart) -> Self {
        Self { text: t.text }
    }
}

impl From<pb::TextPart> for TextPart {
    fn from(t: pb::TextPart) -> Self {
        Self { text: t.text }
    }
}

/// `source` is `bytes` when the bytes are non-empty, else `uri` when non-empty, else unset.
impl From<FilePart> for pb::FilePart {
    fn from(f: FilePart) -> Self {
        use pb::file_part::Source;
        let source = if !f.bytes.is_empty() {
            Some(Source::Bytes(f.bytes))
        } else if !f.uri.is_empty() {
            Some(Source::Uri(f.uri))
        } else {
            None
        };
        Self {
            mime: f.mime,
            source,
            name: f.name,
            digest: f.digest,
        }
    }
}

impl From<pb::FilePart> for FilePart {
    fn from(f: pb::FilePart) -> Self {
        use pb::file_part::Source;
        let (bytes, uri) = match f.source {
            Some(Source::Bytes(bytes)) => (bytes, String::new()),
            Some(Source::Uri(uri)) => (Vec::new(), uri),
            None => (Vec::new(), String::new()),
        };
        Self {
            mime: f.mime,
            bytes,
            uri,
            digest: f.digest,
            name: f.name,
        }
    }
}

/// `opaque` is `opaque_bytes` when non-empty, else `opaque_uri` when non-empty, else unset.
impl From<ReasoningPart> for pb::ReasoningPart {
    fn from(r: ReasoningPart) -> Self {
        use pb::reasoning_part::Opaque;
        let opaque = if !r.opaque.is_empty() {
            Some(Opaque::OpaqueBytes(r.opaque))
        } else if !r.opaque_uri.is_empty() {
            Some(Opaque::OpaqueUri(r.opaque_uri))
        } else {
            None
        };
        Self {
            provider: r.provider,
            model_id: r.model_id,
            opaque,
            summary: r.summary.into_iter().map(Into::into).collect(),
            item_id: r.item_id,
            ordinal: r.ordinal,
            validity_scope: r.validity_scope,
            opaque_digest: r.opaque_digest,
        }
    }
}

impl TryFrom<pb::ReasoningPart> for ReasoningPart {
    type Error = WireError;

    fn try_from(r: pb::ReasoningPart) -> Result<Self> {
        use pb::reasoning_part::Opaque;
        let (opaque, opaque_uri) = match r.opaque {
            Some(Opaque::OpaqueBytes(bytes)) => (bytes, String::new()),
            Some(Opaque::OpaqueUri(uri)) => (Vec::new(), uri),
            None => (Vec::new(), String::new()),
        };
        Ok(Self {
            provider: r.provider,
            model_id: r.model_id,
            opaque,
            opaque_uri,
            opaque_digest: r.opaque_digest,
            summary: vec_from_pb(r.summary, "summary")?,
            item_id: r.item_id,
            ordinal: r.ordinal,
            validity_scope: r.validity_scope,
        })
    }
}

// ---- Tools ----

impl From<Mediation> for pb::Mediation {
    fn from(m: Mediation) -> Self {
        match m {
            Mediation::Unspecified => Self::Unspecified,
            Mediation::InHarnessReported => Self::InHarnessReported,
            Mediation::ControllerMediated => Self::ControllerMediated,
            Mediation::RequiresApproval => Self::RequiresApproval,
        }
    }
}

impl From<pb::Mediation> for Mediation {
    fn from(m: pb::Mediation) -> Self {
        match m {
            pb::Mediation::Unspecified => Self::Unspecified,
            pb::Mediation::InHarnessReported => Self::InHarnessReported,
            pb::Mediation::ControllerMediated => Self::ControllerMediated,
            pb::Mediation::RequiresApproval => Self::RequiresApproval,
        }
    }
}

/// Reads a `Mediation` field by number.
pub(super) fn mediation_from_pb(value: i32, field: &str) -> Result<Mediation> {
    enum_from_pb::<pb::Mediation>(value, field, "agentsessions.v1.Mediation").map(Into::into)
}

impl From<ToolCall> for pb::ToolCall {
    fn from(c: ToolCall) -> Self {
        Self {
            id: c.id,
            tool: c.tool,
            args: c.args.map(struct_to_pb),
            mediation: pb::Mediation::from(c.mediation).into(),
            idempotency_key: c.idempotency_key,
        }
    }
}

impl TryFrom<pb::ToolCall> for ToolCall {
    type Error = WireError;

    fn try_from(c: pb::ToolCall) -> Result<Self> {
        Ok(Self {
            id: c.id,
            tool: c.tool,
            args: opt_struct_from_pb(c.args, "args")?,
            mediation: mediation_from_pb(c.mediation, "mediation")?,
            idempotency_key: c.idempotency_key,
        })
    }
}

impl From<ToolResultCode> for pb::tool_result::Code {
    fn from(c: ToolResultCode) -> Self {
        match c {
            ToolResultCode::Unspecified => Self::Unspecified,
            ToolResultCode::ApprovalDenied => Self::ApprovalDenied,
            ToolResultCode::ExecutorError => Self::ExecutorError,
        }
    }
}

impl From<pb::tool_result::Code> for ToolResultCode {
    fn from(c: pb::tool_result::Code) -> Self {
        match c {
            pb::tool_result::Code::Unspecified => Self::Unspecified,
            pb::tool_result::Code::ApprovalDenied => Self::ApprovalDenied,
            pb::tool_result::Code::ExecutorError => Self::ExecutorError,
        }
    }
}

/// The transient [`ToolResult::approval`] is not part of the wire message and is dropped.
impl From<ToolResult> for pb::ToolResult {
    fn from(r: ToolResult) -> Self {
        Self {
            id: r.id,
            output: r.output.map(struct_to_pb),
            output_uri: r.output_uri,
            output_digest: r.output_digest,
            is_error: r.is_error,
            error: r.error,
            content: r.content.into_iter().map(Into::into).collect(),
            code: pb::tool_result::Code::from(r.code).into(),
            approval_request_seq: r.approval_request_seq,
            approval_decision_seq: r.approval_decision_seq,
        }
    }
}

/// [`ToolResult::approval`] is always `None`: the wire never carries it.
impl TryFrom<pb::ToolResult> for ToolResult {
    type Error = WireError;

    fn try_from(r: pb::ToolResult) -> Result<Self> {
        Ok(Self {
            id: r.id,
            output: opt_struct_from_pb(r.output, "output")?,
            output_uri: r.output_uri,
            output_digest: r.output_digest,
            is_error: r.is_error,
            error: r.error,
            content: vec_from_pb(r.content, "content")?,
            code: enum_from_pb::<pb::tool_result::Code>(
                r.code,
                "code",
                "agentsessions.v1.ToolResult.Code",
            )?
            .into(),
            approval_request_seq: r.approval_request_seq,
            approval_decision_seq: r.approval_decision_seq,
            approval: None,
        })
    }
}

// ---- Identity ----

impl From<IdentityRef> for pb::IdentityRef {
    fn from(id: IdentityRef) -> Self {
        Self {
            principal: id.principal,
            issuer: id.issuer,
            subject: id.subject,
        }
    }
}

impl From<pb::IdentityRef> for IdentityRef {
    fn from(id: pb::IdentityRef) -> Self {
        Self {
            principal: id.principal,
            issuer: id.issuer,
            subject: id.subject,
        }
    }
}

/// An identity as an optional wire field (`Event.actor`, `Session.identity`,
/// `ApproveRequest.identity`): `None` when principal, issuer and subject are all empty.
pub fn identity_to_pb(identity: IdentityRef) -> Option<pb::IdentityRef> {
    (!identity.is_empty()).then(|| identity.into())
}

// ---- Approvals ----

impl From<ApprovalRequest> for pb::ApprovalRequest {
    fn from(a: ApprovalRequest) -> Self {
        Self {
            tool_call_id: a.tool_call_id,
            reason: a.reason,
        }
    }
}

impl From<pb::ApprovalRequest> for ApprovalRequest {
    fn from(a: pb::ApprovalRequest) -> Self {
        Self {
            tool_call_id: a.tool_call_id,
            reason: a.reason,
        }
    }
}

impl From<ApprovalResult> for pb::ApprovalResult {
    fn from(a: ApprovalResult) -> Self {
        Self {
            tool_call_id: a.tool_call_id,
            approved: a.approved,
            reason: a.reason,
            request_seq: a.request_seq,
        }
    }
}

impl From<pb::ApprovalResult> for ApprovalResult {
    fn from(a: pb::ApprovalResult) -> Self {
        Self {
            tool_call_id: a.tool_call_id,
            approved: a.approved,
            reason: a.reason,
            request_seq: a.request_seq,
        }
    }
}

impl From<ApprovalRef> for pb::ApprovalRef {
    fn from(a: ApprovalRef) -> Self {
        Self {
            execution_id: a.execution_id,
            tool_call_id: a.tool_call_id,
            request_seq: a.request_seq,
        }
    }
}

impl From<pb::ApprovalRef> for ApprovalRef {
    fn from(a: pb::ApprovalRef) -> Self {
        Self {
            execution_id: a.execution_id,
            tool_call_id: a.tool_call_id,
            request_seq: a.request_seq,
        }
    }
}

/// The `ApproveRequest` a client sends for `decision` on `session`. `approved` is always present
/// (`false` is a denial); an empty identity is omitted.
pub fn approve_request_from_decision(
    session: impl Into<String>,
    decision: ApprovalDecision,
) -> pb::ApproveRequest {
    pb::ApproveRequest {
        session: session.into(),
        execution_id: decision.execution_id,
        tool_call_id: decision.tool_call_id,
        request_seq: decision.request_seq,
        approved: Some(decision.approved),
        reason: decision.reason,
        identity: identity_to_pb(decision.identity),
    }
}

/// The decision an `ApproveRequest` carries. `session` is not part of the decision; read it from
/// the request first. Other tuple checks (non-empty ids, `request_seq > 0`) are the service's.
///
/// # Errors
///
/// [`WireError::MissingField`] (`approved`) when `approved` is unset: absent is not a denial.
impl TryFrom<pb::ApproveRequest> for ApprovalDecision {
    type Error = WireError;

    fn try_from(r: pb::ApproveRequest) -> Result<Self> {
        let approved = r.approved.ok_or_else(|| WireError::MissingField {
            field: "approved".to_owned(),
        })?;
        Ok(Self {
            execution_id: r.execution_id,
            tool_call_id: r.tool_call_id,
            request_seq: r.request_seq,
            approved,
            reason: r.reason,
            identity: r.identity.map(Into::into).unwrap_or_default(),
        })
    }
}

// ---- Streaming ----

impl From<Delta> for pb::Delta {
    fn from(d: Delta) -> Self {
        Self {
            execution_id: d.execution_id,
            part_index: d.part_index,
            chunk: d.chunk,
            done: d.done,
        }
    }
}

impl From<pb::Delta> for Delta {
    fn from(d: pb::Delta) -> Self {
        Self {
            execution_id: d.execution_id,
            part_index: d.part_index,
            chunk: d.chunk,
            done: d.done,
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use prost::Message as _;
    use prost_types::value::Kind;
    use serde_json::json;

    use super::*;

    /// A JSON object for tests; panics if `value` is not an object.
    pub(crate) fn obj(value: serde_json::Value) -> agentsessions_api::JsonObject {
        match value {
            serde_json::Value::Object(o) => o,
            other => panic!("not an object: {other}"),
        }
    }

    /// A JSON object exercising every value kind; numbers are doubles so they round-trip exactly.
    pub(crate) fn rich_object() -> agentsessions_api::JsonObject {
        obj(json!({
            "s": "text \u{0} ünï",
            "n": -12.5,
            "t": true,
            "f": false,
            "z": null,
            "list": [1.0, [2.0, {"k": "v"}], null, false],
            "nested": {"a": {"b": [], "c": {}}}
        }))
    }

    /// A tool result with every wire field populated (and no transient approval).
    pub(crate) fn full_tool_result() -> ToolResult {
        ToolResult {
            id: "call-1".into(),
            output: Some(rich_object()),
            output_uri: "s3://out".into(),
            output_digest: "sha256:out".into(),
            is_error: true,
            error: "boom".into(),
            content: vec![Part::Text(TextPart {
                text: "result".into(),
            })],
            code: ToolResultCode::ExecutorError,
            approval_request_seq: 9_007_199_254_740_993,
            approval_decision_seq: 9_007_199_254_740_994,
            approval: None,
        }
    }

    /// A tool call with every field populated.
    pub(crate) fn full_tool_call() -> ToolCall {
        ToolCall {
            id: "call-1".into(),
            tool: "search".into(),
            args: Some(rich_object()),
            mediation: Mediation::RequiresApproval,
            idempotency_key: "idem-1".into(),
        }
    }

    /// One part of every kind, with every field populated.
    pub(crate) fn every_part() -> Vec<Part> {
        vec![
            Part::Text(TextPart {
                text: "hello".into(),
            }),
            Part::File(FilePart {
                mime: "application/octet-stream".into(),
                bytes: vec![0x00, 0xff, 0x20, 0x0a, 0x09],
                uri: String::new(),
                digest: "sha256:file".into(),
                name: "blob.bin".into(),
            }),
            Part::File(FilePart {
                mime: "image/png".into(),
                bytes: Vec::new(),
                uri: "https://example.com/a.png".into(),
                digest: "sha256:png".into(),
                name: "a.png".into(),
            }),
            Part::Data(rich_object()),
            Part::Data(agentsessions_api::JsonObject::new()),
            Part::Reasoning(ReasoningPart {
                provider: "anthropic".into(),
                model_id: "m-1".into(),
                opaque: vec![0xff, 0x00, 0xfe],
                opaque_uri: String::new(),
                opaque_digest: "sha256:opaque".into(),
                summary: vec![
                    Part::Text(TextPart {
                        text: "thought".into(),
                    }),
                    Part::Empty,
                ],
                item_id: "item-1".into(),
                ordinal: -3,
                validity_scope: "exec-1".into(),
            }),
            Part::Reasoning(ReasoningPart {
                provider: "openai".into(),
                opaque_uri: "s3://opaque".into(),
                ..ReasoningPart::default()
            }),
            Part::ToolCall(full_tool_call()),
            Part::ToolResult(full_tool_result()),
            Part::Empty,
        ]
    }

    #[test]
    fn message_with_every_part_kind_round_trips() {
        // STYLE rule 2: api -> pb -> api is the identity
        let message = Message {
            role: "assistant".into(),
            parts: every_part(),
        };
        let wire = pb::Message::from(message.clone());
        assert_eq!(Message::try_from(wire.clone()).unwrap(), message);
        // and through the encoded bytes
        let decoded = pb::Message::decode(wire.encode_to_vec().as_slice()).unwrap();
        assert_eq!(Message::try_from(decoded).unwrap(), message);
    }

    #[test]
    fn empty_part_has_no_member() {
        // hashing (a): a Part with nothing set is `{}`
        assert_eq!(pb::Part::from(Part::Empty), pb::Part { part: None });
        assert_eq!(Part::try_from(pb::Part::default()).unwrap(), Part::Empty);
    }

    #[test]
    fn file_bytes_win_over_uri() {
        // hashing (a): source is bytes if non-empty, else uri if non-empty, else unset
        use pb::file_part::Source;
        let both = FilePart {
            bytes: vec![0],
            uri: "u".into(),
            ..FilePart::default()
        };
        assert_eq!(
            pb::FilePart::from(both).source,
            Some(Source::Bytes(vec![0]))
        );
        let uri_only = FilePart {
            uri: "u".into(),
            ..FilePart::default()
        };
        assert_eq!(
            pb::FilePart::from(uri_only).source,
            Some(Source::Uri("u".into()))
        );
        assert_eq!(pb::FilePart::from(FilePart::default()).source, None);
    }

    #[test]
    fn reasoning_opaque_bytes_win_over_uri() {
        use pb::reasoning_part::Opaque;
        let both = ReasoningPart {
            opaque: vec![0xff],
            opaque_uri: "u".into(),
            ..ReasoningPart::default()
        };
        assert_eq!(
            pb::ReasoningPart::from(both).opaque,
            Some(Opaque::OpaqueBytes(vec![0xff]))
        );
        let uri_only = ReasoningPart {
            opaque_uri: "u".into(),
            ..ReasoningPart::default()
        };
        assert_eq!(
            pb::ReasoningPart::from(uri_only).opaque,
            Some(Opaque::OpaqueUri("u".into()))
        );
        assert_eq!(
            pb::ReasoningPart::from(ReasoningPart::default()).opaque,
            None
        );
    }

    #[test]
    fn data_part_without_data_reads_as_empty_part() {
        // the reference converter maps a nil Struct to a part with nothing set
        let wire = pb::Part {
            part: Some(pb::part::Part::Data(pb::DataPart { data: None })),
        };
        assert_eq!(Part::try_from(wire).unwrap(), Part::Empty);
    }

    #[test]
    fn tool_call_args_absent_and_empty_stay_distinct() {
        let none = ToolCall::default();
        let empty = ToolCall {
            args: Some(agentsessions_api::JsonObject::new()),
            ..ToolCall::default()
        };
        assert_eq!(pb::ToolCall::from(none.clone()).args, None);
        assert_eq!(
            pb::ToolCall::from(empty.clone()).args,
            Some(prost_types::Struct::default())
        );
        assert_eq!(
            ToolCall::try_from(pb::ToolCall::from(none.clone())).unwrap(),
            none
        );
        assert_eq!(
            ToolCall::try_from(pb::ToolCall::from(empty.clone())).unwrap(),
            empty
        );
    }

    #[test]
    fn tool_result_approval_is_not_sent() {
        // hashing (a): the transient approval carrier is never serialized
        let mut with_approval = full_tool_result();
        with_approval.approval = Some(ApprovalResult {
            tool_call_id: "call-1".into(),
            approved: true,
            reason: "ok".into(),
            request_seq: 4,
        });
        assert_eq!(
            pb::ToolResult::from(with_approval),
            pb::ToolResult::from(full_tool_result())
        );
        let back = ToolResult::try_from(pb::ToolResult::from(full_tool_result())).unwrap();
        assert_eq!(back, full_tool_result());
        assert_eq!(back.approval, None);
    }

    #[test]
    fn tool_result_codes_are_numeric() {
        for (code, number) in [
            (ToolResultCode::Unspecified, 0),
            (ToolResultCode::ApprovalDenied, 1),
            (ToolResultCode::ExecutorError, 2),
        ] {
            let wire = pb::ToolResult::from(ToolResult {
                code,
                ..ToolResult::default()
            });
            assert_eq!(wire.code, number);
            assert_eq!(wire.code, code.number());
        }
    }

    #[test]
    fn unknown_mediation_names_the_field() {
        let wire = pb::Message {
            role: "assistant".into(),
            parts: vec![
                pb::Part::default(),
                pb::Part {
                    part: Some(pb::part::Part::ToolCall(pb::ToolCall {
                        mediation: 42,
                        ..pb::ToolCall::default()
                    })),
                },
            ],
        };
        let err = Message::try_from(wire).unwrap_err();
        assert_eq!(
            err,
            WireError::UnknownEnumValue {
                field: "parts[1].tool_call.mediation".into(),
                enum_name: "agentsessions.v1.Mediation",
                value: 42,
            }
        );
        assert_eq!(
            err.to_string(),
            "unknown agentsessions.v1.Mediation value 42 at parts[1].tool_call.mediation"
        );
    }

    #[test]
    fn unknown_tool_result_code_is_an_error() {
        let err = ToolResult::try_from(pb::ToolResult {
            code: 3,
            ..pb::ToolResult::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            WireError::UnknownEnumValue { ref field, value: 3, .. } if field == "code"
        ));
    }

    #[test]
    fn non_finite_number_in_a_nested_part_names_the_path() {
        let bad = prost_types::Struct {
            fields: [(
                "x".to_owned(),
                prost_types::Value {
                    kind: Some(Kind::NumberValue(f64::NAN)),
                },
            )]
            .into(),
        };
        let wire = pb::ToolResult {
            content: vec![pb::Part {
                part: Some(pb::part::Part::Data(pb::DataPart { data: Some(bad) })),
            }],
            ..pb::ToolResult::default()
        };
        assert_eq!(
            ToolResult::try_from(wire).unwrap_err(),
            WireError::NonFiniteNumber {
                path: "content[0].data.data.x".into()
            }
        );
    }

    #[test]
    fn approvals_and_deltas_round_trip() {
        let request = ApprovalRequest {
            tool_call_id: "c1".into(),
            reason: "dangerous".into(),
        };
        assert_eq!(
            ApprovalRequest::from(pb::ApprovalRequest::from(request.clone())),
            request
        );
        let result = ApprovalResult {
            tool_call_id: "c1".into(),
            approved: true,
            reason: "fine".into(),
            request_seq: 7,
        };
        assert_eq!(
            ApprovalResult::from(pb::ApprovalResult::from(result.clone())),
            result
        );
        let reference = ApprovalRef {
            execution_id: "e1".into(),
            tool_call_id: "c1".into(),
            request_seq: 7,
        };
        assert_eq!(
            ApprovalRef::from(pb::ApprovalRef::from(reference.clone())),
            reference
        );
        let delta = Delta {
            execution_id: "e1".into(),
            part_index: 2,
            chunk: "chu".into(),
            done: true,
        };
        assert_eq!(Delta::from(pb::Delta::from(delta.clone())), delta);
    }

    #[test]
    fn approve_request_round_trips_and_requires_approved() {
        let decision = ApprovalDecision {
            execution_id: "e1".into(),
            tool_call_id: "c1".into(),
            request_seq: 7,
            approved: false,
            reason: "no".into(),
            identity: IdentityRef {
                principal: "user://alice".into(),
                issuer: "idp".into(),
                subject: "alice".into(),
            },
        };
        let wire = approve_request_from_decision("s1", decision.clone());
        assert_eq!(wire.session, "s1");
        assert_eq!(wire.approved, Some(false));
        assert_eq!(ApprovalDecision::try_from(wire.clone()).unwrap(), decision);
        let anonymous = approve_request_from_decision(
            "s1",
            ApprovalDecision {
                identity: IdentityRef::default(),
                ..decision
            },
        );
        assert_eq!(anonymous.identity, None);
        let missing = pb::ApproveRequest {
            approved: None,
            ..wire
        };
        assert_eq!(
            ApprovalDecision::try_from(missing).unwrap_err(),
            WireError::MissingField {
                field: "approved".into()
            }
        );
    }

    #[test]
    fn identity_is_omitted_only_when_all_empty() {
        assert_eq!(identity_to_pb(IdentityRef::default()), None);
        let subject_only = IdentityRef {
            subject: "s".into(),
            ..IdentityRef::default()
        };
        assert_eq!(
            identity_to_pb(subject_only.clone()),
            Some(pb::IdentityRef {
                subject: "s".into(),
                ..pb::IdentityRef::default()
            })
        );
        assert_eq!(
            IdentityRef::from(pb::IdentityRef::from(subject_only.clone())),
            subject_only
        );
    }
}
