//! Go JSON against the nine reference journals (spec: hashing-and-conformance (e)), plus the
//! shape rules and error paths the fixtures do not exercise.
//!
//! For each fixture: the parsed document re-indented reproduces the file byte for byte (the
//! indenter and string escaper); every record's event decodes and re-encodes, in the shape the
//! file shows, to exactly the compact form of its `Event` member; and the detected shape is the
//! one the file was written in.
#![allow(clippy::tests_outside_test_module)]

use std::path::PathBuf;

use agentsessions_api::{
    ApprovalRef, ApprovalRequest, ApprovalResult, ErrorInfo, Event, EventBody, EventKind,
    ExecutionStart, FilePart, HarnessEnd, IdentityRef, Lifecycle, LifecycleKind, Mediation,
    Message, ModelCall, Part, ReasoningPart, SnapshotRef, TextPart, Timestamp, ToolCall,
    ToolResult, ToolResultCode, Usage,
};
use agentsessions_wire::WireError;
use agentsessions_wire::gojson::{
    GoShape, GoValue, decode_array, decode_event, event_to_json, indent,
};
use serde_json::json;

const FIXTURES: [(&str, usize, GoShape); 9] = [
    ("completed.json", 4, GoShape::V012),
    ("crashed-input.json", 1, GoShape::V012),
    ("crashed-model.json", 2, GoShape::V012),
    ("crashed-output.json", 3, GoShape::V012),
    ("multi-turn.json", 8, GoShape::V012),
    ("multi-turn-crashed-output.json", 7, GoShape::V012),
    ("upgraded-resume.json", 4, GoShape::V012ExecutionStart),
    ("mixed-completed.json", 9, GoShape::V012ExecutionStart),
    ("mixed-interrupted.json", 8, GoShape::V012ExecutionStart),
];

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/reference-v0.1.2")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn fixtures_reindent_byte_for_byte() {
    for (name, _, _) in FIXTURES {
        let text = fixture(name);
        let doc = GoValue::parse(&text).unwrap();
        assert_eq!(format!("{}\n", indent(&doc.to_compact())), text, "{name}");
    }
}

#[test]
fn fixture_events_round_trip_in_their_shape() {
    for (name, count, want_shape) in FIXTURES {
        let doc = GoValue::parse(&fixture(name)).unwrap();
        let records = decode_array(&doc).unwrap();
        assert_eq!(records.len(), count, "{name}");
        let mut shape = GoShape::V012;
        let events: Vec<(Event, &GoValue)> = records
            .iter()
            .map(|r| {
                let raw = r.field("Event").expect("Event member");
                (decode_event(raw, &mut shape).unwrap(), raw)
            })
            .collect();
        assert_eq!(shape, want_shape, "{name}");
        for (i, (event, raw)) in events.iter().enumerate() {
            assert_eq!(
                event_to_json(event, shape).unwrap(),
                raw.to_compact(),
                "{name} record {i}"
            );
            // Every fixture event is also representable in the newer shapes.
            for newer in GoShape::ALL.into_iter().filter(|s| *s >= shape) {
                event_to_json(event, newer).unwrap();
            }
        }
    }
}

#[test]
fn fixture_events_decode_to_the_expected_domain_values() {
    let doc = GoValue::parse(&fixture("mixed-completed.json")).unwrap();
    let records = decode_array(&doc).unwrap();
    let mut shape = GoShape::V012;
    let events: Vec<Event> = records
        .iter()
        .map(|r| decode_event(r.field("Event").unwrap(), &mut shape).unwrap())
        .collect();
    assert_eq!(
        events[0],
        Event::new(
            EventKind::Input,
            EventBody::Message(Message::text_message("user", "hello"))
        )
    );
    assert_eq!(
        events[4],
        Event::new(
            EventKind::ExecutionStart,
            EventBody::ExecutionStart(ExecutionStart {
                input_count: Some(1),
                ..ExecutionStart::default()
            })
        )
        .with_execution("721cca6eababd5be")
    );
    assert_eq!(
        events[3].body,
        Some(EventBody::End(HarnessEnd {
            state: "COMPLETED".into(),
            error: None
        }))
    );
    match &events[1].body {
        Some(EventBody::ModelCall(call)) => {
            assert_eq!(call.model, "echo");
            assert!(call.params.is_empty());
            assert_eq!(
                call.input_hash,
                "2611c24a1a665deca46265ed96d1e1efc699260c9cba9c07f22cda7939232c30"
            );
        }
        other => panic!("record 2 body: {other:?}"),
    }
    assert!(events.iter().all(|e| e.timestamp.is_none()));

    // The v0.3.0 shape writes every ExecutionStart field (Model only when set).
    let current = event_to_json(&events[4], GoShape::V030).unwrap();
    assert!(
        current.contains(concat!(
            r#""ExecutionStart":{"Config":null,"ResumeFromSeq":0,"InputCount":1,"#,
            r#""Harness":"","HarnessVersion":"","ComputeInstance":""},"Actor""#
        )),
        "{current}"
    );
}

fn shape_error(result: Result<String, WireError>) -> (String, &'static str) {
    match result {
        Err(WireError::GoShape { path, shape }) => (path, shape),
        other => panic!("expected a shape error, got {other:?}"),
    }
}

#[test]
fn older_shapes_refuse_what_they_cannot_hold() {
    let start = Event::new(
        EventKind::ExecutionStart,
        EventBody::ExecutionStart(ExecutionStart {
            input_count: Some(1),
            ..ExecutionStart::default()
        }),
    );
    assert_eq!(
        shape_error(event_to_json(&start, GoShape::V012)),
        ("ExecutionStart".into(), "v0.1.2")
    );
    event_to_json(&start, GoShape::V012ExecutionStart).unwrap();
    let harness_start = Event::new(
        EventKind::ExecutionStart,
        EventBody::ExecutionStart(ExecutionStart {
            harness: "echo".into(),
            ..ExecutionStart::default()
        }),
    );
    assert_eq!(
        shape_error(event_to_json(&harness_start, GoShape::V012ExecutionStart)),
        ("ExecutionStart.Harness".into(), "v0.1.2+execution-start")
    );

    let tool_part = Event::new(
        EventKind::Output,
        EventBody::Message(Message {
            role: "assistant".into(),
            parts: vec![Part::Reasoning(ReasoningPart {
                summary: vec![
                    Part::Text(TextPart::default()),
                    Part::ToolCall(ToolCall::default()),
                ],
                ..ReasoningPart::default()
            })],
        }),
    );
    let err = event_to_json(&tool_part, GoShape::V012).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Message.Parts[0].Reasoning.Summary[1].ToolCall cannot be written in the v0.1.2 go json shape"
    );

    let receipt = Event::new(
        EventKind::ToolResult,
        EventBody::Result(ToolResult {
            id: "c1".into(),
            code: ToolResultCode::ApprovalDenied,
            ..ToolResult::default()
        }),
    );
    assert_eq!(
        shape_error(event_to_json(&receipt, GoShape::V012ExecutionStart)).0,
        "Result.Code"
    );
    let decision = Event::new(
        EventKind::ApprovalResult,
        EventBody::ApprovalResult(ApprovalResult {
            request_seq: 3,
            ..ApprovalResult::default()
        }),
    );
    assert_eq!(
        shape_error(event_to_json(&decision, GoShape::V012)).0,
        "ApprovalResult.RequestSeq"
    );
    let fork = Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind: LifecycleKind::Fork,
            compute_instance: "uid-1".into(),
            ..Lifecycle::default()
        }),
    );
    assert_eq!(
        shape_error(event_to_json(&fork, GoShape::V012)).0,
        "Lifecycle.ComputeInstance"
    );
    let parked = Event::new(EventKind::Parked, EventBody::Parked(ApprovalRef::default()));
    assert_eq!(
        shape_error(event_to_json(&parked, GoShape::V012ExecutionStart)).0,
        "Parked"
    );

    // Empty values of the missing keys are fine: the old writer simply had no such key.
    let legacy_result = Event::new(
        EventKind::ToolResult,
        EventBody::Result(ToolResult {
            id: "c1".into(),
            ..ToolResult::default()
        }),
    );
    assert_eq!(
        event_to_json(&legacy_result, GoShape::V012).unwrap(),
        event_to_json(&legacy_result, GoShape::V030)
            .unwrap()
            .replace(",\"ExecutionStart\":null", "")
    );
}

/// One event per body member, with every field set, plus actor and timestamp.
fn rich_events() -> Vec<Event> {
    let data = |v: serde_json::Value| match v {
        serde_json::Value::Object(m) => m,
        _ => unreachable!("object literal"),
    };
    let bodies = vec![
        (
            EventKind::Input,
            EventBody::Message(Message {
                role: "user".into(),
                parts: vec![
                    Part::Text(TextPart {
                        text: "a\u{0}<\u{2029}>\"\\".into(),
                    }),
                    Part::File(FilePart {
                        mime: "image/png".into(),
                        bytes: vec![0, 0xff, 0x20],
                        uri: "s3://x".into(),
                        digest: "sha256:aa".into(),
                        name: "n".into(),
                    }),
                    Part::Data(data(json!({"k": [1.5, "v", null, true, {"z": -2.0}]}))),
                    Part::Empty,
                    Part::Reasoning(ReasoningPart {
                        provider: "p".into(),
                        model_id: "m".into(),
                        opaque: b"op".to_vec(),
                        opaque_uri: "u".into(),
                        opaque_digest: "d".into(),
                        summary: vec![Part::Text(TextPart { text: "s".into() })],
                        item_id: "i".into(),
                        ordinal: -3,
                        validity_scope: "e".into(),
                    }),
                    Part::ToolCall(ToolCall {
                        id: "c".into(),
                        tool: "t".into(),
                        args: Some(data(json!({"n": 2.0}))),
                        mediation: Mediation::RequiresApproval,
                        idempotency_key: "k".into(),
                    }),
                    Part::ToolResult(ToolResult {
                        id: "c".into(),
                        content: vec![Part::Text(TextPart { text: "r".into() })],
                        ..ToolResult::default()
                    }),
                ],
            }),
        ),
        (
            EventKind::ModelCall,
            EventBody::ModelCall(ModelCall {
                model: "m".into(),
                params: [("t".to_owned(), "0".to_owned())].into(),
                input_hash: "h".into(),
                id: "id".into(),
            }),
        ),
        (
            EventKind::ToolCall,
            EventBody::ToolCall(ToolCall {
                id: "c".into(),
                tool: "t".into(),
                args: None,
                mediation: Mediation::InHarnessReported,
                idempotency_key: String::new(),
            }),
        ),
        (
            EventKind::ToolResult,
            EventBody::Result(ToolResult {
                id: "c".into(),
                output: Some(data(json!({"ok": 1.0}))),
                output_uri: "u".into(),
                output_digest: "d".into(),
                is_error: true,
                error: "e".into(),
                content: vec![Part::Empty],
                code: ToolResultCode::ExecutorError,
                approval_request_seq: 4,
                approval_decision_seq: 5,
                approval: None,
            }),
        ),
        (
            EventKind::ApprovalRequest,
            EventBody::Approval(ApprovalRequest {
                tool_call_id: "c".into(),
                reason: "r".into(),
            }),
        ),
        (
            EventKind::ApprovalResult,
            EventBody::ApprovalResult(ApprovalResult {
                tool_call_id: "c".into(),
                approved: true,
                reason: "ok".into(),
                request_seq: 4,
            }),
        ),
        (
            EventKind::Usage,
            EventBody::Usage(Usage {
                model: "m".into(),
                input_tokens: 1,
                output_tokens: i64::MAX,
                reasoning_tokens: i64::MIN,
                cached_input_tokens: 0,
            }),
        ),
        (
            EventKind::Lifecycle,
            EventBody::Lifecycle(Lifecycle {
                kind: LifecycleKind::Suspend,
                detail: "d".into(),
                snapshot: Some(SnapshotRef {
                    local: "l".into(),
                    external_uri: "x".into(),
                    memory: true,
                    sealed: false,
                }),
                compute_instance: "ci".into(),
            }),
        ),
        (
            EventKind::End,
            EventBody::End(HarnessEnd {
                state: "FAILED".into(),
                error: Some(ErrorInfo {
                    code: 13,
                    description: "boom".into(),
                }),
            }),
        ),
        (
            EventKind::Error,
            EventBody::Error(ErrorInfo {
                code: 2,
                description: "x".into(),
            }),
        ),
        (
            EventKind::ExecutionStart,
            EventBody::ExecutionStart(ExecutionStart {
                model: "m".into(),
                config: vec![0, 0xff, 0x20, 0x0a, 0x09],
                resume_from_seq: 9_007_199_254_740_993,
                input_count: Some(0),
                harness: "h".into(),
                harness_version: "v".into(),
                compute_instance: "ci".into(),
            }),
        ),
        (
            EventKind::Parked,
            EventBody::Parked(ApprovalRef {
                execution_id: "e".into(),
                tool_call_id: "c".into(),
                request_seq: 4,
            }),
        ),
    ];
    bodies
        .into_iter()
        .map(|(kind, body)| Event {
            execution_id: "0123456789abcdef".into(),
            timestamp: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 120_000_000,
            }),
            schema_version: 1,
            kind,
            body: Some(body),
            actor: IdentityRef {
                principal: "agent://a".into(),
                issuer: "entra".into(),
                subject: "sub-1".into(),
            },
            redacted: Vec::new(),
        })
        .collect()
}

#[test]
fn every_body_round_trips_in_the_current_shape() {
    for event in rich_events() {
        let json = event_to_json(&event, GoShape::V030).unwrap();
        assert!(
            json.contains(r#""Timestamp":"2023-11-14T22:13:20.12Z""#),
            "{json}"
        );
        let mut shape = GoShape::V012;
        let decoded = decode_event(&GoValue::parse(&json).unwrap(), &mut shape).unwrap();
        assert_eq!(decoded, event, "{json}");
        // The detected shape is the oldest one that writes exactly this text.
        let oldest = GoShape::ALL
            .into_iter()
            .find(|s| event_to_json(&event, *s).as_ref() == Ok(&json))
            .unwrap();
        assert_eq!(shape, oldest, "{json}");
        // And the pretty form reads back the same.
        let pretty = indent(&json);
        let mut shape = GoShape::V012;
        assert_eq!(
            decode_event(&GoValue::parse(&pretty).unwrap(), &mut shape).unwrap(),
            event
        );
    }
    // No body at all: every member null.
    let bare = Event::default();
    let json = event_to_json(&bare, GoShape::V030).unwrap();
    assert_eq!(
        json,
        concat!(
            r#"{"ExecutionID":"","Timestamp":"0001-01-01T00:00:00Z","SchemaVersion":0,"Kind":"","#,
            r#""Message":null,"ModelCall":null,"ToolCall":null,"Result":null,"Approval":null,"#,
            r#""ApprovalResult":null,"Usage":null,"Lifecycle":null,"End":null,"Err":null,"#,
            r#""ExecutionStart":null,"Actor":{"Principal":"","Issuer":"","Subject":""}}"#
        )
    );
    let mut shape = GoShape::V012;
    assert_eq!(
        decode_event(&GoValue::parse(&json).unwrap(), &mut shape).unwrap(),
        bare
    );
}

#[test]
fn decoding_is_tolerant_like_go() {
    let mut shape = GoShape::V012;
    // Missing keys are zero values, unknown keys are ignored, keys match case-insensitively.
    let event = decode_event(
        &GoValue::parse(
            r#"{"kind":"OUTPUT","Bogus":[1,{"x":2}],"message":{"role":"assistant","parts":[{"text":{"text":"hi"}}]}}"#,
        )
        .unwrap(),
        &mut shape,
    )
    .unwrap();
    assert_eq!(
        event,
        Event::new(
            EventKind::Output,
            EventBody::Message(Message::text_message("assistant", "hi"))
        )
    );
    assert_eq!(shape, GoShape::V012);
    // null for a non-pointer leaves the zero value; the first set body member wins.
    let event = decode_event(
        &GoValue::parse(
            r#"{"ExecutionID":null,"Actor":null,"Usage":{"Model":"u"},"End":{"State":"COMPLETED"},"Message":null}"#,
        )
        .unwrap(),
        &mut shape,
    )
    .unwrap();
    assert_eq!(
        event.body,
        Some(EventBody::Usage(Usage {
            model: "u".into(),
            ..Usage::default()
        }))
    );
    assert_eq!(event.actor, IdentityRef::default());
    // An empty data object is still a data part; a part with nothing set is empty.
    let mut shape = GoShape::V012;
    let event = decode_event(
        &GoValue::parse(r#"{"Message":{"Parts":[{"Data":{}},{},null]}}"#).unwrap(),
        &mut shape,
    )
    .unwrap();
    assert_eq!(
        event.message().unwrap().parts,
        vec![Part::Data(serde_json::Map::new()), Part::Empty, Part::Empty]
    );
}

fn go_json_error(text: &str) -> (String, String) {
    let mut shape = GoShape::V012;
    let value = GoValue::parse(text).expect("test input is JSON");
    match decode_event(&value, &mut shape) {
        Err(WireError::GoJson { path, reason }) => (path, reason),
        other => panic!("{text}: expected a go json error, got {other:?}"),
    }
}

#[test]
fn type_errors_name_the_path() {
    assert_eq!(
        go_json_error(r#"{"Message":{"Parts":[{},{"File":{"Bytes":5}}]}}"#),
        (
            "Message.Parts[1].File.Bytes".into(),
            "expected a base64 string, found number 5".into()
        )
    );
    assert_eq!(
        go_json_error(r#"{"SchemaVersion":"1"}"#),
        (
            "SchemaVersion".into(),
            "expected an int32, found a string".into()
        )
    );
    assert_eq!(
        go_json_error(r#"{"Timestamp":"yesterday"}"#),
        (
            "Timestamp".into(),
            "invalid RFC 3339 time \"yesterday\"".into()
        )
    );
    assert_eq!(
        go_json_error(r#"{"ModelCall":{"Params":{"t":0}}}"#),
        (
            "ModelCall.Params.t".into(),
            "expected a string, found number 0".into()
        )
    );
    assert_eq!(
        go_json_error(r#"{"Actor":[]}"#),
        ("Actor".into(), "expected an object, found an array".into())
    );
    // A malformed later body member fails even though an earlier one is kept, as in Go.
    assert_eq!(
        go_json_error(r#"{"Message":{},"Err":{"Code":1.5}}"#).0,
        "Err.Code"
    );
    let mut shape = GoShape::V012;
    let err = decode_event(&GoValue::String("x".into()), &mut shape).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid go json: expected an object, found a string"
    );
    assert_eq!(
        err.within("Event").within("[3]").to_string(),
        "invalid go json at [3].Event: expected an object, found a string"
    );
}
