//! SQLite journal faults and races with real files and real processes: schema stamps, layout,
//! tampering, two processes racing one session, and a writer killed mid-burst.
#![allow(
    clippy::print_stdout,
    clippy::tests_outside_test_module,
    clippy::unwrap_used
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{Event, EventBody, EventKind, ExecutionStart, Message};
use agentsessions_journal::chain::RawRecord;
use agentsessions_journal::sqlite::SCHEMA_VERSION;
use agentsessions_journal::{
    ChainFault, Journal, JournalError, SqliteJournal, TamperReason, verify_raw,
};
use rusqlite::Connection;

fn input(text: &str) -> Event {
    Event::new(
        EventKind::Input,
        EventBody::Message(Message::text_message("user", text)),
    )
    .with_execution("exec-1")
}

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("agentsessions.db")
}

async fn fill(path: &Path, session: &str, n: i64) {
    let j = SqliteJournal::open(path).unwrap();
    for i in 0..n {
        j.append(session, i, 0, input(&format!("record {i}")))
            .await
            .unwrap();
    }
}

fn raw_rows(path: &Path, session: &str) -> Vec<RawRecord> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT seq, prev_hash, hash, event FROM events WHERE session = ?1 ORDER BY seq")
        .unwrap();
    stmt.query_map([session], |r| {
        Ok(RawRecord {
            seq: r.get(0)?,
            prev_hash: r.get(1)?,
            hash: r.get(2)?,
            blob: r.get(3)?,
        })
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

// semantics §1.5: a database stamped by a newer build is refused and nothing is written
#[test]
fn future_schema_is_refused_and_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE future(x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    for _ in 0..2 {
        match SqliteJournal::open(&path) {
            Err(JournalError::UnsupportedSchema {
                found: 99,
                supported,
            }) => {
                assert_eq!(supported, SCHEMA_VERSION);
            }
            other => panic!("expected unsupported schema, got {other:?}"),
        }
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "file was modified");
    assert!(!path.with_extension("db-wal").exists());
}

#[test]
fn negative_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = -1;")
        .unwrap();
    assert!(matches!(
        SqliteJournal::open(&path),
        Err(JournalError::UnsupportedSchema { found: -1, .. })
    ));
}

// semantics §1.5: the reference layout, WAL, synchronous=FULL, user_version 2
#[tokio::test]
async fn layout_matches_the_reference_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    fill(&path, "s", 2).await;
    let conn = Connection::open(&path).unwrap();
    let columns = |table: &str| -> Vec<String> {
        let mut stmt = conn
            .prepare(&format!("PRAGMA table_info({table})"))
            .unwrap();
        stmt.query_map([], |r| r.get::<_, String>(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(
        columns("events"),
        ["session", "seq", "prev_hash", "hash", "fence", "event"]
    );
    assert_eq!(
        columns("sessions"),
        [
            "session",
            "fence",
            "project",
            "name",
            "harness",
            "model",
            "parent_uid",
            "fork_seq",
            "compute_state",
            "created_at",
            "updated_at",
            "labels",
            "annotations",
            "origin",
            "identity"
        ]
    );
    assert_eq!(
        columns("harnesses"),
        [
            "name",
            "uid",
            "spec",
            "spec_digest",
            "state",
            "retire_reason",
            "retired_at",
            "created_at",
            "updated_at"
        ]
    );
    assert_eq!(columns("reserved_harness_names"), ["name", "reserved_at"]);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 2);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // The blob is the protobuf binary of the wire Event, decodable without our domain types.
    let blob: Vec<u8> = conn
        .query_row("SELECT event FROM events WHERE seq = 1", [], |r| r.get(0))
        .unwrap();
    let wire = <agentsessions_wire::pb::Event as prost::Message>::decode(blob.as_slice()).unwrap();
    assert_eq!(wire.execution_id, "exec-1");
}

// semantics §1.5: v1 -> v2 rung reserves names used by sessions and execution starts
#[tokio::test]
async fn v1_file_migrates_and_reserves_recorded_harness_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    {
        let j = SqliteJournal::open(&path).unwrap();
        j.put_session(agentsessions_journal::SessionRow {
            uid: "s".into(),
            harness: "from-row".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        let start = Event::new(
            EventKind::ExecutionStart,
            EventBody::ExecutionStart(ExecutionStart {
                harness: "from-start".into(),
                input_count: Some(0),
                ..ExecutionStart::default()
            }),
        );
        j.append("s", 0, 0, start).await.unwrap();
    }
    // Turn it back into a v1 file: no registry tables, stamp 1.
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "DROP TABLE harnesses; DROP TABLE reserved_harness_names; DROP INDEX sessions_harness;
             PRAGMA user_version = 1;",
        )
        .unwrap();
    let j = SqliteJournal::open(&path).unwrap();
    assert!(j.is_harness_name_reserved("from-row").await.unwrap());
    assert!(j.is_harness_name_reserved("from-start").await.unwrap());
    assert!(!j.is_harness_name_reserved("free").await.unwrap());
    assert_eq!(
        agentsessions_journal::sqlite::schema_version_of(&path).unwrap(),
        Some(2)
    );
}

#[tokio::test]
async fn records_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    fill(&path, "s", 10).await;
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(j.head("s").await.unwrap(), 10);
    let records = j.read("s", 1, 0).await.unwrap();
    agentsessions_journal::verify_records(&records).unwrap();
    j.append("s", 10, 0, input("after reopen")).await.unwrap();
}

// issue: a flipped byte in a stored event is detected, with its seq
#[tokio::test]
async fn flipped_byte_in_stored_event_is_tampering_at_its_seq() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    fill(&path, "s", 5).await;
    assert_eq!(verify_raw(&raw_rows(&path, "s")).unwrap().records, 5);
    let conn = Connection::open(&path).unwrap();
    let mut blob: Vec<u8> = conn
        .query_row(
            "SELECT event FROM events WHERE session='s' AND seq=3",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // Change one character of the text ("record 2" -> "secord 2"): still decodable.
    let at = blob.windows(8).position(|w| w == b"record 2").unwrap();
    blob[at] ^= 0x01;
    conn.execute(
        "UPDATE events SET event=?1 WHERE session='s' AND seq=3",
        [&blob],
    )
    .unwrap();
    match verify_raw(&raw_rows(&path, "s")) {
        Err(ChainFault::Tampered {
            seq: 3,
            reason: TamperReason::ContentHashMismatch,
        }) => {}
        other => panic!("expected tamper at 3, got {other:?}"),
    }
    // The journal still reads it (reads never re-hash) — detection is the verifier's job.
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(j.read("s", 3, 3).await.unwrap().len(), 1);
}

#[tokio::test]
async fn altered_hash_and_broken_link_are_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    fill(&path, "s", 4).await;
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE events SET hash='deadbeef' WHERE session='s' AND seq=2",
        [],
    )
    .unwrap();
    assert_eq!(
        verify_raw(&raw_rows(&path, "s")).unwrap_err(),
        ChainFault::Tampered {
            seq: 2,
            reason: TamperReason::ContentHashMismatch
        }
    );
    let dir2 = tempfile::tempdir().unwrap();
    let path2 = db_in(&dir2);
    fill(&path2, "s", 4).await;
    Connection::open(&path2)
        .unwrap()
        .execute(
            "UPDATE events SET prev_hash='' WHERE session='s' AND seq=3",
            [],
        )
        .unwrap();
    assert_eq!(
        verify_raw(&raw_rows(&path2, "s")).unwrap_err(),
        ChainFault::Tampered {
            seq: 3,
            reason: TamperReason::PrevHashMismatch
        }
    );
    Connection::open(&path2)
        .unwrap()
        .execute("DELETE FROM events WHERE session='s' AND seq=2", [])
        .unwrap();
    assert!(matches!(
        verify_raw(&raw_rows(&path2, "s")).unwrap_err(),
        ChainFault::Tampered {
            seq: 3,
            reason: TamperReason::SeqGap { expected: 2 }
        }
    ));
}

#[tokio::test]
async fn undecodable_blob_is_not_reported_as_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    fill(&path, "s", 3).await;
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE events SET event=x'ffffffffff' WHERE session='s' AND seq=2",
            [],
        )
        .unwrap();
    assert!(matches!(
        verify_raw(&raw_rows(&path, "s")),
        Err(ChainFault::Undecodable { seq: 2, .. })
    ));
    let j = SqliteJournal::open(&path).unwrap();
    assert!(matches!(
        j.read("s", 1, 0).await,
        Err(JournalError::Undecodable { seq: 2, .. })
    ));
}

const CHILD_ENV: &str = "AGENTSESSIONS_TEST_CHILD";

/// Entry point of a child writer process (run by the tests below through the test binary).
/// It appends to the session named in the environment until told how many records it must win,
/// printing each seq it won.
#[test]
#[ignore = "child process entry; run by the racing tests"]
fn child_writer_entry() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.split('|');
    let path = PathBuf::from(parts.next().unwrap());
    let session = parts.next().unwrap().to_owned();
    let wins: usize = parts.next().unwrap().parse().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let j = SqliteJournal::open(&path).unwrap();
        let mut won = 0;
        let mut n = 0u64;
        while won < wins {
            n += 1;
            let head = j.head(&session).await.unwrap();
            match j
                .append(
                    &session,
                    head,
                    0,
                    input(&format!("{} #{n}", std::process::id())),
                )
                .await
            {
                Ok(rec) => {
                    won += 1;
                    println!("WON {}", rec.seq);
                }
                Err(e) if e.is_retryable() => {}
                Err(e) => panic!("child append failed: {e}"),
            }
        }
    });
}

fn spawn_child(path: &Path, session: &str, wins: usize, stdout: Stdio) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_writer_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{}|{session}|{wins}", path.display()))
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

// issue: two processes racing the same session — exactly one wins each seq, no gap, no duplicate
#[tokio::test]
async fn two_processes_race_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    drop(SqliteJournal::open(&path).unwrap());
    let per_child = 150;
    let children: Vec<_> = (0..2)
        .map(|_| spawn_child(&path, "race", per_child, Stdio::piped()))
        .collect();
    let mut won = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "child failed: {:?}", out.status);
        // The test harness may print its own "test … ..." prefix on the first line.
        let text = String::from_utf8(out.stdout).unwrap();
        let seqs: Vec<i64> = text
            .lines()
            .filter_map(|l| l.split_once("WON ").map(|(_, seq)| seq))
            .map(|s| s.trim().parse().unwrap())
            .collect();
        assert_eq!(seqs.len(), per_child);
        won.extend(seqs);
    }
    let unique: BTreeSet<i64> = won.iter().copied().collect();
    assert_eq!(unique.len(), won.len(), "a seq was won by both processes");
    assert_eq!(unique, (1..=i64::try_from(won.len()).unwrap()).collect());
    let rows = raw_rows(&path, "race");
    assert_eq!(verify_raw(&rows).unwrap().records, won.len());
}

// issue: a writer process killed with SIGKILL mid-burst leaves no partial record
#[tokio::test]
async fn writer_killed_mid_burst_leaves_a_verifiable_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    drop(SqliteJournal::open(&path).unwrap());
    let mut child = spawn_child(&path, "burst", 1_000_000, Stdio::null());
    // Wait until the child has committed something, then kill it without warning.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let committed = Connection::open(&path)
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM events", [], |r| r.get::<_, i64>(0)))
            .unwrap_or(0);
        if committed > 50 || std::time::Instant::now() > deadline {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL on unix
    child.wait().unwrap();
    let j = Arc::new(SqliteJournal::open(&path).unwrap());
    let head = j.head("burst").await.unwrap();
    assert!(head > 0, "child never committed");
    let rows = j.read_raw("burst").await.unwrap();
    assert_eq!(
        verify_raw(&rows).unwrap().records,
        usize::try_from(head).unwrap()
    );
    // And the session continues from its head.
    j.append("burst", head, 0, input("after crash"))
        .await
        .unwrap();
}

// issue: invalid UTF-8 or NaN in a Struct from the wire is a clear error and nothing is appended
#[tokio::test]
async fn bad_wire_input_is_refused_before_the_journal() {
    use agentsessions_wire::pb;
    use prost::Message as _;

    let dir = tempfile::tempdir().unwrap();
    let j = SqliteJournal::open(db_in(&dir)).unwrap();

    // A tool call whose Struct args hold NaN: conversion names the field, nothing is appended.
    let nan = prost_types::Value {
        kind: Some(prost_types::value::Kind::NumberValue(f64::NAN)),
    };
    let wire = pb::Event {
        kind: pb::EventKind::EventToolCall as i32,
        body: Some(pb::event::Body::Tool(pb::ToolCall {
            id: "c1".into(),
            tool: "t".into(),
            args: Some(prost_types::Struct {
                fields: [("x".to_owned(), nan)].into_iter().collect(),
            }),
            ..pb::ToolCall::default()
        })),
        ..pb::Event::default()
    };
    let err = Event::try_from(wire).unwrap_err();
    assert!(err.to_string().contains("args.x"), "{err}");

    // A frame whose string field is not UTF-8 does not decode at all.
    let mut bytes = pb::Event {
        execution_id: "ab".into(),
        ..pb::Event::default()
    }
    .encode_to_vec();
    let last = bytes.len() - 1;
    bytes[last] = 0xff;
    pb::Event::decode(bytes.as_slice()).unwrap_err();

    assert_eq!(j.head("s").await.unwrap(), 0);
}

// Long chains are hashed on several threads; the first bad seq must still be the one reported.
#[tokio::test]
async fn parallel_verification_reports_the_first_bad_seq() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let j = SqliteJournal::open(&path).unwrap();
    let events: Vec<Event> = (0..5000).map(|i| input(&format!("record {i}"))).collect();
    j.append_batch("long", 0, 0, events).await.unwrap();
    assert_eq!(
        verify_raw(&j.read_raw("long").await.unwrap())
            .unwrap()
            .records,
        5000
    );
    let conn = Connection::open(&path).unwrap();
    for seq in [4321, 2500] {
        conn.execute(
            "UPDATE events SET hash='00' WHERE session='long' AND seq=?1",
            [seq],
        )
        .unwrap();
    }
    assert_eq!(
        verify_raw(&raw_rows(&path, "long")).unwrap_err(),
        ChainFault::Tampered {
            seq: 2500,
            reason: TamperReason::ContentHashMismatch
        }
    );
}
