//! Starting without waiting and stopping within a bound, against real child processes: a
//! server that never answers `initialize`, and one that also ignores SIGTERM.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use agentsessions_api::ToolCatalog as _;
use agentsessions_mcp::{McpHub, McpHubOptions, McpServerConfig, ServerStatus, ToolLedger};

/// A stdio "server" that never speaks: `sh -c <script>` whose last step execs `sleep <marker>`,
/// so the child's pid is the sleeping process's.
fn silent(name: &str, script: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        command: "/bin/sh".to_owned(),
        args: vec!["-c".to_owned(), script.to_owned()],
        ..McpServerConfig::default()
    }
}

/// The pid of this process's child whose command line is `sleep <marker>`.
fn child_sleeping(marker: &str) -> Option<u32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let parent = stat
                .rsplit_once(") ")?
                .1
                .split_whitespace()
                .nth(1)?
                .to_owned();
            (cmdline == format!("sleep\0{marker}\0").into_bytes() && parent == me).then_some(pid)
        })
}

/// Whether `pid` still runs (a zombie, already dead but not yet reaped, does not).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
    })
}

async fn wait_for_child(marker: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = child_sleeping(marker) {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "the server process never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// A server that hangs in `initialize` does not hold the host: the hub is there at once, the
// server is reported starting and offers nothing; shutdown sends SIGTERM and the child is gone
// well within the stop bound.
#[tokio::test]
async fn a_hanging_server_is_launched_without_waiting_and_stopped_by_sigterm() {
    let marker = "987651";
    let began = Instant::now();
    let hub = McpHub::launch_with_tokens(
        vec![silent("hangs", &format!("exec sleep {marker}"))],
        ToolLedger::in_memory().unwrap(),
        McpHubOptions::default(),
        None,
    )
    .unwrap();
    assert!(began.elapsed() < Duration::from_secs(1));
    assert_eq!(hub.health()[0].status, ServerStatus::Starting);
    assert!(hub.offered().is_empty());
    let pid = wait_for_child(marker).await;
    let stopping = Instant::now();
    hub.shutdown().await;
    let took = stopping.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "SIGTERM ends it at once: {took:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    while runs(pid) {
        assert!(Instant::now() < deadline, "pid {pid} still runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// A server that ignores SIGTERM is killed once the grace has passed: the hub's shutdown still
// ends within its bound (2 s grace plus half a second).
#[tokio::test]
async fn a_server_ignoring_sigterm_is_killed_after_the_grace() {
    let marker = "987652";
    let hub = McpHub::launch_with_tokens(
        vec![silent(
            "stubborn",
            &format!("trap '' TERM; exec sleep {marker}"),
        )],
        ToolLedger::in_memory().unwrap(),
        McpHubOptions::default(),
        None,
    )
    .unwrap();
    let pid = wait_for_child(marker).await;
    let stopping = Instant::now();
    hub.shutdown().await;
    let took = stopping.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(2600),
        "{took:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    while runs(pid) {
        assert!(Instant::now() < deadline, "pid {pid} still runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
