//! The model-input hash (I0) against the shared vectors (spec: hashing-and-conformance "Two other
//! hashes", semantics §2.6), and the Go JSON details it depends on.
//!
//! Each vector's request is rebuilt here from its `request_description`; both the preimage bytes
//! and the hash must match. An unknown vector id fails the test, so a vector added to the file
//! cannot be skipped silently.
#![allow(clippy::tests_outside_test_module)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use agentsessions_api::{
    ApprovalResult, FilePart, Mediation, Message, ModelRequest, Part, ReasoningPart, TextPart,
    ToolCall, ToolChoice, ToolChoiceMode, ToolDefinition, ToolResult, ToolResultCode,
};
use agentsessions_wire::gojson::{GoValue, decode_model_request, model_request_to_json};
use agentsessions_wire::model_input_hash;
use serde_json::{Value as Json, json};

fn vectors() -> Vec<Json> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/golden/model_input_hash_vectors.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: Json = serde_json::from_str(&text).expect("vector file is JSON");
    file["vectors"].as_array().expect("vectors array").clone()
}

fn text(t: &str) -> Part {
    Part::Text(TextPart { text: t.into() })
}

fn object(value: Json) -> serde_json::Map<String, Json> {
    match value {
        Json::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// `controller/inputhash_compat_test.go`'s legacy request: every original part kind.
fn legacy_request() -> ModelRequest {
    ModelRequest {
        model: "m".into(),
        messages: vec![
            Message {
                role: "system".into(),
                parts: vec![text("be brief")],
            },
            Message {
                role: "user".into(),
                parts: vec![
                    text("hi"),
                    Part::File(FilePart {
                        mime: "image/png".into(),
                        bytes: vec![0x01, 0x02],
                        name: "img".into(),
                        digest: "sha256:aa".into(),
                        ..FilePart::default()
                    }),
                    Part::Data(object(json!({"b": 1.5, "a": "x"}))),
                ],
            },
            Message {
                role: "assistant".into(),
                parts: vec![
                    Part::Reasoning(ReasoningPart {
                        provider: "p".into(),
                        model_id: "m".into(),
                        opaque: b"r".to_vec(),
                        item_id: "rs_1".into(),
                        ordinal: 1,
                        summary: vec![text("brief")],
                        ..ReasoningPart::default()
                    }),
                    text("yo"),
                ],
            },
        ],
        params: Some(BTreeMap::from([("temperature".into(), "0".into())])),
        ..ModelRequest::default()
    }
}

/// The echo harness's request for one input.
fn echo_request(input: &str) -> ModelRequest {
    ModelRequest {
        model: "echo".into(),
        messages: vec![Message::text_message("user", input)],
        params: None,
        ..ModelRequest::default()
    }
}

#[test]
fn every_vector_reproduces_its_preimage_and_hash() {
    let vectors = vectors();
    assert_eq!(vectors.len(), 5);
    for v in &vectors {
        let id = v["id"].as_str().expect("id");
        let request = match id {
            "legacy_request_all_part_kinds" => legacy_request(),
            "echo_request_hello" => echo_request("hello"),
            "echo_request_first" => echo_request("first"),
            "echo_request_second" => echo_request("second"),
            "echo_request_new" => echo_request("new"),
            other => panic!("unknown vector {other}: add its request here"),
        };
        assert_eq!(
            model_request_to_json(&request),
            v["preimage"].as_str().expect("preimage"),
            "{id}"
        );
        assert_eq!(
            model_input_hash(&request),
            v["expected_input_hash"].as_str().expect("hash"),
            "{id}"
        );
    }
}

#[test]
fn preimages_decode_back_to_the_same_request() {
    for v in vectors() {
        let preimage = v["preimage"].as_str().expect("preimage");
        let request = decode_model_request(&GoValue::parse(preimage).unwrap()).unwrap();
        assert_eq!(model_request_to_json(&request), preimage);
    }
    let decoded =
        decode_model_request(&GoValue::parse(&model_request_to_json(&legacy_request())).unwrap())
            .unwrap();
    assert_eq!(decoded, legacy_request());
}

fn tool_request() -> ModelRequest {
    ModelRequest {
        tools: vec![ToolDefinition {
            name: "read".into(),
            description: "reads <files> & more".into(),
            input_schema: Some(object(json!({"type": "object", "required": ["path"]}))),
        }],
        ..echo_request("hello")
    }
}

#[test]
fn tools_are_added_after_the_original_keys() {
    let plain = model_request_to_json(&echo_request("hello"));
    let with_tools = model_request_to_json(&tool_request());
    // Everything the old request wrote is still there, unchanged and first.
    let stem = plain.strip_suffix('}').expect("object");
    assert_eq!(
        with_tools,
        format!(
            "{stem},\"Tools\":[{{\"Name\":\"read\",\"Description\":\"reads \\u003cfiles\\u003e \\u0026 more\",\"InputSchema\":{{\"required\":[\"path\"],\"type\":\"object\"}}}}]}}"
        )
    );
    assert_ne!(
        model_input_hash(&tool_request()),
        model_input_hash(&echo_request("hello"))
    );

    let chosen = ModelRequest {
        tool_choice: Some(ToolChoice {
            mode: ToolChoiceMode::Required,
            name: "read".into(),
        }),
        ..tool_request()
    };
    let json = model_request_to_json(&chosen);
    assert!(
        json.ends_with(",\"ToolChoice\":{\"Mode\":\"REQUIRED\",\"Name\":\"read\"}}"),
        "{json}"
    );
    // A present but default choice is still written: omitempty drops only a nil pointer.
    let default_choice = ModelRequest {
        tool_choice: Some(ToolChoice::default()),
        ..echo_request("hello")
    };
    assert!(
        model_request_to_json(&default_choice)
            .ends_with(",\"Params\":null,\"ToolChoice\":{\"Mode\":\"\",\"Name\":\"\"}}")
    );
    for request in [chosen, default_choice] {
        let json = model_request_to_json(&request);
        assert_eq!(
            decode_model_request(&GoValue::parse(&json).unwrap()).unwrap(),
            request
        );
    }
}

#[test]
fn tool_parts_write_their_keys_only_when_set() {
    let call = ToolCall {
        id: "c1".into(),
        tool: "read".into(),
        args: Some(object(json!({"path": "/etc/hosts"}))),
        mediation: Mediation::ControllerMediated,
        idempotency_key: String::new(),
    };
    let receipt = ToolResult {
        id: "c1".into(),
        output: Some(object(json!({"ok": true}))),
        code: ToolResultCode::ExecutorError,
        is_error: true,
        approval_request_seq: 4,
        // Transient: never part of the Go JSON.
        approval: Some(ApprovalResult {
            tool_call_id: "c1".into(),
            approved: true,
            ..ApprovalResult::default()
        }),
        ..ToolResult::default()
    };
    let request = ModelRequest {
        model: "m".into(),
        messages: vec![
            Message {
                role: "assistant".into(),
                parts: vec![Part::ToolCall(call)],
            },
            Message {
                role: "tool".into(),
                parts: vec![Part::ToolResult(receipt)],
            },
        ],
        ..ModelRequest::default()
    };
    assert_eq!(
        model_request_to_json(&request),
        concat!(
            r#"{"Model":"m","Messages":["#,
            r#"{"Role":"assistant","Parts":[{"Text":null,"File":null,"Data":null,"Reasoning":null,"#,
            r#""ToolCall":{"ID":"c1","Tool":"read","Args":{"path":"/etc/hosts"},"Mediation":"CONTROLLER_MEDIATED","IdempotencyKey":""}}]},"#,
            r#"{"Role":"tool","Parts":[{"Text":null,"File":null,"Data":null,"Reasoning":null,"#,
            r#""ToolResult":{"ID":"c1","Output":{"ok":true},"OutputURI":"","OutputDigest":"","IsError":true,"Error":"","Code":2,"ApprovalRequestSeq":4}}]}],"#,
            r#""Params":null}"#
        )
    );
    let without_approval = {
        let mut r = request.clone();
        if let Part::ToolResult(result) = &mut r.messages[1].parts[0] {
            result.approval = None;
        }
        r
    };
    assert_eq!(
        model_input_hash(&request),
        model_input_hash(&without_approval)
    );
    let decoded =
        decode_model_request(&GoValue::parse(&model_request_to_json(&request)).unwrap()).unwrap();
    assert_eq!(decoded, without_approval);
}

#[test]
fn nil_and_empty_params_hash_differently() {
    let empty = ModelRequest {
        params: Some(BTreeMap::new()),
        ..echo_request("hello")
    };
    assert!(model_request_to_json(&empty).ends_with(",\"Params\":{}}"));
    assert!(model_request_to_json(&echo_request("hello")).ends_with(",\"Params\":null}"));
    assert_ne!(
        model_input_hash(&empty),
        model_input_hash(&echo_request("hello"))
    );
}

#[test]
fn data_numbers_and_strings_follow_go() {
    let request = ModelRequest {
        messages: vec![Message {
            role: "user".into(),
            parts: vec![Part::Data(object(json!({
                "big": 1e21,
                "tiny": 1e-7,
                "small": 0.000001,
                "hundred": 100.0,
                "int": 100,
                "neg": -0.0,
                "exact": 9_007_199_254_740_993_i64,
                "html": "<b>&</b>\u{2028}",
                "nested": {"z": [1.5, null, false], "a": {}}
            })))],
        }],
        ..ModelRequest::default()
    };
    let json = model_request_to_json(&request);
    assert!(
        json.contains(concat!(
            r#""Data":{"big":1e+21,"exact":9007199254740993,"#,
            r#""html":"\u003cb\u003e\u0026\u003c/b\u003e\u2028","hundred":100,"int":100,"#,
            r#""neg":-0,"nested":{"a":{},"z":[1.5,null,false]},"small":0.000001,"tiny":1e-7}"#
        )),
        "{json}"
    );
}

#[test]
fn empty_collections_are_go_nil() {
    let request = ModelRequest::default();
    assert_eq!(
        model_request_to_json(&request),
        r#"{"Model":"","Messages":null,"Params":null}"#
    );
    let request = ModelRequest {
        messages: vec![Message::default()],
        ..ModelRequest::default()
    };
    assert_eq!(
        model_request_to_json(&request),
        r#"{"Model":"","Messages":[{"Role":"","Parts":null}],"Params":null}"#
    );
}
