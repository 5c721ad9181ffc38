//! Startup and shutdown a person can rely on, with the real `agentsessionsd` on 127.0.0.1: the
//! Sessions API serves at once whatever its MCP servers do; a signal at any moment (startup
//! included) stops the daemon within the documented 10 s, its MCP server processes included;
//! a turn cut by the shutdown says so in plain words and resumes; a refused configuration
//! leaves no journal behind.
//!
//! The MCP fixture server is a binary of the `agentsessions-mcp` package; `cargo test
//! --workspace` builds it next to this package's binaries.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{CTL, DAEMON, fixture_server};
use tonic_health::pb::health_check_response::ServingStatus;

/// The bound README documents: a signal stops the daemon, children included, within it.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(10);

/// `agentsessionsd --addr 127.0.0.1:0 --config <config> args…` in `dir` (`args` may name
/// another `--addr`), its logs in
/// `dir/daemon.log`. With `ignoring_sigint`, SIGINT is ignored when the daemon starts, as for a
/// job a non-interactive shell runs in the background (`agentsessionsd … &`).
fn daemon(dir: &Path, config: &Path, args: &[&str], ignoring_sigint: bool) -> Child {
    let mut command = if ignoring_sigint {
        let mut sh = Command::new("/bin/sh");
        sh.args(["-c", "trap '' INT; exec \"$0\" \"$@\"", DAEMON]);
        sh
    } else {
        Command::new(DAEMON)
    };
    if !args.contains(&"--addr") {
        command.args(["--addr", "127.0.0.1:0"]);
    }
    command
        .arg("--config")
        .arg(config)
        .args(args)
        .current_dir(dir)
        .env_remove("MODEL_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("AGENTSESSIONS_ADDR")
        .env_remove("AGENTSESSIONS_JOURNAL")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("daemon.log")).unwrap())
        .spawn()
        .unwrap()
}

/// Reads the `agentsessionsd listening on <addr>` line; the address.
fn listening(child: &mut Child) -> String {
    use std::io::BufRead as _;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("agentsessionsd listening on ")
        .unwrap_or_else(|| panic!("unexpected line {line:?}"))
        .to_owned()
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for `child` to exit, at most `limit`; how it exited and how long that took (`None`
/// if it still ran, then it is killed).
fn exits_within(child: &mut Child, limit: Duration) -> (Option<ExitStatus>, Duration) {
    let began = Instant::now();
    while began.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return (Some(status), began.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    (None, began.elapsed())
}

fn logs(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default()
}

/// The `grpc.health.v1` status of `service` at `addr` (-1 when the call fails).
fn health_of(addr: &str, service: &str) -> i32 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let Ok(channel) = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
        else {
            return -1;
        };
        let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
        client
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .map_or(-1, |answer| answer.into_inner().status)
    })
}

/// The children of process `parent` whose command line contains `needle`.
fn children_of(parent: u32, needle: &str) -> Vec<u32> {
    let parent = parent.to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let ppid = stat
                .rsplit_once(") ")?
                .1
                .split_whitespace()
                .nth(1)?
                .to_owned();
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (ppid == parent && cmdline.contains(needle)).then_some(pid)
        })
        .collect()
}

/// Whether `pid` still runs (a zombie does not).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
    })
}

/// Waits until `daemon` has a child whose command line contains `needle`; its pid.
fn child_process(daemon: &Child, needle: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(pid) = children_of(daemon.id(), needle).first() {
            return *pid;
        }
        assert!(
            Instant::now() < deadline,
            "no child process {needle:?} of the daemon"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const HANGING_MCP: &str = "journal = \"agents.db\"\n\
                           [[mcp_servers]]\n\
                           name = \"hangs\"\n\
                           command = \"sleep\"\n\
                           args = [\"1000\"]\n";

// A hanging MCP server (it never answers `initialize`) does not hold the Sessions API: it
// answers within 2 s of the start while grpc.health.v1 reports the server NOT_SERVING; a
// SIGTERM then stops the daemon and the server's process at once.
#[test]
fn a_hanging_mcp_server_does_not_delay_the_sessions_api() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = d.join("agentsessionsd.toml");
    std::fs::write(&config, HANGING_MCP).unwrap();
    let began = Instant::now();
    let mut child = daemon(d, &config, &[], false);
    let addr = listening(&mut child);
    let listed = Command::new(CTL)
        .args(["--server", &addr, "list"])
        .output()
        .unwrap();
    let answered = began.elapsed();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let mcp = health_of(&addr, "agentsessions.mcp.hangs");
    let overall = health_of(&addr, "");
    eprintln!("Sessions API answered {answered:?} after the start");
    assert!(
        answered < Duration::from_secs(2),
        "the Sessions API answered only after {answered:?}"
    );
    assert_eq!(mcp, ServingStatus::NotServing as i32);
    assert_eq!(overall, ServingStatus::Serving as i32);
    let sleeping = child_process(&child, "sleep 1000");

    signal(&child, "TERM");
    let (status, took) = exits_within(&mut child, SHUTDOWN_BOUND);
    eprintln!("stopped {took:?} after SIGTERM");
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}\n{}",
        logs(d)
    );
    assert!(took < Duration::from_secs(3), "{took:?}\n{}", logs(d));
    assert!(
        !runs(sleeping),
        "the MCP server's process outlived the daemon"
    );
}

// A SIGINT one second after the start, with a hanging MCP server and SIGINT ignored at exec
// (a shell's background job): the daemon stops cleanly within the bound, its MCP server
// process with it.
#[test]
fn sigint_a_second_after_the_start_stops_the_daemon_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = d.join("agentsessionsd.toml");
    std::fs::write(&config, HANGING_MCP).unwrap();
    let mut child = daemon(d, &config, &[], true);
    std::thread::sleep(Duration::from_secs(1));
    let sleeping = child_process(&child, "sleep 1000");
    signal(&child, "INT");
    let (status, took) = exits_within(&mut child, SHUTDOWN_BOUND);
    eprintln!("stopped {took:?} after SIGINT");
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?} after {took:?}\n{}",
        logs(d)
    );
    assert!(
        !runs(sleeping),
        "the MCP server's process outlived the daemon"
    );
}

// A signal while startup itself waits (a Postgres journal whose server never answers): the
// daemon stops at once and cleanly instead of finishing startup first.
#[test]
fn sigint_during_startup_stops_the_daemon_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Accepts connections (the kernel's backlog) and never answers them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let config = d.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!("journal = \"postgres://agents@127.0.0.1:{port}/agents\"\n"),
    )
    .unwrap();
    let mut child = daemon(d, &config, &[], true);
    std::thread::sleep(Duration::from_secs(1));
    assert!(child.try_wait().unwrap().is_none(), "{}", logs(d));
    signal(&child, "INT");
    let (status, took) = exits_within(&mut child, SHUTDOWN_BOUND);
    eprintln!("stopped {took:?} after SIGINT during startup");
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?} after {took:?}\n{}",
        logs(d)
    );
    assert!(took < Duration::from_secs(2), "{took:?}\n{}", logs(d));
    drop(silent);
}

// A turn running a slow MCP tool when SIGTERM arrives: the daemon exits within the bound, the
// MCP server's process is gone, the turn's ERROR note says why in plain words (not a task
// cancellation), and a resume on the restarted daemon continues it to COMPLETED.
#[test]
fn a_turn_cut_by_shutdown_says_why_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let count_file = d.join("count");
    let config = d.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = \"agents.db\"\n\
             model = \"directive\"\n\
             model_provider = \"directive\"\n\
             [[mcp_servers]]\n\
             name = \"fixture\"\n\
             command = \"{server}\"\n\
             env = {{ MCP_FIXTURE_COUNT_FILE = \"{count}\" }}\n\
             approval = \"never\"\n",
            server = fixture_server().display(),
            count = count_file.display(),
        ),
    )
    .unwrap();
    let mut child = daemon(d, &config, &[], false);
    let addr = listening(&mut child);
    let deadline = Instant::now() + Duration::from_secs(15);
    while health_of(&addr, "agentsessions.mcp.fixture") != ServingStatus::Serving as i32 {
        assert!(
            Instant::now() < deadline,
            "the fixture server never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let server = child_process(&child, "mcp-fixture-server");
    let turn = std::thread::spawn(move || {
        Command::new(CTL)
            .args(["--server", &addr, "exec", "--harness", "chat"])
            .arg(r#"/tool fixture__count {"hold_ms": 60000}"#)
            .output()
            .unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(15);
    while !std::fs::read_to_string(&count_file).is_ok_and(|n| n.trim() == "1") {
        assert!(Instant::now() < deadline, "the tool never ran\n{}", logs(d));
        std::thread::sleep(Duration::from_millis(20));
    }

    signal(&child, "TERM");
    let (status, took) = exits_within(&mut child, SHUTDOWN_BOUND);
    eprintln!("stopped {took:?} after SIGTERM with a turn in a slow tool");
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?} after {took:?}\n{}",
        logs(d)
    );
    assert!(
        !runs(server),
        "the MCP server's process outlived the daemon"
    );
    let cut = turn.join().unwrap();
    let printed = String::from_utf8_lossy(&cut.stdout).into_owned();
    let uid = printed
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session line in {printed}"))
        .to_owned();

    let mut child = daemon(d, &config, &[], false);
    let addr = listening(&mut child);
    let ctl = |args: &[&str]| {
        let out = Command::new(CTL)
            .args(["--server", &addr])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "agentctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let replay = ctl(&["replay", "--session", &uid]);
    let error = replay
        .lines()
        .find(|l| l.contains(" ERROR "))
        .unwrap_or_else(|| panic!("no ERROR record: {replay}"));
    assert!(
        error.contains("host shutting down; resume to continue"),
        "{error}"
    );
    assert!(!replay.contains("cancelled"), "{replay}");
    assert!(!replay.contains(" END "), "the turn stays open: {replay}");
    ctl(&["resume", "--session", &uid]);
    let resumed = ctl(&["replay", "--session", &uid]);
    assert!(resumed.contains("outcome is unknown"), "{resumed}");
    assert!(resumed.contains("END  COMPLETED"), "{resumed}");
    assert_eq!(
        std::fs::read_to_string(&count_file).unwrap().trim(),
        "1",
        "the tool ran once"
    );
    signal(&child, "TERM");
    let (status, _) = exits_within(&mut child, SHUTDOWN_BOUND);
    assert!(status.is_some_and(|s| s.success()), "{}", logs(d));
}

// A daemon that refuses its configuration exits non-zero and creates no journal (nor a tool
// ledger): every setting is checked, and every port bound, before the journal is opened.
#[test]
fn a_refused_configuration_creates_no_journal() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let journal = "journal = \"agents.db\"\n";
    // The exit status says why (README, "Exit codes of agentsessionsd"): 2 a refused
    // configuration, 3 a journal that cannot be opened, 4 an address that cannot be bound.
    let cases: Vec<(&str, String, Vec<String>, i32)> = vec![
        (
            "bad TOML",
            format!("{journal}this is not toml\n"),
            vec![],
            2,
        ),
        (
            "unknown provider",
            format!("{journal}model = \"m\"\nmodel_provider = \"nope\"\n"),
            vec![],
            2,
        ),
        (
            "malformed harness entry",
            format!("{journal}model = \"m\"\nharness = [\"noequals\"]\n"),
            vec![],
            2,
        ),
        (
            "invalid MCP server name",
            format!("{journal}[[mcp_servers]]\nname = \"Not Valid\"\ncommand = \"sleep\"\n"),
            vec![],
            2,
        ),
        (
            "Sessions port in use",
            journal.to_owned(),
            vec!["--addr".into(), taken.clone()],
            4,
        ),
        (
            "HTTP port in use",
            journal.to_owned(),
            vec!["--http-addr".into(), taken],
            4,
        ),
    ];
    for (case, text, args, code) in cases {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let config = d.join("agentsessionsd.toml");
        std::fs::write(&config, text).unwrap();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = daemon(d, &config, &args, false);
        let (status, _) = exits_within(&mut child, SHUTDOWN_BOUND);
        let status = status.unwrap_or_else(|| panic!("{case}: still running\n{}", logs(d)));
        assert_eq!(status.code(), Some(code), "{case}\n{}", logs(d));
        let left: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("agents.db"))
            .collect();
        assert!(left.is_empty(), "{case}: created {left:?}\n{}", logs(d));
    }
}

// A journal that cannot be opened (its directory does not exist) stops the daemon with 3.
#[test]
fn a_journal_that_cannot_be_opened_exits_with_its_own_status() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = d.join("agentsessionsd.toml");
    std::fs::write(&config, "journal = \"missing/dir/agents.db\"\n").unwrap();
    let mut child = daemon(d, &config, &[], false);
    let (status, _) = exits_within(&mut child, SHUTDOWN_BOUND);
    let status = status.unwrap_or_else(|| panic!("still running\n{}", logs(d)));
    assert_eq!(status.code(), Some(3), "{}", logs(d));
}
