//! `exec_state` tells the truth about the last turn: each state derived from the log's tail,
//! through GetSession over real gRPC on 127.0.0.1.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::sync::Arc;

use agentsessions_api::{
    ErrorInfo, Event, EventBody, EventKind, ExecutionStart, HarnessEnd, Lifecycle, LifecycleKind,
    Message, RuntimeCapabilities, Usage,
};
use agentsessions_harnesses::EchoHarness;
use agentsessions_journal::Journal;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _};
use agentsessions_model::EchoModel;
use agentsessions_server::{ServerBuilder, serve_tcp};
use agentsessions_sqlite::SqliteJournal;
use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_client::SessionsClient;
use tokio::net::TcpListener;
use tonic::transport::Channel;

struct Server {
    client: SessionsClient<Channel>,
    journal: Arc<dyn Journal>,
    _dir: tempfile::TempDir,
}

async fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let journal: Arc<dyn Journal> =
        Arc::new(SqliteJournal::open(dir.path().join("journal.db")).unwrap());
    let service = ServerBuilder::new(Arc::clone(&journal), Arc::new(EchoModel::new()))
        .harness(
            "echo",
            Arc::new(EchoHarness::new()),
            RuntimeCapabilities::default(),
        )
        .default_harness("echo")
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_tcp(listener, service, std::future::pending()));
    let client =
        SessionsClient::new(agentsessions_harnesswire::channel(&addr.to_string()).unwrap());
    Server {
        client,
        journal,
        _dir: dir,
    }
}

fn start_event() -> Event {
    Event::new(
        EventKind::ExecutionStart,
        EventBody::ExecutionStart(ExecutionStart {
            input_count: Some(1),
            harness: "echo".into(),
            ..ExecutionStart::default()
        }),
    )
    .with_execution("exec-1")
}

fn input() -> Event {
    Event::new(
        EventKind::Input,
        EventBody::Message(Message::text_message("user", "hi")),
    )
    .with_execution("exec-1")
}

fn end(state: &str) -> Event {
    Event::new(
        EventKind::End,
        EventBody::End(HarnessEnd {
            state: state.into(),
            error: None,
        }),
    )
    .with_execution("exec-1")
}

fn error() -> Event {
    Event::new(
        EventKind::Error,
        EventBody::Error(ErrorInfo {
            code: 13,
            description: "model went away".into(),
        }),
    )
    .with_execution("exec-1")
}

fn usage() -> Event {
    Event::new(
        EventKind::Usage,
        EventBody::Usage(Usage {
            model: "m".into(),
            input_tokens: 3,
            output_tokens: 4,
            reasoning_tokens: 0,
            cached_input_tokens: 0,
        }),
    )
    .with_execution("exec-1")
}

fn suspend() -> Event {
    Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind: LifecycleKind::Suspend,
            ..Lifecycle::default()
        }),
    )
}

/// The state GetSession reports for a session whose log is `events`.
async fn state_after(server: &mut Server, events: Vec<Event>) -> pb::ExecState {
    let created = server
        .client
        .create_session(pb::CreateSessionRequest {
            session: Some(pb::Session::default()),
        })
        .await
        .unwrap()
        .into_inner();
    let uid = created.metadata.unwrap().uid;
    if !events.is_empty() {
        let fence = server.journal.new_fence(&uid).await.unwrap();
        server
            .journal
            .append_records(AppendRequest::new(&uid, 0, FenceUse::Hold(fence), events))
            .await
            .unwrap();
    }
    server
        .client
        .get_session(pb::GetSessionRequest { uid })
        .await
        .unwrap()
        .into_inner()
        .exec_state()
}

// semantics §1.7 (extension): exec_state is derived from the tail of the log, never COMPLETED for
// a turn that did not end.
#[tokio::test]
async fn exec_state_says_how_the_last_turn_stands() {
    let mut s = start().await;
    let cases = [
        (vec![], pb::ExecState::ExecPending),
        (
            vec![start_event(), input(), end("COMPLETED")],
            pb::ExecState::ExecCompleted,
        ),
        (
            vec![start_event(), input(), end("FAILED")],
            pb::ExecState::ExecFailed,
        ),
        (
            vec![start_event(), input(), end("CANCELED")],
            pb::ExecState::ExecCanceled,
        ),
        (
            vec![start_event(), input(), error()],
            pb::ExecState::ExecInterrupted,
        ),
        (
            vec![start_event(), input(), usage()],
            pb::ExecState::ExecInterrupted,
        ),
        (vec![start_event()], pb::ExecState::ExecInterrupted),
        (
            vec![start_event(), input(), end("COMPLETED"), suspend()],
            pb::ExecState::ExecCompleted,
        ),
        (vec![suspend()], pb::ExecState::ExecPending),
        (
            vec![start_event(), input(), end("SOMETHING_NEW")],
            pb::ExecState::ExecFailed,
        ),
    ];
    for (events, want) in cases {
        let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
        assert_eq!(state_after(&mut s, events).await, want, "{kinds:?}");
    }
}

// semantics §1.7 (extension): a long run of lifecycle records after the last turn still finds it.
#[tokio::test]
async fn exec_state_looks_past_lifecycle_records() {
    let mut s = start().await;
    let mut events = vec![start_event(), input(), end("FAILED")];
    events.extend((0..12).map(|_| suspend()));
    assert_eq!(state_after(&mut s, events).await, pb::ExecState::ExecFailed);
}

// extensions §7 (usage totals, commit times): GetSession shows the session's USAGE records summed,
// and Replay returns each record with the time it was committed.
#[tokio::test]
async fn usage_totals_and_commit_times_reach_the_wire() {
    let mut s = start().await;
    let created = s
        .client
        .create_session(pb::CreateSessionRequest {
            session: Some(pb::Session::default()),
        })
        .await
        .unwrap()
        .into_inner();
    let uid = created.metadata.unwrap().uid;
    assert_eq!(created.usage, None, "nothing counted yet");
    let fence = s.journal.new_fence(&uid).await.unwrap();
    s.journal
        .append_records(AppendRequest::new(
            &uid,
            0,
            FenceUse::Hold(fence),
            vec![start_event(), input(), usage(), usage()],
        ))
        .await
        .unwrap();
    let session = s
        .client
        .get_session(pb::GetSessionRequest { uid: uid.clone() })
        .await
        .unwrap()
        .into_inner();
    let usage = session.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (6, 8));
    let mut stream = s
        .client
        .replay(pb::ReplayRequest {
            session: uid,
            ..pb::ReplayRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut records = 0;
    while let Some(record) = stream.message().await.unwrap() {
        assert!(record.commit_time.is_some(), "seq {}", record.seq);
        records += 1;
    }
    assert_eq!(records, 4);
}
