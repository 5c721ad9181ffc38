//! Deferred appends on the SQLite journal (`Log::append` with `Wait::Committed`): told at commit, made
//! durable by the next durable append's WAL sync (or alone after the delay), never read back
//! before they are durable, and never lost by a clean close.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::time::Duration;

use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _, Wait};
use agentsessions_journal::{Catalog as _, Log as _};
use agentsessions_sqlite::{Durability, SqliteJournal, SqliteOptions};
use agentsessions_testkit::fixtures::input;

fn open(dir: &tempfile::TempDir, delay: Duration) -> SqliteJournal {
    let options = SqliteOptions {
        durability: Durability::Pipelined,
        deferred_sync_delay: delay,
        ..SqliteOptions::default()
    };
    SqliteJournal::open_with(dir.path().join("j.db"), options).unwrap()
}

// A turn's shape: a deferred record, then a durable one. Each pair costs one WAL sync, where two
// durable appends cost two; the delay is long, so the durable append always comes within it.
#[tokio::test]
async fn a_deferred_append_shares_the_next_durable_appends_sync() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_secs(30));
    let fence = j.new_fence("s").await.unwrap();
    let mut head = 0;
    let before = j.wal_syncs();
    let handoffs = j.wal_sync_handoffs();
    for n in 0..10 {
        let deferred = j
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
            .unwrap();
        head = deferred[0].seq;
        head = j
            .append_one("s", head, fence, input(&format!("n{n}")))
            .await
            .unwrap()
            .seq;
    }
    assert_eq!(j.wal_syncs() - before, 10, "one sync per pair");
    // The idle writer held each deferred batch and synced it with the durable one where that
    // committed: no pair woke `journal-sync`.
    assert_eq!(j.wal_sync_handoffs(), handoffs, "synced on the writer");

    let before = j.wal_syncs();
    for n in 0..10 {
        head = j
            .append_one("s", head, fence, input(&format!("a{n}")))
            .await
            .unwrap()
            .seq;
        head = j
            .append_one("s", head, fence, input(&format!("b{n}")))
            .await
            .unwrap()
            .seq;
    }
    assert_eq!(j.wal_syncs() - before, 20, "durable appends sync each");
    assert_eq!(j.read("s", 1, 0).await.unwrap().len(), 40);
}

// Told at commit: the append returns before any sync, and a read of the record waits for it.
#[tokio::test]
async fn a_deferred_record_is_read_back_only_once_durable() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_millis(300));
    let fence = j.new_fence("s").await.unwrap();
    let before = j.wal_syncs();
    let handoffs = j.wal_sync_handoffs();
    let records = j
        .append_records(
            AppendRequest::new(
                "s",
                0,
                FenceUse::from_option(Some(fence)),
                vec![input("one"), input("two")],
            )
            .wait(Wait::Committed),
        )
        .await
        .unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(j.wal_syncs(), before, "returned before the WAL sync");
    let read = j.read("s", 1, 0).await.unwrap();
    assert_eq!(read, records);
    assert_eq!(j.wal_syncs(), before + 1, "the read waited for the sync");
    // No command came: the writer's own deadline synced the batch it held.
    assert_eq!(j.wal_sync_handoffs(), handoffs, "synced on the writer");
}

// The CAS and the fence are checked at commit as for any append; a minting (fence-less)
// deferred append opens an incarnation like a durable minting one (`FenceUse::Mint`).
#[tokio::test]
async fn deferred_appends_keep_the_cas_and_the_fence() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_millis(2));
    let opened = j
        .append_records(
            AppendRequest::new("s", 0, FenceUse::from_option(None), vec![input("open")])
                .wait(Wait::Committed),
        )
        .await
        .unwrap();
    let fence = opened[0].fence;
    assert!(fence >= 1);
    let stale = j
        .append_records(
            AppendRequest::new("s", 0, FenceUse::from_option(Some(fence)), vec![input("x")])
                .wait(Wait::Committed),
        )
        .await;
    assert!(stale.is_err(), "a stale cursor is refused");
    let newer = j.new_fence("s").await.unwrap();
    let fenced = j
        .append_records(
            AppendRequest::new("s", 1, FenceUse::from_option(Some(fence)), vec![input("y")])
                .wait(Wait::Committed),
        )
        .await;
    assert!(fenced.is_err(), "an old fence is refused");
    j.append_records(
        AppendRequest::new("s", 1, FenceUse::from_option(Some(newer)), vec![input("z")])
            .wait(Wait::Committed),
    )
    .await
    .unwrap();
}

// Closing the journal syncs what deferred appends left, without waiting out the delay: a reopen
// reads them all.
#[tokio::test]
async fn a_clean_close_keeps_deferred_records() {
    let dir = tempfile::tempdir().unwrap();
    let written = {
        let j = open(&dir, Duration::from_secs(30));
        let fence = j.new_fence("s").await.unwrap();
        let records = j
            .append_records(
                AppendRequest::new(
                    "s",
                    0,
                    FenceUse::from_option(Some(fence)),
                    vec![input("kept")],
                )
                .wait(Wait::Committed),
            )
            .await
            .unwrap();
        let closing = std::time::Instant::now();
        drop(j);
        assert!(
            closing.elapsed() < Duration::from_secs(10),
            "close waited out the delay"
        );
        records
    };
    let j = open(&dir, Duration::from_millis(2));
    assert_eq!(j.read("s", 1, 0).await.unwrap(), written);
}

// Several deferred batches in a row wait together for the durable append that ends them: one
// sync for all, however many batches came before it.
#[tokio::test]
async fn consecutive_deferred_appends_wait_together() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_secs(30));
    let fence = j.new_fence("s").await.unwrap();
    let before = j.wal_syncs();
    let mut head = 0;
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
        // Give journal-sync time to take each batch on its own.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    j.append_one("s", head, fence, input("end")).await.unwrap();
    assert_eq!(j.wal_syncs() - before, 1);
}

// A short read runs on the calling worker (readers.rs) but waits for the sync asynchronously:
// on a one-thread runtime another task keeps running while the read waits out the delay.
#[tokio::test(flavor = "current_thread")]
async fn a_quick_read_waits_for_durability_without_holding_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_millis(300));
    let fence = j.new_fence("s").await.unwrap();
    j.append_records(
        AppendRequest::new(
            "s",
            0,
            FenceUse::from_option(Some(fence)),
            vec![input("one")],
        )
        .wait(Wait::Committed),
    )
    .await
    .unwrap();
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let ticker = {
        let ticks = std::sync::Arc::clone(&ticks);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    let before = j.wal_syncs();
    assert_eq!(j.head("s").await.unwrap(), 1);
    assert_eq!(j.wal_syncs(), before + 1, "the read waited for the sync");
    ticker.abort();
    let ticked = ticks.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        ticked >= 5,
        "the thread was held while waiting ({ticked} ticks)"
    );
}

// A range longer than the part read on the worker is finished on the blocking pool, through a
// fork child's inherited prefix, with nothing missing or repeated.
#[tokio::test]
async fn long_reads_continue_past_the_quick_part_through_a_fork_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_millis(2));
    let fence = j.new_fence("p").await.unwrap();
    let mut head = 0;
    for n in 0..150 {
        head = j
            .append_records(AppendRequest::new(
                "p",
                head,
                FenceUse::Hold(fence),
                vec![input(&format!("p{n}"))],
            ))
            .await
            .unwrap()[0]
            .seq;
    }
    let child_fence = j.fork_session("p", 100, "c").await.unwrap();
    let mut child_head = 100;
    for n in 0..70 {
        child_head = j
            .append_records(AppendRequest::new(
                "c",
                child_head,
                FenceUse::Hold(child_fence),
                vec![input(&format!("c{n}"))],
            ))
            .await
            .unwrap()[0]
            .seq;
    }
    let parent = j.read("p", 1, 0).await.unwrap();
    assert_eq!(parent.len(), 150);
    let child = j.read("c", 1, 0).await.unwrap();
    assert_eq!(child.len(), 170);
    assert_eq!(child[..100], parent[..100], "the inherited prefix");
    for (i, record) in child.iter().enumerate() {
        assert_eq!(record.seq, i64::try_from(i).unwrap() + 1);
        if i > 0 {
            assert_eq!(
                record.prev_hash,
                child[i - 1].hash,
                "chain at seq {}",
                record.seq
            );
        }
    }
    assert_eq!(j.read("c", 90, 0).await.unwrap(), child[89..].to_vec());
    assert_eq!(j.read("c", 30, 160).await.unwrap(), child[29..160].to_vec());
    assert_eq!(j.read("c", 40, 103).await.unwrap(), child[39..103].to_vec());
    assert_eq!(j.read("c", 40, 104).await.unwrap(), child[39..104].to_vec());
}

// Log::append with Wait::Queued hands an append back before its commit: here the writer cannot commit
// (another connection holds the file's write lock), yet the append is queued at once, and the
// durable append behind it waits with it; once the lock goes both commit, in order.
#[tokio::test]
async fn a_queued_append_is_handed_back_before_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let j = std::sync::Arc::new(open(&dir, Duration::from_secs(30)));
    let fence = j.new_fence("s").await.unwrap();
    let lock = rusqlite::Connection::open(dir.path().join("j.db")).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let queued = tokio::time::timeout(
        Duration::from_secs(2),
        j.append(
            AppendRequest::new("s", 0, FenceUse::Hold(fence), vec![input("queued")])
                .wait(Wait::Queued),
        ),
    )
    .await
    .expect("queued without waiting for the commit")
    .unwrap();
    let behind = tokio::spawn({
        let j = std::sync::Arc::clone(&j);
        async move { j.append_one("s", 1, fence, input("durable")).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !behind.is_finished(),
        "committed through another's write lock"
    );
    lock.execute_batch("ROLLBACK").unwrap();
    let durable = behind.await.unwrap().unwrap();
    let queued = queued.records().await.unwrap();
    assert_eq!((queued[0].seq, durable.seq), (1, 2));
    assert_eq!(
        j.read("s", 1, 0).await.unwrap(),
        [queued[0].clone(), durable]
    );
}

// A settled compute state is an observation a crash may take back (the next settle makes it
// again), so it is never a batch readers wait for: after a turn's settle, a read answers at once
// instead of waiting out the settle's held sync (here 30 s), and no sync is spent on it.
#[tokio::test]
async fn a_read_after_a_settle_waits_for_no_sync() {
    let dir = tempfile::tempdir().unwrap();
    let j = open(&dir, Duration::from_secs(30));
    let fence = j.new_fence("s").await.unwrap();
    let head = j.append_one("s", 0, fence, input("one")).await.unwrap().seq;
    let before = j.wal_syncs();
    let settled = j
        .settle_compute_state("s", head, agentsessions_api::ComputeState::None)
        .await
        .unwrap();
    assert!(settled, "the settle found the head it named");
    let read = tokio::time::timeout(Duration::from_secs(5), j.read("s", 1, 0))
        .await
        .expect("a read after a settle waits for no sync")
        .unwrap();
    assert_eq!(read.len(), 1);
    let row = tokio::time::timeout(Duration::from_secs(5), j.session_info("s"))
        .await
        .expect("a row read after a settle waits for no sync")
        .unwrap();
    assert_eq!(row.compute_state, agentsessions_api::ComputeState::None);
    assert_eq!(j.wal_syncs(), before, "the settle spent no sync");
}
