//! The SQLite writer's spin (`SqliteOptions::writer_spin`): after a commit it watches its queue
//! before it sleeps, so an append that follows soon is taken without a sleep and a wake; it
//! never holds a deferred batch past its sync delay; with no spin it sleeps after every commit.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use agentsessions_journal::Log as _;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _, Wait};
use agentsessions_sqlite::{Durability, SqliteJournal, SqliteOptions};
use agentsessions_testkit::fixtures::input;

/// One test at a time: a spinning writer keeps a core busy, and the sleeps another test counts
/// depend on its writer getting a core as soon as it has one to give up.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn open(dir: &tempfile::TempDir, spin: Duration, delay: Duration) -> SqliteJournal {
    let options = SqliteOptions {
        durability: Durability::Pipelined,
        deferred_sync_delay: delay,
        writer_spin: spin,
        ..SqliteOptions::default()
    };
    SqliteJournal::open_with(dir.path().join("j.db"), options).unwrap()
}

/// Five pairs of a deferred append, a 20 ms pause, and a durable append; the writer's sleeps
/// over them.
async fn sleeps_over_pairs(j: &SqliteJournal) -> u64 {
    let fence = j.new_fence("s").await.unwrap();
    let mut head = 0;
    let sleeps = j.writer_sleeps();
    for n in 0..5 {
        head = j
            .append_records(
                AppendRequest::new(
                    "s",
                    head,
                    FenceUse::from_option(Some(fence)),
                    vec![input(&format!("d{n}"))],
                )
                .wait(Wait::Committed),
            )
            .await
            .unwrap()[0]
            .seq;
        tokio::time::sleep(Duration::from_millis(20)).await;
        head = j
            .append_one("s", head, fence, input(&format!("a{n}")))
            .await
            .unwrap()
            .seq;
    }
    assert_eq!(head, 10);
    // The last append is acknowledged before its writer goes back to its queue: read the count
    // once it has held still for 100 ms, not racing the writer's last sleep.
    let mut seen = j.writer_sleeps();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = j.writer_sleeps();
        if now == seen {
            break;
        }
        seen = now;
    }
    seen - sleeps
}

// A spin longer than the pauses: the writer is still watching when each next append comes, so
// it never sleeps between them.
#[tokio::test]
async fn appends_within_the_spin_are_taken_without_a_sleep() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_secs(30), Duration::from_secs(30));
    assert_eq!(sleeps_over_pairs(&j).await, 0);
}

// With no spin the writer sleeps on its empty queue after every commit.
#[tokio::test]
async fn without_a_spin_the_writer_sleeps_after_each_commit() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::ZERO, Duration::from_secs(30));
    assert_eq!(sleeps_over_pairs(&j).await, 10);
}

// The spin ends where the held batch is due: a spinning writer still syncs it alone after the
// sync delay, not after the spin.
#[tokio::test]
async fn the_spin_never_holds_a_deferred_batch_past_its_delay() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_secs(30), Duration::from_millis(20));
    let fence = j.new_fence("s").await.unwrap();
    let syncs = j.wal_syncs();
    let sent = Instant::now();
    j.append_records(
        AppendRequest::new(
            "s",
            0,
            FenceUse::from_option(Some(fence)),
            vec![input("alone")],
        )
        .wait(Wait::Committed),
    )
    .await
    .unwrap();
    while j.wal_syncs() == syncs {
        assert!(
            sent.elapsed() < Duration::from_secs(10),
            "the held batch waited out the spin"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
