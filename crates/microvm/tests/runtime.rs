//! The microVM runtime on real QEMU VMs running the counter harness: the memory-backend contract
//! suite, and the store's evidence of memory loss (a snapshot file removed or corrupted).
//!
//! Needs `qemu-system-x86_64` and the guest image (`scripts/build-guest.sh`, or
//! `MICROVM_KERNEL`/`MICROVM_INITRD`). Without QEMU the tests say so and pass; without the image
//! they fail, since `.ci/run` builds it.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentsessions_api::{
    ApiError, Harness as _, Incarnation, InstanceRestorer as _, Runtime, SessionSpec, SnapshotKind,
    Start,
};
use agentsessions_harnesses::testsink::{Call, RecordingSink};
use agentsessions_microvm::{MicrovmConfig, MicrovmRuntime};
use agentsessions_runtime::WireDialer;

fn qemu_missing() -> bool {
    let found = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("qemu-system-x86_64").is_file())
    });
    if !found {
        eprintln!("SKIPPED: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)");
    }
    !found
}

fn guest_file(env: &str, name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/guest/current")
        .join(name);
    assert!(
        path.is_file(),
        "no guest image at {}: run scripts/build-guest.sh (or set {env})",
        path.display()
    );
    path
}

fn runtime(dir: &tempfile::TempDir) -> MicrovmRuntime {
    let config = MicrovmConfig {
        kernel: guest_file("MICROVM_KERNEL", "vmlinuz"),
        initrd: guest_file("MICROVM_INITRD", "initrd.img"),
        snapshot_dir: dir.path().join("snapshots"),
        ..MicrovmConfig::default()
    };
    MicrovmRuntime::start(config, "counter").unwrap()
}

async fn turn(dialer: &WireDialer, incarnation: Incarnation) -> String {
    let harness = dialer.remote_harness(&incarnation).unwrap();
    let sink = RecordingSink::default();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let start = Start {
        execution_id: format!("exec-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
        ..Start::default()
    };
    harness.run(&start, &sink).await.unwrap();
    match sink.calls().as_slice() {
        [Call::Output(text)] => text.clone(),
        other => panic!("one output expected, got {other:?}"),
    }
}

fn spec(uid: &str) -> SessionSpec {
    SessionSpec {
        session_uid: uid.to_owned(),
        harness: "counter".to_owned(),
        ..SessionSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_backend_contract_on_qemu() {
    if qemu_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir);
    eprintln!(
        "accelerator: {} ({})",
        runtime.accelerator().kind.as_str(),
        runtime.accelerator().reason
    );
    let dialer = Arc::new(WireDialer::new());
    agentsessions_runtime::memory_conformance::run_all(&runtime, "microvm", "conf", |inc| {
        let dialer = Arc::clone(&dialer);
        async move { turn(&dialer, inc).await }
    })
    .await;
    // Stop released every file of the stopped sessions.
    assert!(runtime.snapshot_files("conf-parent").is_empty());
    let described = dialer
        .remote_harness(&runtime.create(&spec("conf-describe")).await.unwrap())
        .unwrap()
        .describe()
        .await
        .unwrap();
    assert_eq!(described.id, "counter");
    runtime.close().await;
}

/// A snapshot file removed or corrupted is memory lost, shown by the store (missing file,
/// checksum mismatch), and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_corrupt_snapshot_files_are_memory_lost() {
    if qemu_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir);
    let dialer = WireDialer::new();
    let inc = runtime.create(&spec("files")).await.unwrap();
    assert_eq!(turn(&dialer, inc.clone()).await, "1");
    let snapshot = runtime
        .snapshot(&inc, SnapshotKind::External)
        .await
        .unwrap();
    let files = runtime.snapshot_files("files");
    let state = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "vmstate"))
        .unwrap()
        .clone();
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().ends_with(".vmstate.sha256")),
        "{files:?}"
    );
    let recorded = inc.compute_instance.clone();
    let read = move || Ok(recorded.clone());

    // Corrupt one byte in the middle: the checksum catches it.
    let original = std::fs::read(&state).unwrap();
    let mut corrupt = original.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0xff;
    std::fs::write(&state, &corrupt).unwrap();
    match runtime.restore_instance(&snapshot, &read).await {
        Err(ApiError::MemoryStateLost) => {}
        other => panic!("corrupt snapshot: {other:?}"),
    }
    assert_eq!(runtime.vm_pid("files").await, None);

    // Intact again, it restores with the memory kept.
    std::fs::write(&state, &original).unwrap();
    let back = runtime.restore_instance(&snapshot, &read).await.unwrap();
    assert_eq!(turn(&dialer, back.clone()).await, "2");
    // The restore consumed the snapshot: its files are deleted (off the restore's path).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !runtime.snapshot_files("files").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            runtime.snapshot_files("files")
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // Removed: memory lost.
    let again = runtime
        .snapshot(&back, SnapshotKind::External)
        .await
        .unwrap();
    for file in runtime.snapshot_files("files") {
        if file.extension().is_some_and(|e| e == "vmstate") {
            std::fs::remove_file(file).unwrap();
        }
    }
    match runtime.restore_instance(&again, &read).await {
        Err(ApiError::MemoryStateLost) => {}
        other => panic!("missing snapshot: {other:?}"),
    }
    runtime.stop(&back).await.unwrap();
    assert!(runtime.snapshot_files("files").is_empty());
    runtime.close().await;
}
