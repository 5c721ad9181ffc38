//! The SQLite writer's spin (`SqliteOptions::writer_spin`): after a commit it watches its queue
//! before it sleeps, so an append that follows soon is taken without a sleep and a wake; it
//! never holds a deferred batch past its sync delay; with no spin it sleeps after every commit.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use agentsessions_journal::testing::input;
use agentsessions_journal::{Durability, Journal, SqliteJournal, SqliteOptions};

fn open(dir: &tempfile::TempDir, spin: Duration, delay: Duration) -> SqliteJournal {
    let options = SqliteOptions {
        durability: Durability::Pipelined,
        deferred_sync_delay: delay,
        writer_spin: spin,
        ..SqliteOptions::default()
    };
    SqliteJournal::open_with(dir.path().join("j.db"), options).unwrap()
}

// A spin far longer than the pause between appends: the writer is still watching when each
// next append comes, so it does not sleep between them.
#[tokio::test]
async fn appends_within_the_spin_are_taken_without_a_sleep() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_secs(30), Duration::from_millis(2));
    let fence = j.new_fence("s").await.unwrap();
    let mut head = j.append("s", 0, fence, input("first")).await.unwrap().seq;
    let sleeps = j.writer_sleeps();
    for n in 0..5 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        head = j
            .append("s", head, fence, input(&format!("a{n}")))
            .await
            .unwrap()
            .seq;
    }
    assert_eq!(
        j.writer_sleeps(),
        sleeps,
        "slept between appends within its spin"
    );
    assert_eq!(head, 6);
}

// With no spin the writer sleeps on its empty queue after every commit.
#[tokio::test]
async fn without_a_spin_the_writer_sleeps_after_each_commit() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::ZERO, Duration::from_millis(2));
    let fence = j.new_fence("s").await.unwrap();
    let mut head = j.append("s", 0, fence, input("first")).await.unwrap().seq;
    let sleeps = j.writer_sleeps();
    for n in 0..5 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        head = j
            .append("s", head, fence, input(&format!("a{n}")))
            .await
            .unwrap()
            .seq;
    }
    assert!(
        j.writer_sleeps() >= sleeps + 5,
        "took appends without sleeping"
    );
}

// The spin ends where a held deferred batch is due: a spinning writer still syncs it alone
// after the sync delay, not after the spin.
#[tokio::test]
async fn the_spin_never_holds_a_deferred_batch_past_its_delay() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_secs(30), Duration::from_millis(20));
    let fence = j.new_fence("s").await.unwrap();
    let syncs = j.wal_syncs();
    let sent = Instant::now();
    j.append_deferred("s", 0, Some(fence), vec![input("alone")])
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
