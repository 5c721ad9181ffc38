//! [`LocalRuntime`]: harnesses on unix sockets on this machine (semantics §10.2), in two modes.
//!
//! - **In-process** ([`LocalRuntime::in_process`]): one harness object in this process, served
//!   by one harnesswire server on `<tmpdir>/agentlocal-<pid>-<n>.sock`, started on the first
//!   create and shared by every session. Stop is a no-op and status is NONE: nothing is
//!   dedicated to a session, whose harness runs only during its turns.
//! - **Process** ([`LocalRuntime::processes`]): one `harnessnode` process per session, each on its
//!   own socket. Per session rather than shared, so that one session's harness crash, hang or
//!   leak cannot touch another's, and so that stop and suspend have something real to release:
//!   stop and snapshot EXTERNAL terminate the session's process, and the next create starts a
//!   fresh one on the same socket path (a dialer's cached channel then simply reconnects).
//!
//! Both are filesystem-only: snapshot LOCAL is refused, EXTERNAL is `{local: session, memory:
//! false}` (the host replays the journal), restore and fork create, and capabilities are all
//! false, so `REQUIRES_MEMORY_SNAPSHOT` harnesses are refused before placement. Create is called
//! on every execution and is idempotent: a live server or process is reused.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};

use agentsessions_api::{
    ComputeState, Descriptor, ForkOpts, Harness, Incarnation, Result as ApiResult, Runtime,
    RuntimeCapabilities, SessionSpec, SnapshotKind, SnapshotRef,
};
use agentsessions_harnesswire::{ListenAddr, RemoteHarness, remove_stale_socket};
use async_trait::async_trait;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::address::HarnessAddress;
use crate::error::{Result, RuntimeError};
use crate::incarnation::{external_snapshot, fork_child, restore_uid, session_uid, worker};
use crate::process::{HarnessnodeConfig, Node, remove_path, socket_path};

const NAME: &str = "local";

/// The local runtime; see the module docs for its two modes.
#[derive(Debug)]
pub struct LocalRuntime {
    mode: Mode,
    closed: AtomicBool,
}

#[derive(Debug)]
enum Mode {
    InProcess(Shared),
    Processes(Box<Processes>),
}

/// In-process mode: one harness, one lazily started server.
struct Shared {
    harness: Arc<dyn Harness>,
    /// An operator-chosen socket path; `None` generates one per start.
    socket: Option<PathBuf>,
    server: Mutex<Option<Served>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

/// A running in-process server: its task, tracked, and the token that stops it. Dropping it
/// signals the stop and removes the socket file; [`Served::drain`] also waits for the drain.
#[derive(Debug)]
struct Served {
    path: PathBuf,
    stop: CancellationToken,
    task: TaskTracker,
}

impl Served {
    /// Serves `harness` on `listener` until stopped.
    fn start(
        path: PathBuf,
        listener: agentsessions_harnesswire::HarnessListener,
        harness: Arc<dyn Harness>,
    ) -> Self {
        let stop = CancellationToken::new();
        let task = TaskTracker::new();
        let stopped = stop.clone().cancelled_owned();
        task.spawn(async move {
            if let Err(err) = listener.serve(harness, stopped).await {
                tracing::warn!(error = %err, "local harness server failed");
            }
        });
        task.close();
        Self { path, stop, task }
    }

    /// Whether the server task has ended (stopped, or failed on its own).
    fn has_ended(&self) -> bool {
        self.task.is_empty()
    }

    /// Stops the server and waits until it has drained.
    async fn drain(self) {
        self.stop.cancel();
        self.task.wait().await;
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.cancel();
        // The server removes it too once drained; a runtime shutting down may not let it.
        let _ = remove_path(&self.path);
    }
}

/// Process mode: one process per session.
#[derive(Debug)]
struct Processes {
    config: HarnessnodeConfig,
    program: PathBuf,
    slots: StdMutex<HashMap<String, Arc<Mutex<Slot>>>>,
    descriptor: Mutex<Option<Descriptor>>,
}

/// A session's place in process mode: a socket path fixed for the session, and its process.
#[derive(Debug)]
struct Slot {
    socket: PathBuf,
    node: Option<Node>,
}

impl LocalRuntime {
    /// In-process mode: serves `harness` (shared by all sessions) on a generated socket in the
    /// system temp directory.
    pub fn in_process(harness: Arc<dyn Harness>) -> Self {
        Self::new(Mode::InProcess(Shared {
            harness,
            socket: None,
            server: Mutex::new(None),
        }))
    }

    /// In-process mode on an operator-chosen socket `path`. A stale socket there (one that no
    /// server answers) is removed on start; a live one, or a file that is not a socket, is an
    /// error.
    pub fn in_process_at(harness: Arc<dyn Harness>, path: impl Into<PathBuf>) -> Self {
        Self::new(Mode::InProcess(Shared {
            harness,
            socket: Some(path.into()),
            server: Mutex::new(None),
        }))
    }

    /// Process mode: a `harnessnode` process per session, as `config` says.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::HarnessnodeNotFound`] when the executable cannot be found.
    pub fn processes(config: HarnessnodeConfig) -> Result<Self> {
        let program = config.locate()?;
        Ok(Self::new(Mode::Processes(Box::new(Processes {
            config,
            program,
            slots: StdMutex::new(HashMap::new()),
            descriptor: Mutex::new(None),
        }))))
    }

    fn new(mode: Mode) -> Self {
        Self {
            mode,
            closed: AtomicBool::new(false),
        }
    }

    /// False: the descriptor does not change behind a local runtime's back.
    pub fn describes_live_harness(&self) -> bool {
        false
    }

    /// The harness's descriptor. In-process mode asks the harness object; process mode asks a
    /// harness process once (starting a short-lived one) and keeps the answer, since the
    /// configuration that decides it is fixed for the runtime's lifetime.
    ///
    /// # Errors
    ///
    /// The harness's describe error; in process mode also the errors of starting a process, and
    /// [`RuntimeError::Closed`].
    pub async fn describe(&self) -> ApiResult<Descriptor> {
        self.check_open()?;
        match &self.mode {
            Mode::InProcess(shared) => shared.harness.describe().await,
            Mode::Processes(processes) => processes.describe().await,
        }
    }

    /// The pid of the session's harness process (process mode, while it runs).
    pub async fn process_id(&self, session_uid: &str) -> Option<u32> {
        let Mode::Processes(processes) = &self.mode else {
            return None;
        };
        let slot = processes.existing_slot(session_uid)?;
        let mut slot = slot.lock().await;
        let node = slot.node.as_mut()?;
        node.is_running().then(|| node.pid())
    }

    /// Stops everything this runtime started and waits for it: the in-process server drains and
    /// removes its socket; every harness process is stopped. Later calls fail with
    /// [`RuntimeError::Closed`].
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        match &self.mode {
            Mode::InProcess(shared) => {
                let served = shared.server.lock().await.take();
                if let Some(served) = served {
                    served.drain().await;
                }
            }
            Mode::Processes(processes) => processes.stop_all().await,
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(RuntimeError::Closed { runtime: NAME });
        }
        Ok(())
    }

    async fn create_for(&self, uid: &str) -> Result<Incarnation> {
        self.check_open()?;
        match &self.mode {
            Mode::InProcess(shared) => {
                let path = shared.ensure_server().await?;
                Ok(incarnation(
                    uid,
                    std::process::id(),
                    &HarnessAddress::unix(&path),
                ))
            }
            Mode::Processes(processes) => {
                let slot = processes.slot(uid);
                let mut slot = slot.lock().await;
                if let Some(node) = slot.node.as_mut() {
                    if node.is_running() {
                        return Ok(incarnation(
                            uid,
                            node.pid(),
                            &HarnessAddress::unix(&slot.socket),
                        ));
                    }
                    tracing::info!(
                        session_uid = uid,
                        pid = node.pid(),
                        "harness process gone; starting another"
                    );
                    slot.node = None;
                }
                let node =
                    Node::start(&processes.program, &processes.config, uid, &slot.socket).await?;
                // A close that ran while the process started must not leave it behind.
                self.check_open()?;
                let inc = incarnation(uid, node.pid(), &HarnessAddress::unix(&slot.socket));
                slot.node = Some(node);
                Ok(inc)
            }
        }
    }

    /// Terminates the session's process (process mode); nothing in-process.
    async fn release(&self, uid: &str) -> Result<()> {
        let Mode::Processes(processes) = &self.mode else {
            return Ok(());
        };
        let Some(slot) = processes.existing_slot(uid) else {
            return Ok(());
        };
        let node = slot.lock().await.node.take();
        match node {
            Some(node) => node.stop(uid, processes.config.stop_grace).await,
            None => Ok(()),
        }
    }
}

fn incarnation(uid: &str, pid: u32, address: &HarnessAddress) -> Incarnation {
    Incarnation {
        id: uid.to_owned(),
        worker: worker(pid),
        address: address.to_string(),
        runtime: NAME.to_owned(),
        ..Incarnation::default()
    }
}

impl Shared {
    /// The socket of the running server, starting it first when there is none (or it ended).
    async fn ensure_server(&self) -> Result<PathBuf> {
        let mut server = self.server.lock().await;
        if let Some(served) = server.as_ref()
            && !served.has_ended()
        {
            return Ok(served.path.clone());
        }
        if let Some(ended) = server.take() {
            tracing::warn!(path = %ended.path.display(), "local harness server ended; restarting it");
        }
        let path = match &self.socket {
            Some(path) => {
                remove_stale_socket(path).map_err(|source| RuntimeError::Serve {
                    path: path.clone(),
                    source,
                })?;
                path.clone()
            }
            None => {
                let path = socket_path(&std::env::temp_dir());
                // The name carries this pid, so whatever is there was left by an earlier
                // process that had the same pid.
                let _ = remove_path(&path);
                path
            }
        };
        let listener = ListenAddr::Unix(path.clone())
            .bind()
            .await
            .map_err(|source| RuntimeError::Serve {
                path: path.clone(),
                source,
            })?;
        *server = Some(Served::start(
            path.clone(),
            listener,
            Arc::clone(&self.harness),
        ));
        Ok(path)
    }
}

impl Processes {
    fn slot(&self, uid: &str) -> Arc<Mutex<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = self.config.socket_dir_or_temp();
        Arc::clone(slots.entry(uid.to_owned()).or_insert_with(|| {
            Arc::new(Mutex::new(Slot {
                socket: socket_path(&dir),
                node: None,
            }))
        }))
    }

    fn existing_slot(&self, uid: &str) -> Option<Arc<Mutex<Slot>>> {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.get(uid).cloned()
    }

    async fn describe(&self) -> ApiResult<Descriptor> {
        let mut cached = self.descriptor.lock().await;
        if let Some(descriptor) = cached.as_ref() {
            return Ok(descriptor.clone());
        }
        let socket = socket_path(&self.config.socket_dir_or_temp());
        let node = Node::start(&self.program, &self.config, "(describe)", &socket).await?;
        let address = HarnessAddress::unix(&socket);
        let described = match agentsessions_harnesswire::channel(&address.dial_uri()) {
            Ok(channel) => RemoteHarness::new(channel).describe().await,
            Err(err) => Err(err.into()),
        };
        if let Err(err) = node.stop("(describe)", self.config.stop_grace).await {
            tracing::warn!(error = %err, "cannot stop the describe process");
        }
        let descriptor = described?;
        *cached = Some(descriptor.clone());
        Ok(descriptor)
    }

    async fn stop_all(&self) {
        let slots: Vec<(String, Arc<Mutex<Slot>>)> = {
            let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots
                .iter()
                .map(|(uid, slot)| (uid.clone(), Arc::clone(slot)))
                .collect()
        };
        for (uid, slot) in slots {
            let node = slot.lock().await.node.take();
            if let Some(node) = node
                && let Err(err) = node.stop(&uid, self.config.stop_grace).await
            {
                tracing::warn!(session_uid = uid, error = %err, "cannot stop a harness process");
            }
        }
    }
}

#[async_trait]
impl Runtime for LocalRuntime {
    async fn create(&self, spec: &SessionSpec) -> ApiResult<Incarnation> {
        Ok(self.create_for(session_uid(NAME, spec)?).await?)
    }

    /// EXTERNAL also releases the session's process in process mode (a suspended session holds
    /// no compute); the next create starts another.
    async fn snapshot(
        &self,
        incarnation: &Incarnation,
        kind: SnapshotKind,
    ) -> ApiResult<SnapshotRef> {
        self.check_open()?;
        let snapshot = external_snapshot(NAME, incarnation, kind)?;
        self.release(&incarnation.id).await?;
        Ok(snapshot)
    }

    async fn restore(&self, snapshot: &SnapshotRef) -> ApiResult<Incarnation> {
        Ok(self.create_for(restore_uid(NAME, snapshot)?).await?)
    }

    async fn fork(&self, _snapshot: &SnapshotRef, opts: &ForkOpts) -> ApiResult<Incarnation> {
        Ok(self.create_for(fork_child(NAME, opts)?).await?)
    }

    /// In-process: a no-op (the server is shared). Process mode: terminates the session's
    /// process and removes its socket.
    async fn stop(&self, incarnation: &Incarnation) -> ApiResult<()> {
        Ok(self.release(&incarnation.id).await?)
    }

    /// In-process: NONE, since nothing is dedicated to a session: the shared server runs its
    /// harness only during a turn, which the host holds the session for, and keeps nothing of
    /// it between turns. Process mode: LIVE while the session's process runs, NONE otherwise
    /// (the next create starts one).
    async fn status(&self, incarnation: &Incarnation) -> ApiResult<ComputeState> {
        self.check_open()?;
        Ok(match &self.mode {
            Mode::InProcess(_) => ComputeState::None,
            Mode::Processes(_) => match self.process_id(&incarnation.id).await {
                Some(_) => ComputeState::Live,
                None => ComputeState::None,
            },
        })
    }

    fn capabilities(&self) -> RuntimeCapabilities {
        RuntimeCapabilities::default()
    }
}
