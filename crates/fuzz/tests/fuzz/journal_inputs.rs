//! The journal's outside inputs: ListSessions page tokens, the reference JSON journal format
//! (import, export, load with hash checks), and the Go-JSON parser under it. Tokens and files
//! decode or fail; what decodes writes back exactly.

use agentsessions_fuzz::{Corpus, config, config_scaled, run, text_or_mutation};
use agentsessions_journal::Log as _;
use agentsessions_journal::MemoryJournal;
use agentsessions_journal::export::{export_reference_json, import_reference_json, load_records};
use agentsessions_journal::page_token::PageCursor;
use agentsessions_wire::gojson::GoValue;
use proptest::prelude::*;

#[test]
fn page_tokens_decode_or_fail_and_round_trip() {
    let inputs = text_or_mutation(Corpus::load("page_tokens").unwrap().bytes());
    run("journal/page_token", config(), &inputs, |token| {
        if let Ok(Some(cursor)) = PageCursor::decode(&token) {
            let again = PageCursor::decode(&cursor.encode()).unwrap();
            prop_assert_eq!(again, Some(cursor));
        }
        Ok(())
    });
}

#[test]
fn any_cursor_round_trips_through_its_token() {
    let cursors = (any::<i64>(), any::<String>())
        .prop_map(|(created_at_ns, uid)| PageCursor { created_at_ns, uid });
    run("journal/page_cursor", config(), &cursors, |cursor| {
        prop_assert_eq!(PageCursor::decode(&cursor.encode()).unwrap(), Some(cursor));
        Ok(())
    });
}

#[test]
fn go_json_parses_or_fails_and_writes_back_what_it_read() {
    let inputs = text_or_mutation(Corpus::load("reference_json").unwrap().bytes());
    run("wire/gojson_parse", config(), &inputs, |text| {
        if let Ok(value) = GoValue::parse(&text) {
            let compact = value.to_compact();
            let again = GoValue::parse(&compact).unwrap();
            prop_assert_eq!(again.to_compact(), compact);
        }
        Ok(())
    });
}

#[test]
fn reference_journals_import_or_fail_and_export_back_exactly() {
    let corpus = Corpus::load("reference_json").unwrap();
    // Every published file exports back byte for byte.
    for (name, bytes) in &corpus.seeds {
        let text = std::str::from_utf8(bytes).unwrap();
        let imported = import_reference_json(text).unwrap();
        let exported = export_reference_json(&imported.records, imported.format).unwrap();
        assert_eq!(exported, text, "{name}");
    }
    let inputs = text_or_mutation(corpus.bytes());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    run(
        "journal/reference_json",
        config_scaled(1, 2),
        &inputs,
        |text| {
            let Ok(imported) = import_reference_json(&text) else {
                return Ok(());
            };
            if let Ok(exported) = export_reference_json(&imported.records, imported.format) {
                let again = import_reference_json(&exported).unwrap();
                prop_assert_eq!(&again.records, &imported.records);
            }
            // Loading checks every hash and the chain: whatever the file says, an error or a
            // reproduced chain, in bounded time.
            let journal = MemoryJournal::new();
            let loaded = runtime.block_on(load_records(&journal, "s", &imported.records));
            if loaded.is_ok() {
                let head = runtime.block_on(journal.head("s")).unwrap();
                prop_assert_eq!(usize::try_from(head).unwrap(), imported.records.len());
            }
            Ok(())
        },
    );
}

// Regression (found while writing this target): loading a reference journal raised the
// session's fence one new fence at a time up to each record's fence, so a file claiming fence
// 9223372036854775807 held the loader (and the journal's writer) for ever; and a record at seq
// i64::MIN overflowed `seq - 1`. Both are refused now, at once.
#[test]
fn a_reference_journal_with_an_absurd_fence_or_seq_is_refused_at_once() {
    let corpus = Corpus::load("reference_json").unwrap();
    let text = String::from_utf8(corpus.seed("completed.json").unwrap().to_vec()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (fence, seq) in [(i64::MAX, None), (1, Some(i64::MIN))] {
        let mut imported = import_reference_json(&text).unwrap();
        imported.records[0].fence = fence;
        if let Some(seq) = seq {
            imported.records[0].seq = seq;
        }
        let journal = MemoryJournal::new();
        let loaded = runtime.block_on(async {
            tokio::time::timeout(
                std::time::Duration::from_secs(10),
                load_records(&journal, "s", &imported.records),
            )
            .await
        });
        let refused = loaded.expect("the load returns at once");
        assert!(refused.is_err(), "fence {fence} seq {seq:?} was loaded");
    }
}
