//! The real `agentsessionsd` with an MCP server from its config file: the third-party
//! `mcp-server-time` (PyPI). `.ci/run` installs it and sets `AGENTSESSIONS_REQUIRE_MCP_FIXTURES=1`,
//! under which a missing server fails this test; otherwise it is skipped with a note.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::io::{BufRead, BufReader, Read as _};
use std::process::{Command, Stdio};

use common::{DAEMON, time_server_or_skip};

#[test]
fn the_daemon_starts_its_mcp_servers_and_stops_them_with_itself() {
    if !time_server_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentsessionsd.toml");
    std::fs::write(
        &config,
        "journal = \"agents.db\"\n\
         [[mcp_servers]]\n\
         name = \"time\"\n\
         command = \"python3\"\n\
         args = [\"-m\", \"mcp_server_time\", \"--local-timezone\", \"UTC\"]\n\
         approval = [\"convert_time\"]\n",
    )
    .unwrap();
    let mut child = Command::new(DAEMON)
        .args(["--addr", "127.0.0.1:0", "--config"])
        .arg(&config)
        .current_dir(dir.path())
        .env_remove("MODEL_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("agentsessionsd listening on ")
        .unwrap_or_else(|| panic!("{line:?}"));
    // The daemon serves at once; the server connects in the background.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(common::mcp_up(format!("http://{addr}"), None, &["time"]));
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(exit.success(), "{exit:?}\n{logs}");
    assert!(logs.contains("MCP server up"), "{logs}");
    assert!(logs.contains("MCP servers stopped"), "{logs}");
    // The ledger defaults to a file beside the journal (the config's directory).
    assert!(dir.path().join("agents.db.tools.db").exists());
}

/// The fixture server behind a daemon with the offline directive model, logging JSON to
/// `dir/daemon.log`.
fn fixture_daemon(dir: &std::path::Path) -> common::Daemon {
    let config = dir.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = \"agents.db\"\n\
             model = \"directive\"\n\
             model_provider = \"directive\"\n\
             [[mcp_servers]]\n\
             name = \"fixture\"\n\
             command = \"{}\"\n",
            common::fixture_server().display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("daemon.log")).unwrap();
    let mut command = common::Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--log-format", "json", "--config"])
        .arg(&config)
        .current_dir(dir)
        .env("RUST_LOG", "info")
        .stderr(Stdio::from(log));
    let daemon = common::Daemon::spawn(command, false);
    daemon.wait_for_mcp(&["fixture"]);
    daemon
}

/// The session uid and the last seq of a `--json` exec's output.
fn session_and_head(out: &str) -> (String, i64) {
    let mut uid = String::new();
    let mut head = 0;
    for line in out.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(found) = value
            .pointer("/session/metadata/uid")
            .and_then(|v| v.as_str())
        {
            found.clone_into(&mut uid);
        }
        if let Some(seq) = value.get("seq").and_then(serde_json::Value::as_i64) {
            head = head.max(seq);
        }
    }
    (uid, head)
}

// extensions §11: a long tool's notifications/progress reach `agentctl exec` and `agentctl
// watch` while it runs ("fixture__slow: 2/3 — step 2"), and are never journaled.
#[test]
fn a_long_tools_progress_is_shown_by_exec_and_watch_and_never_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = fixture_daemon(dir.path());
    let first = daemon.ok(&["--json", "exec", "--harness", "chat", "hello"]);
    let (uid, head) = session_and_head(&first);
    assert!(!uid.is_empty(), "{first}");
    let watch = Command::new(common::CTL)
        .args([
            "--server",
            &daemon.addr,
            "watch",
            "--session",
            &uid,
            "--until-end",
        ])
        .args(["--from", &(head + 1).to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The watch is open once it printed nothing yet and still runs; give it a moment to
    // subscribe before the turn starts.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let exec = daemon.ok(&[
        "exec",
        "--session",
        &uid,
        r#"/tool fixture__slow {"steps": 3, "step_ms": 150}"#,
    ]);
    for step in 1..=3 {
        let line = format!("fixture__slow: {step}/3 — step {step}");
        assert!(exec.contains(&line), "exec lacks {line:?}:\n{exec}");
    }
    let watched = watch.wait_with_output().unwrap();
    assert!(watched.status.success(), "{watched:?}");
    let watched = String::from_utf8_lossy(&watched.stdout);
    assert!(
        watched.contains("fixture__slow: 3/3 — step 3"),
        "watch lacks the progress:\n{watched}"
    );
    // Transport only: the journal holds the call and its result, not the progress.
    let records = daemon.ok(&["--json", "replay", "--session", &uid]);
    assert!(records.contains("3 steps"), "{records}");
    assert!(
        !records.contains("step 1"),
        "progress was journaled:\n{records}"
    );
}

// A server's notifications/message is logged at its own level as fields naming the server, and
// with --log-format json a stdio server's stderr lines are JSON log lines naming it too.
#[test]
fn server_log_messages_and_stderr_are_json_log_lines_naming_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = fixture_daemon(dir.path());
    let out = daemon.ok(&[
        "exec",
        "--harness",
        "chat",
        r#"/tool fixture__log {"level": "warning", "text": "disk almost full"}"#,
    ]);
    assert!(out.contains("logged"), "{out}");
    let log_path = dir.path().join("daemon.log");
    // The log line and the stderr line are written as they come; wait for both briefly.
    let mut lines = Vec::new();
    for _ in 0..50 {
        let text = std::fs::read_to_string(&log_path).unwrap();
        lines = text.lines().map(str::to_owned).collect::<Vec<_>>();
        if text.contains("MCP server log") && text.contains("MCP server stderr") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    drop(daemon);
    let parsed: Vec<serde_json::Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let field = |value: &serde_json::Value, name: &str| {
        value
            .pointer(&format!("/fields/{name}"))
            .or_else(|| value.get(name))
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let logged = parsed
        .iter()
        .find(|v| field(v, "message") == "MCP server log")
        .unwrap_or_else(|| panic!("no server log line in {lines:#?}"));
    assert_eq!(logged["level"], "WARN", "{logged}");
    assert_eq!(field(logged, "server"), "fixture", "{logged}");
    assert_eq!(field(logged, "mcp_level"), "warning", "{logged}");
    assert!(
        field(logged, "data").contains("disk almost full"),
        "{logged}"
    );
    let stderr = parsed
        .iter()
        .find(|v| field(v, "message") == "MCP server stderr")
        .unwrap_or_else(|| panic!("no stderr line in {lines:#?}"));
    assert_eq!(field(stderr, "server"), "fixture", "{stderr}");
    assert_eq!(field(stderr, "stderr"), "disk almost full", "{stderr}");
    // No Debug dump of the notification (rmcp's own INFO line).
    assert!(
        !lines.iter().any(|l| l.contains("received notification")),
        "{lines:#?}"
    );
}

/// server-everything's `dist/index.js` (`$AGENTSESSIONS_SERVER_EVERYTHING`, else the npm
/// prefixes `target/mcp-everything` or `target/npm-mcp`), when installed with node; else `None`
/// after a note, unless `AGENTSESSIONS_REQUIRE_MCP_FIXTURES` requires it.
fn server_everything_or_skip() -> Option<std::path::PathBuf> {
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let installed = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    let path = std::env::var_os("AGENTSESSIONS_SERVER_EVERYTHING")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain(["mcp-everything", "npm-mcp"].map(|prefix| target.join(prefix).join(installed)))
        .find(|path| path.exists());
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if let Some(path) = path.filter(|_| node) {
        return Some(path);
    }
    assert!(
        std::env::var_os("AGENTSESSIONS_REQUIRE_MCP_FIXTURES").is_none(),
        "server-everything is not installed (or node is missing), and \
         AGENTSESSIONS_REQUIRE_MCP_FIXTURES requires it"
    );
    eprintln!("skipped: server-everything is not installed");
    None
}

// A tool that runs only as an MCP task (server-everything's simulate-research-query,
// execution.taskSupport "required") is not offered to the model, and why is logged once; a
// long tool's progress reaches agentctl exec (extensions §11).
#[test]
fn task_only_tools_are_not_offered_and_server_everything_progress_is_shown() {
    let Some(server) = server_everything_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = \"agents.db\"\n\
             model = \"directive\"\n\
             model_provider = \"directive\"\n\
             [[mcp_servers]]\n\
             name = \"everything\"\n\
             command = \"node\"\n\
             args = [\"{}\", \"stdio\"]\n",
            server.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
    let mut command = common::Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--log-format", "json", "--config"])
        .arg(&config)
        .current_dir(dir.path())
        .env("RUST_LOG", "info")
        .stderr(Stdio::from(log));
    let daemon = common::Daemon::spawn(command, false);
    daemon.wait_for_mcp(&["everything"]);
    let offered = daemon.ok(&["exec", "--harness", "chat", "which tools?"]);
    assert!(
        offered.contains("everything__trigger-long-running-operation"),
        "{offered}"
    );
    assert!(!offered.contains("simulate-research-query"), "{offered}");
    let uid = offered
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .unwrap()
        .trim()
        .to_owned();
    let ran = daemon.ok(&[
        "exec",
        "--session",
        &uid,
        r#"/tool everything__trigger-long-running-operation {"duration": 1, "steps": 2}"#,
    ]);
    assert!(
        ran.contains("everything__trigger-long-running-operation: 1/2"),
        "{ran}"
    );
    drop(daemon);
    let logs = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap();
    let why = logs
        .lines()
        .filter(|l| l.contains("runs only as an MCP task") && l.contains("simulate-research-query"))
        .count();
    assert_eq!(why, 1, "{logs}");
}
