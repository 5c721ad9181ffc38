//! Harness processes for [`crate::LocalRuntime`]'s process mode: where the `harnessnode`
//! executable is ([`HarnessnodeConfig`]), and one supervised process per session (`Node`).
//!
//! A node is started with `--exit-on-stdin-eof` and a piped stdin the runtime holds: closing it
//! is the graceful stop, and it also ends the node when the host dies without running any
//! destructor (SIGKILL), so no harness process outlives its host. The child is also
//! `kill_on_drop`, so a dropped node (or a create future dropped mid-start) leaves no process.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentsessions_api::{ChildEnv, ChildEnvSpec};
use tokio::process::{Child, ChildStdin, Command};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::error::{Result, RuntimeError, waited};

/// The environment variable naming the `harnessnode` executable.
pub const HARNESSNODE_ENV: &str = "HARNESSNODE";

/// How a process-mode [`crate::LocalRuntime`] starts harness processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessnodeConfig {
    /// The executable; `None` looks it up (see [`HarnessnodeConfig::locate`]).
    pub program: Option<PathBuf>,
    /// The reference harness to run (`--harness`): `echo`, `chat` or `counter`.
    pub harness: String,
    /// The model (`--model`), required for `chat`; empty passes none.
    pub model: String,
    /// Further arguments, appended as given (e.g. `--system-prompt`).
    pub args: Vec<String>,
    /// Where sockets are created; `None` is the system temp directory.
    pub socket_dir: Option<PathBuf>,
    /// How long a started process may take to answer health checks.
    pub ready_timeout: Duration,
    /// How long a stopping process may take to exit after its stdin closes before it is killed.
    pub stop_grace: Duration,
    /// Variables set for the process. It never inherits the host's whole environment: it starts
    /// with a cleared one plus the default allowlist, `env_passthrough` and this table
    /// (`docs/security.md`, "What a child process gets").
    pub env: BTreeMap<String, String>,
    /// Names of the host's variables the process gets as they are.
    pub env_passthrough: Vec<String>,
}

impl HarnessnodeConfig {
    /// Runs reference harness `harness`, with the default timeouts (10 s ready, 5 s grace).
    pub fn new(harness: impl Into<String>) -> Self {
        Self {
            program: None,
            harness: harness.into(),
            model: String::new(),
            args: Vec::new(),
            socket_dir: None,
            ready_timeout: Duration::from_secs(10),
            stop_grace: Duration::from_secs(5),
            env: BTreeMap::new(),
            env_passthrough: Vec::new(),
        }
    }

    /// Sets `name` to `value` in the process's environment.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// Passes the host's variable `name` through to the process.
    #[must_use]
    pub fn env_passthrough(mut self, name: impl Into<String>) -> Self {
        self.env_passthrough.push(name.into());
        self
    }

    /// The environment a process starts with, drawn from `host` (the host's own).
    pub fn child_env(&self, host: impl IntoIterator<Item = (OsString, OsString)>) -> ChildEnv {
        ChildEnv::resolve(
            ChildEnvSpec {
                set: &self.env,
                passthrough: &self.env_passthrough,
            },
            host,
        )
    }

    /// Uses the executable at `path`.
    #[must_use]
    pub fn program(mut self, path: impl Into<PathBuf>) -> Self {
        self.program = Some(path.into());
        self
    }

    /// Passes `--model <model>`.
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Appends one argument.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Creates sockets in `dir`.
    #[must_use]
    pub fn socket_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.socket_dir = Some(dir.into());
        self
    }

    /// The executable: the configured path, else `$HARNESSNODE`, else `harnessnode` next to the
    /// current executable (or one directory up, where cargo puts binaries beside `deps/`).
    ///
    /// # Errors
    ///
    /// [`RuntimeError::HarnessnodeNotFound`] listing what was tried.
    pub fn locate(&self) -> Result<PathBuf> {
        let mut tried = Vec::new();
        let candidates = self
            .program
            .clone()
            .map(|path| vec![path])
            .or_else(|| std::env::var_os(HARNESSNODE_ENV).map(|path| vec![PathBuf::from(path)]))
            .unwrap_or_else(|| beside_current_exe("harnessnode"));
        for candidate in candidates {
            if candidate.is_file() {
                return Ok(candidate);
            }
            tried.push(candidate.display().to_string());
        }
        Err(RuntimeError::HarnessnodeNotFound {
            looked_at: if tried.is_empty() {
                "nothing: the current executable's directory is unknown".to_owned()
            } else {
                tried.join(", ")
            },
        })
    }

    pub(crate) fn socket_dir_or_temp(&self) -> PathBuf {
        self.socket_dir.clone().unwrap_or_else(std::env::temp_dir)
    }
}

fn beside_current_exe(name: &str) -> Vec<PathBuf> {
    let Ok(exe) = std::env::current_exe() else {
        return Vec::new();
    };
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(name))
        .collect()
}

/// A fresh socket path `<dir>/agentlocal-<pid>-<n>.sock`, unique within this process.
pub(crate) fn socket_path(dir: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("agentlocal-{}-{n}.sock", std::process::id()))
}

/// Removes whatever is at `path`; nothing there is fine.
pub(crate) fn remove_path(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// One running harness process serving on `socket`.
#[derive(Debug)]
pub(crate) struct Node {
    child: Child,
    stdin: Option<ChildStdin>,
    pid: u32,
    socket: PathBuf,
}

impl Node {
    /// Starts `program` for `session` on `socket` and waits until it reports healthy.
    pub(crate) async fn start(
        program: &Path,
        config: &HarnessnodeConfig,
        session: &str,
        socket: &Path,
    ) -> Result<Self> {
        remove_path(socket).map_err(|source| RuntimeError::Spawn {
            program: program.to_path_buf(),
            source,
        })?;
        let mut command = Command::new(program);
        command
            .arg("--harness")
            .arg(&config.harness)
            .arg("--listen")
            .arg(format!("unix:{}", socket.display()))
            .arg("--exit-on-stdin-eof");
        if !config.model.is_empty() {
            command.arg("--model").arg(&config.model);
        }
        let env = config.child_env(std::env::vars_os());
        command
            .args(&config.args)
            .env_clear()
            .envs(env.vars())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|source| RuntimeError::Spawn {
            program: program.to_path_buf(),
            source,
        })?;
        let stdin = child.stdin.take();
        let pid = child.id().unwrap_or_default();
        let mut node = Self {
            child,
            stdin,
            pid,
            socket: socket.to_path_buf(),
        };
        node.wait_ready(session, config.ready_timeout).await?;
        tracing::info!(
            session_uid = session,
            pid,
            env = %env.names(),
            "harness process ready (environment variables by name)"
        );
        Ok(node)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process still runs.
    pub(crate) fn is_running(&mut self) -> bool {
        child_runs(&mut self.child, self.pid)
    }

    async fn wait_ready(&mut self, session: &str, timeout: Duration) -> Result<()> {
        let not_ready = |reason: String| RuntimeError::NotReady {
            session: session.to_owned(),
            reason,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let mut health = None;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Err(not_ready(format!("it exited ({status})"))),
                Ok(None) => {}
                Err(err) => return Err(not_ready(format!("cannot watch it: {err}"))),
            }
            // A cheap connect first: the socket appears only once the process listens.
            if tokio::net::UnixStream::connect(&self.socket).await.is_ok() {
                if health.is_none() {
                    let uri = format!("unix:{}", self.socket.display());
                    let channel = agentsessions_harnesswire::channel(&uri)
                        .map_err(|err| not_ready(format!("cannot reach its socket: {err}")))?;
                    health = Some(HealthClient::new(channel));
                }
                if let Some(client) = health.as_mut() {
                    let check = client.check(HealthCheckRequest {
                        service: String::new(),
                    });
                    if let Ok(Ok(answer)) =
                        tokio::time::timeout(Duration::from_secs(1), check).await
                        && answer.into_inner().status == ServingStatus::Serving as i32
                    {
                        return Ok(());
                    }
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(not_ready(waited(timeout)));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the process: closes its stdin (a graceful drain), then kills it after `grace`.
    pub(crate) async fn stop(mut self, session: &str, grace: Duration) -> Result<()> {
        drop(self.stdin.take());
        if let Ok(Ok(_)) = tokio::time::timeout(grace, self.child.wait()).await {
            return Ok(());
        }
        tracing::warn!(
            session_uid = session,
            pid = self.pid,
            "harness process did not exit; killing it"
        );
        self.child
            .kill()
            .await
            .map_err(|source| RuntimeError::Stop {
                session: session.to_owned(),
                source,
            })
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // The child itself is killed by `kill_on_drop`; its socket file would stay behind.
        if let Err(err) = remove_path(&self.socket) {
            tracing::warn!(path = %self.socket.display(), error = %err, "cannot remove a harness socket");
        }
    }
}

/// Whether `child` (whose pid is `pid`) still runs. A killed multi-threaded process cannot be
/// reaped until its last thread has exited, while its leader already shows as a zombie in
/// `/proc`; counting that as running would hand out an address nobody answers on.
pub fn child_runs(child: &mut tokio::process::Child, pid: u32) -> bool {
    matches!(child.try_wait(), Ok(None)) && !leader_is_zombie(pid)
}

/// Whether `/proc` shows `pid` as a zombie or dead (false when it cannot tell).
fn leader_is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
    })
}
