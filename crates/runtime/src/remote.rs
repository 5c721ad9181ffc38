//! [`RemoteRuntime`]: attaches sessions to a harness that already runs at an address
//! (semantics §10.3). It provisions nothing: every session's incarnation is that address.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use agentsessions_api::{
    ApiError, ComputeState, Descriptor, ForkOpts, Harness, Incarnation, Result as ApiResult,
    Runtime, RuntimeCapabilities, SessionSpec, SnapshotKind, SnapshotRef,
};
use agentsessions_harnesswire::{RemoteHarness, status_code_of};
use async_trait::async_trait;

use crate::address::HarnessAddress;
use crate::error::{Result, RuntimeError};
use crate::incarnation::{external_snapshot, fork_child, restore_uid, session_uid};

const NAME: &str = "remote";

/// A runtime whose harness is shared and already running at one address.
///
/// Describe uses one connection, created on first use and reused. Create, restore and fork
/// return the configured address; snapshot EXTERNAL hands back the session as a replay handle;
/// stop never stops the shared harness. Capabilities are all false, so a
/// `REQUIRES_MEMORY_SNAPSHOT` harness is always refused before it is placed here. Once
/// [`RemoteRuntime::close`]d, it stays closed.
#[derive(Debug)]
pub struct RemoteRuntime {
    address: HarnessAddress,
    describe_timeout: Option<Duration>,
    tls: Option<tonic::transport::ClientTlsConfig>,
    probe: Mutex<Option<RemoteHarness>>,
    closed: AtomicBool,
}

impl RemoteRuntime {
    /// A runtime attached to the harness at `address` (see [`HarnessAddress`] for the forms).
    /// Nothing is dialed until the first describe.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::InvalidAddress`] for an address that is not accepted.
    pub fn new(address: &str) -> Result<Self> {
        Ok(Self {
            address: HarnessAddress::parse(address)?,
            describe_timeout: None,
            tls: None,
            probe: Mutex::new(None),
            closed: AtomicBool::new(false),
        })
    }

    /// Bounds each Describe by `timeout` (default: harnesswire's 10 s).
    #[must_use]
    pub fn with_describe_timeout(mut self, timeout: Duration) -> Self {
        self.describe_timeout = Some(timeout);
        self
    }

    /// Reaches the harness over TLS with `tls` (the harness serves TLS; with a client identity
    /// in `tls`, mutual TLS). A unix socket address is refused at the first describe.
    #[must_use]
    pub fn with_tls(mut self, tls: tonic::transport::ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The configured address.
    pub fn address(&self) -> &HarnessAddress {
        &self.address
    }

    /// Always true: the address may be answered by another process between this describe and a
    /// turn, so placement should re-describe on the turn's own connection.
    pub fn describes_live_harness(&self) -> bool {
        true
    }

    /// Asks the harness at the address to describe itself.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::Describe`] naming the address and keeping the failure's gRPC code
    /// (`UNAVAILABLE` when nothing answers, `DEADLINE_EXCEEDED` on timeout);
    /// [`RuntimeError::Closed`] after [`RemoteRuntime::close`].
    pub async fn describe(&self) -> Result<Descriptor> {
        let probe = self.probe()?;
        probe
            .describe()
            .await
            .map_err(|err| RuntimeError::Describe {
                address: self.address.to_string(),
                code: status_code_of(&err),
                message: status_message(&err),
            })
    }

    /// Closes the backend: its describe connection is dropped and every later call fails with
    /// [`RuntimeError::Closed`].
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.probe
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(RuntimeError::Closed { runtime: NAME });
        }
        Ok(())
    }

    fn probe(&self) -> Result<RemoteHarness> {
        self.check_open()?;
        let mut probe = self.probe.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(harness) = probe.as_ref() {
            return Ok(harness.clone());
        }
        let channel =
            agentsessions_harnesswire::channel_tls(&self.address.dial_uri(), self.tls.clone())
                .map_err(|source| RuntimeError::Channel {
                    address: self.address.to_string(),
                    source,
                })?;
        let harness = RemoteHarness::new(channel);
        let harness = match self.describe_timeout {
            Some(timeout) => harness.with_describe_timeout(timeout),
            None => harness,
        };
        *probe = Some(harness.clone());
        Ok(harness)
    }

    fn incarnation(&self, uid: &str) -> Incarnation {
        Incarnation {
            id: uid.to_owned(),
            address: self.address.to_string(),
            runtime: NAME.to_owned(),
            ..Incarnation::default()
        }
    }
}

/// An error's message without the `status CODE: ` prefix an [`ApiError::Status`] prints (the
/// code travels separately).
fn status_message(err: &ApiError) -> String {
    match err {
        ApiError::Status { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[async_trait]
impl Runtime for RemoteRuntime {
    async fn create(&self, spec: &SessionSpec) -> ApiResult<Incarnation> {
        self.check_open()?;
        Ok(self.incarnation(session_uid(NAME, spec)?))
    }

    async fn snapshot(
        &self,
        incarnation: &Incarnation,
        kind: SnapshotKind,
    ) -> ApiResult<SnapshotRef> {
        self.check_open()?;
        Ok(external_snapshot(NAME, incarnation, kind)?)
    }

    async fn restore(&self, snapshot: &SnapshotRef) -> ApiResult<Incarnation> {
        self.check_open()?;
        Ok(self.incarnation(restore_uid(NAME, snapshot)?))
    }

    async fn fork(&self, _snapshot: &SnapshotRef, opts: &ForkOpts) -> ApiResult<Incarnation> {
        self.check_open()?;
        Ok(self.incarnation(fork_child(NAME, opts)?))
    }

    /// A no-op: the harness is shared and not this backend's to stop.
    async fn stop(&self, _incarnation: &Incarnation) -> ApiResult<()> {
        Ok(())
    }

    /// NONE: the harness is shared, runs a session only during its turns, and this backend
    /// keeps nothing of the session there between them.
    async fn status(&self, _incarnation: &Incarnation) -> ApiResult<ComputeState> {
        self.check_open()?;
        Ok(ComputeState::None)
    }

    fn capabilities(&self) -> RuntimeCapabilities {
        RuntimeCapabilities::default()
    }
}
