//! The daemon's overload limits (refused at once, never queued), end to end on 127.0.0.1:
//! `[limits]` in the config file and the flags that win over it; a turn past `max_concurrent_turns`
//! refused with RESOURCE_EXHAUSTED while the admitted ones run on; a request past
//! `max_message_bytes` refused with RESOURCE_EXHAUSTED; a limit of 0 refused at startup.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use agentsessions_client::{Client, ClientError, ExecOptions};
use agentsessions_conformance::fixtures::CountingEndpoint;
use common::{DAEMON, Daemon};

const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
/// The same answer as a chat-completions stream (what a delta-streaming turn asks for).
const STREAMED: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"done\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

fn code_of(error: &ClientError) -> tonic::Code {
    match error {
        ClientError::Status(status) => status.code(),
        other => panic!("expected a status, got {other}"),
    }
}

#[tokio::test]
async fn a_turn_past_the_limit_is_refused_while_admitted_turns_finish() {
    // The model holds its first two calls: two turns stay in flight.
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 2).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentsessionsd.toml");
    // The file says 1; the flag says 2 and wins.
    std::fs::write(&config, "[limits]\nmax_concurrent_turns = 1\n").unwrap();
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--journal"])
        .arg(dir.path().join("j.db"))
        .arg("--config")
        .arg(&config)
        .args(["--max-concurrent-turns", "2"])
        .args(["--model", "m", "--model-base-url", &model.base_url])
        .env("MODEL_API_KEY", "k")
        .stderr(Stdio::null());
    let daemon = Daemon::spawn(command, false);
    let addr = daemon.addr.clone();
    let turn = |text: &'static str| {
        let addr = addr.clone();
        tokio::spawn(async move {
            let mut client = Client::dial(&addr).unwrap();
            let options = ExecOptions {
                harness: "chat".into(),
                ..ExecOptions::new(text)
            };
            client.exec(options, |_| {}).await
        })
    };
    let first = turn("one");
    let second = turn("two");
    // Both model calls arrive: both turns hold a place.
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while model.requests() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "two turns should reach the model");

    let refused = turn("three").await.unwrap().unwrap_err();
    assert_eq!(code_of(&refused.error), tonic::Code::ResourceExhausted);
    assert!(
        refused.error.to_string().contains("max_concurrent_turns"),
        "{}",
        refused.error
    );
    assert_eq!(
        model.requests(),
        2,
        "a refused turn never reaches the model"
    );

    model.release_held();
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    // The places are free again.
    turn("four").await.unwrap().unwrap();
}

#[tokio::test]
async fn a_request_past_max_message_bytes_is_resource_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--journal"])
        .arg(dir.path().join("j.db"))
        .args(["--max-message-bytes", "65536"])
        .stderr(Stdio::null());
    let daemon = Daemon::spawn(command, false);
    let mut client = Client::dial(&daemon.addr).unwrap();
    let big = "x".repeat(100 * 1024);
    let refused = client
        .exec(ExecOptions::new(big), |_| {})
        .await
        .unwrap_err();
    assert_eq!(code_of(&refused.error), tonic::Code::ResourceExhausted);
    assert!(
        refused.error.to_string().contains("max_message_bytes"),
        "{}",
        refused.error
    );
    // Within the limit, the same daemon serves.
    client
        .exec(ExecOptions::new("small"), |_| {})
        .await
        .unwrap();
}

#[test]
fn a_zero_limit_is_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentsessionsd.toml");
    std::fs::write(&config, "[limits]\nmax_open_streams = 0\n").unwrap();
    let out = std::process::Command::new(DAEMON)
        .args(["--addr", "127.0.0.1:0", "--journal", ":memory:", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("max_open_streams"), "{stderr}");
}
