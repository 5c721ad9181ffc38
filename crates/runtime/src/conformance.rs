//! The runtime contract suite (semantics §10.1–10.3) for filesystem-only backends: every case
//! takes a fresh backend and panics on a breach. [`run_all`] runs them all; backends in other
//! crates use it through the `test-util` feature.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use agentsessions_api::{
    ApiError, ComputeState, ForkOpts, HarnessDialer, Runtime, RuntimeCapabilities, SessionSpec,
    SnapshotKind, SnapshotRef, StatusCode,
};

fn spec(uid: &str) -> SessionSpec {
    SessionSpec {
        session_uid: uid.to_owned(),
        harness: "echo".to_owned(),
        ..SessionSpec::default()
    }
}

fn assert_code(result: Result<impl std::fmt::Debug, ApiError>, code: StatusCode, what: &str) {
    match result {
        Err(ApiError::Status { code: got, message }) => {
            assert_eq!(got, code, "{what}: {message}");
        }
        other => panic!("{what}: want a {code} status, got {other:?}"),
    }
}

/// Create is called on every execution: the same session gets the same incarnation.
pub async fn create_is_idempotent(runtime: &dyn Runtime, name: &str) {
    let first = runtime.create(&spec("conf-idem")).await.unwrap();
    let second = runtime.create(&spec("conf-idem")).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(first.id, "conf-idem");
    assert_eq!(first.runtime, name);
    assert!(!first.address.is_empty());
    assert!(
        first.compute_instance.is_empty(),
        "no memory, no instance identity"
    );
}

/// Create refuses a spec without a session uid.
pub async fn create_requires_a_session_uid(runtime: &dyn Runtime) {
    assert_code(
        runtime.create(&SessionSpec::default()).await,
        StatusCode::InvalidArgument,
        "create without uid",
    );
}

/// LOCAL is refused; EXTERNAL is the session as a replay handle without memory.
pub async fn snapshots_are_replay_handles(runtime: &dyn Runtime) {
    let inc = runtime.create(&spec("conf-snap")).await.unwrap();
    assert_code(
        runtime.snapshot(&inc, SnapshotKind::Local).await,
        StatusCode::Unimplemented,
        "LOCAL snapshot",
    );
    let snapshot = runtime
        .snapshot(&inc, SnapshotKind::External)
        .await
        .unwrap();
    assert_eq!(
        snapshot,
        SnapshotRef {
            local: "conf-snap".into(),
            ..SnapshotRef::default()
        }
    );
}

/// Restore needs `ref.local` and creates that session.
pub async fn restore_creates_the_named_session(runtime: &dyn Runtime) {
    assert_code(
        runtime.restore(&SnapshotRef::default()).await,
        StatusCode::InvalidArgument,
        "restore without a handle",
    );
    let restored = runtime
        .restore(&SnapshotRef {
            local: "conf-restore".into(),
            ..SnapshotRef::default()
        })
        .await
        .unwrap();
    assert_eq!(restored.id, "conf-restore");
    assert_eq!(
        runtime.create(&spec("conf-restore")).await.unwrap(),
        restored
    );
}

/// Fork needs the child uid and creates the child.
pub async fn fork_creates_the_child(runtime: &dyn Runtime) {
    let parent = SnapshotRef {
        local: "conf-parent".into(),
        ..SnapshotRef::default()
    };
    assert_code(
        runtime.fork(&parent, &ForkOpts::default()).await,
        StatusCode::InvalidArgument,
        "fork without child uid",
    );
    let child = runtime
        .fork(
            &parent,
            &ForkOpts {
                child_session_uid: "conf-child".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(child.id, "conf-child");
}

/// Stop succeeds, also twice and for a session never created. `between_turns` is what status
/// reports for a created incarnation while no turn runs on it: LIVE for a backend that dedicates
/// compute to a session, NONE for one whose shared harness keeps nothing of it.
pub async fn stop_is_accepted(runtime: &dyn Runtime, between_turns: ComputeState) {
    let inc = runtime.create(&spec("conf-stop")).await.unwrap();
    runtime.stop(&inc).await.unwrap();
    runtime.stop(&inc).await.unwrap();
    let mut never = inc.clone();
    never.id = "conf-never".into();
    runtime.stop(&never).await.unwrap();
    // Compute comes back on the next create.
    let again = runtime.create(&spec("conf-stop")).await.unwrap();
    assert_eq!(runtime.status(&again).await.unwrap(), between_turns);
}

/// No memory snapshots, no CoW fork, no attestation, no GPU state.
pub fn capabilities_are_all_false(runtime: &dyn Runtime) {
    assert_eq!(runtime.capabilities(), RuntimeCapabilities::default());
}

/// The created incarnation's address reaches a harness that describes itself as `harness_id`.
pub async fn incarnations_are_dialable(
    runtime: &dyn Runtime,
    dialer: &dyn HarnessDialer,
    harness_id: &str,
) {
    let inc = runtime.create(&spec("conf-dial")).await.unwrap();
    let harness = dialer.dial(&inc).await.unwrap();
    assert_eq!(harness.describe().await.unwrap().id, harness_id);
}

/// Every case, in order, on one backend; `between_turns` as in [`stop_is_accepted`].
pub async fn run_all(
    runtime: &dyn Runtime,
    dialer: &dyn HarnessDialer,
    name: &str,
    harness_id: &str,
    between_turns: ComputeState,
) {
    capabilities_are_all_false(runtime);
    create_requires_a_session_uid(runtime).await;
    create_is_idempotent(runtime, name).await;
    snapshots_are_replay_handles(runtime).await;
    restore_creates_the_named_session(runtime).await;
    fork_creates_the_child(runtime).await;
    stop_is_accepted(runtime, between_turns).await;
    incarnations_are_dialable(runtime, dialer, harness_id).await;
}
