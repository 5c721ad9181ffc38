//! The local runtime's process mode: one supervised harnessnode per session.

use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{ComputeState, HarnessDialer, Runtime, SessionSpec, SnapshotKind};
use agentsessions_runtime::{
    HarnessnodeConfig, LocalRuntime, RuntimeError, WireDialer, conformance,
};
use tempfile::TempDir;

use crate::support::{BIN, RecordingSink, signal, start_frame, wait_gone, worker_pid};

fn runtime(harness: &str) -> (LocalRuntime, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = HarnessnodeConfig::new(harness)
        .program(BIN)
        .socket_dir(dir.path());
    (LocalRuntime::processes(config).unwrap(), dir)
}

fn spec(uid: &str) -> SessionSpec {
    SessionSpec {
        session_uid: uid.into(),
        ..SessionSpec::default()
    }
}

#[tokio::test]
async fn process_runtime_keeps_the_runtime_contract() {
    let (runtime, _dir) = runtime("echo");
    // A session's process is its own and outlives a turn.
    conformance::run_all(
        &runtime,
        &WireDialer::new(),
        "local",
        "echo",
        ComputeState::Live,
    )
    .await;
    runtime.close().await;
}

// docs/security.md, "What a child process gets": a harness process starts with a cleared
// environment plus the allowlist, its passthrough names and its table. This test process has
// CARGO_* variables of its own; none of them may reach the harness.
#[tokio::test]
async fn a_harness_process_gets_a_cleared_environment_and_what_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let config = HarnessnodeConfig::new("echo")
        .program(BIN)
        .socket_dir(dir.path())
        .env("HARNESS_SETTING", "from-the-table")
        .env_passthrough("CARGO_PKG_NAME");
    let runtime = LocalRuntime::processes(config).unwrap();
    let inc = runtime.create(&spec("env")).await.unwrap();
    let pid = worker_pid(&inc.worker);
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let mut names: Vec<String> = environ
        .split(|b| *b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| String::from_utf8_lossy(entry).into_owned())
        .collect();
    names.sort();
    assert!(
        names.contains(&"HARNESS_SETTING=from-the-table".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&format!("CARGO_PKG_NAME={}", env!("CARGO_PKG_NAME"))),
        "{names:?}"
    );
    let allowed = |entry: &String| {
        let name = entry.split('=').next().unwrap_or_default();
        agentsessions_api::DEFAULT_ENV_ALLOWLIST.contains(&name)
            || name.starts_with("LC_")
            || name == "HARNESS_SETTING"
            || name == "CARGO_PKG_NAME"
    };
    let leaked: Vec<_> = names.iter().filter(|entry| !allowed(entry)).collect();
    assert!(leaked.is_empty(), "inherited from the host: {leaked:?}");
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    runtime.close().await;
}

// Create runs on every exec: it reuses the session's live process; sessions do not share one.
#[tokio::test]
async fn create_is_idempotent_and_each_session_has_its_own_process() {
    let (runtime, dir) = runtime("echo");
    let a1 = runtime.create(&spec("a")).await.unwrap();
    let a2 = runtime.create(&spec("a")).await.unwrap();
    let b = runtime.create(&spec("b")).await.unwrap();
    assert_eq!(a1, a2);
    assert_ne!(a1.worker, b.worker);
    assert_ne!(a1.address, b.address);
    assert!(
        a1.address
            .starts_with(&format!("unix://{}/agentlocal-", dir.path().display()))
    );
    assert_eq!(runtime.process_id("a").await, Some(worker_pid(&a1.worker)));
    assert!(!runtime.describes_live_harness());
    runtime.close().await;
}

// A harness process killed mid-turn fails that turn; the next create starts another on the
// same address, and the dialer's cached channel reaches it.
#[tokio::test]
async fn a_process_killed_mid_turn_is_replaced_on_the_next_create() {
    let (runtime, _dir) = runtime("echo");
    let dialer = WireDialer::new();
    let first = runtime.create(&spec("s")).await.unwrap();
    let pid = worker_pid(&first.worker);

    let harness = dialer.dial(&first).await.unwrap();
    let sink = Arc::new(RecordingSink::holding_models());
    let turn = {
        let sink = Arc::clone(&sink);
        tokio::spawn(async move { harness.run(&start_frame("s", "one"), sink.as_ref()).await })
    };
    sink.entered().await;
    signal(pid, "KILL");
    wait_gone(pid).await;
    // The host's model call completes only now; the harness is no longer there to take it.
    sink.release();
    let failed = tokio::time::timeout(Duration::from_secs(10), turn)
        .await
        .unwrap()
        .unwrap();
    assert!(failed.is_err(), "the interrupted turn fails");
    // /proc shows the leader as a zombie while its other threads still exit; the process can be
    // reaped (and so is seen gone by the runtime) only after the last one ends.
    for _ in 0..500 {
        if runtime.process_id("s").await.is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        runtime.process_id("s").await,
        None,
        "the runtime sees the process gone"
    );

    let second = runtime.create(&spec("s")).await.unwrap();
    assert_ne!(worker_pid(&second.worker), pid);
    assert_eq!(second.address, first.address);
    let harness = dialer.dial(&second).await.unwrap();
    let sink = RecordingSink::default();
    harness.run(&start_frame("s", "two"), &sink).await.unwrap();
    assert_eq!(sink.model_requests().len(), 1);
    runtime.close().await;
}

// Stop terminates the session's process; snapshot EXTERNAL (suspend) releases it too.
#[tokio::test]
async fn stop_and_suspend_release_the_process() {
    let (runtime, _dir) = runtime("echo");
    let inc = runtime.create(&spec("s")).await.unwrap();
    let socket = inc.address.strip_prefix("unix://").unwrap().to_owned();
    runtime.stop(&inc).await.unwrap();
    wait_gone(worker_pid(&inc.worker)).await;
    assert!(!std::path::Path::new(&socket).exists());
    assert_eq!(runtime.status(&inc).await.unwrap(), ComputeState::None);

    let inc = runtime.create(&spec("s")).await.unwrap();
    assert_eq!(runtime.status(&inc).await.unwrap(), ComputeState::Live);
    let snapshot = runtime
        .snapshot(&inc, SnapshotKind::External)
        .await
        .unwrap();
    assert_eq!(snapshot.local, "s");
    assert!(!snapshot.memory);
    wait_gone(worker_pid(&inc.worker)).await;
    let restored = runtime.restore(&snapshot).await.unwrap();
    assert_eq!(runtime.status(&restored).await.unwrap(), ComputeState::Live);
    runtime.close().await;
}

// No orphans: dropping the runtime kills every harness process and removes the sockets.
#[tokio::test]
async fn dropping_the_runtime_leaves_no_process_behind() {
    let (runtime, dir) = runtime("echo");
    let a = runtime.create(&spec("a")).await.unwrap();
    let b = runtime.create(&spec("b")).await.unwrap();
    drop(runtime);
    wait_gone(worker_pid(&a.worker)).await;
    wait_gone(worker_pid(&b.worker)).await;
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn describe_asks_a_short_lived_process_once() {
    let (runtime, dir) = runtime("counter");
    let descriptor = runtime.describe().await.unwrap();
    assert_eq!(descriptor.id, "counter");
    assert!(
        descriptor
            .capabilities
            .resumability
            .requires_memory_snapshot()
    );
    assert_eq!(runtime.describe().await.unwrap(), descriptor);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // Placement refuses it here: this runtime takes no memory snapshots.
    assert!(!descriptor.capabilities.can_place_on(runtime.capabilities()));
}

#[tokio::test]
async fn misconfiguration_is_reported_clearly() {
    let missing = HarnessnodeConfig::new("echo").program("/nonexistent/harnessnode");
    match LocalRuntime::processes(missing) {
        Err(RuntimeError::HarnessnodeNotFound { looked_at }) => {
            assert!(
                looked_at.contains("/nonexistent/harnessnode"),
                "{looked_at}"
            );
        }
        other => panic!("{other:?}"),
    }

    // chat without a model: the process refuses to start, and create says so.
    let (runtime, _dir) = runtime("chat");
    let err = runtime.create(&spec("s")).await.unwrap_err();
    assert!(err.to_string().contains("exited"), "{err}");
}
