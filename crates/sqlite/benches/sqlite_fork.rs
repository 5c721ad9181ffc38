//! Fork benchmark (a bench binary, not a timed test). Run with
//! `cargo bench -p agentsessions-sqlite --bench sqlite_fork`.
//!
//! A 100,000-record parent in a SQLite journal (default durability), then:
//! a. 128 children forked one after another at seqs spread over the whole parent, each a
//!    `fork_session` plus its FORK marker, as a Fork RPC does;
//! b. 128 children forked concurrently (the writer group-commits them);
//! c. for comparison, 4 children made the way the reference does it: the prefix copied into the
//!    child (batches of 1,000 appends), then the marker.
//!
//! Bytes per child are measured on the database file plus its WAL after a
//! `wal_checkpoint(TRUNCATE)`, before and after each phase. Each child's chain is then verified
//! from storage.
//!
//! Set `BENCH_QUICK=1` for a short smoke run (10,000-record parent).
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::cast_precision_loss)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsessions_journal::Log as _;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _};
use agentsessions_sqlite::SqliteJournal;
use agentsessions_testkit::fixtures::{fork_marker, percentile, turn_event};

/// Database plus WAL bytes once the WAL is checkpointed into the database and truncated.
fn checkpointed_bytes(path: &Path) -> u64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    let _: (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    drop(conn);
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let wal = path.with_file_name(format!(
        "{}-wal",
        path.file_name().unwrap().to_string_lossy()
    ));
    size(path) + size(&wal)
}

fn report(
    name: &str,
    children: usize,
    elapsed: Duration,
    mut latencies: Vec<Duration>,
    bytes: u64,
) {
    latencies.sort_unstable();
    println!(
        "{name:<46} {children:>4} children  {:>9.3?}/child  p50 {:>9.3?}  p99 {:>9.3?}  {:>8.0} bytes/child",
        elapsed / u32::try_from(children).unwrap(),
        percentile(&latencies, 500),
        percentile(&latencies, 990),
        bytes as f64 / children as f64,
    );
}

/// Fork points spread over the whole parent, from seq 1 to its head.
fn fork_point(k: usize, children: usize, head: i64) -> i64 {
    let k = i64::try_from(k).unwrap();
    let n = i64::try_from(children).unwrap();
    1 + (head - 1) * k / (n - 1).max(1)
}

async fn forks_sequential(j: &SqliteJournal, path: &Path, head: i64, children: usize) {
    let before = checkpointed_bytes(path);
    let mut fork_only = Vec::with_capacity(children);
    let mut with_marker = Vec::with_capacity(children);
    let start = Instant::now();
    for k in 0..children {
        let at = fork_point(k, children, head);
        let child = format!("seq-{k:03}");
        let t = Instant::now();
        let fence = j.fork_session("parent", at, &child).await.unwrap();
        fork_only.push(t.elapsed());
        j.append_one(&child, at, fence, fork_marker("parent", at))
            .await
            .unwrap();
        with_marker.push(t.elapsed());
    }
    let elapsed = start.elapsed();
    let added = checkpointed_bytes(path) - before;
    let fork_total: Duration = fork_only.iter().sum();
    report(
        "a. sequential: fork_session only",
        children,
        fork_total,
        fork_only,
        added,
    );
    report(
        "a. sequential: fork_session + FORK marker",
        children,
        elapsed,
        with_marker,
        added,
    );
}

async fn forks_concurrent(j: &Arc<SqliteJournal>, path: &Path, head: i64, children: usize) {
    let before = checkpointed_bytes(path);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..children {
        let j = Arc::clone(j);
        tasks.spawn(async move {
            let at = fork_point(k, children, head);
            let child = format!("con-{k:03}");
            let t = Instant::now();
            let fence = j.fork_session("parent", at, &child).await.unwrap();
            j.append_one(&child, at, fence, fork_marker("parent", at))
                .await
                .unwrap();
            t.elapsed()
        });
    }
    let mut latencies = Vec::with_capacity(children);
    while let Some(l) = tasks.join_next().await {
        latencies.push(l.unwrap());
    }
    let elapsed = start.elapsed();
    let added = checkpointed_bytes(path) - before;
    report(
        "b. concurrent: fork_session + FORK marker",
        children,
        elapsed,
        latencies,
        added,
    );
}

/// The reference's way: every prefix record appended again under the child.
async fn forks_copying(j: &SqliteJournal, path: &Path, head: i64, children: usize) {
    let before = checkpointed_bytes(path);
    let mut latencies = Vec::with_capacity(children);
    let start = Instant::now();
    for k in 0..children {
        // A quarter, half, three quarters and all of the parent.
        let at = head * i64::try_from(k + 1).unwrap() / i64::try_from(children).unwrap();
        let child = format!("copy-{k:03}");
        let t = Instant::now();
        let fence = j.new_fence(&child).await.unwrap();
        let mut copied = 0;
        while copied < at {
            let upto = (copied + 1_000).min(at);
            let prefix = j.read("parent", copied + 1, upto).await.unwrap();
            let events = prefix.into_iter().map(|r| r.event).collect();
            j.append_records(AppendRequest::new(
                &child,
                copied,
                FenceUse::Hold(fence),
                events,
            ))
            .await
            .unwrap();
            copied = upto;
        }
        j.append_one(&child, at, fence, fork_marker("parent", at))
            .await
            .unwrap();
        latencies.push(t.elapsed());
    }
    let elapsed = start.elapsed();
    let added = checkpointed_bytes(path) - before;
    report(
        "c. copying the prefix (reference), + marker",
        children,
        elapsed,
        latencies,
        added,
    );
}

async fn verify_children(j: &SqliteJournal, prefix: &str, children: usize) -> Duration {
    let start = Instant::now();
    for k in 0..children {
        let summary = j
            .verify_session(&format!("{prefix}-{k:03}"))
            .await
            .unwrap()
            .unwrap();
        assert!(summary.records >= 2);
    }
    start.elapsed()
}

/// The disk's fsync latency right now: each sequential fork pays one or two of them.
fn raw_fsync(dir: &Path) {
    use std::io::Write as _;
    let path = dir.join("fsync.probe");
    let mut file = std::fs::File::create(&path).unwrap();
    let mut latencies = Vec::with_capacity(200);
    for _ in 0..200 {
        let t = Instant::now();
        file.write_all(&[7u8; 128]).unwrap();
        file.sync_data().unwrap();
        latencies.push(t.elapsed());
    }
    latencies.sort_unstable();
    println!(
        "raw 128-byte write + fdatasync: p50 {:.3?}, p99 {:.3?}",
        percentile(&latencies, 500),
        percentile(&latencies, 990)
    );
    drop(std::fs::remove_file(path));
}

async fn run(dir: &Path, parent_records: i64) {
    raw_fsync(dir);
    let path = dir.join("fork.db");
    let j = Arc::new(SqliteJournal::open(&path).unwrap());
    let mut head = 0;
    while head < parent_records {
        let events = (head + 1..=head + 1_000).map(turn_event).collect();
        head = j
            .append_records(AppendRequest::new(
                "parent",
                head,
                FenceUse::Hold(0),
                events,
            ))
            .await
            .unwrap()
            .last()
            .unwrap()
            .seq;
    }
    let parent_bytes = checkpointed_bytes(&path);
    println!(
        "parent: {head} records, database {parent_bytes} bytes ({:.0} bytes/record)",
        parent_bytes as f64 / head as f64
    );
    forks_sequential(&j, &path, head, 128).await;
    forks_concurrent(&j, &path, head, 128).await;
    forks_copying(&j, &path, head, 4).await;
    raw_fsync(dir);
    let verify = verify_children(&j, "seq", 128).await;
    println!(
        "verified 128 children's whole chains (prefix from the parent's rows) in {verify:.3?}"
    );
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    // Keep the files on the project's disk, not tmpfs, so fsync costs what it costs.
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-journal");
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::tempdir_in(&base).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let parent_records = if quick { 10_000 } else { 100_000 };
    println!(
        "SQLite journal fork bench; files in {}",
        dir.path().display()
    );
    rt.block_on(run(dir.path(), parent_records));
}
