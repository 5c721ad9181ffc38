//! Turn latency and throughput through gRPC (a bench binary, not a timed test):
//! client SDK → Sessions service over loopback TCP → echo harness → offline echo model → SQLite
//! (every record fsync'd before it is acknowledged). The service is the daemon's own assembly
//! (`host::build_service`), served in this process so one binary measures both ends.
//!
//! Then, unless `BENCH_POSTGRES=off`, the same 64 concurrent sessions spread over 1, 2 and 3
//! hosts (each its own service and connection pool) sharing one Postgres journal
//! (`BENCH_POSTGRES_URL`, default the local server), in a fresh schema dropped afterwards.
//!
//! Run with `cargo bench -p agentsessions-cli --bench grpc`; `BENCH_QUICK=1` for a smoke run.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::cast_precision_loss)]

use std::time::{Duration, Instant};

use agentsessions_cli::host::{HostConfig, build_service, open_journal};
use agentsessions_client::{Client, ExecOptions};

fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() - 1) * per_mille / 1000]
}

fn report(name: &str, mut latencies: Vec<Duration>, elapsed: Duration) {
    latencies.sort_unstable();
    println!(
        "{name:<44} {:>6} turns {:>8.0} turns/s   p50 {:>9.3?}  p99 {:>9.3?}",
        latencies.len(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 500),
        percentile(&latencies, 990),
    );
}

async fn session_turns(mut client: Client, turns: usize) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(turns);
    let mut session = String::new();
    for t in 0..turns {
        let begun = Instant::now();
        let result = client
            .exec(
                ExecOptions::new(format!("message {t}: how is the weather today?")).on(&session),
                |_| {},
            )
            .await
            .unwrap();
        latencies.push(begun.elapsed());
        if session.is_empty() {
            session = result.session_uid();
        }
    }
    latencies
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let (sequential, concurrent_turns) = if quick { (50, 5) } else { (1_000, 40) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    runtime.block_on(async {
        let path = dir.path().join("bench.db");
        let journal = open_journal(path.to_str().unwrap(), "").await.unwrap();
        let assembled = build_service(journal, &HostConfig::default()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(agentsessions_server::serve_tcp(
            listener,
            assembled.service,
            std::future::pending(),
        ));
        let client = Client::dial(&addr).unwrap();
        // Warm the connection.
        session_turns(client.clone(), 3).await;

        // One session at a time, five turns each so every turn also carries some history.
        let started = Instant::now();
        let mut latencies = Vec::with_capacity(sequential);
        for _ in 0..sequential / 5 {
            latencies.extend(session_turns(client.clone(), 5).await);
        }
        report("turn via gRPC, one client", latencies, started.elapsed());

        // 64 sessions at once, each on its own stream over one connection.
        let started = Instant::now();
        let tasks: Vec<_> = (0..64)
            .map(|_| tokio::spawn(session_turns(client.clone(), concurrent_turns)))
            .collect();
        let mut latencies = Vec::new();
        for task in tasks {
            latencies.extend(task.await.unwrap());
        }
        report(
            "turn via gRPC, 64 concurrent sessions",
            latencies,
            started.elapsed(),
        );

        if std::env::var("BENCH_POSTGRES").as_deref() != Ok("off") {
            postgres_hosts(concurrent_turns).await;
        }
    });
}

/// Serves a fresh service over `url`/`schema` on a loopback port; returns a client.
async fn postgres_host(url: &str, schema: &str) -> Client {
    let journal = open_journal(url, schema).await.unwrap();
    let assembled = build_service(journal, &HostConfig::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(agentsessions_server::serve_tcp(
        listener,
        assembled.service,
        std::future::pending(),
    ));
    Client::dial(&addr).unwrap()
}

async fn postgres_hosts(turns: usize) {
    let url = std::env::var("BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    for hosts in 1..=3 {
        let schema = format!("bench_grpc_{}_{hosts}", std::process::id());
        let mut clients = Vec::new();
        for _ in 0..hosts {
            clients.push(postgres_host(&url, &schema).await);
        }
        session_turns(clients[0].clone(), 3).await;
        let started = Instant::now();
        let tasks: Vec<_> = (0..64)
            .map(|i| tokio::spawn(session_turns(clients[i % hosts].clone(), turns)))
            .collect();
        let mut latencies = Vec::new();
        for task in tasks {
            latencies.extend(task.await.unwrap());
        }
        report(
            &format!("turn via gRPC, 64 sessions, {hosts} host(s), Postgres"),
            latencies,
            started.elapsed(),
        );
        let _ = std::process::Command::new("psql")
            .args([
                &url,
                "-q",
                "-c",
                &format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"),
            ])
            .output();
    }
}
