//! Measures the microVM runtime on real QEMU VMs running the counter harness: boot to first
//! turn, snapshot time and size, restore to first turn, fork per child, resident memory per idle
//! VM, with the accelerator named. Each figure is the median of `ROUNDS` rounds.
//!
//! ```text
//! scripts/build-guest.sh
//! cargo run --release -p agentsessions-microvm --example microvm_bench [ROUNDS]
//! ```
//!
//! Kernel and initrd come from `target/guest/current` or `MICROVM_KERNEL`/`MICROVM_INITRD`.
//! `RUST_LOG=agentsessions_microvm=debug` prints where each restore and snapshot spends its time.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentsessions_api::{
    ForkOpts, Harness as _, Incarnation, Runtime as _, SessionSpec, SnapshotKind, Start,
};
use agentsessions_harnesses::testsink::{Call, RecordingSink};
use agentsessions_microvm::{MicrovmConfig, MicrovmRuntime};
use agentsessions_runtime::WireDialer;

fn guest_file(env: &str, name: &str) -> PathBuf {
    std::env::var_os(env).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/guest/current")
                .join(name)
        },
        PathBuf::from,
    )
}

async fn turn(dialer: &WireDialer, incarnation: &Incarnation) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let harness = dialer.remote_harness(incarnation).unwrap();
    let sink = RecordingSink::default();
    let start = Start {
        execution_id: format!("bench-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
        ..Start::default()
    };
    harness.run(&start, &sink).await.unwrap();
    match sink.calls().as_slice() {
        [Call::Output(text)] => text.clone(),
        other => panic!("{other:?}"),
    }
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let runtime = MicrovmRuntime::start(
        MicrovmConfig {
            kernel: guest_file("MICROVM_KERNEL", "vmlinuz"),
            initrd: guest_file("MICROVM_INITRD", "initrd.img"),
            snapshot_dir: dir.path().join("snapshots"),
            ..MicrovmConfig::default()
        },
        "counter",
    )
    .expect("microvm runtime");
    let dialer = WireDialer::new();
    let accel = runtime.accelerator().clone();
    let (mut boot, mut snap, mut size, mut restore, mut fork, mut rss) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut restore_call, mut fork_total, mut fork_calls) = (vec![], vec![], vec![]);
    for round in 0..rounds {
        let uid = format!("bench-{round}");
        let spec = SessionSpec {
            session_uid: uid.clone(),
            ..SessionSpec::default()
        };
        let t = Instant::now();
        let inc = runtime.create(&spec).await.unwrap();
        assert_eq!(turn(&dialer, &inc).await, "1");
        boot.push(ms(t.elapsed()));
        tokio::time::sleep(Duration::from_secs(1)).await;
        rss.push(rss_mib(runtime.vm_pid(&uid).await.unwrap()));

        let t = Instant::now();
        let snapshot = runtime
            .snapshot(&inc, SnapshotKind::External)
            .await
            .unwrap();
        snap.push(ms(t.elapsed()));
        let bytes: u64 = runtime
            .snapshot_files(&uid)
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "vmstate"))
            .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
            .sum();
        #[allow(clippy::cast_precision_loss)]
        size.push(bytes as f64 / (1024.0 * 1024.0));

        // Fork 3 children from the held snapshot (one Fork call after another, as the daemon
        // places them), then each answers its first turn.
        let t = Instant::now();
        let mut children = Vec::new();
        for n in 0..3 {
            let child = runtime
                .fork(
                    &snapshot,
                    &ForkOpts {
                        child_session_uid: format!("{uid}-child-{n}"),
                    },
                )
                .await
                .unwrap();
            children.push(child);
        }
        fork_calls.push(ms(t.elapsed()));
        let answers = tokio::join!(
            turn(&dialer, &children[0]),
            turn(&dialer, &children[1]),
            turn(&dialer, &children[2])
        );
        assert_eq!(answers, ("2".into(), "2".into(), "2".into()));
        fork.push(ms(t.elapsed()) / 3.0);
        fork_total.push(ms(t.elapsed()));

        // The children stop first, so the restore is measured on its own (three TCG guests
        // running beside it are the fork figure's load, not the restore's).
        for inc in &children {
            runtime.stop(inc).await.unwrap();
        }
        let t = Instant::now();
        let back = runtime.restore(&snapshot).await.unwrap();
        restore_call.push(ms(t.elapsed()));
        assert_eq!(turn(&dialer, &back).await, "2");
        restore.push(ms(t.elapsed()));
        runtime.stop(&back).await.unwrap();
    }
    runtime.close().await;
    println!(
        "accelerator {} ({}); {rounds} rounds, medians:",
        accel.kind.as_str(),
        accel.reason
    );
    println!("  boot to first turn       {:8.0} ms", median(boot));
    println!("  snapshot (EXTERNAL)      {:8.0} ms", median(snap));
    println!("  snapshot size            {:8.1} MiB", median(size));
    println!(
        "  restore to first turn    {:8.0} ms ({:.0} ms of it the Restore call)",
        median(restore),
        median(restore_call)
    );
    println!(
        "  fork of 3 children       {:8.0} ms to all three answering ({:.0} ms of it the 3 Fork calls; {:.0} ms per child)",
        median(fork_total),
        median(fork_calls),
        median(fork)
    );
    println!("  RSS per idle VM          {:8.0} MiB", median(rss));
}
