//! Load test (graceful under twice its capacity), behind a flag: the real daemon's capacity is
//! measured with a closed loop of clients, then turns are offered open-loop at twice that rate for
//! minutes, then at half of it. Checked: the daemon stays up; its memory stays bounded (the
//! overload limits refuse what it cannot take, with RESOURCE_EXHAUSTED); the p99 latency of
//! admitted turns stays bounded; and once load drops, nothing is refused and latency is back.
//!
//! ```text
//! AGENTSESSIONS_LOAD_SECS=180 cargo test --release -p agentsessions-cli --test load -- --nocapture
//! ```
//!
//! Without the variable the test runs a 5-second smoke version of the same phases.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stdout,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentsessions_client::{Client, ClientError, ExecOptions};
use common::DAEMON;

/// Turns admitted at once during the test: the limit that keeps latency and memory bounded.
const MAX_TURNS: &str = "64";

struct Running {
    child: Child,
    addr: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _killed = self.child.kill();
        let _reaped = self.child.wait();
    }
}

impl Running {
    /// Resident memory of the daemon, in KiB.
    fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0)
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

fn start(dir: &std::path::Path) -> Running {
    let mut child = Command::new(DAEMON)
        .args(["--addr", "127.0.0.1:0", "--journal"])
        .arg(dir.join("load.db"))
        .args(["--max-concurrent-turns", MAX_TURNS])
        .env_remove("MODEL_API_KEY")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("agentsessionsd listening on ")
        .unwrap()
        .to_owned();
    Running { child, addr }
}

/// What one phase saw.
#[derive(Debug, Default)]
struct Phase {
    offered: u64,
    admitted: u64,
    refused: u64,
    failed: u64,
    p50_ms: f64,
    p99_ms: f64,
    max_rss_mib: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// One turn on a new session; its latency, or whether it was refused.
async fn one_turn(addr: &str) -> Result<f64, bool> {
    let mut client = Client::dial(addr).map_err(|_| false)?;
    let began = Instant::now();
    match client.exec(ExecOptions::new("load"), |_| {}).await {
        Ok(_) => Ok(began.elapsed().as_secs_f64() * 1e3),
        Err(failed) => Err(matches!(
            &failed.error,
            ClientError::Status(s) if s.code() == tonic::Code::ResourceExhausted
        )),
    }
}

/// Closed loop: `clients` clients back to back for `secs`; turns per second.
async fn capacity(addr: &str, clients: usize, secs: u64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (addr, done, stop) = (addr.to_owned(), Arc::clone(&done), Arc::clone(&stop));
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    if one_turn(&addr).await.is_ok() {
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        let _ended = task.await;
    }
    done.load(Ordering::SeqCst) as f64 / secs as f64
}

/// Open loop: turns started at `rate` per second for `secs`, whatever the daemon does.
async fn offer(daemon: &Running, rate: f64, secs: u64) -> Phase {
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let mut tasks = tokio::task::JoinSet::new();
    let interval = Duration::from_secs_f64(1.0 / rate);
    let began = Instant::now();
    let mut next = began;
    let mut phase = Phase::default();
    let mut last_sample = began;
    while began.elapsed() < Duration::from_secs(secs) {
        next += interval;
        tokio::time::sleep_until(next.into()).await;
        phase.offered += 1;
        let (addr, latencies, counts) = (
            daemon.addr.clone(),
            Arc::clone(&latencies),
            Arc::clone(&counts),
        );
        tasks.spawn(async move {
            match one_turn(&addr).await {
                Ok(ms) => {
                    latencies.lock().unwrap().push(ms);
                    counts[0].fetch_add(1, Ordering::SeqCst);
                }
                Err(true) => {
                    counts[1].fetch_add(1, Ordering::SeqCst);
                }
                Err(false) => {
                    counts[2].fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        while tasks.try_join_next().is_some() {}
        if last_sample.elapsed() >= Duration::from_millis(500) {
            last_sample = Instant::now();
            phase.max_rss_mib = phase.max_rss_mib.max(daemon.rss_kib() as f64 / 1024.0);
        }
    }
    while tasks.join_next().await.is_some() {}
    let mut sorted = latencies.lock().unwrap().clone();
    sorted.sort_by(f64::total_cmp);
    phase.admitted = counts[0].load(Ordering::SeqCst);
    phase.refused = counts[1].load(Ordering::SeqCst);
    phase.failed = counts[2].load(Ordering::SeqCst);
    phase.p50_ms = percentile(&sorted, 0.50);
    phase.p99_ms = percentile(&sorted, 0.99);
    phase
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twice_the_capacity_is_refused_not_queued_and_the_daemon_recovers() {
    let secs: u64 = std::env::var("AGENTSESSIONS_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start(dir.path());
    let warm = capacity(&daemon.addr, 8, (secs / 10).clamp(2, 20)).await;
    let baseline_mib = daemon.rss_kib() as f64 / 1024.0;
    assert!(warm > 0.0, "no turn completed while measuring capacity");
    let overload = offer(&daemon, warm * 2.0, secs).await;
    let calm = offer(&daemon, warm * 0.5, (secs / 3).max(3)).await;
    assert!(daemon.alive(), "the daemon died under load");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load figures: capacity={warm:.1} turns/s, baseline_rss={baseline_mib:.1} MiB\n  \
         2x for {secs}s: {overload:?}\n  0.5x: {calm:?}\n  loadavg: {}",
        load.trim()
    );
    assert_eq!(overload.failed, 0, "only refusals, no other failures");
    assert_eq!(calm.failed, 0);
    // Memory is bounded by the limits, not by the offered load.
    assert!(
        overload.max_rss_mib < baseline_mib * 4.0 + 256.0,
        "memory grew to {} MiB from {baseline_mib} MiB",
        overload.max_rss_mib
    );
    // Admitted turns wait at most for the turns ahead of them (the limit), never for a queue.
    assert!(overload.p99_ms < 10_000.0, "p99 {} ms", overload.p99_ms);
    // Recovery: at half the capacity, nothing is refused and latency is back.
    assert_eq!(calm.refused, 0, "refusals after the load dropped");
    assert!(
        calm.p99_ms < 5_000.0,
        "p99 {} ms after the load dropped",
        calm.p99_ms
    );
}
