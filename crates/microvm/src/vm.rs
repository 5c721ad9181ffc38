//! One QEMU process ([`Vm`]): started booting the guest, or from a snapshot file (an incoming
//! migration), reached over QMP, its serial console read for the guest's readiness line, and
//! its memory written to a file by a migration to `exec:cat`.
//!
//! The process dies with its host: it is started under `setpriv --pdeathsig KILL` where
//! `setpriv` exists (a SIGKILLed daemon runs no destructor), and is `kill_on_drop` otherwise.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentsessions_api::{ChildEnv, ChildEnvSpec};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::config::AccelKind;
use crate::error::{MicrovmError, Result};
use crate::launch::Launch;
use crate::qmp::Qmp;
use crate::store::copy_hashing;

/// The port harnessnode listens on inside the guest; the host forwards a free local port to it.
pub(crate) const GUEST_PORT: u16 = 7000;
/// What harnessnode prints once it listens (see its module docs).
const READY_LINE: &str = "harnessnode: serving";
/// Longest console line kept; the rest of a longer line is dropped.
const MAX_CONSOLE_LINE: u64 = 64 * 1024;
/// Bound on an incoming migration (reading a snapshot file into a new VM).
const INCOMING_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on an outgoing migration (writing a snapshot file).
const OUTGOING_TIMEOUT: Duration = Duration::from_secs(120);

impl Launch {
    fn kernel_args(&self) -> String {
        let mut args = vec![
            "console=ttyS0".to_owned(),
            "quiet".to_owned(),
            "pci=off".to_owned(),
            // Freed boot memory is zeroed, which keeps snapshots small.
            "init_on_free=1".to_owned(),
            "panic=-1".to_owned(),
            format!("agentsessions.harness={}", self.harness),
            format!("agentsessions.port={GUEST_PORT}"),
            format!("agentsessions.epoch={}", epoch_seconds()),
        ];
        if self.machine == "pc" {
            args.retain(|arg| arg != "pci=off");
        }
        if let Some(khz) = self.cpu_khz {
            args.push(format!("tsc_early_khz={khz}"));
        }
        if self.answer_delay_ms > 0 {
            args.push(format!(
                "agentsessions.answer_delay_ms={}",
                self.answer_delay_ms
            ));
        }
        args.join(" ")
    }

    fn command(
        &self,
        session: &str,
        run_dir: &Path,
        port: u16,
        incoming: Option<&Path>,
    ) -> Command {
        let mut command = match setpriv() {
            Some(setpriv) => {
                let mut command = Command::new(setpriv);
                command
                    .arg("--pdeathsig")
                    .arg("KILL")
                    .arg("--")
                    .arg(&self.qemu);
                command
            }
            None => Command::new(&self.qemu),
        };
        let accel = match self.accelerator {
            AccelKind::Kvm => "kvm",
            // A smaller translation cache: ~30 MB less resident memory per VM.
            AccelKind::Tcg => "tcg,tb-size=16",
        };
        let net_device = if self.machine == "pc" {
            "virtio-net-pci"
        } else {
            "virtio-net-device"
        };
        command
            // The session in `ps` (session uids are checked path-safe, so no commas).
            .arg("-name")
            .arg(format!("guest={session}"))
            .arg("-machine")
            .arg(&self.machine)
            .arg("-accel")
            .arg(accel)
            .arg("-m")
            .arg(self.memory_mib.to_string())
            .arg("-smp")
            .arg(self.vcpus.to_string())
            .args(["-nodefaults", "-no-user-config", "-display", "none"])
            .arg("-kernel")
            .arg(&self.kernel)
            .arg("-initrd")
            .arg(&self.initrd)
            .arg("-append")
            .arg(self.kernel_args())
            .arg("-netdev")
            .arg(format!(
                "user,id=net0,hostfwd=tcp:127.0.0.1:{port}-:{GUEST_PORT}"
            ))
            .arg("-device")
            .arg(format!("{net_device},netdev=net0"))
            .args(["-chardev", "stdio,id=console,signal=off"])
            .args(["-serial", "chardev:console"])
            .arg("-qmp")
            .arg(format!(
                "unix:{},server=on,wait=off",
                run_dir.join("qmp.sock").display()
            ));
        if self.accelerator == AccelKind::Kvm {
            command.arg("-cpu").arg("host");
        }
        if let Some(file) = incoming {
            command
                .arg("-S")
                .arg("-incoming")
                .arg(format!("exec:cat {}", shell_quote(file)));
        }
        // QEMU (and the `cat` an incoming migration runs) start with a cleared environment and
        // the default allowlist: nothing of the host's secrets can reach the guest through it
        // (docs/security.md, "What a child process gets").
        let env = ChildEnv::resolve(
            ChildEnvSpec {
                set: &BTreeMap::new(),
                passthrough: &[],
            },
            std::env::vars_os(),
        );
        command.env_clear().envs(env.vars());
        command
    }
}

/// `'path'` for `/bin/sh`; paths come from the snapshot store, which refuses single quotes.
fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display())
}

fn epoch_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn setpriv() -> Option<PathBuf> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
}

/// A local TCP port nothing listens on right now.
fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    Ok(listener.local_addr()?.port())
}

/// Whether the guest is paused in place (a warm LOCAL snapshot) or running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunState {
    Running,
    Paused,
}

/// One running QEMU process and its guest.
#[derive(Debug)]
pub(crate) struct Vm {
    child: Child,
    stdin: Option<ChildStdin>,
    qmp: Qmp,
    port: u16,
    pid: u32,
    run_dir: PathBuf,
    console: JoinHandle<()>,
    pub(crate) state: RunState,
}

impl Vm {
    /// Boots a fresh guest and waits until its harness listens.
    pub(crate) async fn boot(
        launch: &Launch,
        run_dir: PathBuf,
        session: &str,
        timeout: Duration,
    ) -> Result<Self> {
        let (mut vm, mut ready) = Self::spawn(launch, run_dir, session, None).await?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if *ready.borrow_and_update() {
                return Ok(vm);
            }
            vm.check_alive(session)?;
            match tokio::time::timeout_at(deadline, ready.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(vm.not_ready(session, "its console closed")),
                Err(_) => {
                    return Err(vm.not_ready(
                        session,
                        &format!("the guest's harness did not listen within {timeout:?}"),
                    ));
                }
            }
        }
    }

    /// Starts a VM from the snapshot `file`, runs it and sets the guest's clock (a restored
    /// guest's clock stands where the snapshot left it).
    pub(crate) async fn restore(
        launch: &Launch,
        run_dir: PathBuf,
        session: &str,
        file: &Path,
    ) -> Result<Self> {
        let started = tokio::time::Instant::now();
        let (mut vm, _ready) = Self::spawn(launch, run_dir, session, Some(file)).await?;
        let spawned = started.elapsed();
        let deadline = started + INCOMING_TIMEOUT;
        loop {
            vm.check_alive(session)?;
            let status = vm.qmp.status().await?;
            match status.as_str() {
                "inmigrate" => {}
                "paused" | "prelaunch" => break,
                other => {
                    return Err(vm.not_ready(
                        session,
                        &format!("the incoming migration ended in state {other}"),
                    ));
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(vm.not_ready(session, "the snapshot did not load within 60 s"));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let loaded = started.elapsed();
        vm.qmp.execute("cont", None).await?;
        vm.set_clock().await;
        tracing::debug!(
            session_uid = session,
            qmp_ready_ms = spawned.as_millis(),
            loaded_ms = loaded.as_millis(),
            running_ms = started.elapsed().as_millis(),
            "VM loaded from its snapshot"
        );
        Ok(vm)
    }

    async fn spawn(
        launch: &Launch,
        run_dir: PathBuf,
        session: &str,
        incoming: Option<&Path>,
    ) -> Result<(Self, watch::Receiver<bool>)> {
        std::fs::create_dir_all(&run_dir).map_err(MicrovmError::store(&run_dir))?;
        let port = free_port().map_err(MicrovmError::store(&run_dir))?;
        let log_path = run_dir.join("qemu.log");
        let log = std::fs::File::create(&log_path).map_err(MicrovmError::store(&log_path))?;
        let mut command = launch.command(session, &run_dir, port, incoming);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|source| MicrovmError::Spawn {
            program: launch.qemu.clone(),
            source,
        })?;
        let pid = child.id().unwrap_or_default();
        let stdin = child.stdin.take();
        let (ready_tx, ready) = watch::channel(false);
        let console = match child.stdout.take() {
            Some(stdout) => tokio::spawn(read_console(stdout, session.to_owned(), ready_tx)),
            None => tokio::spawn(async {}),
        };
        let qmp = match Qmp::connect(&run_dir.join("qmp.sock"), Duration::from_secs(10)).await {
            Ok(qmp) => qmp,
            Err(err) => {
                console.abort();
                let _ = child.kill().await;
                return Err(MicrovmError::NotReady {
                    session: session.to_owned(),
                    reason: format!("{err}; {}", log_tail(&log_path)),
                });
            }
        };
        tracing::debug!(session_uid = session, pid, port, "qemu started");
        Ok((
            Self {
                child,
                stdin,
                qmp,
                port,
                pid,
                run_dir,
                console,
                state: RunState::Running,
            },
            ready,
        ))
    }

    fn check_alive(&mut self, session: &str) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.not_ready(session, &format!("qemu exited ({status})"))),
            Err(err) => Err(self.not_ready(session, &format!("cannot watch qemu: {err}"))),
        }
    }

    fn not_ready(&self, session: &str, what: &str) -> MicrovmError {
        MicrovmError::NotReady {
            session: session.to_owned(),
            reason: format!("{what}; {}", log_tail(&self.run_dir.join("qemu.log"))),
        }
    }

    /// Tells the guest the time (see the guest's init script).
    async fn set_clock(&mut self) {
        let line = format!("clock={}\n", epoch_seconds());
        if let Some(stdin) = self.stdin.as_mut()
            && let Err(err) = stdin.write_all(line.as_bytes()).await
        {
            tracing::warn!(pid = self.pid, error = %err, "cannot set the guest clock");
        }
    }

    /// The host address the guest's harness is reached at.
    pub(crate) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether QEMU still runs.
    pub(crate) fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None)) && !leader_is_zombie(self.pid)
    }

    /// Pauses the guest in place (a warm snapshot).
    pub(crate) async fn pause(&mut self) -> Result<()> {
        self.qmp.execute("stop", None).await?;
        self.state = RunState::Paused;
        Ok(())
    }

    /// Runs a paused guest again.
    pub(crate) async fn resume(&mut self) -> Result<()> {
        self.qmp.execute("cont", None).await?;
        self.state = RunState::Running;
        self.set_clock().await;
        Ok(())
    }

    /// Stops the guest and writes its whole state (memory and devices) to `file`, hashed on the
    /// way: QEMU migrates to a unix socket this process reads, so the checksum costs no second
    /// pass over the file. Returns the sha256 (hex) and the size. The guest stays stopped; QEMU
    /// refuses a second migration from it, so the VM is done after this.
    pub(crate) async fn save(&mut self, file: &Path) -> Result<(String, u64)> {
        let socket = self.run_dir.join("out.sock");
        remove_stale(&socket)?;
        let listener = UnixListener::bind(&socket).map_err(MicrovmError::store(&socket))?;
        let (gave_up, given_up) = oneshot::channel::<()>();
        let receive = receive_state(listener, file.to_owned(), given_up);
        let drive = async {
            let driven = self.migrate_to(&socket).await;
            if driven.is_err() {
                // QEMU may never connect: the receiver stops waiting for it.
                let _ = gave_up.send(());
            }
            driven
        };
        let started = tokio::time::Instant::now();
        let receive = async {
            let received = receive.await;
            (received, started.elapsed())
        };
        let ((received, received_in), driven) = tokio::join!(receive, drive);
        let _ = std::fs::remove_file(&socket);
        let migrated_in = driven?;
        tracing::debug!(
            pid = self.pid,
            migrated_ms = migrated_in.as_millis(),
            received_ms = received_in.as_millis(),
            "VM state written"
        );
        received
    }

    /// Stops the guest and migrates it to `socket`, waiting until QEMU reports it done; how
    /// long that took.
    async fn migrate_to(&mut self, socket: &Path) -> Result<Duration> {
        let started = tokio::time::Instant::now();
        self.qmp
            .execute(
                "migrate-set-parameters",
                Some(json!({ "max-bandwidth": 100_u64 << 30 })),
            )
            .await?;
        self.qmp.execute("stop", None).await?;
        self.state = RunState::Paused;
        let uri = format!("unix:{}", socket.display());
        self.qmp
            .execute("migrate", Some(json!({ "uri": uri })))
            .await?;
        let deadline = tokio::time::Instant::now() + OUTGOING_TIMEOUT;
        loop {
            let (status, error) = self.qmp.migration().await?;
            match status.as_str() {
                "completed" => return Ok(started.elapsed()),
                "failed" | "cancelled" => {
                    return Err(MicrovmError::Qmp {
                        command: "migrate".into(),
                        reason: format!("migration {status}: {error}"),
                    });
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(MicrovmError::Qmp {
                    command: "migrate".into(),
                    reason: "the snapshot was not written within 120 s".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Ends QEMU (nothing of the guest is kept) and removes its run directory.
    pub(crate) async fn kill(mut self) {
        self.console.abort();
        if let Err(err) = self.child.kill().await {
            tracing::warn!(pid = self.pid, error = %err, "cannot kill qemu");
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        // The child itself is killed by `kill_on_drop`.
        self.console.abort();
    }
}

/// Forwards the guest console to the log and flags the harness's readiness line.
async fn read_console(stdout: ChildStdout, session: String, ready: watch::Sender<bool>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_CONSOLE_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        tracing::debug!(session_uid = %session, console = %text, "guest");
        if text.contains(READY_LINE) {
            ready.send_replace(true);
        }
    }
}

/// Accepts QEMU's outgoing migration on `listener` and copies it to `file`, hashing it on the
/// way (on a blocking thread: hashing ~100 MB is CPU work). Gives up when `given_up` fires
/// (the migration failed before QEMU connected).
async fn receive_state(
    listener: UnixListener,
    file: PathBuf,
    mut given_up: oneshot::Receiver<()>,
) -> Result<(String, u64)> {
    let refused = |reason: &str| MicrovmError::Qmp {
        command: "migrate".into(),
        reason: reason.to_owned(),
    };
    let stream = tokio::select! {
        accepted = listener.accept() => accepted.map_err(MicrovmError::store(&file))?.0,
        Ok(()) = &mut given_up => return Err(refused("QEMU did not connect to the snapshot socket")),
        () = tokio::time::sleep(OUTGOING_TIMEOUT) => {
            return Err(refused("QEMU did not connect to the snapshot socket within 120 s"));
        }
    };
    let stream = stream
        .into_std()
        .and_then(|stream| {
            stream.set_nonblocking(false)?;
            stream.set_read_timeout(Some(OUTGOING_TIMEOUT))?;
            Ok(stream)
        })
        .map_err(MicrovmError::store(&file))?;
    let path = file.clone();
    tokio::task::spawn_blocking(move || copy_hashing(stream, &path))
        .await
        .map_err(|e| MicrovmError::Store {
            path: file.clone(),
            source: std::io::Error::other(e.to_string()),
        })?
        .map_err(MicrovmError::store(&file))
}

/// Removes a socket left at `path` by an earlier VM of the same run directory.
fn remove_stale(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(MicrovmError::store(path)(err))
        }
        _ => Ok(()),
    }
}

/// The last lines QEMU wrote to its log, for error messages.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(3).collect();
    if lines.is_empty() {
        "qemu wrote nothing to stderr".to_owned()
    } else {
        format!(
            "qemu: {}",
            lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
        )
    }
}

/// Whether `/proc` shows `pid` as a zombie or dead (false when it cannot tell). A killed QEMU
/// (many threads) cannot be reaped until its last thread has exited, while its leader already
/// shows as a zombie; counting it as running would dial a guest that is gone. (The local
/// runtime's `process::child_runs` does the same; this crate depends on the API crate only.)
fn leader_is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(accelerator: AccelKind) -> Launch {
        Launch {
            qemu: PathBuf::from("qemu-system-x86_64"),
            kernel: PathBuf::from("/k"),
            initrd: PathBuf::from("/i"),
            memory_mib: 256,
            vcpus: 2,
            machine: "microvm".into(),
            accelerator,
            harness: "counter".into(),
            cpu_khz: Some(2_000_000),
            answer_delay_ms: 0,
        }
    }

    fn args(launch: &Launch, incoming: Option<&Path>) -> Vec<String> {
        launch
            .command("s1", Path::new("/run/1"), 4242, incoming)
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn has_pair(args: &[String], flag: &str, value: &str) -> bool {
        args.windows(2).any(|w| w[0] == flag && w[1] == value)
    }

    // The KVM command line is built and checked here even where KVM cannot run; the resource
    // limits come from the configuration.
    #[test]
    fn command_lines_carry_the_accelerator_and_the_resource_limits() {
        let kvm = args(&launch(AccelKind::Kvm), None);
        assert!(has_pair(&kvm, "-accel", "kvm"), "{kvm:?}");
        assert!(has_pair(&kvm, "-cpu", "host"), "{kvm:?}");
        assert!(has_pair(&kvm, "-m", "256"), "{kvm:?}");
        assert!(has_pair(&kvm, "-smp", "2"), "{kvm:?}");
        assert!(!kvm.iter().any(|a| a == "-incoming"), "{kvm:?}");
        let tcg = args(&launch(AccelKind::Tcg), Some(Path::new("/s/x.vmstate")));
        assert!(has_pair(&tcg, "-accel", "tcg,tb-size=16"), "{tcg:?}");
        assert!(!tcg.iter().any(|a| a == "-cpu"), "{tcg:?}");
        assert!(
            has_pair(&tcg, "-incoming", "exec:cat '/s/x.vmstate'"),
            "{tcg:?}"
        );
        assert!(
            has_pair(
                &tcg,
                "-netdev",
                "user,id=net0,hostfwd=tcp:127.0.0.1:4242-:7000"
            ),
            "{tcg:?}"
        );
        let append = |args: &[String]| {
            args.windows(2)
                .find(|w| w[0] == "-append")
                .map(|w| w[1].clone())
                .unwrap_or_default()
        };
        assert!(append(&tcg).contains("tsc_early_khz=2000000"));
        assert!(!append(&tcg).contains("answer_delay_ms"));
        let held = Launch {
            answer_delay_ms: 1500,
            ..launch(AccelKind::Tcg)
        };
        assert!(append(&args(&held, None)).contains("agentsessions.answer_delay_ms=1500"));
    }
}
