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

use agentsessions_api::{
    ApprovalRequest, ComputeState, Event, EventBody, EventKind, ExecutionStart, Lifecycle,
    LifecycleKind,
};
use agentsessions_journal::chain::RawRecord;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _};
use agentsessions_journal::{Catalog as _, Log as _};
use agentsessions_journal::{ChainFault, JournalError, TamperReason, verify_raw};
use agentsessions_sqlite::{Durability, SCHEMA_VERSION, SqliteJournal, SqliteOptions};
use agentsessions_testkit::fixtures::input;
use rusqlite::Connection;

fn open(path: &Path, durability: Durability) -> SqliteJournal {
    let options = SqliteOptions {
        durability,
        ..SqliteOptions::default()
    };
    let j = SqliteJournal::open_with(path, options).unwrap();
    assert_eq!(j.durability(), durability);
    j
}

fn lifecycle(kind: LifecycleKind) -> Event {
    Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind,
            ..Lifecycle::default()
        }),
    )
}

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("agentsessions.db")
}

async fn fill(path: &Path, session: &str, n: i64) {
    let j = SqliteJournal::open(path).unwrap();
    for i in 0..n {
        j.append_one(session, i, 0, input(&format!("record {i}")))
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
        [
            "session",
            "seq",
            "prev_hash",
            "hash",
            "fence",
            "event",
            // Ours, after the reference columns: when the record was committed (not hashed).
            "committed_at"
        ]
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
            "identity",
            // Ours, after the reference columns (ownership and deletion, extensions §1–§3).
            "owner_issuer",
            "owner_subject",
            "deletion_state",
            "reclaimed_at",
            // Ours: the session's USAGE records summed.
            "usage_input_tokens",
            "usage_output_tokens",
            "usage_reasoning_tokens",
            "usage_cached_input_tokens"
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
        j.append_one("s", 0, 0, start).await.unwrap();
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
        agentsessions_sqlite::schema_version_of(&path).unwrap(),
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
    j.append_one("s", 10, 0, input("after reopen"))
        .await
        .unwrap();
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
    let durability = match parts.next().unwrap() {
        "full" => Durability::Full,
        _ => Durability::Pipelined,
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let j = open(&path, durability);
        let mut won = 0;
        let mut n = 0u64;
        // A writer whose view of the head went stale would lose forever; fail instead of hanging.
        let mut lost_in_a_row = 0;
        while won < wins {
            n += 1;
            assert!(
                lost_in_a_row < 5_000,
                "no progress after {lost_in_a_row} refusals"
            );
            let head = j.head(&session).await.unwrap();
            match j
                .append_one(
                    &session,
                    head,
                    0,
                    input(&format!("{} #{n}", std::process::id())),
                )
                .await
            {
                Ok(rec) => {
                    won += 1;
                    lost_in_a_row = 0;
                    println!("WON {}", rec.seq);
                }
                Err(e) if e.is_retryable() => lost_in_a_row += 1,
                Err(e) => panic!("child append failed: {e}"),
            }
        }
    });
}

fn spawn_child(
    path: &Path,
    session: &str,
    wins: usize,
    durability: Durability,
    stdout: Stdio,
) -> std::process::Child {
    let mode = match durability {
        Durability::Full => "full",
        Durability::Pipelined => "pipelined",
    };
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_writer_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            CHILD_ENV,
            format!("{}|{session}|{wins}|{mode}", path.display()),
        )
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

// issue: two processes racing the same session — exactly one wins each seq, no gap, no duplicate.
// Each writer caches the session head; a stale cache would give a gap, a duplicate or a refusal.
#[tokio::test]
async fn two_processes_race_one_session() {
    race_two_processes(Durability::Pipelined, Durability::Pipelined).await;
}

#[tokio::test]
async fn two_processes_race_one_session_full_and_pipelined() {
    race_two_processes(Durability::Full, Durability::Pipelined).await;
}

async fn race_two_processes(first: Durability, second: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    drop(SqliteJournal::open(&path).unwrap());
    let per_child = 150;
    let children: Vec<_> = [first, second]
        .into_iter()
        .map(|durability| spawn_child(&path, "race", per_child, durability, Stdio::piped()))
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
    let mut child = spawn_child(
        &path,
        "burst",
        1_000_000,
        Durability::Pipelined,
        Stdio::null(),
    );
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
    j.append_one("burst", head, 0, input("after crash"))
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
    j.append_records(AppendRequest::new("long", 0, FenceUse::Hold(0), events))
        .await
        .unwrap();
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

// The writer caches each session's head, fence and compute state. Another journal on the same
// file (another connection, as another process would be) must invalidate that cache: its appends
// move the head, its fences refuse our stale writer, its lifecycle events set the state.
#[tokio::test]
async fn two_journals_on_one_file_see_each_others_writes() {
    for durability in [Durability::Pipelined, Durability::Full] {
        let dir = tempfile::tempdir().unwrap();
        let path = db_in(&dir);
        let a = open(&path, durability);
        let b = open(&path, durability);
        a.append_one("s", 0, 0, input("a1")).await.unwrap();
        b.append_one("s", 1, 0, input("b2")).await.unwrap();
        // a's cached head is 1: a stale cache would refuse 2 and accept 1.
        assert!(matches!(
            a.append_one("s", 1, 0, input("stale")).await,
            Err(JournalError::Conflict { actual: 2, .. })
        ));
        let rec = a.append_one("s", 2, 0, input("a3")).await.unwrap();
        assert_eq!(rec.seq, 3);
        // A fence minted through b refuses a's old fence (no SQL constraint would).
        assert_eq!(b.new_fence("s").await.unwrap(), 1);
        assert!(matches!(
            a.append_one("s", 3, 0, input("fenced")).await,
            Err(JournalError::Fenced { current: 1, .. })
        ));
        a.append_one("s", 3, 1, input("a4")).await.unwrap();
        // b suspends; a's approval request keeps the state b's event set.
        b.append_one("s", 4, 1, lifecycle(LifecycleKind::Suspend))
            .await
            .unwrap();
        let approval = Event::new(
            EventKind::ApprovalRequest,
            EventBody::Approval(ApprovalRequest {
                tool_call_id: "c".into(),
                reason: "r".into(),
            }),
        );
        a.append_one("s", 5, 1, approval).await.unwrap();
        let info = a.session_info("s").await.unwrap();
        assert_eq!(info.compute_state, ComputeState::Cold);
        assert_eq!((info.last_seq, info.fence), (6, 1));
        assert_eq!(verify_raw(&raw_rows(&path, "s")).unwrap().records, 6);
    }
}

// Appends touch the session row with a plain UPDATE when it is complete; a row left without
// project or creation time (another tool wrote it) still gets both.
#[tokio::test]
async fn append_completes_a_bare_session_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    drop(SqliteJournal::open(&path).unwrap());
    Connection::open(&path)
        .unwrap()
        .execute("INSERT INTO sessions(session) VALUES ('bare')", [])
        .unwrap();
    let j = SqliteJournal::open(&path).unwrap();
    j.append_one("bare", 0, 0, input("x")).await.unwrap();
    let info = j.session_info("bare").await.unwrap();
    assert_eq!(info.row.project, "default");
    assert!(info.row.created_at.unwrap().unix_nanos() > 0);
    assert_eq!(info.compute_state, ComputeState::Live);
    assert_eq!(info.updated_at, info.row.created_at.unwrap());
}

// The streaming verifier reads in parts of 4,096 rows; faults on either side of a part boundary
// and across it are reported exactly as by verify_raw.
#[tokio::test]
async fn streaming_verification_matches_verify_raw() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let j = SqliteJournal::open(&path).unwrap();
    let events: Vec<Event> = (0..9000).map(|i| input(&format!("record {i}"))).collect();
    let records = j
        .append_records(AppendRequest::new("long", 0, FenceUse::Hold(0), events))
        .await
        .unwrap();
    let summary = j.verify_session("long").await.unwrap().unwrap();
    assert_eq!(summary.records, 9000);
    assert_eq!(summary.head_hash, records.last().unwrap().hash);
    assert_eq!(j.verify_session("empty").await.unwrap().unwrap().records, 0);
    let conn = Connection::open(&path).unwrap();
    let tamper = |sql: &str| conn.execute(sql, []).unwrap();
    let check = |expected: ChainFault| {
        let j = &j;
        let path = &path;
        async move {
            assert_eq!(verify_raw(&raw_rows(path, "long")).unwrap_err(), expected);
            assert_eq!(
                j.verify_session("long").await.unwrap().unwrap_err(),
                expected
            );
        }
    };
    // The first row of the second part links to the last row of the first.
    tamper("UPDATE events SET prev_hash = 'x' WHERE session = 'long' AND seq = 4097");
    check(ChainFault::Tampered {
        seq: 4097,
        reason: TamperReason::PrevHashMismatch,
    })
    .await;
    tamper("UPDATE events SET hash = '00' WHERE session = 'long' AND seq = 4096");
    check(ChainFault::Tampered {
        seq: 4096,
        reason: TamperReason::ContentHashMismatch,
    })
    .await;
    tamper("DELETE FROM events WHERE session = 'long' AND seq = 100");
    check(ChainFault::Tampered {
        seq: 101,
        reason: TamperReason::SeqGap { expected: 100 },
    })
    .await;
}

// extensions §1–§3 on a file the reference implementation wrote: the ownership and deletion
// columns are added on open, its rows read as unbound and active, and its stamp stays 2.
#[tokio::test]
async fn a_reference_file_gains_owner_and_deletion_columns_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    fill(&path, "s", 2).await;
    {
        // Back to the reference layout: drop our columns and indexes.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP INDEX sessions_owner_created; DROP INDEX sessions_deletion_pending;
             ALTER TABLE sessions DROP COLUMN owner_issuer;
             ALTER TABLE sessions DROP COLUMN owner_subject;
             ALTER TABLE sessions DROP COLUMN deletion_state;
             ALTER TABLE sessions DROP COLUMN reclaimed_at;",
        )
        .unwrap();
    }
    let journal = SqliteJournal::open(&path).unwrap();
    let info = journal.session_info("s").await.unwrap();
    assert_eq!(info.last_seq, 2);
    assert_eq!(info.row.owner, agentsessions_api::CallerIdentity::default());
    assert_eq!(info.deletion, agentsessions_api::DeletionState::Active);
    let owned = journal
        .list_sessions(agentsessions_journal::ListQuery {
            owner: Some(agentsessions_api::CallerIdentity::new("i", "alice")),
            ..agentsessions_journal::ListQuery::default()
        })
        .await
        .unwrap();
    assert!(owned.sessions.is_empty());
    drop(journal);
    let conn = Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 2);
    // The owner-filtered listing is a range scan of its index, not a scan of every session.
    let plan: Vec<String> = conn
        .prepare(
            "EXPLAIN QUERY PLAN SELECT session FROM sessions s
             WHERE s.owner_issuer = 'i' AND s.owner_subject = 'a' AND s.project = 'p'
               AND (1 = 0 OR s.created_at < 5 OR (s.created_at = 5 AND s.session > 'x'))
             ORDER BY s.created_at DESC, s.session ASC LIMIT 3",
        )
        .unwrap()
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        plan.iter()
            .any(|step| step.contains("sessions_owner_created"))
            && !plan.iter().any(|step| step.contains("TEMP B-TREE")),
        "{plan:?}"
    );
}

// extensions §3: a stored deletion state this build does not know fails closed: it reads as
// deleted (never active) and the reclaimer picks the session up.
#[tokio::test]
async fn an_unknown_deletion_state_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    fill(&path, "s", 1).await;
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE sessions SET deletion_state = 'SHREDDED' WHERE session = 's'",
            [],
        )
        .unwrap();
    let journal = SqliteJournal::open(&path).unwrap();
    let info = journal.session_info("s").await.unwrap();
    assert_eq!(
        info.deletion,
        agentsessions_api::DeletionState::Unrecognized("SHREDDED".into())
    );
    assert!(info.deletion.is_deleted());
    assert_eq!(journal.pending_deletions(10).await.unwrap(), ["s"]);
    journal.mark_reclaimed("s").await.unwrap();
    assert!(journal.pending_deletions(10).await.unwrap().is_empty());
    // A later delete marker does not turn the unknown state into a known one.
    let head = journal.head("s").await.unwrap();
    journal
        .append_one(
            "s",
            head,
            0,
            agentsessions_api::Event::new(
                agentsessions_api::EventKind::Lifecycle,
                agentsessions_api::EventBody::Lifecycle(agentsessions_api::Lifecycle {
                    kind: agentsessions_api::LifecycleKind::Delete,
                    ..agentsessions_api::Lifecycle::default()
                }),
            ),
        )
        .await
        .unwrap();
    assert!(
        journal
            .session_info("s")
            .await
            .unwrap()
            .deletion
            .is_deleted()
    );
}
