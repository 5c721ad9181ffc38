//! Crash soak (nothing acknowledged is lost, no effect runs twice): the real `agentsessionsd` with
//! several concurrent clients running tool-using turns — the offline directive model asks for the
//! `count` tool of a real MCP server (`mcp-fixture-server`, which counts its calls in a file) —
//! SIGKILLed at seeded random moments and restarted on the same journal, the sessions carrying on.
//! After every restart:
//!
//! - no acknowledged record (one a client received on its Exec stream) is lost or changed;
//! - every session's chain verifies: what was appended since the last check continues the
//!   chain verified before, whose last record is stored unchanged (`ledger`: each round reads
//!   only what is new, so a round does not grow with the history); every
//!   `AGENTSESSIONS_SOAK_FULL_EVERY` rounds (100) and at the end, every session in full;
//! - every tool effect ran at most once: the server's count never exceeds the tool calls the
//!   journal holds, and it is above zero (the tool really ran);
//! - at the end, one more turn on every session completes, and every execution ever started has
//!   ended (END) or failed cleanly (ERROR): a client whose turn the daemon died under resumes it
//!   (semantics §3.4) once the daemon is back, before it starts the next one.
//!
//! Short by default (20 kills on SQLite, well under 30 s). On demand, through `scripts/soak.sh`:
//!
//! ```text
//! AGENTSESSIONS_SOAK_KILLS=1000 cargo test -p agentsessions-cli --test crash_soak -- --nocapture
//! AGENTSESSIONS_SOAK_JOURNAL=postgres AGENTSESSIONS_SOAK_PG_TERMINATE=1 ... (same)
//! AGENTSESSIONS_SOAK_JOURNAL=postgres AGENTSESSIONS_SOAK_PG_RESTART=1 ... (same)
//! ```
//!
//! `AGENTSESSIONS_SOAK_PG_TERMINATE=1` cuts the daemon's Postgres connections mid-run with
//! `pg_terminate_backend`; `AGENTSESSIONS_SOAK_PG_RESTART=1` restarts the local PostgreSQL
//! cluster (`pg_ctlcluster`, as root) under the running daemon at a seeded moment of every
//! round, and then requires turns to complete on that same daemon before it is killed: it must
//! reconnect on its own. Never in the default run: other tests share that server.
//!
//! `AGENTSESSIONS_SOAK_SEED` picks the kill moments (the default is fixed, so a failure
//! reproduces); `AGENTSESSIONS_SOAK_SECS` stops the kills early once that many seconds have
//! passed (a time budget for the slower journals); the figures of a run are printed at the end.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod common;
#[path = "crash_soak/ledger.rs"]
mod ledger;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentsessions_client::{Client, ExecEvent, ExecOptions, uid_of};
use agentsessions_wire::pb;
use common::{Daemon, fixture_server};
use ledger::{Checked, Ledger};

/// Concurrent clients, each on its own session.
const CLIENTS: usize = 4;
/// What each turn asks: the directive model calls the counting tool, then answers.
const ASK: &str = "/tool counter__count {}";
/// How long the daemon may take to serve turns again after Postgres restarted under it.
const RECOVERY: Duration = Duration::from_secs(60);

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
    let daemon = Daemon::spawn(command, false);
    daemon.wait_for_mcp(&["counter"]);
    daemon
}

/// Runs turns on `session` until `stop`; each record received is acknowledged.
async fn client_loop(
    addr: String,
    session: String,
    acks: Arc<Mutex<Ledger>>,
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
                        .acknowledge(&key, record.seq, &record.content_hash);
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

/// The records of `uid` from seq `from` to its head, from the (restarted) daemon.
async fn records_of(client: &mut Client, uid: &str, from: i64) -> Vec<pb::LogRecord> {
    let mut last = Vec::new();
    // Right after a restart the journal may still be recovering a busy session: retry briefly.
    for _ in 0..50 {
        match client.read_records(uid, from, 0).await {
            Ok(records) => return records,
            Err(e) => {
                last.push(e.to_string());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    panic!("reading {uid} from {from} failed: {last:?}");
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
    acknowledged_checked: u64,
    full_checks: u64,
    tool_calls_journaled: u64,
    tool_effects: u64,
    executions: u64,
    pg_terminations: u64,
    pg_restarts: u64,
    slowest_recovery_ms: u128,
}

/// Checks the invariants on the running daemon (`full`: every session from seq 1, every
/// acknowledgement again); returns what was read and compared.
async fn check(
    addr: &str,
    sessions: &[String],
    ledger: &Mutex<Ledger>,
    count_file: &Path,
    full: bool,
) -> Checked {
    let mut client = Client::dial(addr).unwrap();
    let mut checked = Checked::default();
    for uid in sessions {
        let from = {
            let mut ledger = ledger.lock().unwrap();
            if full {
                ledger.forget_verified(uid);
            }
            ledger.read_from(uid)
        };
        let records = records_of(&mut client, uid, from).await;
        // The chain verifies and continues the one verified before; no acknowledged record is
        // lost or changed.
        match ledger.lock().unwrap().check(uid, from, &records) {
            Ok(seen) => {
                checked.records += seen.records;
                checked.acknowledged += seen.acknowledged;
            }
            Err(finding) => panic!("{finding}"),
        }
    }
    // Each tool effect ran at most once: never more effects than journaled calls.
    let effects = count_of(count_file);
    let calls = ledger.lock().unwrap().tool_calls();
    assert!(
        effects <= calls,
        "the tool ran {effects} times for {calls} journaled calls"
    );
    checked
}

/// The last lines of the daemons' log: the temporary directory is gone once a failure unwinds.
fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Restarts the local PostgreSQL cluster (the one under `/etc/postgresql`, as root): a fast
/// shutdown cuts every connection, then the server is down until it is back up.
fn restart_postgres() -> Result<(), String> {
    let version = std::fs::read_dir("/etc/postgresql")
        .map_err(|e| format!("/etc/postgresql: {e}"))?
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .next()
        .ok_or("no cluster under /etc/postgresql")?;
    let output = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .output()
        .map_err(|e| format!("pg_ctlcluster: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
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
    let restart = setting("AGENTSESSIONS_SOAK_PG_RESTART", 0) == 1;
    let full_every = setting("AGENTSESSIONS_SOAK_FULL_EVERY", 100).max(1);
    let budget = match setting("AGENTSESSIONS_SOAK_SECS", 0) {
        0 => Duration::MAX,
        secs => Duration::from_secs(secs),
    };
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
    assert!(
        !restart || matches!(journal, JournalKind::Postgres { .. }),
        "AGENTSESSIONS_SOAK_PG_RESTART=1 needs AGENTSESSIONS_SOAK_JOURNAL=postgres"
    );
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
    let acks = Arc::new(Mutex::new(Ledger::default()));
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
        if started.elapsed() >= budget {
            break;
        }
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
        if restart {
            // Postgres goes away under the running daemon at a seeded moment; that same daemon
            // must serve turns again before it is killed.
            let before = moments.between(0, run_for);
            tokio::time::sleep(Duration::from_millis(before)).await;
            let done = turns.load(Ordering::SeqCst);
            let restarted = Instant::now();
            if let Err(e) = tokio::task::spawn_blocking(restart_postgres).await.unwrap() {
                panic!("restarting postgres failed: {e}");
            }
            figures.pg_restarts += 1;
            while turns.load(Ordering::SeqCst) < done + CLIENTS as u64 {
                assert!(
                    restarted.elapsed() < RECOVERY,
                    "round {round}: no {CLIENTS} turns completed within {RECOVERY:?} of \
                     restarting postgres: the daemon did not recover; its log ends:\n{}",
                    log_tail(dir.path())
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            figures.slowest_recovery_ms = figures
                .slowest_recovery_ms
                .max(restarted.elapsed().as_millis());
            tokio::time::sleep(Duration::from_millis(run_for - before)).await;
        } else if terminate && let JournalKind::Postgres { url, .. } = &journal {
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
        let full = round % full_every == full_every - 1;
        let checked = check(&daemon.addr, &sessions, &acks, &count_file, full).await;
        figures.records_checked += checked.records;
        figures.acknowledged_checked += checked.acknowledged;
        figures.full_checks += u64::from(full);
        if round % 50 == 49 {
            eprintln!(
                "soak: {} kills, {} turns, {} records checked, {:?} elapsed",
                figures.kills,
                turns.load(Ordering::SeqCst),
                figures.records_checked,
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
    // The last check is a full one: every session from seq 1, every acknowledgement again.
    let checked = check(&daemon.addr, &sessions, &acks, &count_file, true).await;
    figures.records_checked += checked.records;
    figures.acknowledged_checked += checked.acknowledged;
    figures.full_checks += 1;
    figures.tool_calls_journaled = acks.lock().unwrap().tool_calls();
    for uid in &sessions {
        let records = records_of(&mut client, uid, 1).await;
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
    figures.acknowledged = acks.lock().unwrap().acknowledged();
    // The checks compared something: records were read, acknowledgements were among them.
    assert!(figures.records_checked > 0 && figures.acknowledged_checked > 0);
    assert!(figures.acknowledged_checked >= figures.acknowledged);
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
