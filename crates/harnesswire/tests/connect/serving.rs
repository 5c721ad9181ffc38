//! Describe, request ids and the serving helpers (TCP, unix socket, health).

use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{ApiError, Harness, StatusCode};
use agentsessions_harnesses::{ChatHarness, CounterHarness, EchoHarness};
use agentsessions_harnesswire::{RemoteHarness, serve_unix, with_request_id};
use tokio::sync::oneshot;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::support::{Blocker, RawPeer, Scripted, ScriptedSink, TestServer, serve_raw, start};

// semantics §9.1: Describe returns the harness's descriptor unchanged.
#[tokio::test]
async fn describe_round_trips() {
    let harnesses: Vec<Arc<dyn Harness>> = vec![
        Arc::new(EchoHarness),
        Arc::new(CounterHarness::new()),
        Arc::new(ChatHarness::new("gpt-test").unwrap()),
        Arc::new(Scripted::default()),
    ];
    for harness in harnesses {
        let server = TestServer::serve(Arc::clone(&harness)).await;
        assert_eq!(
            server.remote().describe().await.unwrap(),
            harness.describe().await.unwrap()
        );
    }
    assert_eq!(
        TestServer::serve(Arc::new(Scripted::default()))
            .await
            .remote()
            .describe()
            .await
            .unwrap(),
        Scripted::descriptor()
    );
}

// semantics §9.1: Describe is bounded; an unreachable harness is UNAVAILABLE.
#[tokio::test]
async fn describe_is_bounded_and_reports_unreachable_harnesses() {
    let hanging = serve_raw(RawPeer {
        events: Vec::new(),
        hang: true,
    })
    .await
    .with_describe_timeout(Duration::from_millis(200));
    let err = hanging.describe().await.unwrap_err();
    assert!(
        matches!(
            err,
            ApiError::Status {
                code: StatusCode::DeadlineExceeded | StatusCode::Cancelled,
                ..
            }
        ),
        "{err:?}"
    );

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let gone = RemoteHarness::connect_lazy(&addr.to_string()).unwrap();
    let err = gone.describe().await.unwrap_err();
    assert!(
        matches!(
            err,
            ApiError::Status {
                code: StatusCode::Unavailable,
                ..
            }
        ),
        "{err:?}"
    );
    let err = gone.run(&start(), &ScriptedSink::new()).await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
}

// ARCHITECTURE (one request id per RPC): the host's id in scope reaches the served harness on
// Describe and Connect; without one, a fresh id is sent.
#[tokio::test]
async fn the_request_id_is_propagated() {
    let blocker = Arc::new(Blocker::default());
    let server = TestServer::serve(Arc::clone(&blocker)).await;
    let remote = server.remote();
    with_request_id("req-42", remote.describe()).await.unwrap();
    let sink = ScriptedSink::new();
    let start = start();
    tokio::select! {
        result = with_request_id("req-43", remote.run(&start, &sink)) => {
            panic!("the blocker never ends: {result:?}")
        }
        () = sink.outputs.notified() => {}
    }
    remote.describe().await.unwrap();
    let ids = blocker.request_ids.lock().unwrap().clone();
    assert_eq!(ids[..2], [Some("req-42".into()), Some("req-43".into())]);
    let fresh = ids[2].clone().unwrap();
    assert_eq!(fresh.len(), 16);
}

// The serving helper on a unix socket: health reports SERVING for the server and the Harness
// service, a run works end to end, and the socket file is removed on shutdown.
#[tokio::test]
async fn serve_unix_serves_the_harness_and_health() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("harness.sock");
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve_unix(path.clone(), Arc::new(EchoHarness), async {
        let _ = stopped.await;
    }));
    let address = format!("unix://{}", path.display());
    // The socket exists once the helper has bound it.
    for _ in 0..200 {
        if path.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let channel = agentsessions_harnesswire::channel(&address).unwrap();
    let mut health = HealthClient::new(channel.clone());
    for service in ["", "agentsessions.v1.Harness"] {
        let response = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(response.status(), ServingStatus::Serving, "{service:?}");
    }
    let remote = RemoteHarness::new(channel);
    let sink = ScriptedSink::new();
    remote.run(&start(), &sink).await.unwrap();
    assert_eq!(sink.calls().len(), 1);
    assert_eq!(remote.describe().await.unwrap().id, "echo");

    // A second server cannot take a path that is in use.
    let taken = serve_unix(path.clone(), Arc::new(EchoHarness), async {}).await;
    assert!(
        matches!(
            taken,
            Err(agentsessions_harnesswire::HarnessWireError::Bind { .. })
        ),
        "{taken:?}"
    );

    drop(health);
    drop(remote);
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!path.exists());
}

// The TCP serving helper stops when its shutdown future completes.
#[tokio::test]
async fn serve_tcp_stops_on_shutdown() {
    let server = TestServer::serve(Arc::new(EchoHarness)).await;
    server.remote().describe().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server.stop())
        .await
        .unwrap();
}
