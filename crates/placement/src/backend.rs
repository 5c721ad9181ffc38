//! A [`Backend`]: where a registry name's harness runs ([`Runtime`]), how the host reaches it
//! ([`HarnessDialer`]) and how the admission gate learns its descriptor before any compute
//! exists ([`DescriptorSource`]). [`Attached`] serves one harness object this process already
//! holds (an in-process harness, or an adapter connected to a remote one).

use std::sync::Arc;

use agentsessions_api::{
    ComputeState, Descriptor, ForkOpts, Harness, HarnessDialer, Incarnation, Runtime,
    RuntimeCapabilities, SessionSpec, SnapshotKind, SnapshotRef,
};
use async_trait::async_trait;

use crate::describe::{DescribeFailure, describe_within};

/// Where the admission gate gets the descriptor it checks before Create (semantics §2.3 step 4).
#[derive(Clone)]
pub enum DescriptorSource {
    /// A descriptor the operator declared (the live re-check on the dialed harness still runs).
    Declared(Descriptor),
    /// Ask this harness handle (an in-process harness, or a probe connection to a remote one).
    Probe(Arc<dyn Harness>),
}

impl std::fmt::Debug for DescriptorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Declared(d) => f.debug_tuple("Declared").field(&d.id).finish(),
            Self::Probe(_) => f.write_str("Probe(..)"),
        }
    }
}

/// One harness route: runtime, dialer, descriptor source and an optional expected descriptor id.
#[derive(Clone)]
pub struct Backend {
    pub(crate) runtime: Arc<dyn Runtime>,
    pub(crate) dialer: Arc<dyn HarnessDialer>,
    pub(crate) source: DescriptorSource,
    pub(crate) expected_id: String,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("capabilities", &self.runtime.capabilities())
            .field("source", &self.source)
            .field("expected_id", &self.expected_id)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// A route placing harnesses on `runtime`, reached through `dialer`, admitted by `source`.
    pub fn new(
        runtime: Arc<dyn Runtime>,
        dialer: Arc<dyn HarnessDialer>,
        source: DescriptorSource,
    ) -> Self {
        Self {
            runtime: crate::observed::Observed::wrap(runtime),
            dialer,
            source,
            expected_id: String::new(),
        }
    }

    /// A route serving a harness object this process holds (in-process, or a connected remote
    /// adapter) on compute with `capabilities` (`RuntimeCapabilities::default()`: no memory
    /// snapshots).
    pub fn attached(harness: Arc<dyn Harness>, capabilities: RuntimeCapabilities) -> Self {
        let local = Arc::new(Attached::new(Arc::clone(&harness), capabilities));
        Self::new(
            Arc::clone(&local) as Arc<dyn Runtime>,
            local,
            DescriptorSource::Probe(harness),
        )
    }

    /// Refuses a harness whose descriptor id is not `id` (a misdirection check; empty = none).
    #[must_use]
    pub fn expect_descriptor_id(mut self, id: impl Into<String>) -> Self {
        self.expected_id = id.into();
        self
    }

    /// The runtime's capabilities.
    pub fn capabilities(&self) -> RuntimeCapabilities {
        self.runtime.capabilities()
    }

    /// The expected descriptor id, empty when none.
    pub fn expected_id(&self) -> &str {
        &self.expected_id
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<dyn Runtime> {
        &self.runtime
    }

    /// Describes the harness through the descriptor source (no compute is touched), within
    /// [`DESCRIBE_TIMEOUT`](crate::describe::DESCRIBE_TIMEOUT).
    ///
    /// # Errors
    /// The probe's describe failure; `DEADLINE_EXCEEDED` when it does not answer in time.
    pub async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        match &self.source {
            DescriptorSource::Declared(d) => Ok(d.clone()),
            DescriptorSource::Probe(h) => describe_within(h.as_ref(), None)
                .await
                .map_err(DescribeFailure::into_api_error),
        }
    }
}

/// One harness object this process holds, as runtime and dialer at once: every session's
/// incarnation is that object, so it keeps nothing between turns that the journal does not hold.
/// Snapshots are journal handles (`{local: session}`); there is no compute to stop, and between
/// turns a session has none (status NONE).
pub struct Attached {
    harness: Arc<dyn Harness>,
    capabilities: RuntimeCapabilities,
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached")
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

impl Attached {
    /// Serves `harness` with `capabilities`.
    pub fn new(harness: Arc<dyn Harness>, capabilities: RuntimeCapabilities) -> Self {
        Self {
            harness,
            capabilities,
        }
    }

    fn incarnation(id: &str) -> Incarnation {
        Incarnation {
            id: id.to_owned(),
            address: format!("attached:{id}"),
            runtime: "attached".to_owned(),
            ..Incarnation::default()
        }
    }
}

#[async_trait]
impl Runtime for Attached {
    async fn create(&self, spec: &SessionSpec) -> agentsessions_api::Result<Incarnation> {
        Ok(Self::incarnation(&spec.session_uid))
    }

    async fn snapshot(
        &self,
        incarnation: &Incarnation,
        _kind: SnapshotKind,
    ) -> agentsessions_api::Result<SnapshotRef> {
        Ok(SnapshotRef {
            local: incarnation.id.clone(),
            ..SnapshotRef::default()
        })
    }

    async fn restore(&self, snapshot: &SnapshotRef) -> agentsessions_api::Result<Incarnation> {
        Ok(Self::incarnation(&snapshot.local))
    }

    async fn fork(
        &self,
        _snapshot: &SnapshotRef,
        opts: &ForkOpts,
    ) -> agentsessions_api::Result<Incarnation> {
        Ok(Self::incarnation(&opts.child_session_uid))
    }

    async fn stop(&self, _incarnation: &Incarnation) -> agentsessions_api::Result<()> {
        Ok(())
    }

    /// NONE: the object keeps no incarnation for a session; it runs one only during a turn,
    /// while the placer holds the session (docs/extensions.md, "Compute state").
    async fn status(&self, _incarnation: &Incarnation) -> agentsessions_api::Result<ComputeState> {
        Ok(ComputeState::None)
    }

    fn capabilities(&self) -> RuntimeCapabilities {
        self.capabilities
    }
}

#[async_trait]
impl HarnessDialer for Attached {
    async fn dial(
        &self,
        _incarnation: &Incarnation,
    ) -> agentsessions_api::Result<Arc<dyn Harness>> {
        Ok(Arc::clone(&self.harness))
    }
}
