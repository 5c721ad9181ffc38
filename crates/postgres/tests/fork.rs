//! Shared-prefix fork children on Postgres: the v1 → v2 migration, what a fork stores, and a
//! child forked on one host and written on another.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use agentsessions_journal::LogExt as _;
use agentsessions_journal::{Catalog as _, Log as _};
use agentsessions_journal::{JournalError, verify_records};
use agentsessions_postgres::SCHEMA_VERSION;
use agentsessions_testkit::fixtures::{fill, fork_marker};
use common::{TestSchema, admin, count};

// A schema stamped 1 (before forks shared prefixes) gets the link table and stamp 2 in one
// migration, keeping its rows; the stamp table lists the new version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_schema_migrates_to_shared_prefix_forks() {
    let schema = TestSchema::new().await;
    {
        let j = schema.journal().await;
        fill(&j, "p", 3).await;
        j.close().await;
    }
    let db = admin().await;
    db.batch_execute(&format!(
        "DROP TABLE {}; UPDATE {} SET version = 1",
        schema.table("session_prefix"),
        schema.table("schema_version")
    ))
    .await
    .unwrap();
    let j = schema.journal().await;
    let version = count(
        &db,
        &format!("SELECT version FROM {}", schema.table("schema_version")),
    )
    .await;
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(j.head("p").await.unwrap(), 3);
    let fence = j.fork_session("p", 2, "c").await.unwrap();
    j.append_one("c", 2, fence, fork_marker("p", 2))
        .await
        .unwrap();
    verify_records(&j.read("c", 0, 0).await.unwrap()).unwrap();
}

// A fork costs one link row and one session row, whatever the fork point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forks_add_one_row_per_child_not_the_prefix() {
    let schema = TestSchema::new().await;
    let j = schema.journal().await;
    fill(&j, "p", 1_000).await;
    for k in 0..16_i64 {
        let child = format!("c{k:02}");
        let at = 1 + k * 66;
        let fence = j.fork_session("p", at, &child).await.unwrap();
        j.append_one(&child, at, fence, fork_marker("p", at))
            .await
            .unwrap();
    }
    let db = admin().await;
    let events = count(
        &db,
        &format!("SELECT COUNT(*) FROM {}", schema.table("events")),
    )
    .await;
    assert_eq!(events, 1_016);
    let links = count(
        &db,
        &format!("SELECT COUNT(*) FROM {}", schema.table("session_prefix")),
    )
    .await;
    assert_eq!(links, 16);
    let chain = j.read("c15", 0, 0).await.unwrap();
    assert_eq!(chain.len(), 1 + 15 * 66 + 1);
    verify_records(&chain).unwrap();
}

// Two hosts: a child forked on one is appended on the other, and put_session from either keeps
// the lineage fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_forked_on_one_host_is_written_on_another() {
    let schema = TestSchema::new().await;
    let a = schema.journal().await;
    let b = schema.journal().await;
    fill(&a, "p", 5).await;
    let fence = a.fork_session("p", 3, "c").await.unwrap();
    assert_eq!(b.head("c").await.unwrap(), 3);
    let marker = b
        .append_one("c", 3, fence, fork_marker("p", 3))
        .await
        .unwrap();
    let parent = b.read("p", 3, 3).await.unwrap();
    assert_eq!(marker.prev_hash, parent[0].hash);
    fill(&b, "p", 2).await;
    let chain = a.read("c", 0, 0).await.unwrap();
    assert_eq!(chain.len(), 4);
    verify_records(&chain).unwrap();
    assert!(matches!(
        b.fork_session("p", 1, "c").await,
        Err(JournalError::SessionExists(_))
    ));
    let moved = agentsessions_journal::SessionRow {
        uid: "c".into(),
        parent_uid: "p".into(),
        fork_seq: 4,
        ..Default::default()
    };
    assert!(matches!(
        b.put_session(moved).await,
        Err(JournalError::InvalidArgument(_))
    ));
    assert_eq!(a.session_info("c").await.unwrap().row.fork_seq, 3);
}
