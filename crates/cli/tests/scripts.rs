//! `agentctl` in pipes and scripts, the real binaries on 127.0.0.1: a closed stdout ends every
//! command quietly with exit 141; a parked turn has its own exit code, and "no pending approval"
//! one code whichever way it is found; an empty session verifies; the audit bundle comes from a
//! server as from the local journal; `list` filters as the console does; `watch --until-end`
//! stops after the turn's end; read commands never create a journal file.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{CTL, Daemon, PARKED, ctl, fixture_server, stdout};

/// Exit codes as documented in `agentctl --help`.
const USAGE: i32 = 2;
const NOT_FOUND: i32 = 3;
const CONFLICT: i32 = 6;
const CLOSED_PIPE: i32 = 141;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The uid of the session a fresh `agentctl exec` created.
fn new_session(dir: &Path, text: &str) -> String {
    let out = stdout(&ctl(dir, &["exec", text]));
    session_of(&out)
}

/// The uid on the `session <uid>` line of an exec's output.
fn session_of(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session line in {out}"))
        .to_owned()
}

/// `agentctl args` in `dir` with stdout a pipe whose reader has gone, as behind `| head -1`
/// once head has read its line and exited.
fn into_closed_pipe(dir: &Path, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(CTL)
        .current_dir(dir)
        .args(args)
        .env_remove("AGENTCTL_SERVER")
        .env_remove("AGENTSESSIONS_JOURNAL")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// The daemon in `dir` over `dir/agents.db`; with `approvals`, the offline directive model and
/// the fixture MCP server whose `count` needs approval.
fn daemon(dir: &Path, approvals: bool) -> Daemon {
    let mut config = "journal = \"agents.db\"\n".to_owned();
    if approvals {
        config.push_str(&format!(
            "model = \"directive\"\n\
             model_provider = \"directive\"\n\
             [[mcp_servers]]\n\
             name = \"fixture\"\n\
             command = \"{server}\"\n\
             env = {{ MCP_FIXTURE_COUNT_FILE = \"{count}\" }}\n\
             approval = [\"count\"]\n",
            server = fixture_server().display(),
            count = dir.join("count").display(),
        ));
    }
    let path = dir.join("agentsessionsd.toml");
    std::fs::write(&path, config).unwrap();
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--config"])
        .arg(&path)
        .current_dir(dir)
        .stderr(Stdio::null());
    Daemon::spawn(command, false)
}

// A closed stdout (`agentctl replay … | head -1`) ends every command quietly: no panic, no
// error line, and the exit status a shell gives a command killed by SIGPIPE (128 + 13).
#[test]
fn a_closed_stdout_ends_every_command_quietly_with_141() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uid = new_session(d, "hello");
    let session = ["--session", uid.as_str()];
    let commands: Vec<Vec<&str>> = vec![
        [&["replay"][..], &session].concat(),
        [&["--json", "replay"][..], &session].concat(),
        vec!["list"],
        [&["get"][..], &session].concat(),
        [&["verify"][..], &session].concat(),
        [&["tree"][..], &session].concat(),
        [&["export"][..], &session].concat(),
        [&["export", "--format", "audit"][..], &session].concat(),
        [&["exec"][..], &session, &["more"]].concat(),
        vec!["completions", "bash"],
        vec!["completions", "zsh"],
        vec!["--help"],
    ];
    for args in commands {
        let out = into_closed_pipe(d, &args);
        assert_eq!(
            out.status.code(),
            Some(CLOSED_PIPE),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(stderr(&out), "", "{args:?}: nothing on stderr");
    }
    // The turn written into the closed pipe still ran to its end.
    let replay = stdout(&ctl(d, &["replay", "--session", &uid]));
    assert_eq!(replay.matches("END  COMPLETED").count(), 2, "{replay}");
}

// A turn parked awaiting an approval has its own exit code, so a script tells it from one that
// completed; "no pending approval" is one code whether agentctl finds nothing to decide or the
// server refuses a named request that is no longer pending.
#[test]
fn a_parked_turn_has_its_own_exit_code_and_nothing_pending_has_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let daemon = daemon(d, true);
    let turn = ["exec", "--harness", "chat", "/tool fixture__count {}"];

    let parked = daemon.ctl(&turn);
    assert_eq!(parked.status.code(), Some(PARKED), "{}", stderr(&parked));
    let out = String::from_utf8_lossy(&parked.stdout).into_owned();
    assert!(out.contains("APPROVAL_REQUEST"), "{out}");
    assert!(!out.contains("END "), "a parked turn has not ended: {out}");
    let uid = session_of(&out);
    // stderr names the request, field by field, and the command that decides it.
    let message = stderr(&parked);
    let field = |name: &str| {
        message
            .split_whitespace()
            .find_map(|word| word.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {message}"))
            .to_owned()
    };
    let (execution, tool_call, request_seq) =
        (field("execution"), field("tool_call"), field("request_seq"));
    assert!(
        message.contains(&format!("agentctl approve|deny --session {uid}")),
        "{message}"
    );
    let json = daemon.ctl(&[&["--json"][..], &turn].concat());
    assert_eq!(json.status.code(), Some(PARKED), "{}", stderr(&json));

    // Approved, the turn completes: 0.
    let approved = daemon.ok(&["approve", "--session", &uid]);
    assert!(approved.contains("approved"), "{approved}");
    // Nothing pending any more, found by agentctl (no request named) or by the server (a named
    // request that is not open): one code, and each message says so. (The decided request
    // named again with the same verdict is the idempotent repeat of the decision, not this.)
    for verb in ["approve", "deny"] {
        let found = daemon.ctl(&[verb, "--session", &uid]);
        assert_eq!(found.status.code(), Some(CONFLICT), "{verb}: {found:?}");
        assert!(
            stderr(&found).contains("no pending approval"),
            "{}",
            stderr(&found)
        );
        let named = daemon.ctl(&[
            verb,
            "--session",
            &uid,
            "--execution",
            &execution,
            "--tool-call",
            &tool_call,
            "--request-seq",
            "3",
        ]);
        assert_eq!(named.status.code(), Some(CONFLICT), "{verb}: {named:?}");
        assert!(
            stderr(&named).contains("no open approval request"),
            "{}",
            stderr(&named)
        );
    }
    let again = daemon.ok(&[
        "approve",
        "--session",
        &uid,
        "--execution",
        &execution,
        "--tool-call",
        &tool_call,
        "--request-seq",
        &request_seq,
    ]);
    assert!(again.contains("approved"), "{again}");
    let help = stdout(&ctl(d, &["--help"]));
    assert!(help.contains("7  parked"), "{help}");
    assert!(help.contains("141  stdout was closed"), "{help}");
}

// A session that exists and holds no records has an empty chain: it verifies (zero records);
// a session that does not exist stays not found.
#[test]
fn verify_of_an_empty_session_verifies_zero_records() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uid = stdout(&ctl(d, &["create", "--name", "empty"]))
        .trim()
        .to_owned();
    let text = stdout(&ctl(d, &["verify", "--session", &uid]));
    assert!(text.starts_with("verified 0 records of "), "{text}");
    let json = stdout(&ctl(d, &["--json", "verify", "--session", &uid]));
    let value: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(value["records"], 0, "{json}");
    assert_eq!(value["session"], uid.as_str());
    let missing = ctl(d, &["verify", "--session", "sess-none"]);
    assert_eq!(missing.status.code(), Some(NOT_FOUND), "{missing:?}");
}

// `export --server`: the audit bundle (and the reference journal) built from what the API
// returns is byte for byte the one the local journal gives.
#[test]
fn export_against_a_server_writes_the_local_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let daemon = daemon(d, false);
    let uid = session_of(&daemon.ok(&["exec", "hello"]));
    daemon.ok(&["exec", "--session", &uid, "again"]);
    for format in ["audit", "reference"] {
        let served = daemon.ok(&["export", "--session", &uid, "--format", format]);
        let local = stdout(&ctl(
            d,
            &[
                "--journal",
                "agents.db",
                "export",
                "--session",
                &uid,
                "--format",
                format,
            ],
        ));
        assert_eq!(served, local, "{format}");
    }
    let audit = daemon.ok(&["export", "--session", &uid, "--format", "audit"]);
    let bundle: serde_json::Value = serde_json::from_str(&audit).unwrap();
    assert_eq!(bundle["format"], "agentsessions.audit.v1");
    assert_eq!(bundle["records"].as_array().unwrap().len(), 10);
    let missing = daemon.ctl(&["export", "--session", "sess-none", "--format", "audit"]);
    assert_eq!(missing.status.code(), Some(NOT_FOUND), "{missing:?}");
}

// `list` filters by state, harness and name (part of the name or uid, any case) as the console's
// `GET /api/v1/sessions` does; an unknown state is a usage error.
#[test]
fn list_filters_by_state_harness_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let daemon = daemon(d, true);
    let named = daemon
        .ok(&["create", "--name", "Quarterly-Notes"])
        .trim()
        .to_owned();
    let completed = session_of(&daemon.ok(&["exec", "hello"]));
    let awaiting =
        session_of(&daemon.parked(&["exec", "--harness", "chat", "/tool fixture__count {}"]));
    let listed = |args: &[&str]| -> Vec<String> {
        let out = daemon.ok(&[&["--json", "list"][..], args].concat());
        out.lines()
            .map(|line| {
                let session: serde_json::Value = serde_json::from_str(line).unwrap();
                session["metadata"]["uid"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    assert_eq!(listed(&[]).len(), 3);
    assert_eq!(listed(&["--state", "awaiting"]), vec![awaiting.clone()]);
    assert_eq!(
        listed(&["--state", "EXEC_COMPLETED"]),
        vec![completed.clone()]
    );
    assert_eq!(listed(&["--harness", "chat"]), vec![awaiting.clone()]);
    assert_eq!(listed(&["--name", "quarterly"]), vec![named]);
    assert_eq!(
        listed(&["--name", &completed.to_uppercase()]),
        vec![completed]
    );
    assert!(listed(&["--state", "completed", "--harness", "chat"]).is_empty());
    let text = daemon.ok(&["list", "--state", "awaiting"]);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(&awaiting), "{text}");
    let bad = daemon.ctl(&["list", "--state", "sleeping"]);
    assert_eq!(bad.status.code(), Some(USAGE), "{bad:?}");
    assert!(
        stderr(&bad).contains("not an execution state"),
        "{}",
        stderr(&bad)
    );
}

// `watch --until-end` stops (exit 0) after the record that ends the turn: from the running
// turn's next seq, after that turn's END, even while the session goes on.
#[test]
fn watch_until_end_stops_after_the_turns_end() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let daemon = daemon(d, false);
    let uid = session_of(&daemon.ok(&["exec", "hello"]));
    let first = daemon.ok(&["watch", "--session", &uid, "--until-end"]);
    let last = first.lines().last().unwrap();
    assert!(last.contains("END  COMPLETED"), "{first}");
    assert_eq!(first.lines().count(), 5, "{first}");

    // A watch started before the next turn follows it to its END, then exits.
    let mut watching = Command::new(CTL)
        .args(["--server", &daemon.addr, "watch", "--session", &uid])
        .args(["--from", "6", "--until-end"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    daemon.ok(&["exec", "--session", &uid, "again"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while watching.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = watching.kill();
            panic!("watch --until-end did not stop after the turn's END");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = watching.wait_with_output().unwrap();
    let text = stdout(&out);
    assert!(text.lines().next().unwrap().contains("seq=0006"), "{text}");
    assert!(
        text.lines().last().unwrap().contains("END  COMPLETED"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 5, "{text}");
}

// Read commands against a journal file that does not exist fail with not found and a message
// that names the file, and leave no file behind (the default journal and --journal alike).
#[test]
fn read_commands_never_create_a_missing_journal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let session = ["--session", "sess-1"];
    let commands: Vec<Vec<&str>> = vec![
        vec!["list"],
        vec!["approvals"],
        [&["get"][..], &session].concat(),
        [&["replay"][..], &session].concat(),
        [&["verify"][..], &session].concat(),
        [&["tree"][..], &session].concat(),
        [&["export"][..], &session].concat(),
        [&["export", "--format", "audit"][..], &session].concat(),
        [&["watch"][..], &session].concat(),
    ];
    for args in commands {
        for journal in [&[][..], &["--journal", "elsewhere.db"][..]] {
            let all = [journal, &args].concat();
            let out = ctl(d, &all);
            assert_eq!(out.status.code(), Some(NOT_FOUND), "{all:?}: {out:?}");
            let message = stderr(&out);
            assert!(message.contains("no journal at "), "{all:?}: {message}");
            let left: Vec<_> = std::fs::read_dir(d).unwrap().collect();
            assert!(left.is_empty(), "{all:?} left {left:?}");
        }
    }
}
