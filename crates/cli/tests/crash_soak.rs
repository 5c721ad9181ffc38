//! Crash soak (issue 19): the real `agentsessionsd` with several concurrent clients running
//! tool-using turns — the offline directive model asks for the `count` tool of a real MCP
//! server (`mcp-fixture-server`, which counts its calls in a file) — SIGKILLed at seeded random
//! moments and restarted on the same journal, the sessions carrying on. After every restart:
//!
//! - no acknowledged record (one a client received on its Exec stream) is lost or changed;
//! - every session's chain verifies;
//! - every tool effect ran at most once: the server's count never exceeds the tool calls the
//!   journal holds, and it is above zero (the tool really ran);
//! - at the end, one more turn on every session completes, and every execution ever started has
//!   ended (END) or failed cleanly (ERROR): a client whose turn the daemon died under resumes it
//!   (semantics §3.4) once the daemon is back, before it starts the next one.
//!
//! Short by default (20 kills on SQLite, well under 90 s). On demand, through `scripts/soak.sh`:
//!
//! ```text
//! AGENTSESSIONS_SOAK_KILLS=1000 cargo test -p agentsessions-cli --test crash_soak -- --nocapture
//! AGENTSESSIONS_SOAK_JOURNAL=postgres AGENTSESSIONS_SOAK_PG_TERMINATE=1 ... (same)
//! ```
//!
//! `AGENTSESSIONS_SOAK_SEED` picks the kill moments (the default is fixed, so a failure
//! reproduces); the figures of a run are printed at the end.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentsessions_client::{Client, ExecEvent, ExecOptions, uid_of, verify};
use agentsessions_wire::pb;
use common::{DAEMON, Daemon};

/// Concurrent clients, each on its own session.
const CLIENTS: usize = 4;
/// What each turn asks: the directive model calls the counting tool, then answers.
const ASK: &str = "/tool counter__count {}";

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// splitmix64: the kill moments, reproducible from the seed.
struct Moments(u64);

impl Moments {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low)
    }
}

/// Where the journal lives for this run.
enum JournalKind {
    Sqlite(PathBuf),
    Postgres { url: String, schema: String },
}

impl JournalKind {
    fn args(&self) -> Vec<String> {
        match self {
            Self::Sqlite(path) => vec!["--journal".into(), path.display().to_string()],
            Self::Postgres { url, schema } => vec![
                "--journal".into(),
                url.clone(),
                "--journal-schema".into(),
                schema.clone(),
            ],
        }
    }
}

impl Drop for JournalKind {
    fn drop(&mut self) {
        if let Self::Postgres { url, schema } = self {
            let _dropped = Command::new("psql")
                .args([
                    url.as_str(),
                    "-q",
                    "-c",
                    &format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"),
                ])
                .output();
        }
    }
}

/// The MCP fixture server binary, built beside the daemon by `cargo test --workspace`.
fn fixture_server() -> PathBuf {
    let path = Path::new(DAEMON).with_file_name("mcp-fixture-server");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p agentsessions-mcp --bin mcp-fixture-server`",
        path.display()
    );
    path
}

fn start(dir: &Path, config: &Path, journal: &JournalKind) -> Daemon {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("daemon.log"))
        .unwrap();
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--config"])
        .arg(config)
        .args(journal.args())
        .env("RUST_LOG", "warn")
        .stderr(Stdio::from(log));
    Daemon::spawn(command, false)
}

/// What clients were told: every record they received, by session and seq, with its hash.
#[derive(Default)]
struct Acknowledged {
    records: BTreeMap<String, BTreeMap<i64, String>>,
}

/// Runs turns on `session` until `stop`; each record received is acknowledged.
async fn client_loop(
    addr: String,
    session: String,
    acks: Arc<Mutex<Acknowledged>>,
    stop: Arc<AtomicBool>,
    turns: Arc<AtomicU64>,
    resumes: Arc<AtomicU64>,
) {
    let Ok(mut client) = Client::dial(&addr) else {
        return;
    };
    // A turn the last daemon died under is resumed (semantics §3.4) before the next one starts,
    // so every execution is driven to its end.
    let mut interrupted = true;
    while !stop.load(Ordering::SeqCst) {
        if interrupted {
            match client.resume(&session).await {
                Ok(_) => {
                    interrupted = false;
                    resumes.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            }
        }
        let options = ExecOptions {
            session: session.clone(),
            harness: "chat".into(),
            ..ExecOptions::new(ASK)
        };
        let acked = Arc::clone(&acks);
        let key = session.clone();
        let result = client
            .exec(options, move |event| {
                if let ExecEvent::Record(record) = event {
                    acked
                        .lock()
                        .unwrap()
                        .records
                        .entry(key.clone())
                        .or_default()
                        .insert(record.seq, record.content_hash.clone());
                }
            })
            .await;
        match result {
            Ok(_) => {
                turns.fetch_add(1, Ordering::SeqCst);
            }
            // The daemon died under the turn: resume it once the daemon is back.
            Err(_) => {
                interrupted = true;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Every record of `uid`, from the (restarted) daemon.
async fn records_of(client: &mut Client, uid: &str) -> Vec<pb::LogRecord> {
    let mut last = Vec::new();
    // Right after a restart the journal may still be recovering a busy session: retry briefly.
    for _ in 0..50 {
        match client.replay(uid, 0, 0).await {
            Ok(records) => return records,
            Err(e) => {
                last.push(e.to_string());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    panic!("replay of {uid} failed: {last:?}");
}

fn kind(record: &pb::LogRecord) -> pb::EventKind {
    record
        .event
        .as_ref()
        .map_or(pb::EventKind::Unspecified, pb::Event::kind)
}

fn execution(record: &pb::LogRecord) -> String {
    record
        .event
        .as_ref()
        .map(|e| e.execution_id.clone())
        .unwrap_or_default()
}

/// Tool calls the journal holds, as (session, execution, call id).
fn tool_calls(uid: &str, records: &[pb::LogRecord]) -> BTreeSet<(String, String, String)> {
    records
        .iter()
        .filter_map(|r| match r.event.as_ref().and_then(|e| e.body.as_ref()) {
            Some(pb::event::Body::Tool(call)) if kind(r) == pb::EventKind::EventToolCall => {
                Some((uid.to_owned(), execution(r), call.id.clone()))
            }
            _ => None,
        })
        .collect()
}

fn count_of(file: &Path) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// Figures of a run.
#[derive(Debug, Default)]
struct Figures {
    kills: u64,
    turns_completed: u64,
    resumes: u64,
    records_checked: u64,
    acknowledged: u64,
    tool_calls_journaled: u64,
    tool_effects: u64,
    executions: u64,
    pg_terminations: u64,
}

/// Checks the invariants on the running daemon; returns (records, tool calls) seen.
async fn check(
    addr: &str,
    sessions: &[String],
    acks: &Mutex<Acknowledged>,
    count_file: &Path,
) -> (u64, BTreeSet<(String, String, String)>) {
    let mut client = Client::dial(addr).unwrap();
    let mut checked = 0;
    let mut calls = BTreeSet::new();
    for uid in sessions {
        let records = records_of(&mut client, uid).await;
        checked += records.len() as u64;
        // Every session's chain verifies.
        if let Err(e) = verify(&records) {
            panic!("session {uid}: the chain does not verify: {e}");
        }
        // No acknowledged record lost or changed.
        let stored: BTreeMap<i64, &str> = records
            .iter()
            .map(|r| (r.seq, r.content_hash.as_str()))
            .collect();
        let acked = acks
            .lock()
            .unwrap()
            .records
            .get(uid)
            .cloned()
            .unwrap_or_default();
        for (seq, hash) in &acked {
            match stored.get(seq) {
                Some(found) => assert_eq!(
                    *found, hash,
                    "session {uid}: acknowledged record {seq} changed"
                ),
                None => panic!("session {uid}: acknowledged record {seq} was lost"),
            }
        }
        calls.extend(tool_calls(uid, &records));
    }
    // Each tool effect ran at most once: never more effects than journaled calls.
    let effects = count_of(count_file);
    assert!(
        effects <= calls.len() as u64,
        "the tool ran {effects} times for {} journaled calls",
        calls.len()
    );
    (checked, calls)
}

/// Terminates the daemon's Postgres connections (mid-commit, if one is in flight).
fn terminate_backends(url: &str) -> bool {
    Command::new("psql")
        .args([
            url,
            "-q",
            "-t",
            "-c",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND backend_type = 'client backend'",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_survives_kills_without_losing_or_repeating_anything() {
    let kills = setting("AGENTSESSIONS_SOAK_KILLS", 20);
    let seed = setting("AGENTSESSIONS_SOAK_SEED", 19);
    let terminate = setting("AGENTSESSIONS_SOAK_PG_TERMINATE", 0) == 1;
    let dir = tempfile::tempdir().unwrap();
    let count_file = dir.path().join("count");
    let journal = match std::env::var("AGENTSESSIONS_SOAK_JOURNAL").as_deref() {
        Ok("postgres") => JournalKind::Postgres {
            url: std::env::var("AGENTSESSIONS_TEST_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned()),
            schema: format!("soak_{}", std::process::id()),
        },
        _ => JournalKind::Sqlite(dir.path().join("journal.db")),
    };
    let config = dir.path().join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "model = \"directive\"\nmodel_provider = \"directive\"\n\
             mcp_ledger = \"tools.db\"\n\
             [[mcp_servers]]\nname = \"counter\"\ncommand = {:?}\n\
             env = {{ MCP_FIXTURE_COUNT_FILE = {:?} }}\n",
            fixture_server().display().to_string(),
            count_file.display().to_string(),
        ),
    )
    .unwrap();

    let started = Instant::now();
    let mut moments = Moments(seed);
    let mut figures = Figures::default();
    let acks = Arc::new(Mutex::new(Acknowledged::default()));
    let turns = Arc::new(AtomicU64::new(0));
    let resumes = Arc::new(AtomicU64::new(0));
    let mut daemon = start(dir.path(), &config, &journal);
    let sessions: Vec<String> = {
        let mut client = Client::dial(&daemon.addr).unwrap();
        let mut uids = Vec::new();
        for i in 0..CLIENTS {
            let created = client
                .create(&format!("soak-{i}"), "chat", "")
                .await
                .unwrap();
            uids.push(uid_of(&created).to_owned());
        }
        uids
    };
    for round in 0..kills {
        let stop = Arc::new(AtomicBool::new(false));
        let clients: Vec<_> = sessions
            .iter()
            .map(|uid| {
                tokio::spawn(client_loop(
                    daemon.addr.clone(),
                    uid.clone(),
                    Arc::clone(&acks),
                    Arc::clone(&stop),
                    Arc::clone(&turns),
                    Arc::clone(&resumes),
                ))
            })
            .collect();
        let run_for = moments.between(150, 700);
        if terminate && let JournalKind::Postgres { url, .. } = &journal {
            // Cut the daemon's connections mid-run, then kill it later still.
            tokio::time::sleep(Duration::from_millis(run_for / 2)).await;
            if terminate_backends(url) {
                figures.pg_terminations += 1;
            }
            tokio::time::sleep(Duration::from_millis(run_for / 2)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(run_for)).await;
        }
        daemon.sigkill();
        figures.kills += 1;
        stop.store(true, Ordering::SeqCst);
        for client in clients {
            let _ended = tokio::time::timeout(Duration::from_secs(20), client).await;
        }
        daemon = start(dir.path(), &config, &journal);
        let (checked, calls) = check(&daemon.addr, &sessions, &acks, &count_file).await;
        figures.records_checked += checked;
        figures.tool_calls_journaled = calls.len() as u64;
        if round % 50 == 49 {
            eprintln!(
                "soak: {} kills, {} turns, {:?} elapsed",
                figures.kills,
                turns.load(Ordering::SeqCst),
                started.elapsed()
            );
        }
    }

    // Quiet now: one more turn on every session completes, and every execution ever started
    // has ended or failed cleanly.
    let mut client = Client::dial(&daemon.addr).unwrap();
    for uid in &sessions {
        let mut resumed = false;
        for _ in 0..50 {
            if client.resume(uid).await.is_ok() {
                resumed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(resumed, "the interrupted turn of {uid} never resumed");
        let options = ExecOptions {
            session: uid.clone(),
            harness: "chat".into(),
            ..ExecOptions::new(ASK)
        };
        let mut finished = None;
        for _ in 0..50 {
            match client.exec(options.clone(), |_| {}).await {
                Ok(result) => {
                    finished = Some(result);
                    break;
                }
                Err(e) => {
                    finished = None;
                    eprintln!("final turn on {uid}: {}", e.error);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        assert!(
            finished.is_some(),
            "the final turn on {uid} never completed"
        );
    }
    let (checked, calls) = check(&daemon.addr, &sessions, &acks, &count_file).await;
    figures.records_checked += checked;
    figures.tool_calls_journaled = calls.len() as u64;
    for uid in &sessions {
        let records = records_of(&mut client, uid).await;
        let begun: BTreeSet<String> = records
            .iter()
            .filter(|r| kind(r) == pb::EventKind::EventExecutionStart)
            .map(execution)
            .collect();
        let ended: BTreeSet<String> = records
            .iter()
            .filter(|r| matches!(kind(r), pb::EventKind::EventEnd | pb::EventKind::EventError))
            .map(execution)
            .collect();
        let open: Vec<&String> = begun.difference(&ended).collect();
        assert!(
            open.is_empty(),
            "session {uid}: executions {open:?} never ended or failed"
        );
        figures.executions += begun.len() as u64;
    }
    figures.tool_effects = count_of(&count_file);
    figures.turns_completed = turns.load(Ordering::SeqCst) + sessions.len() as u64;
    figures.resumes = resumes.load(Ordering::SeqCst);
    figures.acknowledged = acks
        .lock()
        .unwrap()
        .records
        .values()
        .map(|r| r.len() as u64)
        .sum();
    assert!(
        figures.tool_effects > 0,
        "no tool call ever reached the counting server: the at-most-once check saw nothing"
    );
    assert!(figures.turns_completed > 0);
    daemon.signal("TERM");
    println!(
        "soak figures: journal={} seed={seed} {figures:?} elapsed={:?}",
        match journal {
            JournalKind::Sqlite(_) => "sqlite",
            JournalKind::Postgres { .. } => "postgres",
        },
        started.elapsed()
    );
}
