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

/// A daemon on `config`, with its HarnessRegistry listener.
fn start(config: &Path) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--registry-addr", "127.0.0.1:0"])
        .arg("--config")
        .arg(config)
        .stderr(Stdio::null());
    Daemon::spawn(command, true)
}

/// `agentctl harness register` on the daemon's registry listener with `spec` (proto JSON).
fn register(daemon: &Daemon, dir: &Path, name: &str, spec: &str) -> std::process::Output {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, spec).unwrap();
    Command::new(common::CTL)
        .args([
            "--server",
            &daemon.registry,
            "harness",
            "register",
            "--name",
            name,
        ])
        .arg("--spec")
        .arg(&file)
        .output()
        .unwrap()
}

/// The session uid an `exec` transcript starts with.
fn session_of(out: &str) -> String {
    out.lines()
        .next()
        .and_then(|l| l.strip_prefix("session "))
        .unwrap_or_else(|| panic!("no session in {out}"))
        .to_owned()
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

    // A registered harness declaring memory resumability is placed on the VMs through the spec's
    // memory placement, substrate {atespace "microvm", template "counter"}: it counts in its own
    // VM's memory and keeps the count across suspend and resume.
    let memory_spec = |placement: &str| {
        format!(
            r#"{{{placement},"capabilities":{{"resumability":"RESUMABILITY_REQUIRES_MEMORY_SNAPSHOT"}},"descriptor_id":"counter"}}"#
        )
    };
    let created = register(
        &daemon,
        dir.path(),
        "vm-counter",
        &memory_spec(r#""substrate":{"atespace":"microvm","template":"counter"}"#),
    );
    assert!(created.status.success(), "{created:?}");
    let registered = daemon.ok(&["exec", "--harness", "vm-counter", "count"]);
    let on_vm = session_of(&registered);
    assert_eq!(counted(&registered), "1");
    assert_eq!(vm_pids(&on_vm).len(), 1);
    daemon.ok(&["suspend", "--session", &on_vm]);
    daemon.ok(&["resume", "--session", &on_vm]);
    assert_eq!(exec(&daemon, &on_vm), "2");
    // A substrate this host does not have, or a template its guest does not serve: refused at
    // registration.
    for (name, placement) in [
        (
            "elsewhere",
            r#""substrate":{"atespace":"k8s","template":"counter"}"#,
        ),
        (
            "no-model",
            r#""substrate":{"atespace":"microvm","template":"chat"}"#,
        ),
    ] {
        let out = register(&daemon, dir.path(), name, &memory_spec(placement));
        assert!(!out.status.success(), "{name} registered");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("FAILED_PRECONDITION"), "{name}: {stderr}");
    }
    // A registered remote harness runs on compute this host cannot snapshot: one declaring memory
    // resumability is registered, and the admission gate refuses its turns, journaling nothing.
    let remote = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = remote
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop_remote, remote_stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = std::thread::spawn(move || {
        remote.block_on(agentsessions_harnesswire::serve_tcp_listener(
            listener,
            std::sync::Arc::new(agentsessions_harnesses::CounterHarness::new()),
            async {
                let _ = remote_stopped.await;
            },
        ))
    });
    let far = register(
        &daemon,
        dir.path(),
        "far-counter",
        &memory_spec(&format!(r#""remote":{{"address":"{address}"}}"#)),
    );
    assert!(far.status.success(), "{far:?}");
    refused(
        &daemon,
        &["exec", "--harness", "far-counter", "count"],
        "FAILED_PRECONDITION",
    );
    let listed = daemon.ok(&["list"]);
    let far_sessions: Vec<&str> = listed
        .lines()
        .filter(|l| l.contains("harness=far-counter"))
        .collect();
    assert!(
        far_sessions.iter().all(|l| l.contains("last_seq=0 ")),
        "{listed}"
    );
    let _ = stop_remote.send(());
    serving.join().unwrap().unwrap();

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

/// A daemon config placing the counter on VMs whose harness holds each answer `delay_ms`.
fn write_config(dir: &Path, delay_ms: u64) -> PathBuf {
    let config = dir.join("agentsessionsd.toml");
    std::fs::write(
        &config,
        format!(
            "journal = {:?}\n\n[runtime.microvm]\nkernel = {:?}\ninitrd = {:?}\nsnapshot_dir = {:?}\nanswer_delay_ms = {delay_ms}\n",
            dir.join("journal.db"),
            guest_file("MICROVM_KERNEL", "vmlinuz"),
            guest_file("MICROVM_INITRD", "initrd.img"),
            dir.join("vm"),
        ),
    )
    .unwrap();
    config
}

/// SIGKILL of a VM while its turn is in progress: the guest has counted and its answer is held
/// (the `answer_delay_ms` test hook). The turn fails as a lost harness does (INTERNAL, its
/// execution left without END, semantics §2.8); every record written before stays as it was;
/// recovery reports the memory lost (FAILED_PRECONDITION, extensions §5) and writes nothing,
/// since the snapshot the session last resumed from was consumed by that resume and would bring
/// back a count the journal has moved past.
#[test]
fn a_vm_killed_mid_turn_ends_the_turn_and_recovery_reports_memory_lost() {
    if !qemu_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), 1500);
    let daemon = start(&config);
    let first = daemon.ok(&["exec", "--harness", "counter", "count"]);
    let session = first
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("session "))
        .unwrap()
        .to_owned();
    assert_eq!(counted(&first), "1");
    daemon.ok(&["suspend", "--session", &session]);
    daemon.ok(&["resume", "--session", &session]);
    assert_eq!(exec(&daemon, &session), "2");
    let before = daemon.ok(&["replay", "--session", &session]);
    let before: Vec<&str> = before.lines().collect();

    // The turn starts; once its EXECUTION_START is committed the VM is killed while the guest
    // holds its answer.
    let turn = Command::new(common::CTL)
        .args([
            "--server",
            &daemon.addr,
            "exec",
            "--session",
            &session,
            "count",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually("the turn to start", || {
        daemon
            .ok(&["replay", "--session", &session])
            .lines()
            .skip(before.len())
            .any(|l| l.contains("EXECUTION_START"))
    });
    let pids = vm_pids(&session);
    assert_eq!(pids.len(), 1);
    let killed = Command::new("kill")
        .args(["-KILL", &pids[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = turn.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the killed turn succeeded");
    assert!(stderr.contains("INTERNAL"), "{stderr}");

    // Nothing acknowledged is lost; the interrupted turn has no answer and no END.
    let after = daemon.ok(&["replay", "--session", &session]);
    let after: Vec<&str> = after.lines().collect();
    assert_eq!(&after[..before.len()], &before[..]);
    let turn_records = &after[before.len()..];
    assert!(
        turn_records.iter().any(|l| l.contains("EXECUTION_START")),
        "{turn_records:?}"
    );
    assert!(
        !turn_records
            .iter()
            .any(|l| l.contains(" OUTPUT ") || l.contains(" END ")),
        "{turn_records:?}"
    );

    // Recovery: memory lost, nothing written, no VM stands in for the dead one.
    let written = after.len();
    refused(
        &daemon,
        &["resume", "--session", &session],
        "FAILED_PRECONDITION",
    );
    refused(
        &daemon,
        &["exec", "--session", &session, "count"],
        "FAILED_PRECONDITION",
    );
    assert_eq!(record_count(&daemon, &session), written);
    assert!(vm_pids(&session).is_empty());
}
