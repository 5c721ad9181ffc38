//! Events: the envelope, its kind and body, lifecycle transitions, execution ends and starts, and
//! timestamps.

use agentsessions_api::{
    ErrorInfo, Event, EventBody, EventKind, ExecutionStart, HarnessEnd, Lifecycle, LifecycleKind,
    Message, SnapshotRef, Timestamp, ToolCall, ToolResult,
};

use super::content::identity_to_pb;
use super::enum_from_pb;
use crate::error::{Result, WireError};
use crate::pb;

/// Smallest valid `Timestamp.seconds`: 0001-01-01T00:00:00Z.
const MIN_TIMESTAMP_SECONDS: i64 = -62_135_596_800;
/// Largest valid `Timestamp.seconds`: 9999-12-31T23:59:59Z.
const MAX_TIMESTAMP_SECONDS: i64 = 253_402_300_799;

/// A domain timestamp as `google.protobuf.Timestamp`, copied field for field. Validation is left to
/// the reading side ([`timestamp_from_pb`]) and to the canonical form, so what was recorded is
/// never altered on the way out.
pub fn timestamp_to_pb(ts: Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ts.seconds,
        nanos: ts.nanos,
    }
}

/// A `google.protobuf.Timestamp` as a domain timestamp.
///
/// # Errors
///
/// [`WireError::InvalidTimestamp`] when `nanos` is outside `0..=999_999_999` or the instant is
/// outside `0001-01-01T00:00:00Z..=9999-12-31T23:59:59.999999999Z`, the range the well-known type
/// defines (and the only one its JSON form can write).
pub fn timestamp_from_pb(ts: prost_types::Timestamp) -> Result<Timestamp> {
    let prost_types::Timestamp { seconds, nanos } = ts;
    if (0..1_000_000_000).contains(&nanos)
        && (MIN_TIMESTAMP_SECONDS..=MAX_TIMESTAMP_SECONDS).contains(&seconds)
    {
        Ok(Timestamp { seconds, nanos })
    } else {
        Err(WireError::InvalidTimestamp { seconds, nanos })
    }
}

// ---- Event ----

/// The reference `EventToProto`: ids and schema version copied, kind name for name, `ts` only when
/// set, `actor` omitted when empty, the one body member.
impl From<Event> for pb::Event {
    fn from(e: Event) -> Self {
        Self {
            execution_id: e.execution_id,
            ts: e.timestamp.map(timestamp_to_pb),
            schema_version: e.schema_version,
            kind: pb::EventKind::from(e.kind).into(),
            body: e.body.map(Into::into),
            actor: identity_to_pb(e.actor),
            redacted: e.redacted,
        }
    }
}

/// Clones, then converts; for callers that keep the domain event (hashing, journaling).
impl From<&Event> for pb::Event {
    fn from(e: &Event) -> Self {
        e.clone().into()
    }
}

/// # Errors
///
/// [`WireError::InvalidTimestamp`] for a bad `ts`, [`WireError::UnknownEnumValue`] for an unknown
/// `kind` or an unknown enum inside the body, [`WireError::NonFiniteNumber`] for a NaN or infinite
/// Struct number in the body. Paths start at the event (`tool.args.x[2]`).
impl TryFrom<pb::Event> for Event {
    type Error = WireError;

    fn try_from(e: pb::Event) -> Result<Self> {
        Ok(Self {
            execution_id: e.execution_id,
            timestamp: e.ts.map(timestamp_from_pb).transpose()?,
            schema_version: e.schema_version,
            kind: enum_from_pb::<pb::EventKind>(e.kind, "kind", "agentsessions.v1.EventKind")?
                .into(),
            body: e.body.map(EventBody::try_from).transpose()?,
            actor: e.actor.map(Into::into).unwrap_or_default(),
            redacted: e.redacted,
        })
    }
}

impl From<EventKind> for pb::EventKind {
    fn from(k: EventKind) -> Self {
        match k {
            EventKind::Unspecified => Self::Unspecified,
            EventKind::Input => Self::EventInput,
            EventKind::ModelCall => Self::EventModelCall,
            EventKind::Output => Self::EventOutput,
            EventKind::ToolCall => Self::EventToolCall,
            EventKind::ToolResult => Self::EventToolResult,
            EventKind::ApprovalRequest => Self::EventApprovalRequest,
            EventKind::ApprovalResult => Self::EventApprovalResult,
            EventKind::Usage => Self::EventUsage,
            EventKind::Lifecycle => Self::EventLifecycle,
            EventKind::End => Self::EventEnd,
            EventKind::Error => Self::EventError,
            EventKind::ExecutionStart => Self::EventExecutionStart,
            EventKind::Parked => Self::EventParked,
        }
    }
}

impl From<pb::EventKind> for EventKind {
    fn from(k: pb::EventKind) -> Self {
        match k {
            pb::EventKind::Unspecified => Self::Unspecified,
            pb::EventKind::EventInput => Self::Input,
            pb::EventKind::EventModelCall => Self::ModelCall,
            pb::EventKind::EventOutput => Self::Output,
            pb::EventKind::EventToolCall => Self::ToolCall,
            pb::EventKind::EventToolResult => Self::ToolResult,
            pb::EventKind::EventApprovalRequest => Self::ApprovalRequest,
            pb::EventKind::EventApprovalResult => Self::ApprovalResult,
            pb::EventKind::EventUsage => Self::Usage,
            pb::EventKind::EventLifecycle => Self::Lifecycle,
            pb::EventKind::EventEnd => Self::End,
            pb::EventKind::EventError => Self::Error,
            pb::EventKind::EventExecutionStart => Self::ExecutionStart,
            pb::EventKind::EventParked => Self::Parked,
        }
    }
}

impl From<EventBody> for pb::event::Body {
    fn from(b: EventBody) -> Self {
        match b {
            EventBody::Message(m) => Self::Message(m.into()),
            EventBody::ModelCall(m) => Self::Model(m.into()),
            EventBody::ToolCall(c) => Self::Tool(c.into()),
            EventBody::Result(r) => Self::Result(r.into()),
            EventBody::Approval(a) => Self::Approval(a.into()),
            EventBody::ApprovalResult(a) => Self::ApprovalResult(a.into()),
            EventBody::Usage(u) => Self::Usage(u.into()),
            EventBody::Lifecycle(l) => Self::Lifecycle(l.into()),
            EventBody::End(e) => Self::End(e.into()),
            EventBody::Error(e) => Self::Error(e.into()),
            EventBody::ExecutionStart(s) => Self::ExecutionStart(s.into()),
            EventBody::Parked(p) => Self::Parked(p.into()),
        }
    }
}

/// Error paths start with the body's field name (`message`, `tool`, `result`, `lifecycle` …).
impl TryFrom<pb::event::Body> for EventBody {
    type Error = WireError;

    fn try_from(b: pb::event::Body) -> Result<Self> {
        use pb::event::Body;
        Ok(match b {
            Body::Message(m) => {
                Self::Message(Message::try_from(m).map_err(|e| e.within("message"))?)
            }
            Body::Model(m) => Self::ModelCall(m.into()),
            Body::Tool(c) => Self::ToolCall(ToolCall::try_from(c).map_err(|e| e.within("tool"))?),
            Body::Result(r) => {
                Self::Result(ToolResult::try_from(r).map_err(|e| e.within("result"))?)
            }
            Body::Approval(a) => Self::Approval(a.into()),
            Body::ApprovalResult(a) => Self::ApprovalResult(a.into()),
            Body::Usage(u) => Self::Usage(u.into()),
            Body::Lifecycle(l) => {
                Self::Lifecycle(Lifecycle::try_from(l).map_err(|e| e.within("lifecycle"))?)
            }
            Body::End(e) => Self::End(e.into()),
            Body::Error(e) => Self::Error(e.into()),
            Body::ExecutionStart(s) => Self::ExecutionStart(s.into()),
            Body::Parked(p) => Self::Parked(p.into()),
            Body::MintRequest(_) => {
                return Err(WireError::ConnectOnly {
                    body: "mint_request",
                });
            }
        })
    }
}

// ---- Lifecycle ----

impl From<LifecycleKind> for pb::lifecycle::Kind {
    fn from(k: LifecycleKind) -> Self {
        match k {
            LifecycleKind::Unspecified => Self::LifecycleUnspecified,
            LifecycleKind::Suspend => Self::LifecycleSuspend,
            LifecycleKind::Resume => Self::LifecycleResume,
            LifecycleKind::Fork => Self::LifecycleFork,
            LifecycleKind::Baseline => Self::LifecycleBaseline,
            LifecycleKind::Cancel => Self::LifecycleCancel,
            LifecycleKind::Delete => Self::LifecycleDelete,
        }
    }
}

impl From<pb::lifecycle::Kind> for LifecycleKind {
    fn from(k: pb::lifecycle::Kind) -> Self {
        match k {
            pb::lifecycle::Kind::LifecycleUnspecified => Self::Unspecified,
            pb::lifecycle::Kind::LifecycleSuspend => Self::Suspend,
            pb::lifecycle::Kind::LifecycleResume => Self::Resume,
            pb::lifecycle::Kind::LifecycleFork => Self::Fork,
            pb::lifecycle::Kind::LifecycleBaseline => Self::Baseline,
            pb::lifecycle::Kind::LifecycleCancel => Self::Cancel,
            pb::lifecycle::Kind::LifecycleDelete => Self::Delete,
        }
    }
}

/// The snapshot is flattened into the four `snapshot_*` fields (all zero when there is none).
impl From<Lifecycle> for pb::Lifecycle {
    fn from(l: Lifecycle) -> Self {
        let snapshot = l.snapshot.unwrap_or_default();
        Self {
            kind: pb::lifecycle::Kind::from(l.kind).into(),
            detail: l.detail,
            snapshot_local: snapshot.local,
            snapshot_external_uri: snapshot.external_uri,
            snapshot_memory: snapshot.memory,
            snapshot_sealed: snapshot.sealed,
            compute_instance: l.compute_instance,
        }
    }
}

/// The snapshot is `Some` only when any of the four `snapshot_*` fields is non-zero.
impl TryFrom<pb::Lifecycle> for Lifecycle {
    type Error = WireError;

    fn try_from(l: pb::Lifecycle) -> Result<Self> {
        let snapshot = SnapshotRef {
            local: l.snapshot_local,
            external_uri: l.snapshot_external_uri,
            memory: l.snapshot_memory,
            sealed: l.snapshot_sealed,
        };
        Ok(Self {
            kind: enum_from_pb::<pb::lifecycle::Kind>(
                l.kind,
                "kind",
                "agentsessions.v1.Lifecycle.Kind",
            )?
            .into(),
            detail: l.detail,
            snapshot: (!snapshot.is_empty()).then_some(snapshot),
            compute_instance: l.compute_instance,
        })
    }
}

// ---- End, error, start ----

impl From<HarnessEnd> for pb::HarnessEnd {
    fn from(e: HarnessEnd) -> Self {
        Self {
            state: e.state,
            error: e.error.map(Into::into),
        }
    }
}

impl From<pb::HarnessEnd> for HarnessEnd {
    fn from(e: pb::HarnessEnd) -> Self {
        Self {
            state: e.state,
            error: e.error.map(Into::into),
        }
    }
}

impl From<ErrorInfo> for pb::Error {
    fn from(e: ErrorInfo) -> Self {
        Self {
            code: e.code,
            description: e.description,
        }
    }
}

impl From<pb::Error> for ErrorInfo {
    fn from(e: pb::Error) -> Self {
        Self {
            code: e.code,
            description: e.description,
        }
    }
}

/// `input_count` keeps its presence: `None` stays unset, `Some(0)` is sent.
impl From<ExecutionStart> for pb::ExecutionStart {
    fn from(s: ExecutionStart) -> Self {
        Self {
            config: s.config,
            resume_from_seq: s.resume_from_seq,
            input_count: s.input_count,
            harness: s.harness,
            harness_version: s.harness_version,
            model: s.model,
            compute_instance: s.compute_instance,
        }
    }
}

impl From<pb::ExecutionStart> for ExecutionStart {
    fn from(s: pb::ExecutionStart) -> Self {
        Self {
            model: s.model,
            config: s.config,
            resume_from_seq: s.resume_from_seq,
            input_count: s.input_count,
            harness: s.harness,
            harness_version: s.harness_version,
            compute_instance: s.compute_instance,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentsessions_api::{
        ApprovalRef, ApprovalRequest, ApprovalResult, IdentityRef, ModelCall, Part, TextPart, Usage,
    };
    use prost::Message as _;
    use prost_types::value::Kind;

    use super::super::content::tests::{every_part, full_tool_call, full_tool_result};
    use super::*;
    use crate::canonical::content_hash;

    fn actor() -> IdentityRef {
        IdentityRef {
            principal: "agent://a".into(),
            issuer: "entra".into(),
            subject: "sub-1".into(),
        }
    }

    /// One body of every variant, every field populated.
    fn every_body() -> Vec<EventBody> {
        vec![
            EventBody::Message(Message {
                role: "user".into(),
                parts: every_part(),
            }),
            EventBody::ModelCall(ModelCall {
                model: "gpt-x".into(),
                params: BTreeMap::from([("temperature".to_owned(), "0.2".to_owned())]),
                input_hash: "abc123".into(),
                id: "mc-1".into(),
            }),
            EventBody::ToolCall(full_tool_call()),
            EventBody::Result(full_tool_result()),
            EventBody::Approval(ApprovalRequest {
                tool_call_id: "call-1".into(),
                reason: "needs a human".into(),
            }),
            EventBody::ApprovalResult(ApprovalResult {
                tool_call_id: "call-1".into(),
                approved: true,
                reason: "ok".into(),
                request_seq: 6,
            }),
            EventBody::Usage(Usage {
                model: "gpt-x".into(),
                input_tokens: 1,
                output_tokens: 2,
                reasoning_tokens: 3,
                cached_input_tokens: 4,
            }),
            EventBody::Lifecycle(Lifecycle {
                kind: LifecycleKind::Suspend,
                detail: "suspend".into(),
                snapshot: Some(SnapshotRef {
                    local: "/snap/1".into(),
                    external_uri: "s3://snap/1".into(),
                    memory: true,
                    sealed: true,
                }),
                compute_instance: "vm-7".into(),
            }),
            EventBody::End(HarnessEnd {
                state: "FAILED".into(),
                error: Some(ErrorInfo {
                    code: 13,
                    description: "internal".into(),
                }),
            }),
            EventBody::Error(ErrorInfo {
                code: 14,
                description: "unavailable".into(),
            }),
            EventBody::ExecutionStart(ExecutionStart {
                model: "gpt-x".into(),
                config: vec![0x00, 0xff, 0x20, 0x0a, 0x09],
                resume_from_seq: 9_007_199_254_740_993,
                input_count: Some(2),
                harness: "echo".into(),
                harness_version: "1".into(),
                compute_instance: "vm-7".into(),
            }),
            EventBody::Parked(ApprovalRef {
                execution_id: "exec-1".into(),
                tool_call_id: "call-1".into(),
                request_seq: 6,
            }),
        ]
    }

    /// Every body variant in a fully populated event, plus edge cases of the envelope.
    fn every_event() -> Vec<Event> {
        let kinds = [
            EventKind::Input,
            EventKind::ModelCall,
            EventKind::ToolCall,
            EventKind::ToolResult,
            EventKind::ApprovalRequest,
            EventKind::ApprovalResult,
            EventKind::Usage,
            EventKind::Lifecycle,
            EventKind::End,
            EventKind::Error,
            EventKind::ExecutionStart,
            EventKind::Parked,
        ];
        let mut events: Vec<Event> = kinds
            .into_iter()
            .zip(every_body())
            .map(|(kind, body)| Event {
                execution_id: "exec-1".into(),
                timestamp: Some(Timestamp {
                    seconds: 1_700_000_000,
                    nanos: 500_000_000,
                }),
                schema_version: 1,
                kind,
                body: Some(body),
                actor: actor(),
                redacted: Vec::new(),
            })
            .collect();
        // the body is independent of the kind, and each may be absent
        events.push(Event {
            kind: EventKind::Output,
            body: None,
            ..Event::default()
        });
        events.push(Event::default());
        events.push(Event {
            redacted: vec!["MODEL_API_KEY".into(), "pattern-1".into()],
            ..Event::new(
                EventKind::Output,
                EventBody::Message(Message::text_message(
                    "assistant",
                    "[REDACTED:MODEL_API_KEY]",
                )),
            )
        });
        events.push(Event {
            timestamp: Some(Timestamp {
                seconds: MIN_TIMESTAMP_SECONDS,
                nanos: 0,
            }),
            ..Event::new(
                EventKind::ExecutionStart,
                EventBody::ExecutionStart(ExecutionStart {
                    input_count: Some(0),
                    ..ExecutionStart::default()
                }),
            )
        });
        events.push(Event::new(
            EventKind::ExecutionStart,
            EventBody::ExecutionStart(ExecutionStart::default()),
        ));
        events.push(Event::new(
            EventKind::Lifecycle,
            EventBody::Lifecycle(Lifecycle {
                kind: LifecycleKind::Delete,
                ..Lifecycle::default()
            }),
        ));
        events
    }

    /// The domain event the reference implementation hashed for a published golden vector.
    fn golden_domain_event(id: &str) -> Event {
        let start = |execution_id: &str, start: ExecutionStart| {
            Event::new(EventKind::ExecutionStart, EventBody::ExecutionStart(start))
                .with_execution(execution_id)
        };
        match id {
            "golden_output_event" => Event {
                execution_id: "exec-1".into(),
                timestamp: Some(Timestamp {
                    seconds: 1_700_000_000,
                    nanos: 0,
                }),
                schema_version: 1,
                kind: EventKind::Output,
                body: Some(EventBody::Message(Message::text_message(
                    "assistant",
                    "hello",
                ))),
                actor: actor(),
                redacted: Vec::new(),
            },
            "execution_start_config_cursor_count" => start(
                "exec-config",
                ExecutionStart {
                    config: vec![0x00, 0xff, 0x20, 0x0a, 0x09],
                    resume_from_seq: 9_007_199_254_740_993,
                    input_count: Some(2),
                    ..ExecutionStart::default()
                },
            ),
            "execution_start_default_count_0" => start(
                "exec-default",
                ExecutionStart {
                    input_count: Some(0),
                    ..ExecutionStart::default()
                },
            ),
            "execution_start_default_count_2" => start(
                "exec-default",
                ExecutionStart {
                    input_count: Some(2),
                    ..ExecutionStart::default()
                },
            ),
            "legacy_tool_result_default_valued" => Event::new(
                EventKind::ToolResult,
                EventBody::Result(ToolResult {
                    id: "c1".into(),
                    ..ToolResult::default()
                }),
            ),
            "legacy_approval_denial" => Event::new(
                EventKind::ApprovalResult,
                EventBody::ApprovalResult(ApprovalResult {
                    tool_call_id: "c1".into(),
                    approved: false,
                    reason: "no".into(),
                    request_seq: 0,
                }),
            ),
            other => panic!("no domain event for golden vector {other}"),
        }
    }

    #[test]
    fn a_mint_request_is_not_a_session_event() {
        let wire = pb::Event {
            body: Some(pb::event::Body::MintRequest(pb::MintRequest {
                request_id: "mint-1".into(),
                audience: vec!["api".into()],
            })),
            ..pb::Event::default()
        };
        assert_eq!(
            Event::try_from(wire),
            Err(WireError::ConnectOnly {
                body: "mint_request"
            })
        );
    }

    #[test]
    fn domain_events_hash_to_the_golden_vectors() {
        // hashing (a), (b): the content hash is computed over the converted message, so the
        // domain events of the published vectors must convert to exactly the hashed wire events
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/golden/content_hash_vectors.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        let vectors = file["published_vectors"].as_array().unwrap();
        assert!(!vectors.is_empty());
        for vector in vectors {
            let id = vector["id"].as_str().unwrap();
            let event = golden_domain_event(id);
            let wire = pb::Event::from(&event);
            let prev_hash = vector["prev_hash"].as_str().unwrap();
            let seq = vector["seq"].as_i64().unwrap();
            assert_eq!(
                content_hash(prev_hash, seq, &wire).unwrap(),
                vector["expected_content_hash"].as_str().unwrap(),
                "{id}"
            );
            assert_eq!(Event::try_from(wire).unwrap(), event, "{id}");
        }
    }

    #[test]
    fn transient_approval_and_integer_numbers_do_not_change_the_hash() {
        // hashing (a): ToolResult.approval is not serialized; Struct numbers are doubles
        let plain = Event::new(EventKind::ToolResult, EventBody::Result(full_tool_result()));
        let mut with_approval = full_tool_result();
        with_approval.approval = Some(ApprovalResult {
            tool_call_id: "call-1".into(),
            approved: true,
            reason: String::new(),
            request_seq: 1,
        });
        let approved = Event::new(EventKind::ToolResult, EventBody::Result(with_approval));
        let hash = |e: &Event| content_hash("", 1, &pb::Event::from(e)).unwrap();
        assert_eq!(hash(&approved), hash(&plain));
        // extensions §1: the redaction list is stored beside the content, never hashed
        let marked = Event {
            redacted: vec!["MODEL_API_KEY".into()],
            ..plain.clone()
        };
        assert_eq!(hash(&marked), hash(&plain));

        let call = |n: serde_json::Value| {
            Event::new(
                EventKind::ToolCall,
                EventBody::ToolCall(agentsessions_api::ToolCall {
                    id: "c".into(),
                    args: Some(serde_json::Map::from_iter([("n".to_owned(), n)])),
                    ..agentsessions_api::ToolCall::default()
                }),
            )
        };
        assert_eq!(
            hash(&call(serde_json::json!(3))),
            hash(&call(serde_json::json!(3.0)))
        );
    }

    #[test]
    fn every_event_round_trips() {
        // STYLE rule 2: api -> pb -> api is the identity, for every body variant
        for event in every_event() {
            let wire = pb::Event::from(&event);
            assert_eq!(Event::try_from(wire).unwrap(), event);
        }
    }

    #[test]
    fn every_event_round_trips_through_encoded_bytes() {
        // pb -> encode -> decode -> api
        for event in every_event() {
            let bytes = pb::Event::from(event.clone()).encode_to_vec();
            let decoded = pb::Event::decode(bytes.as_slice()).unwrap();
            assert_eq!(Event::try_from(decoded).unwrap(), event);
        }
    }

    #[test]
    fn envelope_follows_event_to_proto() {
        // hashing (a): ts only when set, actor omitted when empty, kind name for name
        let bare = pb::Event::from(Event::default());
        assert_eq!(bare, pb::Event::default());
        let full = pb::Event::from(&every_event()[0]);
        assert_eq!(full.kind, 1);
        assert_eq!(
            full.ts,
            Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 500_000_000
            })
        );
        assert_eq!(full.actor, Some(actor().into()));
        for kind in EventKind::ALL {
            let wire = pb::EventKind::from(kind);
            let name = match kind {
                EventKind::Unspecified => "",
                _ => wire.as_str_name().strip_prefix("EVENT_").unwrap(),
            };
            assert_eq!(name, kind.as_str());
            assert_eq!(EventKind::from(wire), kind);
        }
    }

    #[test]
    fn input_count_presence_is_preserved() {
        // semantics §1.1: input_count has explicit presence; Some(0) is sent, None is not
        let none = pb::ExecutionStart::from(ExecutionStart::default());
        assert_eq!(none.input_count, None);
        let zero = pb::ExecutionStart::from(ExecutionStart {
            input_count: Some(0),
            ..ExecutionStart::default()
        });
        assert_eq!(zero.input_count, Some(0));
        let decoded = pb::ExecutionStart::decode(zero.encode_to_vec().as_slice()).unwrap();
        assert_eq!(ExecutionStart::from(decoded).input_count, Some(0));
        let decoded = pb::ExecutionStart::decode(none.encode_to_vec().as_slice()).unwrap();
        assert_eq!(ExecutionStart::from(decoded).input_count, None);
    }

    #[test]
    fn lifecycle_snapshot_is_flattened() {
        // semantics §1.1: the domain snapshot is set only if any of the four is non-zero
        let plain = pb::Lifecycle::from(Lifecycle {
            kind: LifecycleKind::Fork,
            detail: "parent@7".into(),
            snapshot: None,
            compute_instance: "vm-2".into(),
        });
        assert_eq!(plain.snapshot_local, "");
        assert!(!plain.snapshot_memory);
        assert_eq!(Lifecycle::try_from(plain).unwrap().snapshot, None);
        let sealed_only = pb::Lifecycle {
            snapshot_sealed: true,
            ..pb::Lifecycle::default()
        };
        assert_eq!(
            Lifecycle::try_from(sealed_only).unwrap().snapshot,
            Some(SnapshotRef {
                sealed: true,
                ..SnapshotRef::default()
            })
        );
    }

    #[test]
    fn unknown_event_kind_names_the_field() {
        let err = Event::try_from(pb::Event {
            kind: 99,
            ..pb::Event::default()
        })
        .unwrap_err();
        assert_eq!(
            err,
            WireError::UnknownEnumValue {
                field: "kind".into(),
                enum_name: "agentsessions.v1.EventKind",
                value: 99,
            }
        );
    }

    #[test]
    fn unknown_lifecycle_kind_names_the_field() {
        let err = Event::try_from(pb::Event {
            body: Some(pb::event::Body::Lifecycle(pb::Lifecycle {
                kind: -1,
                ..pb::Lifecycle::default()
            })),
            ..pb::Event::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            WireError::UnknownEnumValue { ref field, value: -1, .. } if field == "lifecycle.kind"
        ));
    }

    #[test]
    fn nan_in_tool_args_names_the_path() {
        let args = prost_types::Struct {
            fields: [(
                "x".to_owned(),
                prost_types::Value {
                    kind: Some(Kind::ListValue(prost_types::ListValue {
                        values: [1.0, 2.0, f64::NAN]
                            .into_iter()
                            .map(|n| prost_types::Value {
                                kind: Some(Kind::NumberValue(n)),
                            })
                            .collect(),
                    })),
                },
            )]
            .into(),
        };
        let call = pb::ToolCall {
            args: Some(args),
            ..pb::ToolCall::default()
        };
        assert_eq!(
            ToolCall::try_from(call.clone()).unwrap_err(),
            WireError::NonFiniteNumber {
                path: "args.x[2]".into()
            }
        );
        let event = pb::Event {
            body: Some(pb::event::Body::Tool(call)),
            ..pb::Event::default()
        };
        assert_eq!(
            Event::try_from(event).unwrap_err(),
            WireError::NonFiniteNumber {
                path: "tool.args.x[2]".into()
            }
        );
    }

    #[test]
    fn invalid_timestamps_are_rejected() {
        for (seconds, nanos) in [
            (0, -1),
            (0, 1_000_000_000),
            (0, i32::MIN),
            (MIN_TIMESTAMP_SECONDS - 1, 0),
            (MAX_TIMESTAMP_SECONDS + 1, 0),
        ] {
            let event = pb::Event {
                ts: Some(prost_types::Timestamp { seconds, nanos }),
                ..pb::Event::default()
            };
            assert_eq!(
                Event::try_from(event).unwrap_err(),
                WireError::InvalidTimestamp { seconds, nanos }
            );
        }
        let last = prost_types::Timestamp {
            seconds: MAX_TIMESTAMP_SECONDS,
            nanos: 999_999_999,
        };
        assert_eq!(
            timestamp_from_pb(last).unwrap(),
            Timestamp {
                seconds: MAX_TIMESTAMP_SECONDS,
                nanos: 999_999_999
            }
        );
    }

    #[test]
    fn invalid_utf8_in_a_string_field_fails_to_decode() {
        // a bad harness frame is a decode error, never a lossy string
        let valid = pb::Event {
            execution_id: "exec".into(),
            ..pb::Event::default()
        }
        .encode_to_vec();
        // field 2 (execution_id), wire type 2, length 4: "exec"
        assert_eq!(valid, [0x12, 0x04, b'e', b'x', b'e', b'c']);
        let mut bad = valid;
        bad[3] = 0xff;
        let err = pb::Event::decode(bad.as_slice()).unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
        // also nested inside a text part of a message body
        let mut nested = pb::Event::from(Event::new(
            EventKind::Output,
            EventBody::Message(Message {
                role: "assistant".into(),
                parts: vec![Part::Text(TextPart { text: "ok".into() })],
            }),
        ))
        .encode_to_vec();
        let at = nested
            .windows(2)
            .position(|w| w == b"ok")
            .expect("text is in the encoding");
        nested[at] = 0xc3; // a lead byte without its continuation
        let err = pb::Event::decode(nested.as_slice()).unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
    }
}
