//! Shared-prefix fork children in the SQLite file: what a fork stores (one link and one row,
//! never the prefix), that the file stays the reference layout, that children written by the
//! reference (copied prefix, lineage only in `sessions`) still read, and that a child's chain
//! survives a reopen, verifies whole from storage and exports whole.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use agentsessions_journal::LogExt as _;
use agentsessions_journal::export::{JsonFormat, export_reference_json, import_reference_json};
use agentsessions_journal::{Catalog as _, Log as _};
use agentsessions_journal::{JournalError, SessionRow, verify_records};
use agentsessions_sqlite::SqliteJournal;
use agentsessions_testkit::fixtures::{fill, fork_marker, fork_with_marker, input};
use rusqlite::Connection;

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("agentsessions.db")
}

fn count(path: &Path, sql: &str) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

// A fork costs one link row and one session row, whatever the fork point: 32 children of a
// 2,000-record parent add 32 FORK markers to `events`, not 32 prefixes.
#[tokio::test]
async fn forks_add_one_row_per_child_not_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let j = SqliteJournal::open(&path).unwrap();
    fill(&j, "p", 2_000).await;
    for k in 0..32_i64 {
        fork_with_marker(&j, "p", 1 + k * 61, &format!("c{k:02}")).await;
    }
    drop(j);
    assert_eq!(count(&path, "SELECT COUNT(*) FROM events"), 2_032);
    assert_eq!(count(&path, "SELECT COUNT(*) FROM session_prefix"), 32);
    assert_eq!(
        count(&path, "SELECT COUNT(*) FROM events WHERE session = 'c31'"),
        1
    );
    let j = SqliteJournal::open(&path).unwrap();
    let summary = j.verify_session("c31").await.unwrap().unwrap();
    assert_eq!(summary.records, 1 + 31 * 61 + 1);
}

// A child survives a reopen (the writer's head cache starts empty), verifies whole from storage,
// and its first own record appended after the reopen links to its fork point.
#[tokio::test]
async fn shared_prefix_children_survive_reopen_and_verify_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let fence = {
        let j = SqliteJournal::open(&path).unwrap();
        fill(&j, "p", 5_000).await;
        j.fork_session("p", 4_500, "c").await.unwrap()
    };
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(j.head("c").await.unwrap(), 4_500);
    let marker = j
        .append_one("c", 4_500, fence, fork_marker("p", 4_500))
        .await
        .unwrap();
    let parent_at = j.read("p", 4_500, 4_500).await.unwrap();
    assert_eq!(marker.prev_hash, parent_at[0].hash);
    j.fork_session("c", 4_501, "g").await.unwrap();
    fill(&j, "g", 3).await;
    fill(&j, "p", 10).await;
    let summary = j.verify_session("g").await.unwrap().unwrap();
    assert_eq!(summary.records, 4_504);
    let raw = j.read_raw("g").await.unwrap();
    assert_eq!(raw.len(), 4_504);
    assert_eq!(
        agentsessions_journal::verify_raw(&raw).unwrap().head_hash,
        summary.head_hash
    );
    assert!(
        j.sessions_with_events()
            .await
            .unwrap()
            .contains(&"c".to_owned())
    );
    // A child with a tampered ancestor row fails verification at that seq.
    drop(j);
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE events SET hash = 'x' WHERE session = 'p' AND seq = 17",
            [],
        )
        .unwrap();
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(j.verify_session("g").await.unwrap().unwrap_err().seq(), 17);
}

// semantics §1.5: the reference tables and stamp are unchanged; the link table sits beside them
// and a reference-stamped file without it gets it on open
#[tokio::test]
async fn layout_stays_the_reference_one_with_a_prefix_table_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    {
        let j = SqliteJournal::open(&path).unwrap();
        fill(&j, "p", 3).await;
        fork_with_marker(&j, "p", 2, "c").await;
    }
    let conn = Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 2);
    let columns: Vec<String> = conn
        .prepare("PRAGMA table_info(session_prefix)")
        .unwrap()
        .query_map([], |r| r.get(1))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(columns, ["session", "parent_uid", "fork_seq", "fork_hash"]);
    // The reference sees the lineage in `sessions` and the child's own records.
    let (parent_uid, fork_seq): (String, i64) = conn
        .query_row(
            "SELECT parent_uid, fork_seq FROM sessions WHERE session = 'c'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((parent_uid.as_str(), fork_seq), ("p", 2));
    conn.execute_batch("DROP TABLE session_prefix").unwrap();
    drop(conn);
    let j = SqliteJournal::open(&path).unwrap();
    assert_eq!(
        j.read("c", 0, 0).await.unwrap().len(),
        1,
        "without its link a child is read from its own rows"
    );
    assert_eq!(
        count(
            &path,
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'session_prefix'"
        ),
        1
    );
}

// A file written by the reference: the child's row carries parent_uid/fork_seq and its events
// hold a copy of the prefix; there is no link. It reads, verifies, appends and forks as is.
#[tokio::test]
async fn reference_written_children_with_copied_prefixes_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    {
        let j = SqliteJournal::open(&path).unwrap();
        fill(&j, "p", 4).await;
    }
    // What the reference writes for a fork at 3: the rows copied verbatim, a FORK marker, and
    // the lineage in the metadata row.
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "INSERT INTO events(session, seq, prev_hash, hash, fence, event)
             SELECT 'ref-child', seq, prev_hash, hash, fence, event FROM events
             WHERE session = 'p' AND seq <= 3;
         INSERT INTO sessions(session, fence, project, parent_uid, fork_seq, compute_state,
                              created_at, updated_at)
             VALUES ('ref-child', 1, 'default', 'p', 3, 'LIVE', 1, 1);",
    )
    .unwrap();
    drop(conn);
    let j = SqliteJournal::open(&path).unwrap();
    let parent = j.read("p", 0, 0).await.unwrap();
    let marker = j
        .append_one("ref-child", 3, 1, fork_marker("p", 3))
        .await
        .unwrap();
    assert_eq!(marker.prev_hash, parent[2].hash);
    let chain = j.read("ref-child", 0, 0).await.unwrap();
    assert_eq!(chain[..3], parent[..3]);
    assert_eq!(
        j.verify_session("ref-child")
            .await
            .unwrap()
            .unwrap()
            .records,
        4
    );
    // Its metadata is only metadata: it may be rewritten.
    j.put_session(SessionRow {
        uid: "ref-child".into(),
        name: "imported".into(),
        ..SessionRow::default()
    })
    .await
    .unwrap();
    // A shared-prefix fork of it reads through its copied rows.
    fork_with_marker(&j, "ref-child", 4, "ours").await;
    let ours = j.read("ours", 0, 0).await.unwrap();
    assert_eq!(ours[..4], chain[..]);
    verify_records(&ours).unwrap();
    assert!(matches!(
        j.fork_session("p", 1, "ref-child").await,
        Err(JournalError::SessionExists(_))
    ));
}

// Two journals on one file: a fork made through one is seen by the other's writer (its head
// cache is dropped when another connection committed).
#[tokio::test]
async fn a_fork_through_one_journal_is_appended_through_another() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let a = SqliteJournal::open(&path).unwrap();
    let b = SqliteJournal::open(&path).unwrap();
    fill(&a, "p", 3).await;
    assert_eq!(b.head("c").await.unwrap(), 0);
    // b caches "c" as empty before the fork exists.
    assert!(matches!(
        b.append_one("c", 1, 0, input("early")).await,
        Err(JournalError::Conflict { actual: 0, .. })
    ));
    let fence = a.fork_session("p", 2, "c").await.unwrap();
    let marker = b
        .append_one("c", 2, fence, fork_marker("p", 2))
        .await
        .unwrap();
    assert_eq!(marker.seq, 3);
    fill(&b, "p", 1).await;
    let fence2 = a.fork_session("p", 4, "c2").await.unwrap();
    b.append_one("c2", 4, fence2, fork_marker("p", 4))
        .await
        .unwrap();
    verify_records(&a.read("c2", 0, 0).await.unwrap()).unwrap();
    verify_records(&b.read("c", 0, 0).await.unwrap()).unwrap();
}

// hashing-and-conformance (e): the reference JSON export of a child is its whole chain, so the
// reference loader (which copies every record) rebuilds it hash for hash.
#[tokio::test]
async fn a_child_exports_its_whole_chain() {
    let dir = tempfile::tempdir().unwrap();
    let j = SqliteJournal::open(db_in(&dir)).unwrap();
    fill(&j, "p", 6).await;
    fork_with_marker(&j, "p", 4, "c").await;
    fill(&j, "c", 2).await;
    fork_with_marker(&j, "c", 6, "g").await;
    let chain = j.read("g", 0, 0).await.unwrap();
    assert_eq!(chain.len(), 7);
    let text = export_reference_json(&chain, JsonFormat::V030).unwrap();
    let imported = import_reference_json(&text).unwrap();
    assert_eq!(imported.records, chain);
    verify_records(&imported.records).unwrap();
    let copy = agentsessions_journal::MemoryJournal::new();
    agentsessions_journal::export::load_records(&copy, "g", &imported.records)
        .await
        .unwrap();
    assert_eq!(copy.read("g", 0, 0).await.unwrap(), chain);
}
