//! Overload limits (bounded admission): turns and streams past their limit are refused at once with
//! RESOURCE_EXHAUSTED naming the setting, nothing is written for a refused turn, and a freed
//! place is admitted again. Over gRPC, a request past `max_message_bytes` is RESOURCE_EXHAUSTED
//! too (tonic alone says OUT_OF_RANGE).
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod fixtures;

use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{Descriptor, EventSink, Harness, Message, RuntimeCapabilities, Start};
use agentsessions_journal::{ListQuery, MemoryJournal};
use agentsessions_model::EchoModel;
use agentsessions_server::{Limits, ServerBuilder, SessionsService};
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use agentsessions_wire::pb::sessions_client::SessionsClient;
use agentsessions_wire::pb::sessions_server::Sessions;
use tokio::sync::Semaphore;
use tokio_stream::StreamExt;
use tonic::{Code, Request};

use agentsessions_journal::{Catalog as _, Log as _};
use fixtures::{descriptor, uid_of};

/// Holds every turn until the test adds permits: turns stay in flight as long as it likes.
#[derive(Debug)]
struct Held(Arc<Semaphore>);

#[async_trait::async_trait]
impl Harness for Held {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Ok(descriptor("held"))
    }

    async fn run(&self, _start: &Start, sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        let permit = self.0.acquire().await;
        drop(permit);
        sink.output("released".into()).await
    }
}

fn service(journal: Arc<MemoryJournal>, gate: &Arc<Semaphore>, limits: Limits) -> SessionsService {
    ServerBuilder::new(journal, Arc::new(EchoModel::new()))
        .harness(
            "held",
            Arc::new(Held(Arc::clone(gate))),
            RuntimeCapabilities::default(),
        )
        .limits(limits)
        .build()
        .unwrap()
}

fn exec_request(session: &str) -> pb::ExecRequest {
    pb::ExecRequest {
        session: session.into(),
        inputs: vec![pb::Message::from(Message::text_message("user", "go"))],
        ..pb::ExecRequest::default()
    }
}

async fn create(service: &SessionsService) -> String {
    let session = service
        .create_session(Request::new(pb::CreateSessionRequest::default()))
        .await
        .unwrap()
        .into_inner();
    uid_of(&session)
}

async fn session_count(journal: &MemoryJournal) -> usize {
    journal
        .list_sessions(ListQuery {
            project: "default".into(),
            page_size: 1_000,
            ..ListQuery::default()
        })
        .await
        .unwrap()
        .sessions
        .len()
}

#[tokio::test]
async fn turns_past_max_concurrent_turns_are_refused_and_a_freed_place_is_admitted() {
    let journal = Arc::new(MemoryJournal::new());
    let gate = Arc::new(Semaphore::new(0));
    let limits = Limits {
        max_concurrent_turns: 2,
        ..Limits::default()
    };
    let service = service(Arc::clone(&journal), &gate, limits);
    let sessions = [
        create(&service).await,
        create(&service).await,
        create(&service).await,
    ];
    let mut running = Vec::new();
    for uid in &sessions[..2] {
        let mut stream = service
            .exec(Request::new(exec_request(uid)))
            .await
            .unwrap()
            .into_inner();
        // The session frame: the turn is admitted and running.
        let first = stream.next().await.unwrap().unwrap();
        assert!(matches!(first.update, Some(Update::Session(_))));
        running.push(stream);
    }
    let third = &sessions[2];
    let refused = service
        .exec(Request::new(exec_request(third)))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("max_concurrent_turns"),
        "{refused:?}"
    );
    // Nothing of the refused turn reached the journal, and an auto-create is refused before
    // it creates a session.
    assert_eq!(journal.head(third).await.unwrap(), 0);
    let before = session_count(&journal).await;
    let refused = service
        .exec(Request::new(exec_request("")))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(session_count(&journal).await, before);

    // The held turns finish; their places are free again.
    gate.add_permits(2);
    for mut stream in running {
        while let Some(item) = stream.next().await {
            item.unwrap();
        }
    }
    let mut admitted = None;
    for _ in 0..100 {
        match service.exec(Request::new(exec_request(third))).await {
            Ok(stream) => {
                admitted = Some(stream.into_inner());
                break;
            }
            Err(status) if status.code() == Code::ResourceExhausted => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(status) => panic!("{status:?}"),
        }
    }
    let mut stream = admitted.expect("a freed place admits the next turn");
    gate.add_permits(1);
    while let Some(item) = stream.next().await {
        item.unwrap();
    }
    assert!(journal.head(third).await.unwrap() > 0);
}

#[tokio::test]
async fn streams_past_max_open_streams_are_refused_until_one_closes() {
    let journal = Arc::new(MemoryJournal::new());
    let gate = Arc::new(Semaphore::new(0));
    let limits = Limits {
        max_open_streams: 2,
        ..Limits::default()
    };
    let service = service(Arc::clone(&journal), &gate, limits);
    let uid = create(&service).await;
    let watch = || pb::WatchRequest {
        session: uid.clone(),
        ..pb::WatchRequest::default()
    };
    let first = service.watch(Request::new(watch())).await.unwrap();
    let _second = service.watch(Request::new(watch())).await.unwrap();
    let refused = service.watch(Request::new(watch())).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        refused.message().contains("max_open_streams"),
        "{refused:?}"
    );
    let replay = pb::ReplayRequest {
        session: uid.clone(),
        ..pb::ReplayRequest::default()
    };
    let refused = service
        .replay(Request::new(replay.clone()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    // An Exec holds a stream too.
    let refused = service
        .exec(Request::new(exec_request(&uid)))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        refused.message().contains("max_open_streams"),
        "{refused:?}"
    );

    // The client of the first Watch goes away: its place is freed once the server notices.
    drop(first);
    let mut reopened = false;
    for _ in 0..100 {
        match service.replay(Request::new(replay.clone())).await {
            Ok(_) => {
                reopened = true;
                break;
            }
            Err(status) if status.code() == Code::ResourceExhausted => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(status) => panic!("{status:?}"),
        }
    }
    assert!(reopened, "a closed stream's place is admitted again");
}

#[test]
fn a_zero_limit_is_refused_when_the_service_is_built() {
    let gate = Arc::new(Semaphore::new(0));
    let built = ServerBuilder::new(Arc::new(MemoryJournal::new()), Arc::new(EchoModel::new()))
        .harness("held", Arc::new(Held(gate)), RuntimeCapabilities::default())
        .limits(Limits {
            max_concurrent_turns: 0,
            ..Limits::default()
        })
        .build();
    let err = built.unwrap_err();
    assert!(err.to_string().contains("max_concurrent_turns"), "{err}");
}

#[tokio::test]
async fn a_request_past_max_message_bytes_is_resource_exhausted_over_grpc() {
    let gate = Arc::new(Semaphore::new(0));
    let limits = Limits {
        max_message_bytes: 4 * 1024,
        ..Limits::default()
    };
    let service = service(Arc::new(MemoryJournal::new()), &gate, limits);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let server = tokio::spawn(agentsessions_server::serve_tcp(
        listener,
        service,
        async move { stopped.cancelled().await },
    ));
    let channel = agentsessions_harnesswire::channel(&addr.to_string()).unwrap();
    let mut client = SessionsClient::new(channel);
    let big = pb::CreateSessionRequest {
        session: Some(pb::Session {
            metadata: Some(pb::ResourceMetadata {
                name: "x".repeat(8 * 1024),
                ..pb::ResourceMetadata::default()
            }),
            ..pb::Session::default()
        }),
    };
    let refused = client.create_session(big).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("max_message_bytes"),
        "{refused:?}"
    );
    // A request within the limit is served.
    client
        .create_session(pb::CreateSessionRequest::default())
        .await
        .unwrap();
    stop.cancel();
    server.await.unwrap().unwrap();
}
