//! The reference JSON journal format against the nine upstream fixtures (spec:
//! hashing-and-conformance (e)): every file imports with the record count of the spec's table,
//! exports back byte for byte in the format it was detected in, and re-verifies hash by hash with
//! the canonical content hash. Plus the errors: malformed input names where, and a legacy format
//! refuses records it cannot hold. Loading the fixtures into a SQLite file is tested beside that
//! backend (`crates/sqlite/tests/reference_json.rs`).
#![allow(clippy::tests_outside_test_module)]

use std::path::PathBuf;

use agentsessions_api::{
    Event, EventBody, EventKind, ExecutionStart, Message, Part, Timestamp, ToolCall, ToolResult,
    ToolResultCode,
};
use agentsessions_journal::Log as _;
use agentsessions_journal::LogRecord;
use agentsessions_journal::export::{
    ExportError, ImportedJournal, JsonFormat, export_reference_json, import_reference_json,
};
use agentsessions_wire::{WireError, content_hash, pb};

/// The spec's table: file, record count, and the writer the file comes from.
const FIXTURES: [(&str, usize, JsonFormat); 9] = [
    ("completed.json", 4, JsonFormat::V012),
    ("crashed-input.json", 1, JsonFormat::V012),
    ("crashed-model.json", 2, JsonFormat::V012),
    ("crashed-output.json", 3, JsonFormat::V012),
    ("multi-turn.json", 8, JsonFormat::V012),
    ("multi-turn-crashed-output.json", 7, JsonFormat::V012),
    ("upgraded-resume.json", 4, JsonFormat::V012ExecutionStart),
    ("mixed-completed.json", 9, JsonFormat::V012ExecutionStart),
    ("mixed-interrupted.json", 8, JsonFormat::V012ExecutionStart),
];

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/reference-v0.1.2")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn import(name: &str) -> ImportedJournal {
    import_reference_json(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn all_fixtures_import_with_the_expected_counts_and_formats() {
    let mut total = 0;
    for (name, count, format) in FIXTURES {
        let journal = import(name);
        assert_eq!(journal.records.len(), count, "{name}");
        assert_eq!(journal.format, format, "{name}");
        for (i, record) in journal.records.iter().enumerate() {
            assert_eq!(record.seq, i64::try_from(i).unwrap() + 1, "{name}");
            assert_eq!(record.hash.len(), 64, "{name}");
        }
        total += count;
    }
    assert_eq!(total, 46);
}

#[test]
fn all_fixtures_export_byte_for_byte() {
    for (name, _, _) in FIXTURES {
        let text = fixture(name);
        let journal = import(name);
        assert_eq!(
            export_reference_json(&journal.records, journal.format).unwrap(),
            text,
            "{name}"
        );
    }
}

#[test]
fn all_fixture_hashes_and_links_recompute() {
    for (name, _, _) in FIXTURES {
        let mut prev = String::new();
        for record in import(name).records {
            assert_eq!(record.prev_hash, prev, "{name} seq {} link", record.seq);
            let hash = content_hash(
                &record.prev_hash,
                record.seq,
                &pb::Event::from(&record.event),
            )
            .unwrap_or_else(|e| panic!("{name} seq {}: {e}", record.seq));
            assert_eq!(hash, record.hash, "{name} seq {}", record.seq);
            prev = record.hash;
        }
    }
}

#[test]
fn fixture_records_hold_the_expected_events() {
    let journal = import("mixed-completed.json");
    let kinds: Vec<EventKind> = journal.records.iter().map(|r| r.event.kind).collect();
    use EventKind::*;
    assert_eq!(
        kinds,
        [
            Input,
            ModelCall,
            Output,
            End,
            ExecutionStart,
            Input,
            ModelCall,
            Output,
            End
        ]
    );
    let fences: Vec<i64> = journal.records.iter().map(|r| r.fence).collect();
    assert_eq!(fences, [1, 1, 1, 2, 3, 3, 3, 3, 3]);
    assert_eq!(
        journal.records[7]
            .event
            .message()
            .map(Message::text)
            .as_deref(),
        Some("echo:new")
    );
    assert!(
        journal.records[4..]
            .iter()
            .all(|r| r.event.execution_id == "721cca6eababd5be")
    );
    assert!(
        journal.records[..4]
            .iter()
            .all(|r| r.event.execution_id.is_empty())
    );
}

#[test]
fn newer_formats_accept_every_fixture() {
    for (name, _, format) in FIXTURES {
        let journal = import(name);
        for newer in JsonFormat::ALL.into_iter().filter(|f| *f > format) {
            let text = export_reference_json(&journal.records, newer).unwrap();
            let again = import_reference_json(&text).unwrap();
            assert_eq!(again.records, journal.records, "{name} as {newer}");
            // Only an execution start has v0.3.0 keys (`Harness` …) in these files; without one,
            // the execution-start layout writes the same text.
            let has_start = journal
                .records
                .iter()
                .any(|r| r.event.execution_start().is_some());
            let expected = if has_start && newer == JsonFormat::V030 {
                JsonFormat::V030
            } else {
                JsonFormat::V012ExecutionStart
            };
            assert_eq!(again.format, expected, "{name} as {newer}");
        }
    }
}

#[test]
fn legacy_formats_refuse_what_they_cannot_hold() {
    let journal = import("mixed-completed.json");
    assert_eq!(
        export_reference_json(&journal.records, JsonFormat::V012),
        Err(ExportError::Unrepresentable {
            seq: 5,
            path: "Event.ExecutionStart".into(),
            format: JsonFormat::V012,
        })
    );

    let mut records = import("completed.json").records;
    records[2].event.body = Some(EventBody::Message(Message {
        role: "assistant".into(),
        parts: vec![Part::ToolCall(ToolCall::default())],
    }));
    let err = export_reference_json(&records, JsonFormat::V012ExecutionStart).unwrap_err();
    assert_eq!(
        err.to_string(),
        "record seq 3: Event.Message.Parts[0].ToolCall cannot be written in the v0.1.2+execution-start json format"
    );

    records[2].event.body = Some(EventBody::Result(ToolResult {
        code: ToolResultCode::ApprovalDenied,
        ..ToolResult::default()
    }));
    assert!(matches!(
        export_reference_json(&records, JsonFormat::V012),
        Err(ExportError::Unrepresentable { seq: 3, ref path, .. }) if path == "Event.Result.Code"
    ));

    records[0].event.body = Some(EventBody::ExecutionStart(ExecutionStart {
        harness: "echo".into(),
        ..ExecutionStart::default()
    }));
    assert!(matches!(
        export_reference_json(&records, JsonFormat::V012ExecutionStart),
        Err(ExportError::Unrepresentable { seq: 1, ref path, .. }) if path == "Event.ExecutionStart.Harness"
    ));
    // The current format holds all of it, and reads back as such.
    let text = export_reference_json(&records, JsonFormat::V030).unwrap();
    let again = import_reference_json(&text).unwrap();
    assert_eq!(again.format, JsonFormat::V030);
    assert_eq!(again.records, records);
}

#[test]
fn unwritable_timestamps_are_errors() {
    let mut records = import("crashed-input.json").records;
    records[0].event.timestamp = Some(Timestamp {
        seconds: 253_402_300_800, // year 10000
        nanos: 0,
    });
    assert!(matches!(
        export_reference_json(&records, JsonFormat::V012),
        Err(ExportError::Encode {
            seq: 1,
            source: WireError::InvalidTimestamp { .. }
        })
    ));
    records[0].event.timestamp = Some(Timestamp {
        seconds: 1_700_000_000,
        nanos: 5_000,
    });
    let text = export_reference_json(&records, JsonFormat::V012).unwrap();
    assert!(text.contains("\"Timestamp\": \"2023-11-14T22:13:20.000005Z\""));
    assert_eq!(import_reference_json(&text).unwrap().records, records);
}

fn invalid(text: &str) -> (String, String) {
    match import_reference_json(text) {
        Err(ExportError::Invalid { path, reason }) => (path, reason),
        other => panic!("expected an invalid-journal error, got {other:?}"),
    }
}

#[test]
fn malformed_files_say_where() {
    let text = fixture("completed.json");
    // Truncated after the first member of the second record (line 42 of the file).
    let cut = text.find("\"Seq\": 2,\n").unwrap() + "\"Seq\": 2,\n".len();
    let err = import_reference_json(&text[..cut]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid reference journal: unexpected end of input looking for beginning of object key string at line 43, column 1"
    );
    // Truncated inside a string.
    let cut = text.find("\"PrevHash\": \"62da").unwrap() + 16;
    assert_eq!(
        invalid(&text[..cut]),
        (
            String::new(),
            "unexpected end of input in string literal at line 43, column 21".into()
        )
    );

    // A string where Go has an int64.
    let quoted = text.replacen("\"Seq\": 2", "\"Seq\": \"2\"", 1);
    let err = import_reference_json(&quoted).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid reference journal at [1].Seq: expected an int64, found a string"
    );

    assert_eq!(
        invalid(&text.replacen("\"Kind\": \"OUTPUT\"", "\"Kind\": \"SHOUT\"", 1)),
        (
            "[2].Event.Kind".into(),
            "unknown event kind \"SHOUT\"".into()
        )
    );
    assert_eq!(
        invalid(&text.replacen("\"Text\": \"echo:hello\"", "\"Text\": 7", 1)),
        (
            "[2].Event.Message.Parts[0].Text.Text".into(),
            "expected a string, found number 7".into()
        )
    );
    assert_eq!(
        invalid(r#"{"Seq": 1}"#),
        (String::new(), "expected an array, found an object".into())
    );
    assert_eq!(
        invalid("[1]"),
        ("[0]".into(), "expected an object, found number 1".into())
    );
    assert_eq!(
        invalid(r#"[{"Seq": 1.5}]"#),
        (
            "[0].Seq".into(),
            "expected an int64, found number 1.5".into()
        )
    );
}

#[test]
fn tolerant_decoding_and_empty_journals() {
    // Go decodes null as "nothing" and ignores unknown keys; missing keys stay zero.
    let journal =
        import_reference_json(r#"[{"Seq": 1, "Extra": {"x": [1]}}, null, {"Event": null}]"#)
            .unwrap();
    assert_eq!(journal.format, JsonFormat::V012);
    assert_eq!(
        journal.records,
        vec![
            LogRecord {
                committed_at: None,
                seq: 1,
                prev_hash: String::new(),
                hash: String::new(),
                fence: 0,
                event: Event::default(),
            },
            LogRecord {
                committed_at: None,
                seq: 0,
                prev_hash: String::new(),
                hash: String::new(),
                fence: 0,
                event: Event::default(),
            },
            LogRecord {
                committed_at: None,
                seq: 0,
                prev_hash: String::new(),
                hash: String::new(),
                fence: 0,
                event: Event::default(),
            },
        ]
    );
    for format in JsonFormat::ALL {
        assert_eq!(export_reference_json(&[], format).unwrap(), "[]\n");
    }
    let empty = import_reference_json("[]\n").unwrap();
    assert!(empty.records.is_empty());
    assert!(import_reference_json("null").unwrap().records.is_empty());
}

#[tokio::test]
async fn loading_a_tampered_record_is_refused_at_its_seq() {
    use agentsessions_journal::export::load_records;
    use agentsessions_journal::{JournalError, MemoryJournal};

    let mut imported = import("completed.json");
    imported.records[2].hash = "0".repeat(64);
    let journal = MemoryJournal::new();
    match load_records(&journal, "s", &imported.records).await {
        Err(JournalError::ImportMismatch { seq: 3, .. }) => {}
        other => panic!("expected a mismatch at seq 3, got {other:?}"),
    }
    assert_eq!(
        journal.head("s").await.unwrap(),
        3,
        "loading stops at the record that did not reproduce"
    );
}
