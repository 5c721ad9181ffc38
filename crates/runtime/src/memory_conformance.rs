//! The runtime contract suite for memory-snapshot backends (semantics §10.1, extensions §5):
//! instance identity, snapshots that keep a harness's memory, restore and fork from them,
//! supersession and memory loss. A backend under test runs the `counter` harness; the caller
//! supplies `turn`, which runs one execution on an incarnation and returns its output. Each case
//! panics on a breach; [`run_all`] runs them in order on one backend.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::future::Future;
use std::sync::Arc;

use agentsessions_api::{
    ApiError, ComputeState, ForkOpts, Incarnation, Runtime, SessionSpec, SnapshotKind, SnapshotRef,
    StatusCode,
};

fn spec(uid: &str, turns: usize) -> SessionSpec {
    SessionSpec {
        session_uid: uid.to_owned(),
        harness: "counter".to_owned(),
        started_turns: Some(Arc::new(move || Ok(turns))),
        ..SessionSpec::default()
    }
}

fn fork_opts(child: &str) -> ForkOpts {
    ForkOpts {
        child_session_uid: child.to_owned(),
    }
}

fn assert_lost<T: std::fmt::Debug>(result: Result<T, ApiError>, what: &str) {
    match result {
        Err(ApiError::MemoryStateLost) => {}
        other => panic!("{what}: want MemoryStateLost, got {other:?}"),
    }
}

async fn restore_as(
    runtime: &dyn Runtime,
    snapshot: &SnapshotRef,
    recorded: &str,
) -> Result<Incarnation, ApiError> {
    let recorded = recorded.to_owned();
    match runtime.as_instance_restorer() {
        Some(restorer) => {
            restorer
                .restore_instance(snapshot, &move || Ok(recorded.clone()))
                .await
        }
        None => panic!("a memory backend implements InstanceRestorer"),
    }
}

/// Every case, in order, on one backend named `name`. Session uids start with `prefix`.
pub async fn run_all<F, Fut>(runtime: &dyn Runtime, name: &str, prefix: &str, turn: F)
where
    F: Fn(Incarnation) -> Fut,
    Fut: Future<Output = String>,
{
    let uid = |s: &str| format!("{prefix}-{s}");
    assert!(runtime.capabilities().memory_snapshot);
    match runtime.create(&SessionSpec::default()).await {
        Err(ApiError::Status { code, .. }) => assert_eq!(code, StatusCode::InvalidArgument),
        other => panic!("create without a uid: {other:?}"),
    }

    // Create is idempotent and names the instance; the harness counts in its memory.
    let parent = uid("parent");
    let first = runtime.create(&spec(&parent, 0)).await.unwrap();
    assert_eq!(runtime.create(&spec(&parent, 0)).await.unwrap(), first);
    assert_eq!(first.runtime, name);
    assert!(!first.compute_instance.is_empty());
    assert_eq!(runtime.status(&first).await.unwrap(), ComputeState::Live);
    assert_eq!(turn(first.clone()).await, "1");
    assert_eq!(turn(first.clone()).await, "2");

    // A snapshot requiring another instance captures nothing, and the VM serves on.
    let mut other = first.clone();
    other.compute_instance = "not-this-one".into();
    assert_lost(
        runtime.snapshot(&other, SnapshotKind::External).await,
        "snapshot of another instance",
    );
    assert_eq!(turn(first.clone()).await, "3");

    // EXTERNAL: the memory goes to the store and the compute is released.
    let cold = runtime
        .snapshot(&first, SnapshotKind::External)
        .await
        .unwrap();
    assert!(cold.memory && !cold.external_uri.is_empty(), "{cold:?}");
    assert_eq!(cold.local, parent);
    assert_ne!(runtime.status(&first).await.unwrap(), ComputeState::Live);

    // A restore that the journal says must be another instance is refused before any VM runs.
    assert_lost(
        restore_as(runtime, &cold, "not-this-one").await,
        "restore of another instance",
    );
    // Restore: the same instance, its memory intact.
    let restored = restore_as(runtime, &cold, &first.compute_instance)
        .await
        .unwrap();
    assert_eq!(restored.compute_instance, first.compute_instance);
    assert_eq!(turn(restored.clone()).await, "4");
    // Restoring again while it runs attaches to it.
    assert_eq!(
        restore_as(runtime, &cold, &first.compute_instance)
            .await
            .unwrap(),
        restored
    );

    // The restored snapshot is superseded: a fork from it is refused.
    match runtime.fork(&cold, &fork_opts(&uid("late"))).await {
        Err(ApiError::SnapshotSuperseded) => {}
        other => panic!("fork from a superseded snapshot: {other:?}"),
    }

    // Fork: children start from one snapshot, each a new instance, and diverge.
    let checkpoint = runtime
        .snapshot(&restored, SnapshotKind::External)
        .await
        .unwrap();
    let a = runtime
        .fork(&checkpoint, &fork_opts(&uid("child-a")))
        .await
        .unwrap();
    let b = runtime
        .fork(&checkpoint, &fork_opts(&uid("child-b")))
        .await
        .unwrap();
    assert_ne!(a.compute_instance, b.compute_instance);
    assert_ne!(a.compute_instance, first.compute_instance);
    assert_eq!(turn(a.clone()).await, "5");
    assert_eq!(turn(a.clone()).await, "6");
    assert_eq!(turn(b.clone()).await, "5");
    // The parent still holds the checkpoint and continues from it.
    let parent_again = restore_as(runtime, &checkpoint, &first.compute_instance)
        .await
        .unwrap();
    assert_eq!(turn(parent_again.clone()).await, "5");

    // Compute gone with turns recorded: the memory is lost, never replaced by a fresh instance.
    runtime.stop(&parent_again).await.unwrap();
    runtime.stop(&parent_again).await.unwrap();
    assert_eq!(
        runtime.status(&parent_again).await.unwrap(),
        ComputeState::None
    );
    assert_lost(
        runtime.create(&spec(&parent, 5)).await,
        "create after the compute is gone",
    );
    assert_lost(
        restore_as(runtime, &checkpoint, &first.compute_instance).await,
        "restore of a snapshot stop released",
    );
    // A LOCAL (warm) snapshot pauses in place; restore runs it on.
    let warm = runtime.snapshot(&b, SnapshotKind::Local).await.unwrap();
    assert!(warm.memory);
    assert_eq!(runtime.status(&b).await.unwrap(), ComputeState::Warm);
    let b_again = restore_as(runtime, &warm, &b.compute_instance)
        .await
        .unwrap();
    assert_eq!(turn(b_again).await, "6");
    runtime.stop(&a).await.unwrap();
    runtime.stop(&b).await.unwrap();
}
