//! Faults under a turn (every turn ends, the daemon serves on), with the real daemon on 127.0.0.1:
//! a model that never answers (the turn's deadline and Cancel still end the turn, promptly), a
//! model that answers malformed JSON (the turn fails cleanly), and a harness process that accepts
//! the connection and then hangs (the deadline bounds the turn). Each time the daemon goes on
//! serving.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentsessions_client::{Client, ExecOptions, uid_of};
use agentsessions_conformance::fixtures::CountingEndpoint;
use common::Daemon;

const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
const STREAMED: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"done\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

fn daemon(dir: &tempfile::TempDir, model: &CountingEndpoint, extra: &[&str]) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--journal"])
        .arg(dir.path().join("journal.db"))
        .args(["--model", "m", "--model-base-url", &model.base_url])
        .args(extra)
        .env("MODEL_API_KEY", "k")
        .stderr(Stdio::null());
    Daemon::spawn(command, false)
}

fn in_seconds(secs: i64) -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
        + secs
}

async fn chat(client: &mut Client, session: &str, deadline_unix: i64) -> Result<(), String> {
    turn(client, session, deadline_unix, false).await
}

/// A chat turn that abandons the session's unfinished turn when `abandon` (extensions §9).
async fn turn(
    client: &mut Client,
    session: &str,
    deadline_unix: i64,
    abandon: bool,
) -> Result<(), String> {
    let options = ExecOptions {
        session: session.to_owned(),
        harness: "chat".into(),
        deadline_unix,
        abandon_unfinished: abandon,
        ..ExecOptions::new("hello")
    };
    client
        .exec(options, |_| {})
        .await
        .map(|_| ())
        .map_err(|failed| failed.error.to_string())
}

#[tokio::test]
async fn a_hanging_model_is_ended_by_the_deadline_and_by_cancel() {
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 2).await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = daemon(&dir, &model, &[]);
    let mut client = Client::dial(&daemon.addr).unwrap();
    let session = uid_of(&client.create("hang", "chat", "").await.unwrap()).to_owned();

    // The deadline: the turn ends soon after it, though the model never answers.
    let began = Instant::now();
    let ended = chat(&mut client, &session, in_seconds(2))
        .await
        .unwrap_err();
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "{:?}",
        began.elapsed()
    );
    assert!(ended.contains("DEADLINE_EXCEEDED"), "{ended}");
    // The timed-out turn did not end: new input must resume or abandon it (extensions §9).
    let refused = chat(&mut client, &session, 0).await.unwrap_err();
    assert!(refused.contains("FAILED_PRECONDITION"), "{refused}");

    // Cancel: a second turn held by the model ends when cancelled.
    let addr = daemon.addr.clone();
    let held_session = session.clone();
    let held = tokio::spawn(async move {
        let mut client = Client::dial(&addr).unwrap();
        turn(&mut client, &held_session, 0, true).await
    });
    while model.requests() < 2 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let began = Instant::now();
    client.cancel(&session, "", "stop").await.unwrap();
    let cancelled = tokio::time::timeout(Duration::from_secs(15), held)
        .await
        .expect("the cancelled turn ends")
        .unwrap()
        .unwrap_err();
    assert!(began.elapsed() < Duration::from_secs(15));
    assert!(cancelled.contains("CANCELLED"), "{cancelled}");

    // The model answers again: so does the daemon.
    model.release_held();
    chat(&mut client, &session, 0).await.unwrap();
}

#[tokio::test]
async fn a_malformed_model_answer_fails_the_turn_cleanly() {
    let model =
        CountingEndpoint::start_full("{\"choices\": [{\"mess", Some("data: {nope\n\n"), 0).await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = daemon(&dir, &model, &["--model-retries", "0"]);
    let mut client = Client::dial(&daemon.addr).unwrap();
    let session = uid_of(&client.create("bad", "chat", "").await.unwrap()).to_owned();
    let failed = chat(&mut client, &session, 0).await.unwrap_err();
    assert!(failed.contains("INTERNAL"), "{failed}");
    // The failure is journaled as an ERROR record and the chain holds.
    let records = client.replay(&session, 0, 0).await.unwrap();
    agentsessions_client::verify(&records).unwrap();
    let last = records.last().and_then(|r| r.event.as_ref()).unwrap();
    assert_eq!(last.kind(), agentsessions_wire::pb::EventKind::EventError);
}

#[tokio::test]
async fn a_hanging_harness_process_is_bounded_by_the_deadline() {
    // A "harness" that accepts connections and never says a word.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 0).await;
    let entry = format!("hang={address}");
    let dir = tempfile::tempdir().unwrap();
    let daemon = daemon(&dir, &model, &["--harness", &entry]);
    let mut client = Client::dial(&daemon.addr).unwrap();
    let began = Instant::now();
    let options = ExecOptions {
        harness: "hang".into(),
        deadline_unix: in_seconds(2),
        ..ExecOptions::new("hello")
    };
    let failed = client.exec(options, |_| {}).await.unwrap_err();
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "the hanging harness held the turn for {:?}",
        began.elapsed()
    );
    let code = failed.error.to_string();
    assert!(
        code.contains("DEADLINE_EXCEEDED") || code.contains("UNAVAILABLE"),
        "{code}"
    );
    // Other harnesses are served meanwhile.
    client.exec(ExecOptions::new("echo"), |_| {}).await.unwrap();
    holder.abort();
}
