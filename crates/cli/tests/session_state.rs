//! The state shown is the state that is: what `agentctl get` and `list` and the daemon's
//! `/metrics` sessions gauge say about a session's compute, harness and model
//! (docs/extensions.md, "Compute state" and "Harness and model"). The real binaries on
//! 127.0.0.1.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agentsessions_journal::{Catalog as _, Log as _};
use common::Daemon;

/// The daemon in `dir` over `sessions.db`, with its HTTP listener and `extra` arguments.
fn daemon(dir: &Path, extra: &[&str]) -> Daemon {
    let mut command = Daemon::command();
    command
        .current_dir(dir)
        .args([
            "--addr",
            "127.0.0.1:0",
            "--journal",
            "sessions.db",
            "--http-addr",
            "127.0.0.1:0",
        ])
        .args(extra)
        .stderr(Stdio::null());
    Daemon::spawn(command, false)
}

/// The session uid from `exec`'s first line.
fn session_of(exec_output: &str) -> String {
    exec_output
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("session "))
        .unwrap_or_else(|| panic!("no session line in {exec_output:?}"))
        .to_owned()
}

/// `agentctl get`'s field `name` (the `name      value` lines).
fn field(details: &str, name: &str) -> String {
    details
        .lines()
        .find_map(|l| {
            l.strip_prefix(name)
                .filter(|rest| rest.starts_with(' '))
                .map(|rest| rest.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no {name} in {details:?}"))
}

/// `agentctl list`'s line for `uid`.
fn listed(d: &Daemon, uid: &str) -> String {
    let list = d.ok(&["list"]);
    list.lines()
        .find(|l| l.starts_with(uid))
        .unwrap_or_else(|| panic!("{uid} not listed in {list:?}"))
        .to_owned()
}

/// The `agentsessions_sessions` gauge by compute state, from a fresh scrape. The gauge reads the
/// journal at most once a second, so each call first waits that long.
fn sessions_gauge(http: &str, state: &str) -> i64 {
    std::thread::sleep(Duration::from_millis(1_100));
    let mut stream = TcpStream::connect(http).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let sample = format!("agentsessions_sessions{{compute_state=\"{state}\"}} ");
    answer
        .lines()
        .find_map(|l| l.strip_prefix(&sample))
        .map_or(0, |value| {
            value.trim().trim_end_matches(".0").parse::<i64>().unwrap()
        })
}

// A finished turn on the echo harness (in the host, running only during a turn) holds no
// compute: NONE in get, list and the gauge, never LIVE; suspended it reads COLD everywhere, and
// resumed NONE again. The session made by `exec` without `--harness` names the harness the host
// resolved and the model it called.
#[test]
fn a_finished_turn_holds_no_compute_and_a_suspended_session_reads_cold() {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(dir.path(), &[]);
    let uid = session_of(&d.ok(&["exec", "hello"]));

    let details = d.ok(&["get", "--session", &uid]);
    assert_eq!(field(&details, "compute"), "NONE", "{details}");
    assert_eq!(field(&details, "harness"), "echo", "{details}");
    assert_eq!(field(&details, "model"), "echo", "{details}");
    let line = listed(&d, &uid);
    assert!(line.contains(" compute=NONE harness=echo "), "{line}");
    assert_eq!(sessions_gauge(&d.http, "LIVE"), 0);
    assert_eq!(sessions_gauge(&d.http, "NONE"), 1);

    let suspended = d.ok(&["suspend", "--session", &uid]);
    assert!(suspended.contains(" suspend compute=COLD "), "{suspended}");
    let details = d.ok(&["get", "--session", &uid]);
    assert_eq!(field(&details, "compute"), "COLD", "{details}");
    assert!(listed(&d, &uid).contains(" compute=COLD "));
    assert_eq!(sessions_gauge(&d.http, "COLD"), 1);
    assert_eq!(sessions_gauge(&d.http, "LIVE"), 0);

    let resumed = d.ok(&["resume", "--session", &uid]);
    assert!(resumed.contains(" resume compute=NONE "), "{resumed}");
    assert!(listed(&d, &uid).contains(" compute=NONE "));

    // Another turn, then another session: nothing stays LIVE once its turn is over.
    d.ok(&["exec", "--session", &uid, "again"]);
    let second = session_of(&d.ok(&["exec", "--harness", "echo", "more"]));
    for uid in [&uid, &second] {
        let details = d.ok(&["get", "--session", uid]);
        assert_eq!(field(&details, "compute"), "NONE", "{details}");
        assert!(listed(&d, uid).contains(" compute=NONE harness=echo "));
    }
    assert_eq!(sessions_gauge(&d.http, "LIVE"), 0);
    assert_eq!(sessions_gauge(&d.http, "NONE"), 2);

    // A session that never ran has no compute.
    let created = d.ok(&["create", "--name", "idle"]);
    let idle = created.trim().to_owned();
    let details = d.ok(&["get", "--session", &idle]);
    assert_eq!(field(&details, "compute"), "NONE", "{details}");
    assert_eq!(field(&details, "harness"), "echo", "{details}");
}

// Chat sessions record the model their turns call: the chat harness's model (here served by the
// offline directive provider), whether the session was made by `exec` or `create`; under a model
// policy, the policy's default, which each turn's EXECUTION_START journals.
#[test]
fn chat_and_directive_sessions_record_their_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(
        dir.path(),
        &["--model", "m-directive", "--model-provider", "directive"],
    );
    let by_exec = session_of(&d.ok(&["exec", "--harness", "chat", "hello"]));
    let details = d.ok(&["get", "--session", &by_exec]);
    assert_eq!(field(&details, "harness"), "chat", "{details}");
    assert_eq!(field(&details, "model"), "m-directive", "{details}");
    assert_eq!(field(&details, "compute"), "NONE", "{details}");
    assert!(listed(&d, &by_exec).contains(" compute=NONE harness=chat "));

    let by_create = d.ok(&["create", "--harness", "chat"]).trim().to_owned();
    let details = d.ok(&["get", "--session", &by_create]);
    assert_eq!(field(&details, "model"), "m-directive", "{details}");
    // A model the caller names is recorded as named.
    let named = d
        .ok(&["create", "--harness", "chat", "--model", "m-other"])
        .trim()
        .to_owned();
    let details = d.ok(&["get", "--session", &named]);
    assert_eq!(field(&details, "model"), "m-other", "{details}");
    drop(d);

    let dir = tempfile::tempdir().unwrap();
    let d = daemon(
        dir.path(),
        &[
            "--model",
            "m-directive",
            "--model-provider",
            "directive",
            "--model-allowed",
            "m-directive",
            "--model-allowed",
            "echo",
        ],
    );
    let uid = session_of(&d.ok(&["exec", "hello"]));
    let journaled = d.ok(&["--json", "replay", "--session", &uid]);
    let start = journaled
        .lines()
        .find(|l| l.contains("EXECUTION_START"))
        .unwrap_or_else(|| panic!("no EXECUTION_START in {journaled}"));
    assert!(start.contains("m-directive"), "{start}");
    let details = d.ok(&["get", "--session", &uid]);
    assert_eq!(field(&details, "model"), "m-directive", "{details}");
    assert_eq!(field(&details, "harness"), "echo", "{details}");
}

// A journal whose finished sessions were stored LIVE (by a build that never settled them):
// the daemon settles them with its runtime when it starts, so `list` and the gauge stop
// counting them LIVE.
#[test]
fn the_daemon_settles_finished_sessions_stored_live() {
    use agentsessions_api::ComputeState;
    use agentsessions_sqlite::SqliteJournal;

    let dir = tempfile::tempdir().unwrap();
    let mut uids = Vec::new();
    for text in ["one", "two", "three"] {
        let out = common::ctl(dir.path(), &["--journal", "sessions.db", "exec", text]);
        uids.push(session_of(&common::stdout(&out)));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let journal = SqliteJournal::open(dir.path().join("sessions.db")).unwrap();
        for uid in &uids {
            let head = journal.head(uid).await.unwrap();
            assert!(
                journal
                    .settle_compute_state(uid, head, ComputeState::Live)
                    .await
                    .unwrap()
            );
        }
    });
    drop(runtime);

    let d = daemon(dir.path(), &[]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let list = d.ok(&["list"]);
        if !list.contains("compute=LIVE") {
            assert_eq!(list.matches("compute=NONE").count(), 3, "{list}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still LIVE after the daemon started: {list}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(sessions_gauge(&d.http, "LIVE"), 0);
    assert_eq!(sessions_gauge(&d.http, "NONE"), 3);
}
