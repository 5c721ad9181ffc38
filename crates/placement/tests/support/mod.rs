#![allow(clippy::unwrap_used, dead_code)]
//! Test doubles for placement: a runtime whose "compute" is a live harness object kept in a map,
//! a dialer that hands those objects out, and a probe harness that counts in memory and records
//! the history length each run receives.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentsessions_api::{
    ApiError, Capabilities, ComputeState, Descriptor, EventSink, ForkOpts, Harness, HarnessDialer,
    Incarnation, Resumability, Runtime, RuntimeCapabilities, SessionSpec, SnapshotKind,
    SnapshotRef, Start, StatusCode,
};
use agentsessions_controller::IdSource;
use agentsessions_journal::{Journal, MemoryJournal, SessionRow};
use agentsessions_model::EchoModel;
use agentsessions_placement::{Backend, DescriptorSource, Placer, Registry};
use agentsessions_sqlite::SqliteJournal;
use async_trait::async_trait;
use tokio::sync::Notify;

/// A harness that counts runs in its own memory and notes the history length of every run.
#[derive(Debug)]
pub(crate) struct Probe {
    memory: bool,
    pub(crate) count: AtomicU64,
    pub(crate) histories: Mutex<Vec<usize>>,
    /// When set, each run waits for a notification before finishing.
    pub(crate) gate: Option<Arc<Notify>>,
    pub(crate) running: AtomicUsize,
}

impl Probe {
    pub(crate) fn new(memory: bool, count: u64) -> Self {
        Self {
            memory,
            count: AtomicU64::new(count),
            histories: Mutex::new(Vec::new()),
            gate: None,
            running: AtomicUsize::new(0),
        }
    }

    pub(crate) fn descriptor(memory: bool) -> Descriptor {
        Descriptor {
            id: if memory { "probe-memory" } else { "probe" }.to_owned(),
            version: "1".to_owned(),
            capabilities: Capabilities {
                resumability: if memory {
                    Resumability::RequiresMemorySnapshot
                } else {
                    Resumability::StatelessReplay
                },
                ..Capabilities::default()
            },
            ..Descriptor::default()
        }
    }

    pub(crate) fn last_history(&self) -> Option<usize> {
        self.histories.lock().unwrap().last().copied()
    }
}

#[async_trait]
impl Harness for Probe {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Ok(Self::descriptor(self.memory))
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        self.histories.lock().unwrap().push(start.history.len());
        let value = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(gate) = &self.gate {
            self.running.fetch_add(1, Ordering::SeqCst);
            gate.notified().await;
        }
        sink.output(value.to_string()).await
    }
}

struct Live {
    probe: Arc<Probe>,
    instance: String,
}

#[derive(Default)]
struct State {
    live: HashMap<String, Live>,
    checkpoints: HashMap<String, u64>,
    next: u64,
    creates: usize,
    snapshots: usize,
    forks: usize,
    stops: usize,
}

/// TEST DOUBLE. A runtime whose compute is a live [`Probe`] object per session kept in a map.
/// With `memory` it takes memory snapshots (a checkpoint is the probe's counter) and reports a
/// compute instance per object; without, it is a filesystem-only runtime whose harnesses keep
/// nothing the journal does not hold.
pub(crate) struct InMemoryTestRuntime {
    memory: bool,
    /// Whether the harnesses it starts declare REQUIRES_MEMORY_SNAPSHOT.
    memory_harness: bool,
    state: Mutex<State>,
    gate: Option<Arc<Notify>>,
    /// When set, `stop` waits for a notification first (an operation that holds its session).
    stop_gate: Option<Arc<Notify>>,
}

impl InMemoryTestRuntime {
    pub(crate) fn new(memory: bool, memory_harness: bool) -> Self {
        Self {
            memory,
            memory_harness,
            state: Mutex::new(State::default()),
            gate: None,
            stop_gate: None,
        }
    }

    /// Makes `stop` wait for `gate` to be notified.
    pub(crate) fn stopping_on(mut self, gate: Arc<Notify>) -> Self {
        self.stop_gate = Some(gate);
        self
    }

    pub(crate) fn gated(mut self, gate: Arc<Notify>) -> Self {
        self.gate = Some(gate);
        self
    }

    fn start(&self, state: &mut State, session: &str, count: u64) -> Incarnation {
        state.next += 1;
        let instance = if self.memory {
            format!("instance-{}", state.next)
        } else {
            String::new()
        };
        let mut probe = Probe::new(self.memory_harness, count);
        probe.gate.clone_from(&self.gate);
        state.live.insert(
            session.to_owned(),
            Live {
                probe: Arc::new(probe),
                instance: instance.clone(),
            },
        );
        incarnation(session, &instance)
    }

    pub(crate) fn probe(&self, session: &str) -> Option<Arc<Probe>> {
        self.state
            .lock()
            .unwrap()
            .live
            .get(session)
            .map(|l| Arc::clone(&l.probe))
    }

    /// Replaces the session's compute with a fresh object (its memory is gone).
    pub(crate) fn replace(&self, session: &str) {
        let mut state = self.state.lock().unwrap();
        self.start(&mut state, session, 0);
    }

    /// Drops the session's compute entirely (as if the node died).
    pub(crate) fn stop_session_for_test(&self, session: &str) {
        self.state.lock().unwrap().live.remove(session);
    }

    /// Snapshots this runtime still keeps of `session`.
    pub(crate) fn checkpoints_of(&self, session: &str) -> usize {
        let prefix = format!("mem://{session}/");
        self.state
            .lock()
            .unwrap()
            .checkpoints
            .keys()
            .filter(|uri| uri.starts_with(&prefix))
            .count()
    }

    pub(crate) fn counts(&self) -> (usize, usize, usize, usize) {
        let s = self.state.lock().unwrap();
        (s.creates, s.snapshots, s.forks, s.stops)
    }
}

fn incarnation(session: &str, instance: &str) -> Incarnation {
    Incarnation {
        id: session.to_owned(),
        address: format!("test:{session}"),
        runtime: "in-memory-test".to_owned(),
        compute_instance: instance.to_owned(),
        ..Incarnation::default()
    }
}

#[async_trait]
impl Runtime for InMemoryTestRuntime {
    async fn create(&self, spec: &SessionSpec) -> agentsessions_api::Result<Incarnation> {
        let turns = spec.started_turns()?;
        let mut state = self.state.lock().unwrap();
        state.creates += 1;
        if let Some(live) = state.live.get(&spec.session_uid) {
            return Ok(incarnation(&spec.session_uid, &live.instance));
        }
        if self.memory_harness && turns > 0 {
            return Err(ApiError::MemoryStateLost);
        }
        Ok(self.start(&mut state, &spec.session_uid, 0))
    }

    async fn snapshot(
        &self,
        incarnation: &Incarnation,
        _kind: SnapshotKind,
    ) -> agentsessions_api::Result<SnapshotRef> {
        let mut state = self.state.lock().unwrap();
        state.snapshots += 1;
        if !self.memory {
            return Ok(SnapshotRef {
                local: incarnation.id.clone(),
                ..SnapshotRef::default()
            });
        }
        let Some(live) = state.live.get(&incarnation.id) else {
            return Err(ApiError::MemoryStateLost);
        };
        if !incarnation.compute_instance.is_empty() && incarnation.compute_instance != live.instance
        {
            return Err(ApiError::MemoryStateLost);
        }
        let count = live.probe.count.load(Ordering::SeqCst);
        let uri = format!("mem://{}/{}", incarnation.id, state.snapshots);
        state.checkpoints.insert(uri.clone(), count);
        Ok(SnapshotRef {
            local: incarnation.id.clone(),
            external_uri: uri,
            memory: true,
            sealed: false,
        })
    }

    async fn restore(&self, snapshot: &SnapshotRef) -> agentsessions_api::Result<Incarnation> {
        let mut state = self.state.lock().unwrap();
        if let Some(live) = state.live.get(&snapshot.local) {
            return Ok(incarnation(&snapshot.local, &live.instance));
        }
        if self.memory_harness {
            return Err(ApiError::MemoryStateLost);
        }
        Ok(self.start(&mut state, &snapshot.local, 0))
    }

    async fn fork(
        &self,
        snapshot: &SnapshotRef,
        opts: &ForkOpts,
    ) -> agentsessions_api::Result<Incarnation> {
        let mut state = self.state.lock().unwrap();
        state.forks += 1;
        let count = if self.memory {
            *state
                .checkpoints
                .get(&snapshot.external_uri)
                .ok_or(ApiError::SnapshotSuperseded)?
        } else {
            0
        };
        Ok(self.start(&mut state, &opts.child_session_uid, count))
    }

    async fn stop(&self, incarnation: &Incarnation) -> agentsessions_api::Result<()> {
        if let Some(gate) = &self.stop_gate {
            gate.notified().await;
        }
        let mut state = self.state.lock().unwrap();
        state.stops += 1;
        state.live.remove(&incarnation.id);
        // Stopping frees the compute and the snapshots this runtime kept of it.
        let prefix = format!("mem://{}/", incarnation.id);
        state.checkpoints.retain(|uri, _| !uri.starts_with(&prefix));
        Ok(())
    }

    async fn status(&self, incarnation: &Incarnation) -> agentsessions_api::Result<ComputeState> {
        let state = self.state.lock().unwrap();
        Ok(if state.live.contains_key(&incarnation.id) {
            ComputeState::Live
        } else {
            ComputeState::None
        })
    }

    fn capabilities(&self) -> RuntimeCapabilities {
        RuntimeCapabilities {
            memory_snapshot: self.memory,
            ..RuntimeCapabilities::default()
        }
    }
}

/// TEST DOUBLE. Maps incarnation ids to the in-process harness objects of an
/// [`InMemoryTestRuntime`].
pub(crate) struct TestDialer {
    pub(crate) runtime: Arc<InMemoryTestRuntime>,
}

#[async_trait]
impl HarnessDialer for TestDialer {
    async fn dial(&self, incarnation: &Incarnation) -> agentsessions_api::Result<Arc<dyn Harness>> {
        self.runtime
            .probe(&incarnation.id)
            .map(|p| p as Arc<dyn Harness>)
            .ok_or_else(|| ApiError::status(StatusCode::Unavailable, "nothing at the address"))
    }
}

/// A placer with one route `probe` on `runtime`.
pub(crate) fn placer(journal: Arc<dyn Journal>, runtime: &Arc<InMemoryTestRuntime>) -> Placer {
    let registry = Registry::default();
    let memory_harness = runtime.memory_harness;
    registry
        .add_static(
            "probe",
            Backend::new(
                Arc::clone(runtime) as Arc<dyn Runtime>,
                Arc::new(TestDialer {
                    runtime: Arc::clone(runtime),
                }),
                DescriptorSource::Declared(Probe::descriptor(memory_harness)),
            ),
        )
        .unwrap();
    Placer::new(journal, Arc::new(EchoModel::new()), registry)
}

pub(crate) async fn session(journal: &Arc<dyn Journal>, uid: &str) {
    journal
        .put_session(SessionRow {
            uid: uid.to_owned(),
            harness: "probe".to_owned(),
            project: "p".to_owned(),
            ..SessionRow::default()
        })
        .await
        .unwrap();
}

/// Both journal backends; the tempdir keeps the SQLite file alive.
pub(crate) async fn journals() -> Vec<(Arc<dyn Journal>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteJournal::open(dir.path().join("j.db")).unwrap();
    vec![
        (Arc::new(MemoryJournal::new()), None),
        (Arc::new(sqlite), Some(dir)),
    ]
}

/// TEST DOUBLE. Ids in sequence: `x0000000000000001`-style hex for executions and model calls,
/// `child-<n>` for sessions, so a test can name every id it will see.
#[derive(Debug, Default)]
pub(crate) struct SequentialIds {
    next: AtomicU64,
}

impl SequentialIds {
    fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::SeqCst) + 1
    }
}

impl IdSource for SequentialIds {
    fn execution_id(&self) -> String {
        format!("{:016x}", self.next())
    }

    fn model_call_id(&self) -> String {
        format!("{:016x}", self.next())
    }

    fn session_uid(&self) -> String {
        format!("child-{}", self.next())
    }
}
