//! Postgres journal benchmark (a bench binary, not a timed test). Run with
//! `cargo bench -p agentsessions-postgres --bench postgres_journal`; `BENCH_QUICK=1` for a short
//! smoke run. The server is `AGENTSESSIONS_BENCH_POSTGRES` (default: 127.0.0.1:5432, database
//! `test`); each run works in a schema of its own and drops it afterwards.
//!
//! Measures:
//! a. one session appending sequentially on one host (the latency floor of one commit);
//! b. 64 sessions appending concurrently, spread over 1, 2 and 3 journal instances ("hosts")
//!    on one database: aggregate appends/s and per-append latency;
//! c. the same 64 sessions on one host with 1 and 4 writer connections instead of the default 2.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::cast_precision_loss)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsessions_journal::LogExt as _;
use agentsessions_postgres::{PostgresJournal, PostgresOptions};
use agentsessions_testkit::fixtures::{percentile, turn_event};

const SESSIONS: usize = 64;

fn url() -> String {
    std::env::var("AGENTSESSIONS_BENCH_POSTGRES")
        .unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=test".to_owned())
}

/// One measured run: appends, wall time and every append's latency.
struct Run {
    appends: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.appends as f64 / self.elapsed.as_secs_f64()
    }
}

/// Prints the run with the median throughput of `runs` (this machine's disk and neighbours are
/// noisy), with the range of the others.
fn report(name: &str, mut runs: Vec<Run>) {
    runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let (low, high) = (
        runs.first().map_or(0.0, Run::rate),
        runs.last().map_or(0.0, Run::rate),
    );
    let middle = runs.len() / 2;
    let Some(mut run) = runs.into_iter().nth(middle) else {
        return;
    };
    run.latencies.sort_unstable();
    println!(
        "{name:<44} {:>6} appends {:>7.0} appends/s (runs {low:.0}..{high:.0})   p50 {:>8.3?}  \
         p99 {:>8.3?}",
        run.appends,
        run.rate(),
        percentile(&run.latencies, 500),
        percentile(&run.latencies, 990),
    );
}

async fn admin() -> tokio_postgres::Client {
    let url = url();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL is not reachable at `{url}`: {e}"));
    tokio::spawn(connection);
    client
}

async fn fresh_schema(db: &tokio_postgres::Client, tag: &str) -> String {
    let schema = format!("bench_{}_{tag}", std::process::id());
    db.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .unwrap();
    schema
}

async fn sequential(db: &tokio_postgres::Client, n: usize) -> Run {
    let schema = fresh_schema(db, "seq").await;
    let options = PostgresOptions {
        schema: schema.clone(),
        ..PostgresOptions::default()
    };
    let j = PostgresJournal::connect(&url(), options).await.unwrap();
    let mut latencies = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        j.append_one("solo", i64::try_from(i).unwrap(), 0, turn_event(i))
            .await
            .unwrap();
        latencies.push(t.elapsed());
    }
    let elapsed = start.elapsed();
    j.close().await;
    db.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .unwrap();
    Run {
        appends: n,
        elapsed,
        latencies,
    }
}

async fn concurrent(
    db: &tokio_postgres::Client,
    hosts: usize,
    writers: usize,
    per_session: usize,
) -> Run {
    let schema = fresh_schema(db, &format!("h{hosts}w{writers}")).await;
    let options = PostgresOptions {
        schema: schema.clone(),
        writers,
        ..PostgresOptions::default()
    };
    let mut journals = Vec::with_capacity(hosts);
    for _ in 0..hosts {
        journals.push(Arc::new(
            PostgresJournal::connect(&url(), options.clone())
                .await
                .unwrap(),
        ));
    }
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for s in 0..SESSIONS {
        // Each session has one writer, on one host, as placement arranges in production.
        let j = Arc::clone(&journals[s % hosts]);
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
    let elapsed = start.elapsed();
    for j in journals {
        if let Ok(j) = Arc::try_unwrap(j) {
            j.close().await;
        }
    }
    db.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .unwrap();
    Run {
        appends: SESSIONS * per_session,
        elapsed,
        latencies,
    }
}

fn main() {
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
    let (sequential_n, per_session, rounds) = if quick { (50, 10, 1) } else { (500, 150, 3) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let db = admin().await;
        let settings = db
            .query_one(
                "SELECT current_setting('server_version'), current_setting('synchronous_commit'),
                        current_setting('fsync')",
                &[],
            )
            .await
            .unwrap();
        println!(
            "postgres {} (synchronous_commit={}, fsync={}); {SESSIONS} sessions x {per_session} \
             appends in b and c; median of {rounds} run(s)",
            settings.get::<_, String>(0),
            settings.get::<_, String>(1),
            settings.get::<_, String>(2),
        );
        let mut runs = Vec::new();
        for _ in 0..rounds {
            runs.push(sequential(&db, sequential_n).await);
        }
        report("a. 1 session, sequential, 1 host", runs);
        let default_writers = PostgresOptions::default().writers;
        for hosts in 1..=3 {
            let mut runs = Vec::new();
            for _ in 0..rounds {
                runs.push(concurrent(&db, hosts, default_writers, per_session).await);
            }
            report(
                &format!("b. {SESSIONS} sessions, concurrent, {hosts} host(s)"),
                runs,
            );
        }
        for writers in [1, 4] {
            let mut runs = Vec::new();
            for _ in 0..rounds {
                runs.push(concurrent(&db, 1, writers, per_session).await);
            }
            report(
                &format!("c. {SESSIONS} sessions, 1 host, {writers} writer(s)"),
                runs,
            );
        }
    });
}
