//! SQLite journal benchmark (a bench binary, not a timed test). Run with
//! `cargo bench -p agentsessions-sqlite --bench sqlite_journal`.
//!
//! Measures, on a file in the target directory (so it sits on the same disk as the journal would):
//! 0. the raw fsync rate of this machine (a tight 128-byte write + fdatasync loop);
//! a. one session appending sequentially (each append waits for its commit);
//! b. 64 sessions appending concurrently (group commit shares one fsync per batch);
//! c. reading and verifying a 100,000-record session (streaming, and read-all-then-verify).
//!
//! (a) and (b) run in both [`Durability`] modes, the default (pipelined) first.
//!
//! Set `BENCH_QUICK=1` for a short smoke run, `BENCH_ONLY=b` (any of `0abc`) to run only the
//! named sections (for profiling one of them).
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::cast_precision_loss)]

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsessions_api::Event;
use agentsessions_journal::Log as _;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _, verify_raw};
use agentsessions_sqlite::{Durability, SqliteJournal, SqliteOptions};
use agentsessions_testkit::fixtures::{percentile, turn_event};

fn report(name: &str, events: usize, elapsed: Duration, mut latencies: Vec<Duration>) {
    latencies.sort_unstable();
    println!(
        "{name:<44} {events:>8} events {:>10.0} events/s   p50 {:>9.3?}  p99 {:>9.3?}",
        events as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 500),
        percentile(&latencies, 990),
    );
}

fn raw_fsync(dir: &std::path::Path, n: usize) {
    let path = dir.join("fsync.probe");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = [7u8; 128];
    let mut latencies = Vec::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        file.write_all(&block).unwrap();
        file.sync_data().unwrap();
        latencies.push(t.elapsed());
    }
    report("0. raw write+fdatasync loop", n, start.elapsed(), latencies);
    drop(std::fs::remove_file(path));
}

fn open(path: std::path::PathBuf, durability: Durability) -> SqliteJournal {
    let options = SqliteOptions {
        durability,
        ..SqliteOptions::default()
    };
    let j = SqliteJournal::open_with(path, options).unwrap();
    assert_eq!(j.durability(), durability);
    j
}

fn mode_name(durability: Durability) -> &'static str {
    match durability {
        Durability::Pipelined => "pipelined",
        Durability::Full => "FULL",
    }
}

async fn sequential(dir: &std::path::Path, durability: Durability, n: usize) {
    let j = open(dir.join(format!("a-{durability:?}.db")), durability);
    let mut latencies = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        j.append_one("solo", i64::try_from(i).unwrap(), 0, turn_event(i))
            .await
            .unwrap();
        latencies.push(t.elapsed());
    }
    report(
        &format!("a. 1 session, sequential ({})", mode_name(durability)),
        n,
        start.elapsed(),
        latencies,
    );
}

async fn concurrent(
    dir: &std::path::Path,
    durability: Durability,
    sessions: usize,
    per_session: usize,
) {
    let j = Arc::new(open(dir.join(format!("b-{durability:?}.db")), durability));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for s in 0..sessions {
        let j = Arc::clone(&j);
        tasks.spawn(async move {
            let session = format!("sess-{s:04}");
            let mut latencies = Vec::with_capacity(per_session);
            for i in 0..per_session {
                let t = Instant::now();
                j.append_one(&session, i64::try_from(i).unwrap(), 0, turn_event(i))
                    .await
                    .unwrap();
                latencies.push(t.elapsed());
            }
            latencies
        });
    }
    let mut latencies = Vec::new();
    while let Some(l) = tasks.join_next().await {
        latencies.extend(l.unwrap());
    }
    report(
        &format!(
            "b. {sessions} sessions, concurrent ({})",
            mode_name(durability)
        ),
        sessions * per_session,
        start.elapsed(),
        latencies,
    );
}

async fn read_and_verify(dir: &std::path::Path, n: usize) {
    let j = SqliteJournal::open(dir.join("c.db")).unwrap();
    let chunk = 1000;
    let mut head = 0i64;
    while usize::try_from(head).unwrap() < n {
        let events: Vec<Event> = (0..chunk).map(turn_event).collect();
        let records = j
            .append_records(AppendRequest::new("big", head, FenceUse::Hold(0), events))
            .await
            .unwrap();
        head = records.last().unwrap().seq;
    }
    let start = Instant::now();
    let summary = j.verify_session("big").await.unwrap().unwrap();
    let elapsed = start.elapsed();
    println!(
        "{:<44} {:>8} records {:>10.0} records/s",
        "c. read + verify one session (streaming)",
        summary.records,
        summary.records as f64 / elapsed.as_secs_f64(),
    );
    let start = Instant::now();
    let rows = j.read_raw("big").await.unwrap();
    let read = start.elapsed();
    let summary = verify_raw(&rows).unwrap();
    let total = start.elapsed();
    println!(
        "{:<44} {:>8} records {:>10.0} records/s   (read {read:.3?}, read+verify {total:.3?})",
        "c. read_raw, then verify_raw",
        summary.records,
        summary.records as f64 / total.as_secs_f64(),
    );
    let start = Instant::now();
    let decoded = j.read("big", 1, 0).await.unwrap();
    let elapsed = start.elapsed();
    println!(
        "{:<44} {:>8} records {:>10.0} records/s",
        "c'. read + decode to domain events",
        decoded.len(),
        decoded.len() as f64 / elapsed.as_secs_f64(),
    );
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    // Keep the files on the project's disk, not tmpfs, so fsync costs what it costs.
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-journal");
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::tempdir_in(&base).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (fsyncs, seq, sessions, per, big) = if quick {
        (100, 200, 64, 20, 10_000)
    } else {
        (2_000, 2_000, 64, 1_000, 100_000)
    };
    let only = std::env::var("BENCH_ONLY").unwrap_or_else(|_| "0abc".to_owned());
    println!("SQLite journal, WAL; files in {}", dir.path().display());
    if only.contains('0') {
        raw_fsync(dir.path(), fsyncs);
    }
    for durability in [Durability::Pipelined, Durability::Full] {
        if only.contains('a') {
            rt.block_on(sequential(dir.path(), durability, seq));
        }
        if only.contains('b') {
            rt.block_on(concurrent(dir.path(), durability, sessions, per));
        }
    }
    if only.contains('c') {
        rt.block_on(read_and_verify(dir.path(), big));
    }
}
