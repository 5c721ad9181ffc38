//! Controller overhead per turn and replay speed (a bench binary, not a timed test). Run with
//! `cargo bench -p agentsessions-conformance --bench controller`; `BENCH_QUICK=1` for a smoke run.
//!
//! A turn is the echo harness with the offline echo model: EXECUTION_START + INPUT (one commit),
//! MODEL_CALL, OUTPUT, END — four durable commits on SQLite (WAL, each fsync'd before it returns). Sessions get
//! five turns each, so each turn also reads and hands over the session's history.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::cast_precision_loss)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsessions_controller::{Controller, ExecRequest};
use agentsessions_harnesses::EchoHarness;
use agentsessions_journal::{Journal, MemoryJournal};
use agentsessions_model::EchoModel;
use agentsessions_sqlite::SqliteJournal;

const TURNS_PER_SESSION: usize = 5;

fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() - 1) * per_mille / 1000]
}

fn request(i: usize) -> ExecRequest {
    ExecRequest {
        inputs: vec![agentsessions_api::Message::text_message(
            "user",
            format!("message {i}: how is the weather today?"),
        )],
        ..ExecRequest::default()
    }
}

async fn turns(name: &str, journal: Arc<dyn Journal>, sessions: usize) {
    let harness = Arc::new(EchoHarness::new());
    let model = Arc::new(EchoModel::new());
    let mut latencies = Vec::with_capacity(sessions * TURNS_PER_SESSION);
    let start = Instant::now();
    for s in 0..sessions {
        let controller = Controller::new(
            Arc::clone(&journal),
            harness.clone(),
            model.clone(),
            format!("bench-{s}"),
        );
        for t in 0..TURNS_PER_SESSION {
            let begun = Instant::now();
            controller.exec(request(t)).await.unwrap();
            latencies.push(begun.elapsed());
        }
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    println!(
        "{name:<34} {:>6} turns {:>8.0} turns/s   p50 {:>9.3?}  p99 {:>9.3?}",
        latencies.len(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 500),
        percentile(&latencies, 990),
    );
}

/// Turn latency on one long-lived session, measured over the last `window` of `turns` turns:
/// shows what a growing history costs each turn.
async fn long_session(name: &str, journal: Arc<dyn Journal>, turns: usize, window: usize) {
    let harness = Arc::new(EchoHarness::new());
    let model = Arc::new(EchoModel::new());
    let controller = Controller::new(journal, harness, model, "long-lived");
    let mut latencies = Vec::with_capacity(window);
    let start = Instant::now();
    for t in 0..turns {
        let begun = Instant::now();
        controller.exec(request(t)).await.unwrap();
        if t >= turns - window {
            latencies.push(begun.elapsed());
        }
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    println!(
        "{name:<34} {turns:>6} turns, last {window}: p50 {:>9.3?}  p99 {:>9.3?}  (all in {elapsed:.2?})",
        percentile(&latencies, 500),
        percentile(&latencies, 990),
    );
}

async fn replay(name: &str, journal: Arc<dyn Journal>, turns: usize) {
    let harness = Arc::new(EchoHarness::new());
    let model = Arc::new(EchoModel::new());
    let controller = Controller::new(Arc::clone(&journal), harness, model, "replayed");
    for t in 0..turns {
        controller.exec(request(t)).await.unwrap();
    }
    let records = journal.head("replayed").await.unwrap();
    let start = Instant::now();
    let report = controller.replay().await.unwrap();
    let elapsed = start.elapsed();
    assert_eq!(report.executions, turns);
    assert_eq!(report.reproduced, report.effects);
    println!(
        "{name:<34} {records:>6} records {:>8.0} records/s  ({} executions in {elapsed:.3?})",
        records as f64 / elapsed.as_secs_f64(),
        report.executions,
    );
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let sessions = if quick { 20 } else { 400 };
    let replay_turns = if quick { 200 } else { 4_000 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    runtime.block_on(async {
        turns(
            "turn, memory journal",
            Arc::new(MemoryJournal::new()),
            sessions,
        )
        .await;
        let sqlite: Arc<dyn Journal> =
            Arc::new(SqliteJournal::open(dir.path().join("turns.db")).unwrap());
        turns("turn, SQLite journal (durable)", sqlite, sessions).await;
        replay(
            "replay, memory journal",
            Arc::new(MemoryJournal::new()),
            replay_turns,
        )
        .await;
        let sqlite: Arc<dyn Journal> =
            Arc::new(SqliteJournal::open(dir.path().join("replay.db")).unwrap());
        replay("replay, SQLite journal", sqlite, replay_turns).await;
        let (long, window) = if quick { (100, 20) } else { (2_000, 100) };
        long_session(
            "turn, long session, memory",
            Arc::new(MemoryJournal::new()),
            long,
            window,
        )
        .await;
        let sqlite: Arc<dyn Journal> =
            Arc::new(SqliteJournal::open(dir.path().join("long.db")).unwrap());
        long_session("turn, long session, SQLite", sqlite, long, window).await;
    });
}
