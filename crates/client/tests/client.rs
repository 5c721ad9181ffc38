//! The SDK against a real server on 127.0.0.1.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::sync::Arc;

use agentsessions_api::RuntimeCapabilities;
use agentsessions_client::{Client, ExecEvent, ExecOptions, ForkOptions, uid_of, verify};
use agentsessions_harnesses::EchoHarness;
use agentsessions_journal::SqliteJournal;
use agentsessions_model::EchoModel;
use agentsessions_server::{ServerBuilder, serve_tcp};
use agentsessions_wire::pb;

async fn start(dir: &tempfile::TempDir) -> Client {
    let journal = Arc::new(SqliteJournal::open(dir.path().join("j.db")).unwrap());
    let service = ServerBuilder::new(journal, Arc::new(EchoModel::new()))
        .harness(
            "echo",
            Arc::new(EchoHarness::new()),
            RuntimeCapabilities::default(),
        )
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_tcp(listener, service, std::future::pending()));
    Client::dial(&addr.to_string()).unwrap()
}

#[tokio::test]
async fn exec_replay_verify_fork_and_list() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = start(&dir).await;
    let mut seen = Vec::new();
    let turn = client
        .exec(ExecOptions::new("hello"), |event| {
            seen.push(match event {
                ExecEvent::Session(_) => "session",
                ExecEvent::Record(_) => "record",
                ExecEvent::Delta(_) => "delta",
            });
        })
        .await
        .unwrap();
    let uid = turn.session_uid();
    assert_eq!(seen.first(), Some(&"session"));
    assert_eq!(turn.records.len(), 5);
    assert_eq!(turn.last_seq, 5);
    assert!(turn.output.contains("hello"), "{}", turn.output);

    let second = client
        .exec(
            ExecOptions {
                expected_last_seq: Some(5),
                ..ExecOptions::new("again").on(&uid)
            },
            |_| {},
        )
        .await
        .unwrap();
    assert_eq!(second.last_seq, 10);

    let records = client.replay(&uid, 0, 0).await.unwrap();
    assert_eq!(verify(&records).unwrap().records, 10);
    // A changed byte is caught, at its seq.
    let mut tampered = records.clone();
    if let Some(pb::event::Body::Message(m)) = tampered[3].event.as_mut().unwrap().body.as_mut() {
        m.role = "someone-else".into();
    }
    let fault = verify(&tampered).unwrap_err().to_string();
    assert!(fault.contains("record 4"), "{fault}");

    let children = client
        .fork(
            &uid,
            ForkOptions {
                at_seq: 5,
                count: 2,
                ..ForkOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(children.len(), 2);
    let all = client.list(1).await.unwrap();
    assert_eq!(all.len(), 3);
    assert!(all.iter().any(|s| uid_of(s) == uid));

    let stale = client
        .exec(
            ExecOptions {
                expected_last_seq: Some(1),
                ..ExecOptions::new("late").on(&uid)
            },
            |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(stale.error.code(), tonic::Code::Aborted);
    assert_eq!(
        stale.partial.session_uid(),
        uid,
        "the partial result names the session"
    );
}
