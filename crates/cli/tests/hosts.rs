//! Many hosts, one journal: three real `agentsessionsd` processes on 127.0.0.1 sharing one
//! Postgres schema (the server CI starts on 127.0.0.1:5432; `AGENTSESSIONS_TEST_POSTGRES_URL`
//! overrides it). Each test uses its own schema and drops it afterwards.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentsessions_client::{Client, ExecOptions, uid_of, verify};
use agentsessions_conformance::fixtures::CountingEndpoint;

const DAEMON: &str = env!("CARGO_BIN_EXE_agentsessionsd");
const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"live answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
/// The same answer as a chat-completions stream (what a live, delta-streaming turn asks for).
const STREAMED: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"live \"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"answer\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n",
    "data: [DONE]\n\n",
);

fn url() -> String {
    std::env::var("AGENTSESSIONS_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A fresh schema, dropped on drop.
struct Schema(String);

impl Schema {
    fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Self(format!("e2e_{tag}_{}_{nanos}", std::process::id()))
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([
                &url(),
                "-q",
                "-c",
                &format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.0),
            ])
            .output();
    }
}

struct Host {
    child: Child,
    addr: String,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn host(schema: &Schema, model: Option<&str>) -> Host {
    let mut command = Command::new(DAEMON);
    command
        .args([
            "--addr",
            "127.0.0.1:0",
            "--journal",
            &url(),
            "--journal-schema",
            &schema.0,
        ])
        .env_remove("MODEL_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(base) = model {
        command.args(["--model", "test-model", "--model-base-url", base]);
    }
    let mut child = command.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("agentsessionsd listening on ")
        .unwrap_or_else(|| {
            panic!("host did not start: {line:?} (is PostgreSQL up on 127.0.0.1:5432?)")
        })
        .to_owned();
    Host { child, addr }
}

fn client(host: &Host) -> Client {
    Client::dial(&host.addr).unwrap()
}

// Clients racing Exec on one session through different hosts: exactly one commit per turn, no
// gap, the losers ABORTED; listing from any host sees every session exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hosts_race_and_list_consistently() {
    let schema = Schema::new("race");
    let hosts: Vec<Host> = (0..3).map(|_| host(&schema, None)).collect();
    let mut first = client(&hosts[0]);
    let turn = first.exec(ExecOptions::new("start"), |_| {}).await.unwrap();
    let uid = turn.session_uid();
    let mut won = 0;
    for round in 0..5 {
        let head = first.get(&uid).await.unwrap().last_seq;
        let racers = hosts.iter().map(|h| {
            let mut c = client(h);
            let uid = uid.clone();
            async move {
                c.exec(
                    ExecOptions {
                        expected_last_seq: Some(head),
                        ..ExecOptions::new(format!("round {round}")).on(uid)
                    },
                    |_| {},
                )
                .await
            }
        });
        let results = futures_join_all(racers).await;
        let winners = results.iter().filter(|r| r.is_ok()).count();
        // The cursor admits exactly one turn: each racer's fence is minted in its opening
        // commit, after the cursor check, so a loser never supersedes the winner.
        assert_eq!(
            winners, 1,
            "round {round}: {winners} hosts committed a turn at seq {head}"
        );
        won += winners;
        for loser in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(loser.error.code(), tonic::Code::Aborted, "round {round}");
        }
    }
    assert_eq!(won, 5, "every round made progress");
    let records = first.replay(&uid, 0, 0).await.unwrap();
    let seqs: Vec<i64> = records.iter().map(|r| r.seq).collect();
    let expected: Vec<i64> = (1..=i64::try_from(records.len()).unwrap()).collect();
    assert_eq!(seqs, expected, "one commit per seq: no gap, no duplicate");
    verify(&records).unwrap();
    let inputs = records
        .iter()
        .filter(|r| {
            r.event.as_ref().unwrap().kind == agentsessions_wire::pb::EventKind::EventInput as i32
        })
        .count();
    let ends = records
        .iter()
        .filter(|r| {
            r.event.as_ref().unwrap().kind == agentsessions_wire::pb::EventKind::EventEnd as i32
        })
        .count();
    assert_eq!(ends, 1 + won, "every completed turn ended once");
    assert_eq!(inputs, ends, "no loser left an opened turn behind");

    // Sessions created through every host; each host lists all of them once.
    let mut created = BTreeSet::from([uid.clone()]);
    for (i, h) in hosts.iter().enumerate() {
        for n in 0..2 {
            let s = client(h)
                .create(&format!("h{i}-{n}"), "", "")
                .await
                .unwrap();
            created.insert(uid_of(&s).to_owned());
        }
    }
    for h in &hosts {
        let listed: Vec<String> = client(h)
            .list(2)
            .await
            .unwrap()
            .iter()
            .map(|s| uid_of(s).to_owned())
            .collect();
        let unique: BTreeSet<String> = listed.iter().cloned().collect();
        assert_eq!(unique.len(), listed.len(), "no session listed twice");
        assert_eq!(unique, created);
    }
}

/// Runs futures concurrently and returns their outputs in order.
async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

async fn wait_for_requests(model: &CountingEndpoint, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while model.requests() < n {
        assert!(Instant::now() < deadline, "the model was never called");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// A host killed with SIGKILL mid-turn: another host resumes the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_host_resumes_after_a_sigkill() {
    let schema = Schema::new("kill");
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 1).await;
    let a = host(&schema, Some(&model.base_url));
    let b = host(&schema, Some(&model.base_url));
    let mut on_a = client(&a);
    let session = on_a.create("crash", "chat", "test-model").await.unwrap();
    let uid = uid_of(&session).to_owned();
    let turn_uid = uid.clone();
    let turn = tokio::spawn(async move {
        on_a.exec(ExecOptions::new("survive").on(turn_uid), |_| {})
            .await
    });
    wait_for_requests(&model, 1).await;
    drop(a); // SIGKILL
    turn.await.unwrap().unwrap_err();

    let mut on_b = client(&b);
    let before = on_b.replay(&uid, 0, 0).await.unwrap();
    let resumed = on_b.resume(&uid).await.unwrap();
    assert_eq!(model.requests(), 2, "re-driven once, by the surviving host");
    let records = on_b.replay(&uid, 0, 0).await.unwrap();
    assert_eq!(
        &records[..before.len()],
        &before[..],
        "nothing committed was lost"
    );
    verify(&records).unwrap();
    assert_eq!(resumed.last_seq, i64::try_from(records.len()).unwrap());
    let outputs = records
        .iter()
        .filter(|r| {
            r.event.as_ref().unwrap().kind == agentsessions_wire::pb::EventKind::EventOutput as i32
        })
        .count();
    assert_eq!(outputs, 1);
}

// A stalled host wakes up after another host minted a newer fence: its late append is refused
// (ABORTED) and the journal holds only the newer writer's records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_host_is_fenced_out() {
    let schema = Schema::new("stale");
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 1).await;
    let a = host(&schema, Some(&model.base_url));
    let b = host(&schema, Some(&model.base_url));
    let mut on_a = client(&a);
    let session = on_a.create("fenced", "chat", "test-model").await.unwrap();
    let uid = uid_of(&session).to_owned();
    let turn_uid = uid.clone();
    let stale = tokio::spawn(async move {
        on_a.exec(ExecOptions::new("slow").on(turn_uid), |_| {})
            .await
    });
    wait_for_requests(&model, 1).await;

    // Host B takes over: its resume re-drives the interrupted call with a newer fence.
    let mut on_b = client(&b);
    on_b.resume(&uid).await.unwrap();
    let after_b = on_b.replay(&uid, 0, 0).await.unwrap();

    // Host A's model call now returns; its append must be refused.
    model.release_held();
    let late = stale.await.unwrap().unwrap_err();
    assert_eq!(late.error.code(), tonic::Code::Aborted, "{:?}", late.error);
    let records = on_b.replay(&uid, 0, 0).await.unwrap();
    assert_eq!(records, after_b, "the stale host wrote nothing");
    verify(&records).unwrap();
}
