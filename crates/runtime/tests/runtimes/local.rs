//! semantics §10.2: the local runtime in in-process mode.

use std::sync::Arc;

use agentsessions_api::{
    ApiError, ComputeState, HarnessDialer, Runtime, SessionSpec, SnapshotKind, StatusCode,
};
use agentsessions_harnesses::EchoHarness;
use agentsessions_runtime::{LocalRuntime, WireDialer, conformance};

use crate::support::{RecordingSink, start};

fn spec(uid: &str) -> SessionSpec {
    SessionSpec {
        session_uid: uid.into(),
        ..SessionSpec::default()
    }
}

fn echo_runtime() -> LocalRuntime {
    LocalRuntime::in_process(Arc::new(EchoHarness::new()))
}

#[tokio::test]
async fn in_process_runtime_keeps_the_runtime_contract() {
    let runtime = echo_runtime();
    conformance::run_all(
        &runtime,
        &WireDialer::new(),
        "local",
        "echo",
        ComputeState::None,
    )
    .await;
    runtime.close().await;
}

// semantics §10.2: one lazily started server, shared by every session, on
// <tmpdir>/agentlocal-<pid>-<n>.sock; worker "<hostname>/<pid>".
#[tokio::test]
async fn sessions_share_one_lazily_started_server() {
    let runtime = echo_runtime();
    let a = runtime.create(&spec("a")).await.unwrap();
    let b = runtime.create(&spec("b")).await.unwrap();
    assert_eq!(a.address, b.address);
    let prefix = format!(
        "unix://{}/agentlocal-{}-",
        std::env::temp_dir().display(),
        std::process::id()
    );
    assert!(a.address.starts_with(&prefix), "{}", a.address);
    assert!(a.address.ends_with(".sock"), "{}", a.address);
    assert!(
        a.worker.ends_with(&format!("/{}", std::process::id())),
        "{}",
        a.worker
    );
    assert_eq!(a.runtime, "local");
    // Nothing is dedicated to a session: no incarnation outlives a turn.
    assert_eq!(runtime.status(&a).await.unwrap(), ComputeState::None);
    assert!(!runtime.describes_live_harness());
    assert_eq!(runtime.describe().await.unwrap().id, "echo");

    // Stop is a no-op for the shared server: the next turn still reaches it.
    runtime.stop(&a).await.unwrap();
    let harness = WireDialer::new().dial(&b).await.unwrap();
    let sink = RecordingSink::default();
    harness.run(&start("b", "hi"), &sink).await.unwrap();
    assert_eq!(sink.answers(), ["echo:hi"]);
    runtime.close().await;
}

// semantics §10.2: Close stops the server and removes the socket; a closed runtime stays closed.
#[tokio::test]
async fn close_stops_the_server_and_removes_the_socket() {
    let runtime = echo_runtime();
    let inc = runtime.create(&spec("s")).await.unwrap();
    let path = inc.address.strip_prefix("unix://").unwrap().to_owned();
    assert!(std::path::Path::new(&path).exists());
    runtime.close().await;
    assert!(!std::path::Path::new(&path).exists());
    match runtime.create(&spec("s")).await {
        Err(ApiError::Status { code, message }) => {
            assert_eq!(code, StatusCode::FailedPrecondition);
            assert!(message.contains("closed"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn dropping_the_runtime_removes_the_socket() {
    let runtime = echo_runtime();
    let inc = runtime.create(&spec("s")).await.unwrap();
    let path = inc.address.strip_prefix("unix://").unwrap().to_owned();
    drop(runtime);
    assert!(!std::path::Path::new(&path).exists());
}

// semantics §10.2: a stale socket file is removed before the server binds; a live one and a
// file that is not a socket are left alone and reported.
#[tokio::test]
async fn stale_socket_is_removed_and_live_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists(), "a dropped listener leaves its file");

    let runtime = LocalRuntime::in_process_at(Arc::new(EchoHarness::new()), &path);
    let inc = runtime.create(&spec("s")).await.unwrap();
    assert_eq!(inc.address, format!("unix://{}", path.display()));
    let harness = WireDialer::new().dial(&inc).await.unwrap();
    assert_eq!(harness.describe().await.unwrap().id, "echo");

    // The path is now live: a second runtime must not steal it.
    let thief = LocalRuntime::in_process_at(Arc::new(EchoHarness::new()), &path);
    let refused = thief.create(&spec("s")).await.unwrap_err();
    assert!(refused.to_string().contains("in use"), "{refused}");
    runtime.close().await;

    let file = dir.path().join("plain");
    std::fs::write(&file, b"data").unwrap();
    let runtime = LocalRuntime::in_process_at(Arc::new(EchoHarness::new()), &file);
    let refused = runtime.create(&spec("s")).await.unwrap_err();
    assert!(
        refused.to_string().contains("not a unix socket"),
        "{refused}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"data");
}

// semantics §10.2: Snapshot LOCAL is an error, EXTERNAL hands back the session for replay.
#[tokio::test]
async fn snapshot_kinds() {
    let runtime = echo_runtime();
    let inc = runtime.create(&spec("s")).await.unwrap();
    let local = runtime
        .snapshot(&inc, SnapshotKind::Local)
        .await
        .unwrap_err();
    assert!(local.to_string().contains("LOCAL"), "{local}");
    let external = runtime
        .snapshot(&inc, SnapshotKind::External)
        .await
        .unwrap();
    assert_eq!(external.local, "s");
    assert!(!external.memory);
    runtime.close().await;
}
