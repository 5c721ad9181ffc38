//! Sessions over gRPC on routes placed through the Runtime SPI: a memory-snapshot test runtime
//! (suspend, resume, fork at the head) and a memory harness refused on compute without
//! snapshots, with nothing journaled.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod fixtures;
#[path = "../../placement/tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentsessions_api::{Message, Runtime};
use agentsessions_journal::{Journal, MemoryJournal};
use agentsessions_model::EchoModel;
use agentsessions_placement::DescriptorSource;
use agentsessions_server::{ServerBuilder, serve_tcp};
use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_client::SessionsClient;
use fixtures::uid_of;
use support::{InMemoryTestRuntime, Probe, TestDialer};
use tokio::net::TcpListener;
use tonic::Code;
use tonic::transport::Channel;

async fn start(
    journal: &Arc<dyn Journal>,
    memory: &Arc<InMemoryTestRuntime>,
    flat: &Arc<InMemoryTestRuntime>,
) -> SessionsClient<Channel> {
    let dialer = |runtime: &Arc<InMemoryTestRuntime>| {
        Arc::new(TestDialer {
            runtime: Arc::clone(runtime),
        })
    };
    let service = ServerBuilder::new(Arc::clone(journal), Arc::new(EchoModel::new()))
        .runtime_harness(
            "vm",
            Arc::clone(memory) as Arc<dyn Runtime>,
            dialer(memory),
            DescriptorSource::Declared(Probe::descriptor(true)),
        )
        .runtime_harness(
            "flat",
            Arc::clone(flat) as Arc<dyn Runtime>,
            dialer(flat),
            DescriptorSource::Declared(Probe::descriptor(true)),
        )
        .default_harness("vm")
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_tcp(listener, service, std::future::pending()));
    SessionsClient::new(agentsessions_harnesswire::channel(&addr.to_string()).unwrap())
}

async fn turn(client: &mut SessionsClient<Channel>, uid: &str) -> Result<String, tonic::Status> {
    let mut stream = client
        .exec(pb::ExecRequest {
            session: uid.into(),
            inputs: vec![pb::Message::from(Message::text_message("user", "go"))],
            ..pb::ExecRequest::default()
        })
        .await?
        .into_inner();
    let mut uid = String::new();
    while let Some(update) = stream.message().await? {
        if let Some(pb::exec_update::Update::Session(s)) = update.update {
            uid = uid_of(&s);
        }
    }
    Ok(uid)
}

// semantics §4.2–§4.4 over the wire: suspend and resume keep a memory harness's state; a fork at
// the head takes one checkpoint and every child continues from it.
#[tokio::test]
async fn memory_route_suspends_resumes_and_forks_over_grpc() {
    let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
    let memory = Arc::new(InMemoryTestRuntime::new(true, true));
    let flat = Arc::new(InMemoryTestRuntime::new(false, true));
    let mut client = start(&journal, &memory, &flat).await;
    let uid = turn(&mut client, "").await.unwrap();
    turn(&mut client, &uid).await.unwrap();
    let suspended = client
        .suspend(pb::SuspendRequest {
            session: uid.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        suspended.compute_state,
        pb::ComputeState::ComputeCold as i32
    );
    let resumed = client
        .resume(pb::ResumeRequest {
            session: uid.clone(),
            ..pb::ResumeRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resumed.compute_state, pb::ComputeState::ComputeLive as i32);
    let forked = client
        .fork(pb::ForkRequest {
            session: uid.clone(),
            count: 2,
            ..pb::ForkRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(forked.children.len(), 2);
    assert_eq!(memory.counts().1, 2, "one suspend, one fork checkpoint");
    for child in &forked.children {
        turn(&mut client, &uid_of(child)).await.unwrap();
        let probe = memory.probe(&uid_of(child)).unwrap();
        assert_eq!(probe.count.load(Ordering::SeqCst), 3);
        assert_eq!(*probe.histories.lock().unwrap(), vec![0], "I4: no history");
    }
    // A historical fork of a memory session is refused.
    let err = client
        .fork(pb::ForkRequest {
            session: uid.clone(),
            at_seq: 1,
            ..pb::ForkRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
}

// semantics §4.1: a REQUIRES_MEMORY_SNAPSHOT harness on compute without memory snapshots is
// FAILED_PRECONDITION before any compute or journal write.
#[tokio::test]
async fn memory_harness_without_snapshots_is_refused_before_any_write() {
    let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
    let memory = Arc::new(InMemoryTestRuntime::new(true, true));
    let flat = Arc::new(InMemoryTestRuntime::new(false, true));
    let mut client = start(&journal, &memory, &flat).await;
    let session = client
        .create_session(pb::CreateSessionRequest {
            session: Some(pb::Session {
                harness: "flat".into(),
                ..pb::Session::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let err = turn(&mut client, &uid_of(&session)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("memory snapshots"),
        "{}",
        err.message()
    );
    assert_eq!(flat.counts(), (0, 0, 0, 0));
    let info = journal.session_info(&uid_of(&session)).await.unwrap();
    assert_eq!((info.last_seq, info.fence), (0, 0));
}

// extensions §3: DeleteSession records the intent and marks the session pending in one commit,
// then releases its compute and snapshots at once; the session stays readable, refuses effects,
// and its fork children keep working.
#[tokio::test]
async fn delete_releases_compute_and_snapshots_and_keeps_the_record() {
    let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
    let memory = Arc::new(InMemoryTestRuntime::new(true, true));
    let flat = Arc::new(InMemoryTestRuntime::new(false, true));
    let mut client = start(&journal, &memory, &flat).await;
    let uid = turn(&mut client, "").await.unwrap();
    let child = client
        .fork(pb::ForkRequest {
            session: uid.clone(),
            count: 1,
            ..pb::ForkRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .children
        .remove(0);
    assert_eq!(memory.checkpoints_of(&uid), 1, "the fork checkpoint");
    let deleted = client
        .delete_session(pb::DeleteSessionRequest { uid: uid.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        deleted.deletion_state,
        pb::DeletionState::DeletionPending as i32
    );
    let mut reclaimed = false;
    for _ in 0..200 {
        if journal
            .session_info(&uid)
            .await
            .unwrap()
            .reclaimed_at
            .is_some()
        {
            reclaimed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(reclaimed, "reclaimed right after the delete");
    assert!(memory.probe(&uid).is_none(), "compute stopped");
    assert_eq!(memory.checkpoints_of(&uid), 0, "snapshots released");
    let shown = client
        .get_session(pb::GetSessionRequest { uid: uid.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        shown.deletion_state,
        pb::DeletionState::DeletionPending as i32
    );
    let refused = turn(&mut client, &uid).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);
    // The child forked before the delete has its own compute and goes on.
    turn(&mut client, &uid_of(&child)).await.unwrap();
}
