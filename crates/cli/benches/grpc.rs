//! Turn latency and throughput through gRPC (a bench binary, not a timed test):
//! client SDK → Sessions service over loopback TCP → echo harness → offline echo model → SQLite
//! (every record fsync'd before it is acknowledged). The service is the daemon's own assembly
//! (`host::build_service`), served in this process so one binary measures both ends.
//!
//! Then, unless `BENCH_POSTGRES=off`, the same 64 concurrent sessions spread over 1, 2 and 3
//! hosts (each its own service and connection pool) sharing one Postgres journal
//! (`BENCH_POSTGRES_URL`, default the local server), in a fresh schema dropped afterwards.
//!
//! `BENCH_TRACING` picks what observes the service: unset or `off`, no subscriber at all; `logs`,
//! the daemon's log subscriber (lines to stderr); `otlp`, those logs plus every span exported
//! over OTLP/HTTP (the daemon's default protocol) to a receiver in this process (on its own
//! thread) that keeps the requests and counts their spans after the runs ("tracing on" of
//! BENCHMARKS.md, "Tracing off vs on").
//!
//! Run with `cargo bench -p agentsessions-cli --bench grpc`; `BENCH_QUICK=1` for a smoke run.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::cast_precision_loss)]

/// The daemon's allocator (`agentsessionsd`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use agentsessions_cli::config::HostConfig;
use agentsessions_cli::host::{build_service, open_journal};
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
        let tracing = tracing_mode().await;
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
        if let Some((telemetry, spans)) = tracing {
            telemetry.shutdown().await;
            println!("spans received by the OTLP receiver: {}", spans.spans());
        }
    });
}

/// Keeps the OTLP/HTTP export requests it receives, undecoded, so receiving costs the timed runs
/// next to nothing (a real collector runs on another machine); the spans are counted afterwards.
#[derive(Clone, Default)]
struct StashingReceiver(std::sync::Arc<std::sync::Mutex<Vec<axum::body::Bytes>>>);

impl StashingReceiver {
    /// The spans of every request received so far.
    fn spans(&self) -> usize {
        use prost::Message as _;
        let bodies = self.0.lock().unwrap();
        bodies
            .iter()
            .map(|body| {
                opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(
                    body.as_ref(),
                )
                .unwrap()
                .resource_spans
                .iter()
                .flat_map(|r| &r.scope_spans)
                .map(|s| s.spans.len())
                .sum::<usize>()
            })
            .sum()
    }
}

/// Serves `receiver` as an OTLP/HTTP endpoint (`POST /v1/traces`) on a loopback port from its
/// own thread and runtime, so receiving takes none of the service's workers; the port. The thread
/// lives as long as the bench process.
fn spawn_receiver(receiver: StashingReceiver) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            axum::routing::post(
                |axum::extract::State(kept): axum::extract::State<StashingReceiver>,
                 body: axum::body::Bytes| async move {
                    kept.0.lock().unwrap().push(body);
                    // An empty ExportTraceServiceResponse: full success.
                    (
                        [("content-type", "application/x-protobuf")],
                        Vec::<u8>::new(),
                    )
                },
            ),
        )
        .with_state(receiver);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let _ = axum::serve(listener, app).await;
        });
    });
    port
}

/// Installs what `BENCH_TRACING` asks for; with `otlp`, also the receiver and its span count.
async fn tracing_mode() -> Option<(agentsessions_telemetry::Telemetry, StashingReceiver)> {
    use agentsessions_telemetry::{LogFormat, Telemetry, TelemetryConfig};
    let mode = std::env::var("BENCH_TRACING").unwrap_or_default();
    let endpoint = match mode.as_str() {
        "" | "off" => return None,
        "logs" => String::new(),
        "otlp" => {
            let receiver = StashingReceiver::default();
            let port = spawn_receiver(receiver.clone());
            let config = TelemetryConfig {
                otlp_endpoint: format!("http://127.0.0.1:{port}"),
                otlp_protocol: "http/protobuf".into(),
                ..TelemetryConfig::default()
            };
            let resolved = config.resolve().unwrap();
            let telemetry = Telemetry::install(LogFormat::Text, &resolved).unwrap();
            println!("tracing: logs to stderr and spans over OTLP/HTTP to 127.0.0.1:{port}");
            return Some((telemetry, receiver));
        }
        other => panic!("BENCH_TRACING={other:?}: expected off, logs or otlp"),
    };
    let resolved = TelemetryConfig {
        otlp_endpoint: endpoint,
        ..TelemetryConfig::default()
    }
    .resolve()
    .unwrap();
    let telemetry = Telemetry::install(LogFormat::Text, &resolved).unwrap();
    println!("tracing: logs to stderr, no span export");
    Some((telemetry, StashingReceiver::default()))
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
