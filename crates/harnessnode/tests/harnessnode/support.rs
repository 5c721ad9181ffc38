//! Starting the binary, signalling processes, and a recording host sink.

use std::process::Stdio;
use std::time::Duration;

use agentsessions_api::{Message, Start};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_harnessnode");

/// The binary with a clean harnessnode environment.
pub(crate) fn node(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env_remove("HARNESS_KIND")
        .env_remove("HARNESS_ADDR")
        .env_remove("HARNESS_MODEL")
        .env_remove("HARNESS_SYSTEM_PROMPT")
        .env_remove("HARNESSNODE_EXIT_ON_STDIN_EOF")
        .env_remove("HARNESS_TLS_CERT")
        .env_remove("HARNESS_TLS_KEY")
        .env_remove("HARNESS_TLS_CLIENT_CA")
        .kill_on_drop(true);
    command
}

/// Starts the binary and waits for its readiness line; returns it and the address it names.
pub(crate) async fn start(args: &[&str]) -> (Child, String) {
    let mut child = node(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("readiness line in time")
        .unwrap()
        .expect("a readiness line");
    let (_, address) = line
        .rsplit_once(" on ")
        .unwrap_or_else(|| panic!("readiness line: {line}"));
    assert!(line.starts_with("harnessnode: serving "), "{line}");
    (child, address.to_owned())
}

/// Sends `signal` (e.g. `TERM`, `KILL`) to `pid` with the system `kill` command.
pub(crate) fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Whether `pid` no longer runs (gone, or a zombie waiting to be reaped).
pub(crate) fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// Polls until `pid` is gone, for up to 10 s.
pub(crate) async fn wait_gone(pid: u32) {
    for _ in 0..500 {
        if process_gone(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("process {pid} still runs");
}

/// The pid in a worker name `<hostname>/<pid>`.
pub(crate) fn worker_pid(worker: &str) -> u32 {
    worker.rsplit_once('/').unwrap().1.parse().unwrap()
}

pub(crate) use agentsessions_harnesses::testsink::RecordingSink;

pub(crate) fn start_frame(session: &str, text: &str) -> Start {
    Start {
        execution_id: format!("exec-{session}-{text}"),
        session_uid: session.to_owned(),
        inputs: vec![Message::text_message("user", text)],
        ..Start::default()
    }
}
