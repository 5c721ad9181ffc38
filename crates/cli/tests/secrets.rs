//! Secrets stay out of the journal (docs/security.md, "What a child process gets" and
//! "Redaction"): the real daemon, with secrets in its environment, runs the MCP fixture server
//! (which dumps its environment and echoes a variable it was given) through the chat harness and
//! the offline directive model. No child gets a secret it was not configured with, and no secret
//! value is anywhere in the stored journal (the SQLite file and its WAL, or a `pg_dump` of the
//! Postgres schema) or in the daemon's log; the markers and the records' `redacted` lists are,
//! and the session still replays and verifies.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{Daemon, fixture_server};

/// The secrets in the daemon's environment, by variable.
const MODEL_KEY: (&str, &str) = ("MODEL_API_KEY", "sk-model-secret-0123456789abcdef");
const OPENAI_KEY: (&str, &str) = ("OPENAI_API_KEY", "sk-openai-secret-fedcba9876543210");
const CLIENT_TOKEN: (&str, &str) = ("AGENTCTL_TOKEN", "agentctl-token-secret-4242424242");
/// Passed through to the fixture by name: it gets it, the journal does not.
const TOOL_TOKEN: (&str, &str) = ("FIXTURE_API_TOKEN", "fixture-token-secret-1357913579");
/// Matched by a configured pattern only.
const PATTERNED: &str = "ghp_patternsecret0123456789";

fn postgres_url() -> String {
    std::env::var("AGENTSESSIONS_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn config(dir: &Path, journal: &str) -> PathBuf {
    let path = dir.join("agentsessionsd.toml");
    std::fs::write(
        &path,
        format!(
            "{journal}\n\
             mcp_ledger = \"{ledger}\"\n\
             model = \"directive\"\n\
             model_provider = \"directive\"\n\
             [redaction]\n\
             patterns = [\"ghp_[A-Za-z0-9]{{20,}}\"]\n\
             [[mcp_servers]]\n\
             name = \"fixture\"\n\
             command = \"{server}\"\n\
             env = {{ MCP_FIXTURE_COUNT_FILE = \"{count}\" }}\n\
             env_passthrough = [\"{tool_token}\"]\n",
            ledger = dir.join("tools.db").display(),
            server = fixture_server().display(),
            count = dir.join("count").display(),
            tool_token = TOOL_TOKEN.0,
        ),
    )
    .unwrap();
    path
}

/// Starts the daemon with the secrets in its environment and its log in `dir/daemon.log`.
fn start(dir: &Path, config: &Path) -> Daemon {
    let log = std::fs::File::create(dir.join("daemon.log")).unwrap();
    let mut command = Daemon::command();
    command
        .args([
            "--addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(config)
        .current_dir(dir)
        .env(MODEL_KEY.0, MODEL_KEY.1)
        .env(OPENAI_KEY.0, OPENAI_KEY.1)
        .env(CLIENT_TOKEN.0, CLIENT_TOKEN.1)
        .env(TOOL_TOKEN.0, TOOL_TOKEN.1)
        .env("RUST_LOG", "debug")
        .stderr(Stdio::from(log));
    Daemon::spawn(command, false)
}

/// The daemon's `/metrics` page.
fn metrics(daemon: &Daemon) -> String {
    use std::io::Write as _;
    let mut stream = std::net::TcpStream::connect(&daemon.http).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        daemon.http
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// The value of the redaction counter on a metrics page.
fn redactions(page: &str) -> f64 {
    page.lines()
        .find_map(|line| line.strip_prefix("agentsessions_redactions_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

fn session_of(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session line in {out}"))
        .to_owned()
}

/// Runs the turns that put secrets in front of the journal; the session and its JSON records.
fn run_turns(daemon: &Daemon) -> (String, String) {
    // The fixture dumps its environment: only the allowlist, its table and its passthrough.
    let out = daemon.ok(&["exec", "--harness", "chat", "/tool fixture__env {}"]);
    let uid = session_of(&out);
    // A tool that echoes the secret it was given.
    daemon.ok(&[
        "exec",
        "--session",
        &uid,
        &format!("/tool fixture__echo_env {{\"name\": \"{}\"}}", TOOL_TOKEN.0),
    ]);
    // A person pastes the model key and a pattern-matched token into their message.
    daemon.ok(&[
        "exec",
        "--session",
        &uid,
        &format!("my key is {} and my token {PATTERNED}", MODEL_KEY.1),
    ]);
    let replay = daemon.ok(&["replay", "--session", &uid, "--json"]);
    (uid, replay)
}

fn assert_redacted(replay: &str) {
    // The tool's environment dump: no secret it was not configured with, not even the name.
    for name in [MODEL_KEY.0, OPENAI_KEY.0, CLIENT_TOKEN.0] {
        assert!(
            !replay.contains(&format!("{name}=")),
            "{name} reached the MCP server's environment: {replay}"
        );
    }
    assert!(replay.contains("MCP_FIXTURE_COUNT_FILE="), "{replay}");
    assert!(replay.contains("PATH="), "{replay}");
    // The passthrough value reached the tool, and was redacted from its result and the output.
    assert!(
        replay.contains(&format!("{} is [REDACTED:{}]", TOOL_TOKEN.0, TOOL_TOKEN.0)),
        "{replay}"
    );
    assert!(
        replay.contains(&format!("[REDACTED:{}]", MODEL_KEY.0)),
        "{replay}"
    );
    assert!(replay.contains("[REDACTED:pattern-1]"), "{replay}");
    // Each redacted record says so.
    let marked: Vec<serde_json::Value> = replay
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|record| record["redacted"].as_array().cloned())
        .flat_map(|names| names.into_iter())
        .collect();
    for name in [TOOL_TOKEN.0, MODEL_KEY.0, "pattern-1"] {
        assert!(
            marked.iter().any(|n| n == name),
            "no record lists {name} as redacted: {marked:?}"
        );
    }
}

fn contains(bytes: &[u8], needle: &str) -> bool {
    bytes
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// `text` as `pg_dump` prints it inside a `bytea` (lowercase hex).
fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// No secret in `bytes`, as text or as the hex a `bytea` dump holds.
fn assert_nowhere(what: &str, bytes: &[u8]) {
    for secret in [
        MODEL_KEY.1,
        OPENAI_KEY.1,
        CLIENT_TOKEN.1,
        TOOL_TOKEN.1,
        PATTERNED,
    ] {
        assert!(!contains(bytes, secret), "{secret} is in {what}");
        assert!(
            !contains(bytes, &hex(secret)),
            "{secret} (hex) is in {what}"
        );
    }
}

fn file_bytes(path: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        file.read_to_end(&mut bytes).unwrap();
    }
    bytes
}

#[test]
fn no_secret_reaches_a_child_or_the_sqlite_journal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = config(d, "journal = \"agents.db\"");
    let daemon = start(d, &config);
    let (uid, replay) = run_turns(&daemon);
    assert_redacted(&replay);
    let verified = daemon.ok(&["verify", "--session", &uid]);
    assert!(
        verified.contains("every hash and link checks out"),
        "{verified}"
    );
    // The echoed token (in the tool result and the output quoting it), the pasted key and the
    // patterned token: at least four values replaced, and none of them on the page.
    let page = metrics(&daemon);
    assert!(redactions(&page) >= 4.0, "{page}");
    assert_nowhere("the metrics page", page.as_bytes());
    drop(daemon);

    // Every byte the journal stored: the database, its WAL, and the tool ledger.
    for file in ["agents.db", "agents.db-wal", "tools.db", "tools.db-wal"] {
        assert_nowhere(file, &file_bytes(&d.join(file)));
    }
    // The search sees the records: the marker that replaced the echoed token is there.
    let stored = [
        file_bytes(&d.join("agents.db")),
        file_bytes(&d.join("agents.db-wal")),
    ]
    .concat();
    assert!(contains(&stored, &format!("[REDACTED:{}]", TOOL_TOKEN.0)));
    let log = file_bytes(&d.join("daemon.log"));
    assert_nowhere("the daemon's log", &log);
    let log = String::from_utf8_lossy(&log);
    assert!(
        log.contains("starting MCP server") && log.contains(TOOL_TOKEN.0),
        "the startup line names the variables the server gets: {log}"
    );
}

#[test]
fn no_secret_reaches_the_postgres_journal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("e2e_secrets_{}_{nanos}", std::process::id());
    let config = config(
        d,
        &format!(
            "journal = \"{}\"\njournal_schema = \"{schema}\"",
            postgres_url()
        ),
    );
    let daemon = start(d, &config);
    let (uid, replay) = run_turns(&daemon);
    assert_redacted(&replay);
    let verified = daemon.ok(&["verify", "--session", &uid]);
    assert!(
        verified.contains("every hash and link checks out"),
        "{verified}"
    );
    drop(daemon);

    let dump = Command::new("pg_dump")
        .args(["--schema", &schema, "--data-only", &postgres_url()])
        .output()
        .unwrap();
    let _dropped = Command::new("psql")
        .args([
            &postgres_url(),
            "-q",
            "-c",
            &format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"),
        ])
        .output();
    assert!(
        dump.status.success(),
        "pg_dump failed: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    // The search sees the records: the marker that replaced the echoed token is there.
    assert!(
        contains(&dump.stdout, &hex(&format!("[REDACTED:{}]", TOOL_TOKEN.0))),
        "the dump holds the journal's records"
    );
    assert_nowhere("the pg_dump of the journal", &dump.stdout);
    assert_nowhere("the daemon's log", &file_bytes(&d.join("daemon.log")));
}
