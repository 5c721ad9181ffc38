//! The memory tier end to end: `agentsessionsd` with `[runtime.microvm]` places the counter
//! harness on QEMU VMs and `agentctl` drives it. One daemon (and one restart) carries every
//! assertion to keep VM boots few: counting across turns, suspend and resume with the memory
//! kept, fork into three independent children, a removed or corrupted snapshot file, a killed
//! VM, delete with reclamation, and a SIGKILLed daemon.
//!
//! Needs `qemu-system-x86_64` and the guest image (`scripts/build-guest.sh`, or
//! `MICROVM_KERNEL`/`MICROVM_INITRD`); without QEMU the test says so and passes.

#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Daemon;

fn qemu_installed() -> bool {
    let found = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("qemu-system-x86_64").is_file())
    });
    if !found {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "SKIPPED: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
            );
        }
    }
    found
}

fn guest_file(env: &str, name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/guest/current")
        .join(name);
    assert!(
        path.is_file(),
        "no guest image at {}: run scripts/build-guest.sh (or set {env})",
        path.display()
    );
    path
}

fn start(config: &Path) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--config"])
        .arg(config)
        .stderr(Stdio::null());
    Daemon::spawn(command, false)
}

/// The pids of QEMU processes running `session`'s VM.
fn vm_pids(session: &str) -> Vec<u32> {
    let needle = format!("guest={session}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.first().is_some_and(|a| a.contains("qemu-system")) && args.contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The counter's answer in an `exec` transcript.
fn counted(out: &str) -> String {
    out.lines()
        .find_map(|l| l.split("OUTPUT  assistant: ").nth(1))
        .unwrap_or_else(|| panic!("no output in {out}"))
        .trim()
        .to_owned()
}

fn exec(daemon: &Daemon, session: &str) -> String {
    counted(&daemon.ok(&["exec", "--session", session, "count"]))
}

fn record_count(daemon: &Daemon, session: &str) -> usize {
    daemon.ok(&["replay", "--session", session]).lines().count()
}

/// A failing agentctl call's stderr, which must name `code`.
fn refused(daemon: &Daemon, args: &[&str], code: &str) {
    let out = daemon.ctl(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "agentctl {args:?} succeeded");
    assert!(stderr.contains(code), "agentctl {args:?}: {stderr}");
}

fn state_file(dir: &Path, session: &str) -> PathBuf {
    std::fs::read_dir(dir.join("sessions").join(session))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "vmstate"))
        .unwrap_or_else(|| panic!("no snapshot of {session}"))
}

#[test]
fn counter_on_microvms_through_the_daemon_and_agentctl() {
    if !qemu_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let snapshots = dir.path().join("vm");
    let config = dir.path().join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = {:?}\nreclaim_interval_secs = 1\n\n[runtime.microvm]\nkernel = {:?}\ninitrd = {:?}\nsnapshot_dir = {:?}\n",
            dir.path().join("journal.db"),
            guest_file("MICROVM_KERNEL", "vmlinuz"),
            guest_file("MICROVM_INITRD", "initrd.img"),
            snapshots,
        ),
    )
    .unwrap();
    let daemon = start(&config);

    // 1, 2, 3 across turns: the count lives in the guest's memory.
    let first = daemon.ok(&["exec", "--harness", "counter", "count"]);
    let parent = first
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("session "))
        .unwrap()
        .to_owned();
    assert_eq!(counted(&first), "1");
    assert_eq!(exec(&daemon, &parent), "2");
    assert_eq!(exec(&daemon, &parent), "3");
    assert_eq!(vm_pids(&parent).len(), 1);

    // Suspend writes the VM's memory to the store and ends the VM; resume brings it back.
    let suspended = daemon.ok(&["suspend", "--session", &parent]);
    assert!(suspended.contains("compute=COLD"), "{suspended}");
    assert!(state_file(&snapshots, &parent).is_file());
    eventually("the suspended VM to end", || vm_pids(&parent).is_empty());
    let resumed = daemon.ok(&["resume", "--session", &parent]);
    assert!(resumed.contains("compute=LIVE"), "{resumed}");
    assert_eq!(exec(&daemon, &parent), "4");

    // Fork at the head into three children: each continues from 4 on its own VM.
    let forked = daemon.ok(&["fork", "--session", &parent, "--count", "3"]);
    let children: Vec<String> = forked
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().to_owned())
        .collect();
    assert_eq!(children.len(), 3, "{forked}");
    for child in &children {
        assert_eq!(exec(&daemon, child), "5");
    }
    assert_eq!(exec(&daemon, &children[0]), "6");
    assert_eq!(exec(&daemon, &children[0]), "7");
    assert_eq!(exec(&daemon, &children[1]), "6");
    // The parent was checkpointed by the fork and continues from the same 4.
    assert_eq!(exec(&daemon, &parent), "5");

    // A corrupted snapshot file: resume reports the memory lost and writes nothing.
    daemon.ok(&["suspend", "--session", &children[1]]);
    let state = state_file(&snapshots, &children[1]);
    let mut bytes = std::fs::read(&state).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&state, bytes).unwrap();
    let before = record_count(&daemon, &children[1]);
    refused(
        &daemon,
        &["resume", "--session", &children[1]],
        "FAILED_PRECONDITION",
    );
    assert_eq!(record_count(&daemon, &children[1]), before);
    assert!(vm_pids(&children[1]).is_empty());

    // A removed snapshot file: the same.
    daemon.ok(&["suspend", "--session", &children[2]]);
    std::fs::remove_file(state_file(&snapshots, &children[2])).unwrap();
    let before = record_count(&daemon, &children[2]);
    refused(
        &daemon,
        &["resume", "--session", &children[2]],
        "FAILED_PRECONDITION",
    );
    refused(
        &daemon,
        &["exec", "--session", &children[2], "count"],
        "FAILED_PRECONDITION",
    );
    assert_eq!(record_count(&daemon, &children[2]), before);

    // A VM killed: its memory is gone, and no fresh VM stands in for it.
    let pids = vm_pids(&children[0]);
    assert_eq!(pids.len(), 1);
    let killed = Command::new("kill")
        .args(["-KILL", &pids[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    eventually("the killed VM to go", || vm_pids(&children[0]).is_empty());
    let before = record_count(&daemon, &children[0]);
    refused(
        &daemon,
        &["exec", "--session", &children[0], "count"],
        "FAILED_PRECONDITION",
    );
    refused(
        &daemon,
        &["resume", "--session", &children[0]],
        "FAILED_PRECONDITION",
    );
    assert_eq!(record_count(&daemon, &children[0]), before);

    // Delete: the reclaimer stops the VM and releases the session's snapshot files.
    assert_eq!(vm_pids(&parent).len(), 1);
    daemon.ok(&["delete", "--session", &parent]);
    eventually("the deleted session's VM to stop", || {
        vm_pids(&parent).is_empty()
    });
    eventually("the deleted session's files to go", || {
        !snapshots.join("sessions").join(&parent).exists()
    });

    // SIGKILL of the daemon: its VMs die with it. A session whose memory is in a snapshot
    // resumes on the next daemon; one whose memory was only in a VM reports it lost.
    let kept = children[1].clone();
    let survivor = daemon.ok(&["exec", "--harness", "counter", "count"]);
    let suspended_one = survivor
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("session "))
        .unwrap()
        .to_owned();
    assert_eq!(exec(&daemon, &suspended_one), "2");
    daemon.ok(&["suspend", "--session", &suspended_one]);
    let live_one = daemon.ok(&["exec", "--harness", "counter", "count"]);
    let live_one = live_one
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("session "))
        .unwrap()
        .to_owned();
    assert_eq!(vm_pids(&live_one).len(), 1);
    daemon.sigkill();
    eventually("the VMs to die with the daemon", || {
        vm_pids(&live_one).is_empty()
    });
    let daemon = start(&config);
    daemon.ok(&["resume", "--session", &suspended_one]);
    assert_eq!(exec(&daemon, &suspended_one), "3");
    refused(
        &daemon,
        &["exec", "--session", &live_one, "count"],
        "FAILED_PRECONDITION",
    );
    refused(
        &daemon,
        &["resume", "--session", &kept],
        "FAILED_PRECONDITION",
    );
    drop(daemon);
    eventually("every VM to stop with the daemon", || {
        vm_pids(&suspended_one).is_empty()
    });
}
