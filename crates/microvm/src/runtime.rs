//! [`MicrovmRuntime`]: the [`Runtime`] (and [`InstanceRestorer`]) over QEMU VMs, one per session
//! incarnation.
//!
//! - **create** attaches to the session's running VM; with none it restores the snapshot the
//!   journal last recorded when the session still holds it, refuses with `MemoryStateLost` when
//!   turns are recorded (their memory is gone), and otherwise boots a fresh VM.
//! - **snapshot** LOCAL pauses the VM in place; EXTERNAL writes its whole state to the store and
//!   ends the VM (a suspended session holds no compute).
//! - **restore** attaches to a running VM of the recorded instance or runs a new VM from the
//!   held snapshot, checksum verified, with the instance identity the snapshot recorded.
//! - **fork** runs a new VM per child from the parent's held snapshot, each a new instance.
//! - **stop** ends the VM and deletes the session's snapshots.
//!
//! Every operation on a session runs under that session's lock, so two calls never drive one
//! VM at once.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Instant;

use agentsessions_api::{
    ComputeState, ForkOpts, Incarnation, InstanceRestorer, Result as ApiResult, Runtime,
    RuntimeCapabilities, SessionSpec, SnapshotKind, SnapshotRef,
};
use async_trait::async_trait;
use tokio::sync::Mutex;
use tokio_util::task::TaskTracker;

use crate::config::{Accelerator, MicrovmConfig};
use crate::error::{MicrovmError, Result};
use crate::launch::Launch;
use crate::store::{Meta, SnapshotName, Store, random_id, remove_files};
use crate::vm::{RunState, Vm};

/// The backend name in incarnations.
pub const NAME: &str = "microvm";

/// The QEMU microVM runtime; cheap to clone (clones share VMs and the store).
#[derive(Debug, Clone)]
pub struct MicrovmRuntime {
    shared: Arc<Shared>,
    /// The harnessnode `--harness` kind booted for new sessions.
    harness: String,
}

#[derive(Debug)]
struct Shared {
    config: MicrovmConfig,
    accelerator: Accelerator,
    store: Store,
    slots: StdMutex<HashMap<String, Arc<Mutex<Slot>>>>,
    closed: AtomicBool,
    /// Deletions of unheld snapshot files, run off the restores that release them.
    cleanup: TaskTracker,
}

/// A session's place: its running VM, if any.
#[derive(Debug, Default)]
struct Slot {
    live: Option<Live>,
}

#[derive(Debug)]
struct Live {
    vm: Vm,
    instance: String,
    launch: Launch,
}

fn required<'a>(value: &'a str, what: &'static str) -> Result<&'a str> {
    if value.is_empty() {
        return Err(MicrovmError::MissingArgument(what));
    }
    Ok(value)
}

impl MicrovmRuntime {
    /// Checks `config`, chooses the accelerator and opens the snapshot store; new sessions boot
    /// the `harness` kind.
    ///
    /// # Errors
    /// [`MicrovmError::Config`], or a store directory that cannot be created.
    pub fn start(config: MicrovmConfig, harness: impl Into<String>) -> Result<Self> {
        config.check()?;
        let accelerator = Accelerator::choose(&config.accelerator)?;
        let store = Store::open(&config.snapshot_dir)?;
        tracing::info!(
            accelerator = accelerator.kind.as_str(),
            reason = %accelerator.reason,
            "microvm runtime ready"
        );
        Ok(Self {
            shared: Arc::new(Shared {
                config,
                accelerator,
                store,
                slots: StdMutex::new(HashMap::new()),
                closed: AtomicBool::new(false),
                cleanup: TaskTracker::new(),
            }),
            harness: harness.into(),
        })
    }

    /// The same runtime (VMs, store) booting the `harness` kind for new sessions.
    #[must_use]
    pub fn serving(&self, harness: impl Into<String>) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            harness: harness.into(),
        }
    }

    /// The accelerator chosen at startup.
    pub fn accelerator(&self) -> &Accelerator {
        &self.shared.accelerator
    }

    /// The QEMU pid of the session's VM while one runs.
    pub async fn vm_pid(&self, session: &str) -> Option<u32> {
        let slot = self.existing_slot(session)?;
        let mut slot = slot.lock().await;
        let live = slot.live.as_mut()?;
        live.vm.is_running().then(|| live.vm.pid())
    }

    /// The files the store keeps for `session`.
    pub fn snapshot_files(&self, session: &str) -> Vec<PathBuf> {
        self.shared.store.files_of(session)
    }

    /// Ends every VM. Later calls fail with [`MicrovmError::Closed`].
    pub async fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        let slots: Vec<Arc<Mutex<Slot>>> = {
            let slots = self
                .shared
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            slots.values().cloned().collect()
        };
        for slot in slots {
            if let Some(live) = slot.lock().await.live.take() {
                live.vm.kill().await;
            }
        }
        self.shared.cleanup.close();
        self.shared.cleanup.wait().await;
    }

    fn check_open(&self) -> Result<()> {
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(MicrovmError::Closed);
        }
        Ok(())
    }

    fn slot(&self, session: &str) -> Arc<Mutex<Slot>> {
        let mut slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(slots.entry(session.to_owned()).or_default())
    }

    fn existing_slot(&self, session: &str) -> Option<Arc<Mutex<Slot>>> {
        let slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slots.get(session).cloned()
    }

    fn incarnation(session: &str, live: &Live) -> Incarnation {
        Incarnation {
            id: session.to_owned(),
            worker: format!("qemu-{}", live.vm.pid()),
            address: live.vm.address(),
            runtime: NAME.to_owned(),
            compute_instance: live.instance.clone(),
            ..Incarnation::default()
        }
    }

    /// The session's VM if it still runs (a paused one is run again); a VM that exited is
    /// forgotten.
    async fn attach(session: &str, slot: &mut Slot) -> Result<Option<Incarnation>> {
        let Some(live) = slot.live.as_mut() else {
            return Ok(None);
        };
        if !live.vm.is_running() {
            tracing::warn!(session_uid = session, pid = live.vm.pid(), "VM gone");
            if let Some(dead) = slot.live.take() {
                dead.vm.kill().await;
            }
            return Ok(None);
        }
        if live.vm.state == RunState::Paused {
            live.vm.resume().await?;
        }
        Ok(Some(Self::incarnation(session, live)))
    }

    async fn boot(&self, session: &str, slot: &mut Slot) -> Result<Incarnation> {
        let launch = Launch::new(&self.shared.config, &self.shared.accelerator, &self.harness);
        let started = Instant::now();
        let vm = Vm::boot(
            &launch,
            self.shared.store.run_dir(),
            session,
            self.shared.config.boot_timeout(),
        )
        .await?;
        // A close that ran while the VM booted must not leave it behind.
        if let Err(err) = self.check_open() {
            vm.kill().await;
            return Err(err);
        }
        let live = Live {
            vm,
            instance: random_id(),
            launch,
        };
        tracing::info!(
            session_uid = session,
            instance = %live.instance,
            millis = started.elapsed().as_millis(),
            "VM booted"
        );
        let incarnation = Self::incarnation(session, &live);
        slot.live = Some(live);
        Ok(incarnation)
    }

    /// Runs a VM for `session` from snapshot `name`, checksum verified while it loads, as
    /// `instance`. With `consume`, the snapshot's session stops holding it (its memory moves on
    /// in this VM), which deletes it.
    async fn run_from(
        &self,
        session: &str,
        slot: &mut Slot,
        (name, meta, file): (SnapshotName, Meta, PathBuf),
        instance: String,
        consume: bool,
    ) -> Result<Incarnation> {
        let name = &name;
        let started = Instant::now();
        let run_dir = self.shared.store.run_dir();
        let verify = async {
            let verified = self.shared.store.verify(name, &meta).await;
            (verified, started.elapsed())
        };
        let ((verified, verify_time), vm) =
            tokio::join!(verify, Vm::restore(&meta.launch, run_dir, session, &file));
        let vm = match (verified, vm) {
            (Ok(()), Ok(vm)) => vm,
            (Err(err), vm) => {
                if let Ok(vm) = vm {
                    vm.kill().await;
                }
                return Err(err);
            }
            (Ok(()), Err(err)) => return Err(err),
        };
        if let Err(err) = self.check_open() {
            vm.kill().await;
            return Err(err);
        }
        if consume {
            let unheld = self.shared.store.release(&name.session)?;
            self.shared
                .cleanup
                .spawn_blocking(move || remove_files(&unheld));
        }
        let live = Live {
            vm,
            instance,
            launch: meta.launch,
        };
        tracing::info!(
            session_uid = session,
            snapshot = %name.id,
            instance = %live.instance,
            verify_millis = verify_time.as_millis(),
            millis = started.elapsed().as_millis(),
            "VM restored"
        );
        let incarnation = Self::incarnation(session, &live);
        slot.live = Some(live);
        Ok(incarnation)
    }

    /// The held snapshot `uri` of `session`, or why its memory is gone.
    fn held_snapshot(&self, session: &str, uri: &str) -> Result<(SnapshotName, Meta, PathBuf)> {
        let name = SnapshotName::parse(uri)
            .filter(|name| name.session == session)
            .ok_or_else(|| MicrovmError::ForeignSnapshot(uri.to_owned()))?;
        if self.shared.store.held(session)?.as_deref() != Some(name.id.as_str()) {
            return Err(MicrovmError::lost(
                session,
                format!(
                    "snapshot {} is no longer held (a VM already ran on from it, or it was removed)",
                    name.id
                ),
            ));
        }
        let (meta, file) = self.shared.store.load(&name)?;
        Ok((name, meta, file))
    }

    async fn create_for(&self, spec: &SessionSpec) -> Result<Incarnation> {
        self.check_open()?;
        let session = required(&spec.session_uid, "a session uid")?;
        self.shared.store.session_dir(session)?;
        let slot = self.slot(session);
        let mut slot = slot.lock().await;
        if let Some(incarnation) = Self::attach(session, &mut slot).await? {
            return Ok(incarnation);
        }
        // The journal is read only now that the compute is known to be gone.
        let checkpoint = spec.recorded_checkpoint().map_err(journal_read)?;
        if checkpoint.memory && !checkpoint.external_uri.is_empty() {
            match self.held_snapshot(session, &checkpoint.external_uri) {
                Ok((name, meta, file)) => {
                    let instance = meta.instance.clone();
                    return self
                        .run_from(session, &mut slot, (name, meta, file), instance, true)
                        .await;
                }
                Err(err) => {
                    tracing::info!(session_uid = session, error = %err, "recorded checkpoint not restorable")
                }
            }
        }
        let turns = spec.started_turns().map_err(journal_read)?;
        if turns > 0 {
            return Err(MicrovmError::lost(
                session,
                format!(
                    "no VM runs and no held snapshot has its memory, with {turns} turn(s) recorded"
                ),
            ));
        }
        // Fresh compute: nothing the session holds belongs to it any more.
        self.shared.store.hold(session, None)?;
        self.boot(session, &mut slot).await
    }

    async fn snapshot_of(
        &self,
        incarnation: &Incarnation,
        kind: SnapshotKind,
    ) -> Result<SnapshotRef> {
        self.check_open()?;
        let session = required(&incarnation.id, "an incarnation id")?;
        let slot = self.slot(session);
        let mut slot = slot.lock().await;
        let running = match slot.live.as_mut() {
            Some(live) => live.vm.is_running(),
            None => false,
        };
        let Some(live) = slot.live.as_mut().filter(|_| running) else {
            return Err(MicrovmError::lost(session, "no VM runs to snapshot"));
        };
        if !incarnation.compute_instance.is_empty() && incarnation.compute_instance != live.instance
        {
            return Err(MicrovmError::lost(
                session,
                format!(
                    "the VM is instance {}, not the required {}",
                    live.instance, incarnation.compute_instance
                ),
            ));
        }
        match kind {
            SnapshotKind::Local => {
                live.vm.pause().await?;
                Ok(SnapshotRef {
                    local: session.to_owned(),
                    memory: true,
                    ..SnapshotRef::default()
                })
            }
            SnapshotKind::External => {
                let started = Instant::now();
                let (name, tmp) = self.shared.store.begin(session)?;
                let checksum = match live.vm.save(&tmp).await {
                    Ok(checksum) => checksum,
                    Err(err) => {
                        let _ = std::fs::remove_file(&tmp);
                        // The guest is stopped but intact: run it on, the session keeps its VM.
                        if let Err(cont) = live.vm.resume().await {
                            tracing::warn!(session_uid = session, error = %cont, "cannot run the VM again");
                        }
                        return Err(err);
                    }
                };
                let saved = started.elapsed();
                let meta = self.shared.store.commit(
                    &name,
                    &tmp,
                    checksum,
                    &live.instance,
                    &live.launch,
                )?;
                let committed = started.elapsed();
                if let Some(done) = slot.live.take() {
                    done.vm.kill().await;
                }
                tracing::info!(
                    session_uid = session,
                    snapshot = %name.id,
                    bytes = meta.bytes,
                    save_millis = saved.as_millis(),
                    commit_millis = committed.as_millis(),
                    millis = started.elapsed().as_millis(),
                    "VM snapshotted"
                );
                Ok(SnapshotRef {
                    local: session.to_owned(),
                    external_uri: name.uri(),
                    memory: true,
                    sealed: false,
                })
            }
        }
    }

    async fn restore_with(
        &self,
        snapshot: &SnapshotRef,
        recorded: &(dyn Fn() -> ApiResult<String> + Send + Sync),
    ) -> Result<Incarnation> {
        self.check_open()?;
        let session = required(&snapshot.local, "a snapshot handle (local)")?;
        self.shared.store.session_dir(session)?;
        let slot = self.slot(session);
        let mut slot = slot.lock().await;
        if let Some(live) = slot.live.as_ref() {
            let instance = live.instance.clone();
            if Self::attach(session, &mut slot).await?.is_some() {
                let wanted = recorded().map_err(journal_read)?;
                if !wanted.is_empty() && wanted != instance {
                    return Err(MicrovmError::lost(
                        session,
                        format!(
                            "the running VM is instance {instance}, the journal recorded {wanted}"
                        ),
                    ));
                }
                if let Some(live) = slot.live.as_ref() {
                    return Ok(Self::incarnation(session, live));
                }
            }
        }
        if snapshot.external_uri.is_empty() {
            let wanted = recorded().map_err(journal_read)?;
            if wanted.is_empty() && !snapshot.memory {
                // Nothing was ever recorded on any instance: no memory to lose.
                self.shared.store.hold(session, None)?;
                return self.boot(session, &mut slot).await;
            }
            return Err(MicrovmError::lost(
                session,
                "no VM runs and no snapshot was written of its memory",
            ));
        }
        let (name, meta, file) = self.held_snapshot(session, &snapshot.external_uri)?;
        let wanted = recorded().map_err(journal_read)?;
        if !wanted.is_empty() && wanted != meta.instance {
            return Err(MicrovmError::lost(
                session,
                format!(
                    "snapshot {} holds instance {}, the journal recorded {wanted}",
                    name.id, meta.instance
                ),
            ));
        }
        let instance = meta.instance.clone();
        self.run_from(session, &mut slot, (name, meta, file), instance, true)
            .await
    }

    async fn fork_from(&self, snapshot: &SnapshotRef, opts: &ForkOpts) -> Result<Incarnation> {
        self.check_open()?;
        let child = required(&opts.child_session_uid, "a child session uid")?;
        self.shared.store.session_dir(child)?;
        let parent = required(&snapshot.local, "a snapshot handle (local)")?;
        let name = SnapshotName::parse(&snapshot.external_uri)
            .filter(|name| name.session == parent)
            .ok_or_else(|| MicrovmError::ForeignSnapshot(snapshot.external_uri.clone()))?;
        // The parent's lock keeps its snapshot from being consumed while the child loads it.
        let parent_slot = self.slot(parent);
        let _parent = parent_slot.lock().await;
        if self.shared.store.held(parent)?.as_deref() != Some(name.id.as_str()) {
            return Err(MicrovmError::Superseded {
                session: parent.to_owned(),
                snapshot: name.id,
            });
        }
        let (meta, file) = self.shared.store.load(&name)?;
        let child_slot = self.slot(child);
        let mut child_slot = child_slot.lock().await;
        if child_slot.live.is_some() {
            return Err(MicrovmError::Busy(child.to_owned()));
        }
        self.run_from(
            child,
            &mut child_slot,
            (name, meta, file),
            random_id(),
            false,
        )
        .await
    }

    async fn stop_session(&self, incarnation: &Incarnation) -> Result<()> {
        let session = required(&incarnation.id, "an incarnation id")?;
        self.shared.store.session_dir(session)?;
        let slot = self.slot(session);
        let mut slot = slot.lock().await;
        if let Some(live) = slot.live.take() {
            live.vm.kill().await;
        }
        self.shared.store.remove_session(session)?;
        drop(slot);
        self.shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session);
        Ok(())
    }

    async fn status_of(&self, incarnation: &Incarnation) -> Result<ComputeState> {
        let session = required(&incarnation.id, "an incarnation id")?;
        if let Some(slot) = self.existing_slot(session) {
            let mut slot = slot.lock().await;
            if let Some(live) = slot.live.as_mut()
                && live.vm.is_running()
            {
                return Ok(match live.vm.state {
                    RunState::Running => ComputeState::Live,
                    RunState::Paused => ComputeState::Warm,
                });
            }
        }
        Ok(if self.shared.store.held(session)?.is_some() {
            ComputeState::Cold
        } else {
            ComputeState::None
        })
    }
}

fn journal_read(err: agentsessions_api::ApiError) -> MicrovmError {
    MicrovmError::Journal(err)
}

#[async_trait]
impl Runtime for MicrovmRuntime {
    async fn create(&self, spec: &SessionSpec) -> ApiResult<Incarnation> {
        Ok(self.create_for(spec).await?)
    }

    async fn snapshot(
        &self,
        incarnation: &Incarnation,
        kind: SnapshotKind,
    ) -> ApiResult<SnapshotRef> {
        Ok(self.snapshot_of(incarnation, kind).await?)
    }

    async fn restore(&self, snapshot: &SnapshotRef) -> ApiResult<Incarnation> {
        Ok(self.restore_with(snapshot, &|| Ok(String::new())).await?)
    }

    async fn fork(&self, snapshot: &SnapshotRef, opts: &ForkOpts) -> ApiResult<Incarnation> {
        Ok(self.fork_from(snapshot, opts).await?)
    }

    async fn stop(&self, incarnation: &Incarnation) -> ApiResult<()> {
        Ok(self.stop_session(incarnation).await?)
    }

    async fn status(&self, incarnation: &Incarnation) -> ApiResult<ComputeState> {
        Ok(self.status_of(incarnation).await?)
    }

    fn capabilities(&self) -> RuntimeCapabilities {
        RuntimeCapabilities {
            memory_snapshot: true,
            ..RuntimeCapabilities::default()
        }
    }

    fn as_instance_restorer(&self) -> Option<&dyn InstanceRestorer> {
        Some(self)
    }
}

#[async_trait]
impl InstanceRestorer for MicrovmRuntime {
    async fn restore_instance(
        &self,
        snapshot: &SnapshotRef,
        recorded: &(dyn Fn() -> ApiResult<String> + Send + Sync),
    ) -> ApiResult<Incarnation> {
        Ok(self.restore_with(snapshot, recorded).await?)
    }
}
