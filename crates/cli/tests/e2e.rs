//! End to end: the real `agentsessionsd` and `agentctl` binaries on 127.0.0.1.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentsessions_client::{Client, ExecOptions, verify};
use agentsessions_conformance::fixtures::CountingEndpoint;
use common::{DAEMON, Daemon, ctl, stdout};

const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"live answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
/// The same answer as a chat-completions stream, for calls that stream deltas.
const STREAMED: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"live \"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"answer\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n",
    "data: [DONE]\n\n",
);

/// The daemon on `journal` with `extra` arguments (and its registry line when it serves one).
fn start(journal: &Path, extra: &[&str]) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--journal"])
        .arg(journal)
        .args(extra)
        .stderr(Stdio::null());
    Daemon::spawn(command, extra.contains(&"--registry-addr"))
}

// The README's quickstart on a fresh directory with no server: embedded agentctl.
#[test]
fn agentctl_embedded_exec_replay_fork_suspend_resume_verify() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = stdout(&ctl(d, &["exec", "hello"]));
    let uid = out
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("session "))
        .unwrap()
        .to_owned();
    assert!(out.contains("OUTPUT  assistant: echo:hello"), "{out}");
    assert!(out.contains("END  COMPLETED"), "{out}");
    assert!(d.join("agentsessions.db").exists());

    let out = stdout(&ctl(d, &["exec", "--session", &uid, "again"]));
    assert!(
        out.contains("seq=0009 OUTPUT  assistant: echo:again"),
        "{out}"
    );
    let replayed = stdout(&ctl(d, &["replay", "--session", &uid]));
    assert_eq!(replayed.lines().count(), 10);

    let forked = stdout(&ctl(
        d,
        &[
            "fork",
            "--session",
            &uid,
            "--at",
            "5",
            "--count",
            "2",
            "--names",
            "a,b",
        ],
    ));
    let children: Vec<&str> = forked.lines().collect();
    assert_eq!(children.len(), 2);
    assert!(
        children[0].contains(&format!("parent={uid} fork_seq=5 name=a")),
        "{forked}"
    );

    let suspended = stdout(&ctl(d, &["suspend", "--session", &uid]));
    assert!(
        suspended.contains("suspend compute=COLD last_seq=11"),
        "{suspended}"
    );
    // The echo harness runs in the host only during a turn: resumed, nothing of it is held.
    let resumed = stdout(&ctl(d, &["resume", "--session", &uid]));
    assert!(
        resumed.contains("resume compute=NONE last_seq=12"),
        "{resumed}"
    );
    let verified = stdout(&ctl(d, &["verify", "--session", &uid]));
    assert!(verified.starts_with("verified 12 records"), "{verified}");
    let tree = stdout(&ctl(d, &["tree", "--session", &uid]));
    assert_eq!(tree.lines().count(), 3, "{tree}");
    let listed = stdout(&ctl(d, &["list"]));
    assert_eq!(listed.lines().count(), 3, "{listed}");

    // Export to the audit format and let the independent verifier check it.
    let audit = stdout(&ctl(d, &["export", "--session", &uid, "--format", "audit"]));
    let path = d.join("audit.json");
    std::fs::write(&path, audit).unwrap();
    if let Ok(out) = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/verify_chain.py"))
        .arg("audit")
        .arg(&path)
        .output()
    {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    // Errors are clear and exit non-zero.
    let missing = ctl(d, &["get", "--session", "sess-none"]);
    assert!(!missing.status.success());
    let message = String::from_utf8_lossy(&missing.stderr);
    assert!(message.contains("NOT_FOUND"), "{message}");
    // What a decision does not name comes from the pending approval; here there is none.
    let partial = ctl(d, &["approve", "--session", &uid, "--execution", "e"]);
    assert!(!partial.status.success());
    assert!(String::from_utf8_lossy(&partial.stderr).contains("no pending approval"));
}

// The daemon serves agentctl and the SDK; racing writers: exactly one wins; malformed input
// gets its code and the daemon keeps serving; SIGTERM stops it cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_serves_clients_races_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir.path().join("j.db"), &[]);
    let out = stdout(&ctl(dir.path(), &["--server", &daemon.addr, "exec", "hi"]));
    let uid = out
        .lines()
        .next()
        .unwrap()
        .strip_prefix("session ")
        .unwrap()
        .to_owned();

    let mut a = Client::dial(&daemon.addr).unwrap();
    let mut b = a.clone();
    let race = |mut client: Client, text: &'static str| {
        let uid = uid.clone();
        async move {
            client
                .exec(
                    ExecOptions {
                        expected_last_seq: Some(5),
                        ..ExecOptions::new(text).on(uid)
                    },
                    |_| {},
                )
                .await
        }
    };
    let (first, second) = tokio::join!(race(a.clone(), "left"), race(b.clone(), "right"));
    let outcomes = [first.is_ok(), second.is_ok()];
    assert_eq!(
        outcomes.iter().filter(|ok| **ok).count(),
        1,
        "exactly one wins"
    );
    let loser = first.err().or_else(|| second.err()).unwrap();
    assert_eq!(loser.error.code(), tonic::Code::Aborted);
    let records = a.replay(&uid, 0, 0).await.unwrap();
    assert_eq!(records.len(), 10, "no gap, no duplicate");
    verify(&records).unwrap();

    // Malformed input, each with its code; the daemon keeps serving.
    assert_eq!(
        a.get("").await.unwrap_err().code(),
        tonic::Code::InvalidArgument
    );
    assert_eq!(
        a.get("sess-none").await.unwrap_err().code(),
        tonic::Code::NotFound
    );
    let bad_fork = a
        .fork(
            &uid,
            agentsessions_client::ForkOptions {
                count: 129,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(bad_fork.code(), tonic::Code::InvalidArgument);
    let huge = "x".repeat(20 * 1024 * 1024);
    let oversized = b
        .exec(ExecOptions::new(huge).on(&uid), |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            oversized.error.code(),
            tonic::Code::ResourceExhausted | tonic::Code::OutOfRange | tonic::Code::Internal
        ),
        "{:?}",
        oversized.error
    );
    let mut listing = Client::dial(&daemon.addr).unwrap();
    let bad_token = {
        // A token this server never issued.
        let status = agentsessions_wire::pb::sessions_client::SessionsClient::new(
            agentsessions_harnesswire::channel(&daemon.addr).unwrap(),
        )
        .list_sessions(agentsessions_wire::pb::ListSessionsRequest {
            page_token: "garbage".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
        status.code()
    };
    assert_eq!(bad_token, tonic::Code::InvalidArgument);
    assert_eq!(listing.list(0).await.unwrap().len(), 1);

    // SIGTERM: a clean exit.
    daemon.signal("TERM");
    let mut daemon = daemon;
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = daemon.try_wait() {
            break status;
        }
        assert!(Instant::now() < deadline, "daemon did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

// A daemon killed with SIGKILL mid-turn (its model call in flight): a new daemon on the same
// journal resumes the session; nothing committed is lost and the model is asked once more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_turn_then_resume_on_a_new_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.db");
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 1).await;
    let flags = [
        "--model",
        "test-model",
        "--model-base-url",
        model.base_url.as_str(),
    ];
    let daemon = start(&journal, &flags);
    let mut client = Client::dial(&daemon.addr).unwrap();
    let session = client.create("crash", "chat", "test-model").await.unwrap();
    let uid = agentsessions_client::uid_of(&session).to_owned();
    let mut runner = client.clone();
    let turn_uid = uid.clone();
    let turn = tokio::spawn(async move {
        runner
            .exec(ExecOptions::new("survive this").on(turn_uid), |_| {})
            .await
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while model.requests() < 1 {
        assert!(Instant::now() < deadline, "the model was never called");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = client.replay(&uid, 0, 0).await.unwrap();
    daemon.sigkill();
    assert!(
        turn.await.unwrap().is_err(),
        "the turn died with the daemon"
    );

    let daemon = start(&journal, &flags);
    let mut client = Client::dial(&daemon.addr).unwrap();
    let after_restart = client.replay(&uid, 0, 0).await.unwrap();
    assert_eq!(after_restart, before, "everything committed survived");
    let resumed = client.resume(&uid).await.unwrap();
    assert_eq!(
        model.requests(),
        2,
        "the interrupted model call is re-driven exactly once"
    );
    let records = client.replay(&uid, 0, 0).await.unwrap();
    verify(&records).unwrap();
    assert_eq!(&records[..before.len()], &before[..]);
    let kinds: Vec<i32> = records
        .iter()
        .map(|r| r.event.as_ref().unwrap().kind)
        .collect();
    use agentsessions_wire::pb::EventKind;
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == EventKind::EventModelCall as i32)
            .count(),
        1,
        "one MODEL_CALL: the intent is reused, not recorded twice"
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == EventKind::EventOutput as i32)
            .count(),
        1
    );
    assert!(kinds.contains(&(EventKind::EventEnd as i32)));
    assert_eq!(resumed.last_seq, i64::try_from(records.len()).unwrap());
    // A second resume has nothing to re-drive and asks the model nothing.
    client.resume(&uid).await.unwrap();
    assert_eq!(model.requests(), 2);
}

// The operator listener: register a harness running in another process, use it, retire it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_on_the_operator_listener() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let refused = Command::new(DAEMON)
        .args([
            "--addr",
            "127.0.0.1:0",
            "--registry-addr",
            "0.0.0.0:0",
            "--journal",
        ])
        .arg(d.join("x.db"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("loopback"));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let harness_addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(agentsessions_harnesswire::serve_tcp_listener(
        listener,
        std::sync::Arc::new(agentsessions_harnesses::EchoHarness::new()),
        std::future::pending(),
    ));
    let daemon = start(&d.join("j.db"), &["--registry-addr", "127.0.0.1:0"]);
    let spec = d.join("spec.json");
    std::fs::write(
        &spec,
        format!(
            r#"{{"remote":{{"address":"{harness_addr}"}},"capabilities":{{"resumability":"RESUMABILITY_STATELESS_REPLAY"}},"descriptor_id":"echo"}}"#
        ),
    )
    .unwrap();
    let spec_arg = spec.to_str().unwrap();
    let op = daemon.registry.as_str();
    let out = stdout(&ctl(
        d,
        &[
            "--server", op, "harness", "register", "--name", "remote", "--spec", spec_arg,
        ],
    ));
    assert!(
        out.starts_with("CREATED remote state=ACTIVE source=REGISTERED"),
        "{out}"
    );
    let listed = stdout(&ctl(d, &["--server", op, "harness", "list"]));
    assert_eq!(listed.lines().count(), 2, "{listed}");
    let observed = stdout(&ctl(
        d,
        &[
            "--server",
            op,
            "harness",
            "get",
            "--name",
            "remote",
            "--observe",
        ],
    ));
    assert!(observed.contains("observed_id=echo"), "{observed}");

    let sessions = daemon.addr.as_str();
    let uid = stdout(&ctl(
        d,
        &["--server", sessions, "create", "--harness", "remote"],
    ));
    let turn = stdout(&ctl(
        d,
        &[
            "--server",
            sessions,
            "exec",
            "--session",
            uid.trim(),
            "over the wire",
        ],
    ));
    assert!(turn.contains("echo:over the wire"), "{turn}");

    stdout(&ctl(
        d,
        &[
            "--server", op, "harness", "retire", "--name", "remote", "--reason", "done",
        ],
    ));
    let late = ctl(d, &["--server", sessions, "create", "--harness", "remote"]);
    assert!(!late.status.success());
    assert!(String::from_utf8_lossy(&late.stderr).contains("FAILED_PRECONDITION"));
    // The operator API is not on the Sessions port.
    let wrong = ctl(d, &["--server", sessions, "harness", "list"]);
    assert!(!wrong.status.success());
}

// A static `--harness name=address` entry: a harness in another process, placed by the remote
// runtime and driven over Harness.Connect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_remote_harness_serves_turns() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let harness_addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(agentsessions_harnesswire::serve_tcp_listener(
        listener,
        std::sync::Arc::new(agentsessions_harnesses::EchoHarness::new()),
        std::future::pending(),
    ));
    let entry = format!("far={harness_addr}");
    let daemon = start(
        &d.join("j.db"),
        &["--model", "echo", "--harness", entry.as_str()],
    );
    let uid = stdout(&ctl(
        d,
        &["--server", &daemon.addr, "create", "--harness", "far"],
    ));
    let turn = stdout(&ctl(
        d,
        &[
            "--server",
            &daemon.addr,
            "exec",
            "--session",
            uid.trim(),
            "across processes",
        ],
    ));
    assert!(turn.contains("echo:across processes"), "{turn}");
    let bad = Command::new(DAEMON)
        .args([
            "--addr",
            "127.0.0.1:0",
            "--model",
            "echo",
            "--harness",
            "x=http://127.0.0.1:1",
        ])
        .arg("--journal")
        .arg(d.join("k.db"))
        .output()
        .unwrap();
    assert!(!bad.status.success(), "a URL is not a harness address");
}
