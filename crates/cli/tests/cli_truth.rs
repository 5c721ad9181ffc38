//! What `agentctl` and `agentsessionsd` say is true: exit codes, messages, ranges, input, JSON,
//! import, read-only journals, addresses and config files. The real binaries on 127.0.0.1.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{CTL, DAEMON, Daemon, ctl, stdout};

/// Exit codes as documented in `agentctl --help`.
const USAGE: i32 = 2;
const NOT_FOUND: i32 = 3;
const UNAVAILABLE: i32 = 5;
const CONFLICT: i32 = 6;

/// `agentsessionsd args` (stderr to `stderr`), and its registry line when `with_registry`.
fn start(args: &[&str], stderr: Stdio, with_registry: bool) -> Daemon {
    let mut command = Daemon::command();
    command.args(args).stderr(stderr);
    Daemon::spawn(command, with_registry)
}

fn ctl_with_stdin(dir: &Path, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(CTL)
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The uid of the session a fresh `agentctl exec` created.
fn new_session(dir: &Path, text: &str) -> String {
    let out = stdout(&ctl(dir, &["exec", text]));
    out.lines()
        .next()
        .and_then(|l| l.strip_prefix("session "))
        .unwrap()
        .to_owned()
}

// CLI truth 1: an unknown session is NOT_FOUND for replay and verify, not an empty success.
#[test]
fn replay_and_verify_of_an_unknown_session_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    new_session(d, "hello");
    for command in ["replay", "verify"] {
        let out = ctl(d, &[command, "--session", "sess-none"]);
        assert_eq!(out.status.code(), Some(NOT_FOUND), "{command}: {out:?}");
        assert!(out.stdout.is_empty(), "{command}");
        let message = stderr(&out);
        assert!(
            message.contains("NOT_FOUND") && message.contains("sess-none"),
            "{command}: {message}"
        );
    }
}

// CLI truth 2 and 14: one default for --from, and empty or inverted ranges are usage errors.
#[test]
fn empty_and_inverted_ranges_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uid = new_session(d, "hello");
    for range in [["--from", "5", "--to", "2"], ["--from", "0", "--to", "3"]] {
        let mut args = vec!["replay", "--session", &uid];
        args.extend(range);
        let out = ctl(d, &args);
        assert_eq!(out.status.code(), Some(USAGE), "{range:?}: {out:?}");
        assert!(out.stdout.is_empty());
        assert!(stderr(&out).contains("--from"), "{}", stderr(&out));
    }
    let one = stdout(&ctl(
        d,
        &["replay", "--session", &uid, "--from", "2", "--to", "2"],
    ));
    assert_eq!(one.lines().count(), 1, "{one}");
    let help = stdout(&ctl(d, &["replay", "--help"]));
    assert!(help.contains("[default: 1]"), "{help}");
    assert!(!help.contains("(default 1)"), "{help}");
}

// CLI truth 3: the words of `exec` are one message; `-` reads it from stdin.
#[test]
fn exec_words_are_one_message_and_dash_reads_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = stdout(&ctl(d, &["exec", "what", "did", "I", "say"]));
    assert_eq!(out.matches(" INPUT ").count(), 1, "{out}");
    assert!(out.contains("INPUT  user: what did I say"), "{out}");
    assert!(out.contains("inputs=1"), "{out}");
    let piped = stdout(&ctl_with_stdin(
        d,
        &["exec", "-"],
        "from a pipe\nline two\n",
    ));
    assert!(
        piped.contains("INPUT  user: from a pipe\nline two"),
        "{piped}"
    );
    let empty = ctl_with_stdin(d, &["exec", "-"], "");
    assert_eq!(empty.status.code(), Some(USAGE), "{empty:?}");
}

// CLI truth 4: approve and deny take --session like every other command; nothing pending is
// a conflict (as the server says of a named request that is not pending).
#[test]
fn approve_and_deny_take_the_session_flag() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uid = new_session(d, "hello");
    for verb in ["approve", "deny"] {
        let out = ctl(d, &[verb, "--session", &uid]);
        assert_eq!(out.status.code(), Some(CONFLICT), "{verb}: {out:?}");
        assert!(
            stderr(&out).contains("no pending approval"),
            "{}",
            stderr(&out)
        );
        let positional = ctl(d, &[verb, &uid]);
        assert_eq!(positional.status.code(), Some(USAGE), "{verb}");
    }
}

// CLI truth 5: nothing listening at --server: the message names the address and the daemon.
#[test]
fn an_unreachable_server_is_named_with_the_daemon_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let out = ctl(dir.path(), &["--server", &addr, "list"]);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{out:?}");
    let message = stderr(&out);
    assert!(message.contains(&addr), "{message}");
    assert!(
        message.contains(&format!("agentsessionsd --addr {addr}")),
        "{message}"
    );
}

// CLI truth 6: the registry and Sessions ports swapped: each says which API is missing.
#[test]
fn swapped_ports_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let journal = d.join("j.db");
    let daemon = start(
        &[
            "--addr",
            "127.0.0.1:0",
            "--registry-addr",
            "127.0.0.1:0",
            "--journal",
            journal.to_str().unwrap(),
        ],
        Stdio::null(),
        true,
    );
    let out = ctl(d, &["--server", &daemon.registry, "list"]);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{out:?}");
    let message = stderr(&out);
    assert!(
        message.contains(&format!(
            "the server at {} does not serve the Sessions API",
            daemon.registry
        )) && message.contains("registry port"),
        "{message}"
    );
    let out = ctl(d, &["--server", &daemon.addr, "harness", "list"]);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{out:?}");
    assert!(
        stderr(&out).contains("does not serve the HarnessRegistry API"),
        "{}",
        stderr(&out)
    );
}

// CLI truth 7 and 8: verify and tree honour --json; --json is documented as JSON Lines.
#[test]
fn verify_and_tree_print_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uid = new_session(d, "hello");
    stdout(&ctl(d, &["fork", "--session", &uid, "--at", "3"]));
    let verified = stdout(&ctl(d, &["--json", "verify", "--session", &uid]));
    let value: serde_json::Value = serde_json::from_str(verified.trim()).unwrap();
    assert_eq!(value["session"], uid.as_str());
    assert_eq!(value["records"], 5);
    assert_eq!(value["head_hash"].as_str().unwrap().len(), 64);
    let tree = stdout(&ctl(d, &["--json", "tree", "--session", &uid]));
    assert_eq!(tree.lines().count(), 1, "{tree}");
    let root: serde_json::Value = serde_json::from_str(tree.trim()).unwrap();
    assert_eq!(root["uid"], uid.as_str());
    assert_eq!(root["asked"], true);
    assert_eq!(root["children"][0]["fork_seq"], 3);
    for line in stdout(&ctl(d, &["--json", "replay", "--session", &uid])).lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            record["seq"].is_i64() && record["event"].is_object(),
            "{line}"
        );
    }
    let help = stdout(&ctl(d, &["--help"]));
    assert!(help.contains("JSON Lines"), "{help}");
    assert!(help.contains("Exit codes:"), "{help}");
}

// CLI truth 9: import reports progress on stderr and refuses a second copy unless asked.
#[test]
fn import_reports_progress_and_refuses_a_second_copy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uid = new_session(d, "hello");
    let exported = stdout(&ctl(d, &["export", "--session", &uid]));
    let file = d.join("session.json");
    std::fs::write(&file, exported).unwrap();
    let file = file.to_str().unwrap();

    // Into another journal: a new session, with progress on stderr.
    let other = ["--journal", "other.db", "import", file];
    let first = ctl(d, &other);
    assert!(stdout(&first).starts_with("imported 5 records into "));
    assert!(stderr(&first).contains("5/5"), "{}", stderr(&first));
    let again = ctl(d, &other);
    assert_eq!(again.status.code(), Some(CONFLICT), "{again:?}");
    assert!(stderr(&again).contains("--copy"), "{}", stderr(&again));
    // Back into the journal it came from: that session already holds the chain.
    let home = ctl(d, &["import", file]);
    assert_eq!(home.status.code(), Some(CONFLICT), "{home:?}");
    assert!(stderr(&home).contains(&uid), "{}", stderr(&home));
    let copy = ["--journal", "other.db", "import", file, "--copy"];
    stdout(&ctl(d, &copy));
    let listed = stdout(&ctl(d, &["--journal", "other.db", "list"]));
    assert_eq!(listed.lines().count(), 2, "{listed}");
}

// CLI truth 10: the read commands work on a journal this user may not write.
#[test]
fn read_commands_work_on_a_read_only_journal() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uid = new_session(d, "hello");
    // Root writes anything; the reads then run as `nobody`, with a copy of the binary it can
    // reach.
    let as_root = std::fs::metadata(d.join("agentsessions.db")).unwrap().uid() == 0;
    let binary = d.join("agentctl");
    std::fs::copy(CTL, &binary).unwrap();
    let set_mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    set_mode(&d.join("agentsessions.db"), 0o444);
    set_mode(d, 0o555);
    let run = |args: &[&str]| {
        let mut command = if as_root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&binary);
            c
        } else {
            Command::new(&binary)
        };
        command.current_dir(d).args(args).output().unwrap()
    };
    let results: Vec<(Vec<&str>, Output)> = [
        vec!["list"],
        vec!["get", "--session", &uid],
        vec!["replay", "--session", &uid],
        vec!["verify", "--session", &uid],
        vec!["tree", "--session", &uid],
        vec!["export", "--session", &uid],
    ]
    .into_iter()
    .map(|args| {
        let out = run(&args);
        (args, out)
    })
    .collect();
    let write = run(&["exec", "--session", &uid, "more"]);
    set_mode(d, 0o755);
    set_mode(&d.join("agentsessions.db"), 0o644);
    for (args, out) in results {
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
    assert!(!write.status.success(), "a write to a read-only journal");
}

// CLI truth 11: the daemon's --addr takes a host name.
#[test]
fn the_daemon_listens_on_a_host_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let journal = d.join("j.db");
    let daemon = start(
        &[
            "--addr",
            "localhost:0",
            "--journal",
            journal.to_str().unwrap(),
        ],
        Stdio::null(),
        false,
    );
    assert!(daemon.addr.starts_with("127.0.0.1:"), "{}", daemon.addr);
    let port = daemon.addr.rsplit(':').next().unwrap();
    let server = format!("localhost:{port}");
    stdout(&ctl(d, &["--server", &server, "exec", "hi"]));
    assert_eq!(
        stdout(&ctl(d, &["--server", &server, "list"]))
            .lines()
            .count(),
        1
    );
}

// CLI truth 12: log_format and registry_addr are accepted in the daemon's config file.
#[test]
fn the_config_file_takes_log_format_and_registry_addr() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = d.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        "addr = \"127.0.0.1:0\"\njournal = \"j.db\"\nlog_format = \"json\"\nregistry_addr = \"localhost:0\"\n",
    )
    .unwrap();
    let mut daemon = start(
        &["--config", config.to_str().unwrap()],
        Stdio::piped(),
        true,
    );
    assert!(
        daemon.registry.starts_with("127.0.0.1:"),
        "{}",
        daemon.registry
    );
    let mut logs = BufReader::new(daemon.take_stderr().unwrap());
    let mut first = String::new();
    logs.read_line(&mut first).unwrap();
    let line: serde_json::Value = serde_json::from_str(&first)
        .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {first:?}"));
    assert!(line["level"].is_string(), "{first}");
    stdout(&ctl(d, &["--server", &daemon.registry, "harness", "list"]));

    std::fs::write(&config, "log_format = \"xml\"\n").unwrap();
    let refused = Command::new(DAEMON)
        .args(["--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("log_format"));
}

// CLI truth 13 and 15: long help has examples; completions name the commands.
#[test]
fn help_has_examples_and_completions_name_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for command in [
        "exec", "replay", "fork", "approve", "import", "export", "list",
    ] {
        let help = stdout(&ctl(d, &[command, "--help"]));
        assert!(help.contains("Examples:\n  agentctl"), "{command}: {help}");
    }
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout(&ctl(d, &["completions", shell]));
        for command in ["exec", "replay", "approve", "completions"] {
            assert!(script.contains(command), "{shell}: no {command}");
        }
    }
    let bad = ctl(d, &["completions", "cmd.exe"]);
    assert_eq!(bad.status.code(), Some(USAGE));
}

// extensions §7 (commit times, pending approvals): replay lines start with the commit time, JSON
// records carry it, and `approvals` lists nothing on a journal with no gated call (text and JSON
// Lines alike).
#[test]
fn records_show_commit_times_and_approvals_list_what_waits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uid = new_session(d, "hello");
    for line in stdout(&ctl(d, &["replay", "--session", &uid])).lines() {
        let (time, rest) = line.split_once(' ').unwrap();
        assert!(time.ends_with('Z') && time.contains('T'), "{line}");
        assert!(rest.starts_with("seq="), "{line}");
    }
    for line in stdout(&ctl(d, &["--json", "replay", "--session", &uid])).lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            record["commit_time"].as_str().unwrap().ends_with('Z'),
            "{line}"
        );
    }
    assert_eq!(stdout(&ctl(d, &["approvals"])), "");
    assert_eq!(stdout(&ctl(d, &["--json", "approvals"])), "");
}
