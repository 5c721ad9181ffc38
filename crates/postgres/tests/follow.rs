//! Following commits across hosts: a follower on one journal ("host") sees the records another
//! journal on the same schema commits, through `LISTEN`/`NOTIFY`, also after the server cut the
//! listening connection; journals on other schemas never wake it.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use agentsessions_journal::Log as _;
use agentsessions_journal::LogExt as _;
use agentsessions_journal::{Journal, LogRecord, RecordFollower};
use agentsessions_testkit::fixtures::input;
use common::{TestSchema, admin, count};

const PATIENCE: Duration = Duration::from_secs(20);

/// Reads from `follower` until it returned records up to `last`.
async fn follow_to(follower: &mut RecordFollower, last: i64) -> Vec<LogRecord> {
    let mut got = Vec::new();
    while got.last().map_or(0, |r: &LogRecord| r.seq) < last {
        let page = tokio::time::timeout(PATIENCE, follower.next_records())
            .await
            .unwrap_or_else(|_| panic!("no commit heard after {:?}", got.last().map(|r| r.seq)))
            .unwrap()
            .unwrap();
        got.extend(page);
    }
    got
}

/// Waits until `want` backends of `application` are listening (the listener's connection is
/// named after the journal's, with `-listener` appended).
async fn wait_for_listeners(db: &tokio_postgres::Client, application: &str, want: i64) {
    let listening = format!(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE application_name = '{application}-listener' AND query ILIKE 'LISTEN%'"
    );
    let deadline = std::time::Instant::now() + PATIENCE;
    while count(db, &listening).await != want {
        assert!(
            std::time::Instant::now() < deadline,
            "never {want} listening backends"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_hears_commits_another_host_makes() {
    let schema = TestSchema::new().await;
    let host_a: Arc<dyn Journal> = Arc::new(schema.journal().await);
    let host_b: Arc<dyn Journal> = Arc::new(schema.journal().await);
    host_a.append_one("s", 0, 0, input("one")).await.unwrap();
    let mut follower = RecordFollower::new(Arc::clone(&host_b), "s", 1);
    assert_eq!(follow_to(&mut follower, 1).await.len(), 1);
    // Host B never appends: only host A's notifications can wake its follower.
    let writer = Arc::clone(&host_a);
    let appends = tokio::spawn(async move {
        for seq in 1..=20 {
            writer
                .append_one("s", seq, 0, input(&format!("m{seq}")))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let got = follow_to(&mut follower, 21).await;
    appends.await.unwrap();
    assert_eq!(
        got.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (2..=21).collect::<Vec<_>>()
    );
    assert_eq!(got, host_a.read("s", 2, 21).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_schemas_commits_do_not_wake_a_follower() {
    let ours = TestSchema::new().await;
    let theirs = TestSchema::new().await;
    let host: Arc<dyn Journal> = Arc::new(ours.journal().await);
    let other: Arc<dyn Journal> = Arc::new(theirs.journal().await);
    let mut follow = host.follow("s");
    other
        .append_one("s", 0, 0, input("elsewhere"))
        .await
        .unwrap();
    let quiet = tokio::time::timeout(Duration::from_millis(500), follow.changed()).await;
    assert!(quiet.is_err(), "woken by another schema: {quiet:?}");
    // The same session committed in our schema by another host does wake it.
    let peer = ours.journal().await;
    peer.append_one("s", 0, 0, input("here")).await.unwrap();
    let hint = tokio::time::timeout(PATIENCE, follow.changed())
        .await
        .expect("not woken by a commit in its schema")
        .unwrap();
    assert_eq!(hint, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_reconnects_and_what_was_committed_meanwhile_is_read() {
    let schema = TestSchema::new().await;
    let app = format!("lis_{}", schema.name);
    let writer: Arc<dyn Journal> = Arc::new(schema.journal().await);
    let follower_host: Arc<dyn Journal> =
        Arc::new(schema.journal_at(&common::url_named(&app)).await);
    let mut follower = RecordFollower::new(Arc::clone(&follower_host), "s", 1);
    writer.append_one("s", 0, 0, input("first")).await.unwrap();
    follow_to(&mut follower, 1).await;

    let db = admin().await;
    for round in 1..=3i64 {
        // Cut the following host's listening connection, and commit while it may not be
        // listening.
        wait_for_listeners(&db, &app, 1).await;
        let killed = count(
            &db,
            &format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = '{app}-listener' AND query ILIKE 'LISTEN%'"
            ),
        )
        .await;
        assert_eq!(killed, 1, "the listening backend");
        let head = writer.head("s").await.unwrap();
        writer
            .append_one("s", head, 0, input(&format!("while cut {round}")))
            .await
            .unwrap();
        follow_to(&mut follower, head + 1).await;
        // And once it listens again, later commits are heard as they happen.
        writer
            .append_one("s", head + 1, 0, input(&format!("after {round}")))
            .await
            .unwrap();
        follow_to(&mut follower, head + 2).await;
    }
    assert_eq!(follower.next_seq(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_batch_notifies_nobody_and_close_stops_the_listener() {
    let schema = TestSchema::new().await;
    let app = format!("cls_{}", schema.name);
    let host = schema.journal_at(&common::url_named(&app)).await;
    let peer = schema.journal().await;
    let mut follow = host.follow("s");
    peer.append_one("s", 0, 0, input("one")).await.unwrap();
    let hint = tokio::time::timeout(PATIENCE, follow.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hint, 1);
    // A refused append (stale cursor) commits nothing and announces nothing.
    peer.append_one("s", 0, 0, input("stale"))
        .await
        .unwrap_err();
    let quiet = tokio::time::timeout(Duration::from_millis(300), follow.changed()).await;
    assert!(quiet.is_err(), "woken by a refused append: {quiet:?}");
    let db = admin().await;
    wait_for_listeners(&db, &app, 1).await;
    tokio::time::timeout(PATIENCE, host.close())
        .await
        .expect("close waits for the listener, which must stop");
    wait_for_listeners(&db, &app, 0).await;
    // Its followers learn that the journal is gone.
    let closed = tokio::time::timeout(PATIENCE, follow.changed())
        .await
        .unwrap();
    assert!(closed.is_err(), "{closed:?}");
}
