//! semantics §10.3: the remote runtime, and the dialer's call metadata.

use std::sync::{Arc, Mutex};

use agentsessions_api::{
    ApiError, ComputeState, HarnessDialer, Incarnation, Runtime, SessionSpec, StatusCode,
};
use agentsessions_harnesses::EchoHarness;
use agentsessions_harnesswire::{HarnessService, serve_tcp_listener};
use agentsessions_runtime::{RemoteRuntime, RuntimeError, WireDialer, conformance};
use agentsessions_wire::pb::harness_server::HarnessServer;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_stream::wrappers::TcpListenerStream;

use crate::support::{RecordingSink, start};

/// Serves the echo harness on 127.0.0.1:0; returns the address and the stop switch.
async fn serve_echo() -> (String, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve_tcp_listener(
        listener,
        Arc::new(EchoHarness::new()),
        async {
            let _ = stopped.await;
        },
    ));
    (address, stop)
}

#[tokio::test]
async fn remote_runtime_keeps_the_runtime_contract() {
    let (address, _stop) = serve_echo().await;
    let runtime = RemoteRuntime::new(&address).unwrap();
    conformance::run_all(
        &runtime,
        &WireDialer::new(),
        "remote",
        "echo",
        ComputeState::None,
    )
    .await;
    let inc = runtime
        .create(&SessionSpec {
            session_uid: "s".into(),
            ..SessionSpec::default()
        })
        .await
        .unwrap();
    assert_eq!(inc.address, address);
    assert!(runtime.describes_live_harness());
    assert_eq!(runtime.describe().await.unwrap().id, "echo");
    // Describe again on the same connection.
    assert_eq!(runtime.describe().await.unwrap().version, "1");
}

// semantics §10.3: Describe errors name the address and keep the gRPC status.
#[tokio::test]
async fn describe_errors_name_the_address_and_keep_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("unix://{}", dir.path().join("nobody.sock").display());
    // Port 1 on loopback: nothing listens there in a test environment.
    for address in ["127.0.0.1:1", missing.as_str()] {
        let runtime = RemoteRuntime::new(address).unwrap();
        let err = runtime.describe().await.unwrap_err();
        match &err {
            RuntimeError::Describe {
                address: named,
                code,
                ..
            } => {
                assert_eq!(named, address);
                assert_eq!(*code, StatusCode::Unavailable, "{err}");
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains(address), "{err}");
        match ApiError::from(err) {
            ApiError::Status { code, message } => {
                assert_eq!(code, StatusCode::Unavailable);
                assert!(message.contains(address), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn bad_addresses_are_refused_at_construction() {
    for bad in ["http://127.0.0.1:80", "127.0.0.1", "unix:", "dns:9000"] {
        assert!(
            matches!(
                RemoteRuntime::new(bad),
                Err(RuntimeError::InvalidAddress { .. })
            ),
            "{bad}"
        );
    }
}

// semantics §10.3: a closed backend stays closed; stop never stops the shared harness.
#[tokio::test]
async fn a_closed_remote_runtime_stays_closed() {
    let (address, _stop) = serve_echo().await;
    let runtime = RemoteRuntime::new(&address).unwrap();
    let spec = SessionSpec {
        session_uid: "s".into(),
        ..SessionSpec::default()
    };
    let inc = runtime.create(&spec).await.unwrap();
    runtime.stop(&inc).await.unwrap();
    let harness = WireDialer::new().dial(&inc).await.unwrap();
    harness
        .run(&start("s", "still here"), &RecordingSink::default())
        .await
        .unwrap();

    runtime.close();
    assert!(matches!(
        runtime.describe().await,
        Err(RuntimeError::Closed { .. })
    ));
    let err = runtime.create(&spec).await.unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
}

// api HarnessDialer: the incarnation's call metadata travels with Describe and Connect.
#[tokio::test]
async fn call_metadata_reaches_the_harness_server() {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = Arc::clone(&seen);
    let service = HarnessServer::with_interceptor(
        HarnessService::new(Arc::new(EchoHarness::new())),
        move |request: tonic::Request<()>| {
            let route = request
                .metadata()
                .get("x-sandbox")
                .and_then(|value| value.to_str().ok())
                .unwrap_or("")
                .to_owned();
            record.lock().unwrap().push(route);
            Ok(request)
        },
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                let _ = stopped.await;
            }),
    );

    let incarnation = Incarnation {
        id: "s".into(),
        address,
        call_metadata: [("X-Sandbox".to_owned(), "sandbox-7".to_owned())].into(),
        ..Incarnation::default()
    };
    let harness = WireDialer::new().dial(&incarnation).await.unwrap();
    assert_eq!(harness.describe().await.unwrap().id, "echo");
    let sink = RecordingSink::default();
    harness.run(&start("s", "routed"), &sink).await.unwrap();
    assert_eq!(sink.answers(), ["echo:routed"]);
    assert_eq!(*seen.lock().unwrap(), ["sandbox-7", "sandbox-7"]);

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
