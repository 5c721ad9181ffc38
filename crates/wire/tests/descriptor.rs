//! Checks the embedded `FileDescriptorSet` against the wire contract (`wire.md` plus the
//! project's additions): file names, message counts, reserved ranges, field numbers, presence,
//! oneof membership and the three services.
#![allow(clippy::tests_outside_test_module)]

use agentsessions_wire::pb::FILE_DESCRIPTOR_SET;
use prost::Message as _;
use prost_types::field_descriptor_proto::Label;
use prost_types::{
    DescriptorProto, FileDescriptorProto, FileDescriptorSet, ServiceDescriptorProto,
};

fn descriptor_set() -> FileDescriptorSet {
    FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("embedded descriptor set decodes")
}

fn file<'a>(set: &'a FileDescriptorSet, name: &str) -> &'a FileDescriptorProto {
    set.file
        .iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("file {name} missing"))
}

/// Finds a top-level message of the package by simple name in any file.
fn message<'a>(set: &'a FileDescriptorSet, name: &str) -> &'a DescriptorProto {
    set.file
        .iter()
        .flat_map(|f| f.message_type.iter())
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("message {name} missing"))
}

fn service<'a>(set: &'a FileDescriptorSet, name: &str) -> &'a ServiceDescriptorProto {
    set.file
        .iter()
        .flat_map(|f| f.service.iter())
        .find(|s| s.name() == name)
        .unwrap_or_else(|| panic!("service {name} missing"))
}

/// Counts messages, nested ones included, skipping synthesized map-entry types.
fn count_messages(messages: &[DescriptorProto]) -> usize {
    messages
        .iter()
        .filter(|m| !m.options.as_ref().is_some_and(|o| o.map_entry()))
        .map(|m| 1 + count_messages(&m.nested_type))
        .sum()
}

/// Field numbers of `msg` in declaration order, as `(name, number)`.
fn fields(msg: &DescriptorProto) -> Vec<(&str, i32)> {
    msg.field.iter().map(|f| (f.name(), f.number())).collect()
}

fn field<'a>(msg: &'a DescriptorProto, name: &str) -> &'a prost_types::FieldDescriptorProto {
    msg.field
        .iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("{}.{name} missing", msg.name()))
}

/// Name of the (non-synthetic) oneof a field belongs to, if any.
fn oneof_of<'a>(msg: &'a DescriptorProto, name: &str) -> Option<&'a str> {
    let f = field(msg, name);
    if f.proto3_optional() {
        return None;
    }
    let index = usize::try_from(f.oneof_index?).expect("oneof index is non-negative");
    Some(msg.oneof_decl[index].name())
}

fn reserved(msg: &DescriptorProto) -> Vec<(i32, i32)> {
    msg.reserved_range
        .iter()
        .map(|r| (r.start(), r.end()))
        .collect()
}

fn methods(svc: &ServiceDescriptorProto) -> Vec<&str> {
    svc.method.iter().map(|m| m.name()).collect()
}

#[test]
fn files_are_the_four_contract_files_with_bare_names() {
    let set = descriptor_set();
    let mut names: Vec<&str> = set.file.iter().map(FileDescriptorProto::name).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "common.proto",
            "harness.proto",
            "harness_registry.proto",
            "session.proto"
        ]
    );
    for f in &set.file {
        assert_eq!(f.package(), "agentsessions.v1", "{}", f.name());
        assert_eq!(f.syntax(), "proto3", "{}", f.name());
        assert_eq!(
            f.options.as_ref().map(|o| o.go_package()),
            Some("github.com/aramase/agentsessions/api/genpb;agentsessionsv1"),
            "{}",
            f.name()
        );
    }
    assert_eq!(
        file(&set, "common.proto").dependency,
        [
            "google/protobuf/timestamp.proto",
            "google/protobuf/struct.proto"
        ]
    );
    assert_eq!(file(&set, "harness.proto").dependency, ["common.proto"]);
    assert_eq!(
        file(&set, "harness_registry.proto").dependency,
        [
            "common.proto",
            "harness.proto",
            "google/protobuf/timestamp.proto"
        ]
    );
    assert_eq!(
        file(&set, "session.proto").dependency,
        [
            "common.proto",
            "google/protobuf/struct.proto",
            "google/protobuf/timestamp.proto"
        ]
    );
}

#[test]
fn message_counts() {
    let set = descriptor_set();
    assert!(count_messages(&file(&set, "common.proto").message_type) >= 25);
    // 25 from the contract plus the MintRequest extension.
    assert_eq!(count_messages(&file(&set, "common.proto").message_type), 26);
    // 9 from the contract plus the MintResult extension.
    assert_eq!(
        count_messages(&file(&set, "harness.proto").message_type),
        10
    );
    assert_eq!(
        count_messages(&file(&set, "harness_registry.proto").message_type),
        10
    );
    // 20 published, plus this project's UsageTotals, the ListApprovals messages,
    // WatchRequest, the ReadRecords messages, and ToolProgress and WatchUpdate (extensions §11).
    assert_eq!(
        count_messages(&file(&set, "session.proto").message_type),
        29
    );
    assert_eq!(
        fields(message(&set, "ToolProgress")),
        [
            ("execution_id", 1),
            ("tool_call_id", 2),
            ("tool", 3),
            ("progress", 4),
            ("total", 5),
            ("message", 6)
        ]
    );
    assert_eq!(
        fields(message(&set, "ReadRecordsRequest")),
        [
            ("session", 1),
            ("from_seq", 2),
            ("to_seq", 3),
            ("max_records", 4)
        ]
    );
    assert_eq!(
        fields(message(&set, "ReadRecordsResponse")),
        [("records", 1), ("next_seq", 2), ("head_seq", 3)]
    );
    assert_eq!(
        fields(message(&set, "WatchRequest")),
        [("session", 1), ("from_seq", 2)]
    );
    let caller = message(&set, "CallerIdentity");
    assert_eq!(fields(caller), [("issuer", 1), ("subject", 2)]);
    assert_eq!(field(message(&set, "LogRecord"), "commit_time").number(), 6);
    assert_eq!(
        fields(message(&set, "PendingApproval")),
        [
            ("session_uid", 1),
            ("execution_id", 2),
            ("tool_call_id", 3),
            ("request_seq", 4),
            ("tool", 5),
            ("args", 6),
            ("reason", 7),
            ("requested_at", 8),
            ("project", 9),
            ("owner", 10),
        ]
    );
}

#[test]
fn reserved_numbers() {
    let set = descriptor_set();
    // Reserved ranges are half-open [start, end).
    let mut event = reserved(message(&set, "Event"));
    event.sort_unstable();
    assert_eq!(event, [(1, 2), (5, 6), (6, 7)]);
    assert_eq!(reserved(message(&set, "Session")), [(4, 5)]);
}

#[test]
fn tool_result_fields() {
    let set = descriptor_set();
    assert_eq!(
        fields(message(&set, "ToolResult")),
        [
            ("id", 1),
            ("output", 2),
            ("output_uri", 3),
            ("output_digest", 6),
            ("is_error", 4),
            ("error", 5),
            ("content", 7),
            ("code", 8),
            ("approval_request_seq", 9),
            ("approval_decision_seq", 10),
        ]
    );
}

#[test]
fn event_fields_and_body_oneof() {
    let set = descriptor_set();
    let event = message(&set, "Event");
    assert_eq!(
        fields(event),
        [
            ("execution_id", 2),
            ("ts", 3),
            ("schema_version", 4),
            ("kind", 7),
            ("message", 8),
            ("model", 9),
            ("tool", 10),
            ("result", 11),
            ("approval", 12),
            ("approval_result", 13),
            ("usage", 14),
            ("lifecycle", 15),
            ("end", 16),
            ("error", 17),
            ("execution_start", 19),
            ("parked", 20),
            ("mint_request", 21),
            ("actor", 18),
            ("redacted", 22),
        ]
    );
    for (name, _) in fields(event) {
        let expected = match name {
            "execution_id" | "ts" | "schema_version" | "kind" | "actor" | "redacted" => None,
            _ => Some("body"),
        };
        assert_eq!(oneof_of(event, name), expected, "Event.{name}");
    }
}

#[test]
fn execution_start_and_lifecycle_fields() {
    let set = descriptor_set();
    let start = message(&set, "ExecutionStart");
    assert_eq!(
        fields(start),
        [
            ("config", 1),
            ("resume_from_seq", 2),
            ("input_count", 3),
            ("harness", 4),
            ("harness_version", 5),
            ("model", 6),
            ("compute_instance", 7),
        ]
    );
    assert!(field(start, "input_count").proto3_optional());
    assert!(!field(start, "model").proto3_optional());

    let lifecycle = message(&set, "Lifecycle");
    assert_eq!(field(lifecycle, "compute_instance").number(), 7);
    let kind = lifecycle
        .enum_type
        .iter()
        .find(|e| e.name() == "Kind")
        .expect("Lifecycle.Kind");
    let values: Vec<(&str, i32)> = kind.value.iter().map(|v| (v.name(), v.number())).collect();
    assert_eq!(
        values,
        [
            ("LIFECYCLE_UNSPECIFIED", 0),
            ("LIFECYCLE_SUSPEND", 1),
            ("LIFECYCLE_RESUME", 2),
            ("LIFECYCLE_FORK", 3),
            ("LIFECYCLE_BASELINE", 4),
            ("LIFECYCLE_CANCEL", 5),
            ("LIFECYCLE_DELETE", 6),
        ]
    );

    let harness_start = message(&set, "Start");
    assert_eq!(field(harness_start, "model").number(), 6);
    assert_eq!(field(harness_start, "session_uid").number(), 7);
}

#[test]
fn session_fields() {
    let set = descriptor_set();
    let session = message(&set, "Session");
    assert_eq!(
        fields(session),
        [
            ("metadata", 1),
            ("harness", 2),
            ("model", 3),
            ("exec_state", 13),
            ("compute_state", 14),
            ("pending_approval", 15),
            ("last_seq", 5),
            ("parent_uid", 6),
            ("fork_seq", 7),
            ("identity", 8),
            ("compute", 9),
            ("origin", 10),
            ("labels", 11),
            ("annotations", 12),
            ("owner", 16),
            ("deletion_state", 17),
            ("usage", 18),
        ]
    );
    assert_eq!(
        field(session, "owner").type_name(),
        ".agentsessions.v1.CallerIdentity"
    );
    assert_eq!(
        field(session, "deletion_state").type_name(),
        ".agentsessions.v1.DeletionState"
    );
    let deletion = file(&set, "session.proto")
        .enum_type
        .iter()
        .find(|e| e.name() == "DeletionState")
        .expect("DeletionState");
    let values: Vec<(&str, i32)> = deletion
        .value
        .iter()
        .map(|v| (v.name(), v.number()))
        .collect();
    assert_eq!(
        values,
        [
            ("DELETION_STATE_UNSPECIFIED", 0),
            ("DELETION_ACTIVE", 1),
            ("DELETION_PENDING", 2),
        ]
    );
}

#[test]
fn explicit_presence_fields() {
    let set = descriptor_set();
    for (msg, name) in [
        ("ExecutionStart", "input_count"),
        ("ExecRequest", "expected_last_seq"),
        ("ApproveRequest", "approved"),
        ("ToolProgress", "total"),
    ] {
        let f = field(message(&set, msg), name);
        assert!(f.proto3_optional(), "{msg}.{name} must be proto3 optional");
        assert_eq!(f.label(), Label::Optional);
    }
    // ApprovalResult.approved is deliberately implicit presence.
    assert!(!field(message(&set, "ApprovalResult"), "approved").proto3_optional());
    let optional_count: usize = set
        .file
        .iter()
        .flat_map(|f| f.message_type.iter())
        .map(|m| m.field.iter().filter(|f| f.proto3_optional()).count())
        .sum();
    assert_eq!(optional_count, 4);
}

#[test]
fn other_oneofs() {
    let set = descriptor_set();
    for (msg, oneof, members) in [
        (
            "Part",
            "part",
            &[
                "text",
                "file",
                "data",
                "reasoning",
                "tool_call",
                "tool_result",
            ][..],
        ),
        ("FilePart", "source", &["bytes", "uri"][..]),
        (
            "ReasoningPart",
            "opaque",
            &["opaque_bytes", "opaque_uri"][..],
        ),
        (
            "ControllerFrame",
            "frame",
            &[
                "start",
                "cancel",
                "approval",
                "tool",
                "model",
                "park",
                "mint_result",
            ][..],
        ),
        (
            "ExecUpdate",
            "update",
            &["record", "delta", "session", "progress"][..],
        ),
        ("HarnessSpec", "placement", &["remote", "substrate"][..]),
    ] {
        let m = message(&set, msg);
        for name in members {
            assert_eq!(oneof_of(m, name), Some(oneof), "{msg}.{name}");
        }
    }
    assert_eq!(
        field(message(&set, "HarnessRegistration"), "unservable_reason").number(),
        10
    );
}

/// The token-minting extension (docs/extensions.md): numbers never reused or renumbered.
#[test]
fn mint_extension_fields() {
    let set = descriptor_set();
    assert_eq!(
        fields(message(&set, "MintRequest")),
        [("request_id", 1), ("audience", 2)]
    );
    assert_eq!(
        field(message(&set, "MintRequest"), "audience").label(),
        Label::Repeated
    );
    assert_eq!(
        fields(message(&set, "MintResult")),
        [("request_id", 1), ("token", 2), ("error", 3)]
    );
    assert_eq!(
        field(message(&set, "ControllerFrame"), "mint_result").number(),
        9
    );
    assert_eq!(field(message(&set, "Event"), "mint_request").number(), 21);
}

#[test]
fn services() {
    let set = descriptor_set();
    let sessions = service(&set, "Sessions");
    assert_eq!(
        methods(sessions),
        [
            "CreateSession",
            "GetSession",
            "ListSessions",
            "DeleteSession",
            "Exec",
            "Replay",
            "Approve",
            "Cancel",
            "Suspend",
            "Resume",
            "Fork",
            "ListApprovals",
            "ReadRecords",
            "Watch",
            "WatchUpdates",
        ]
    );
    assert_eq!(methods(service(&set, "Harness")), ["Describe", "Connect"]);
    assert_eq!(
        methods(service(&set, "HarnessRegistry")),
        [
            "RegisterHarness",
            "GetHarness",
            "ListHarnesses",
            "RetireHarness"
        ]
    );

    let streaming: Vec<(&str, bool, bool)> = set
        .file
        .iter()
        .flat_map(|f| f.service.iter())
        .flat_map(|s| s.method.iter())
        .filter(|m| m.client_streaming() || m.server_streaming())
        .map(|m| (m.name(), m.client_streaming(), m.server_streaming()))
        .collect();
    let mut streaming = streaming;
    streaming.sort_unstable();
    assert_eq!(
        streaming,
        [
            ("Connect", true, true),
            ("Exec", false, true),
            ("Replay", false, true),
            ("Watch", false, true),
            ("WatchUpdates", false, true)
        ]
    );
}
