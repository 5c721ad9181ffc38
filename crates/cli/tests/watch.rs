//! `agentctl watch` against real daemons on 127.0.0.1: it follows a running turn's records as
//! they commit, from a seq, and ends when the session is deleted; with two daemons on one
//! Postgres journal, a turn on one is watched from the other; an interrupted `agentctl exec`
//! prints the exact `agentctl watch` command that reattaches. The console's live stream
//! (`/api/v1/sessions/{uid}/events`) is the same Watch: served by the other daemon, it shows the
//! turn's records as they commit and ends after the delete record.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentsessions_client::{Client, ExecOptions, uid_of};
use agentsessions_conformance::fixtures::CountingEndpoint;
use common::{CTL, Daemon};

const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"live answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
/// The same answer as a chat-completions stream (what a delta-streaming turn asks for).
const STREAMED: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"live \"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"answer\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n",
    "data: [DONE]\n\n",
);
const PATIENCE: Duration = Duration::from_secs(30);

fn pg_url() -> String {
    std::env::var("AGENTSESSIONS_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A fresh Postgres schema, dropped on drop.
struct Schema(String);

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([
                &pg_url(),
                "-q",
                "-c",
                &format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.0),
            ])
            .output();
    }
}

fn daemon(journal: &[&str], model: &CountingEndpoint) -> Daemon {
    daemon_with(journal, model, &[])
}

fn daemon_with(journal: &[&str], model: &CountingEndpoint, extra: &[&str]) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--journal"])
        .args(journal)
        .args(["--model", "test-model", "--model-base-url", &model.base_url])
        .args(extra)
        .stderr(Stdio::null());
    Daemon::spawn(command, false)
}

/// A running `agentctl` whose stdout lines arrive on a channel.
struct Ctl {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Ctl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ctl {
    fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(CTL)
            .args(args)
            .env_remove("AGENTCTL_SERVER")
            .env_remove("AGENTSESSIONS_JOURNAL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// Lines until one contains `needle` (that one included).
    fn until(&self, needle: &str) -> Vec<String> {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no line with {needle:?} ({e}); saw {seen:#?}"));
            let found = line.contains(needle);
            seen.push(line);
            if found {
                return seen;
            }
        }
    }

    /// Waits for the process to exit; its exit code and stderr.
    fn exit(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut stderr = String::new();
                std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut stderr)
                    .unwrap();
                return (status.code(), stderr);
            }
            assert!(Instant::now() < deadline, "agentctl did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn seq_of(json_line: &str) -> i64 {
    let value: serde_json::Value = serde_json::from_str(json_line).unwrap();
    value["seq"].as_i64().unwrap()
}

async fn wait_for_model(model: &CountingEndpoint, n: u64) {
    let deadline = Instant::now() + PATIENCE;
    while model.requests() < n {
        assert!(Instant::now() < deadline, "the model was never called");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A turn on `uid` through `runner` whose model call is held by `model`, watched through
/// `watcher`: the records before the model answers arrive while the turn waits, the rest once
/// it is released; deleting the session ends the watch with exit 0.
async fn watch_a_held_turn(
    runner: &Daemon,
    watcher: &Daemon,
    model: &CountingEndpoint,
) -> (String, Vec<String>) {
    let mut client = Client::dial(&runner.addr).unwrap();
    let session = client
        .create("watched", "chat", "test-model")
        .await
        .unwrap();
    let uid = uid_of(&session).to_owned();
    let watch = Ctl::spawn(&[
        "--server",
        &watcher.addr,
        "--json",
        "watch",
        "--session",
        &uid,
    ]);
    let mut turn_client = client.clone();
    let turn_uid = uid.clone();
    let turn = tokio::spawn(async move {
        turn_client
            .exec(ExecOptions::new("watch me").on(turn_uid), |_| {})
            .await
    });
    wait_for_model(model, 1).await;
    // The turn waits for its model: what it committed so far is already on the watch.
    let mut lines = watch.until("EVENT_INPUT");
    model.release_held();
    lines.extend(watch.until("EVENT_OUTPUT"));
    turn.await.unwrap().unwrap();
    client.delete(&uid).await.unwrap();
    lines.extend(watch.until("LIFECYCLE_DELETE"));
    let (code, stderr) = watch.exit();
    assert_eq!(code, Some(0), "{stderr}");
    let seqs: Vec<i64> = lines.iter().map(|l| seq_of(l)).collect();
    let head = client.get(&uid).await.unwrap().last_seq;
    assert_eq!(seqs, (1..=head).collect::<Vec<_>>(), "{lines:#?}");
    (uid, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_follows_a_running_turn_from_a_seq_and_ends_on_delete() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.db");
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 1).await;
    let host = daemon(&[journal.to_str().unwrap()], &model);
    let (uid, all) = watch_a_held_turn(&host, &host, &model).await;

    // From a seq: the records from there on, in the text format of replay; the session is
    // deleted, so the watch ends after its delete record.
    let from = Ctl::spawn(&[
        "--server",
        &host.addr,
        "watch",
        "--session",
        &uid,
        "--from",
        "3",
    ]);
    let lines = from.until("LIFECYCLE");
    let replayed = host.ok(&["replay", "--session", &uid, "--from", "3"]);
    let replayed: Vec<&str> = replayed.lines().collect();
    assert_eq!(lines, replayed);
    assert_eq!(lines.len(), all.len() - 2);
    assert_eq!(from.exit().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_on_one_daemon_is_watched_from_another_on_the_same_postgres_journal() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = Schema(format!("e2e_watch_{}_{nanos}", std::process::id()));
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 1).await;
    let url = pg_url();
    let journal = [url.as_str(), "--journal-schema", schema.0.as_str()];
    let a = daemon(&journal, &model);
    let b = daemon(&journal, &model);
    watch_a_held_turn(&a, &b, &model).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_exec_prints_the_command_that_reattaches() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.db");
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 1).await;
    let host = daemon(&[journal.to_str().unwrap()], &model);
    let mut client = Client::dial(&host.addr).unwrap();
    let session = client.create("cut", "chat", "test-model").await.unwrap();
    let uid = uid_of(&session).to_owned();

    let exec = Ctl::spawn(&["--server", &host.addr, "exec", "--session", &uid, "hello"]);
    wait_for_model(&model, 1).await;
    exec.until("INPUT");
    let status = Command::new("kill")
        .args(["-INT", &exec.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let (code, stderr) = exec.exit();
    assert_eq!(code, Some(130), "{stderr}");
    let head = client.get(&uid).await.unwrap().last_seq;
    let prefix = format!(
        "reattach with `agentctl --server {} watch --session {uid} --from ",
        host.addr
    );
    assert!(stderr.contains(&prefix), "{stderr}");

    // The turn went on in the daemon; the printed command picks it up where exec stopped.
    let command = stderr.split('`').nth(1).unwrap();
    let args: Vec<&str> = command.split_whitespace().skip(1).collect();
    let from: i64 = args.last().unwrap().parse().unwrap();
    assert!((2..=head + 1).contains(&from), "--from {from}, head {head}");
    let reattached = Ctl::spawn(&args);
    model.release_held();
    let lines = reattached.until("OUTPUT");
    assert!(lines[0].contains(&format!("seq={from:04}")), "{lines:#?}");
}

/// Server-Sent Events read so far from one response.
struct Events {
    response: reqwest::Response,
    text: String,
}

impl Events {
    /// Reads until `needle` has arrived (the whole text so far then), failing after a while.
    async fn until(&mut self, needle: &str) -> &str {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !self.text.contains(needle) {
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no {needle:?} in {}", self.text))
                .unwrap()
                .unwrap_or_else(|| panic!("stream ended before {needle:?}: {}", self.text));
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
        &self.text
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_of_one_daemon_streams_a_turn_run_on_another_on_the_same_postgres_journal() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = Schema(format!("e2e_console_{}_{nanos}", std::process::id()));
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 1).await;
    let url = pg_url();
    let journal = [url.as_str(), "--journal-schema", schema.0.as_str()];
    let runner = daemon(&journal, &model);
    let watcher = daemon_with(&journal, &model, &["--http-addr", "127.0.0.1:0"]);
    let mut client = Client::dial(&runner.addr).unwrap();
    let session = client
        .create("watched", "chat", "test-model")
        .await
        .unwrap();
    let uid = uid_of(&session).to_owned();
    let response = reqwest::Client::new()
        .get(format!(
            "http://{}/api/v1/sessions/{uid}/events",
            watcher.http
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let mut events = Events {
        response,
        text: String::new(),
    };
    let mut turn_client = client.clone();
    let turn_uid = uid.clone();
    let turn = tokio::spawn(async move {
        turn_client
            .exec(ExecOptions::new("watch me").on(turn_uid), |_| {})
            .await
    });
    wait_for_model(&model, 1).await;
    // The turn waits for its model on the runner: what it committed is already on the stream.
    let seen = events.until("EVENT_INPUT").await;
    assert!(!seen.contains("EVENT_OUTPUT"), "{seen}");
    model.release_held();
    events.until("EVENT_END").await;
    turn.await.unwrap().unwrap();
    client.delete(&uid).await.unwrap();
    let seen = events.until("event: end").await.to_owned();
    assert!(seen.contains("LIFECYCLE_DELETE"), "{seen}");
    let head = client.get(&uid).await.unwrap().last_seq;
    let seqs: Vec<i64> = seen
        .lines()
        .filter_map(|line| line.strip_prefix("id: "))
        .map(|seq| seq.parse().unwrap())
        .collect();
    assert_eq!(seqs, (1..=head).collect::<Vec<_>>(), "{seen}");
    let rest = tokio::time::timeout(PATIENCE, events.response.chunk())
        .await
        .unwrap()
        .unwrap();
    assert!(rest.is_none(), "the stream went on after the end");
}
