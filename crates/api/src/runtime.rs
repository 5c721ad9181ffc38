//! The compute SPI: [`Runtime`] (and its optional [`InstanceRestorer`] extension) and what it
//! creates ([`Incarnation`]) from what ([`SessionSpec`], [`ForkOpts`]).
//!
//! Pod, microVM and actor backends all implement [`Runtime`]; they are interchangeable, and the
//! host reads [`Runtime::capabilities`] to place harnesses and degrade honestly. Cancellation is
//! dropping the future: a backend must not leave a half-provisioned incarnation that nobody owns
//! when a future is dropped mid-operation (tear it down or make the next call adopt it).
//!
//! ```text
//! create ─► LIVE ─snapshot(LOCAL)────► WARM ─┐
//!            ▲  └─snapshot(EXTERNAL)─► COLD ─┤ SnapshotRef
//!            └────────── restore(ref) ◄──────┤
//! child LIVE ◄────── fork(ref, opts) ◄───────┘
//! stop: any state ─► TERMINATED
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::Result;
use crate::session::IdentityRef;
use crate::session::{ComputeState, RuntimeCapabilities, SnapshotRef};

/// Where a snapshot keeps captured state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SnapshotKind {
    /// Warm pause: the captured state stays node-resident.
    Local,
    /// Cold suspend: dedicated compute is released while restore state is retained.
    External,
}

impl SnapshotKind {
    /// The v0.3.0 API's name (`LOCAL`, `EXTERNAL`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "LOCAL",
            Self::External => "EXTERNAL",
        }
    }

    /// Parses a v0.3.0 API name; `None` when unknown.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "LOCAL" => Some(Self::Local),
            "EXTERNAL" => Some(Self::External),
            _ => None,
        }
    }
}

/// A live compute instance (sandbox) of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Incarnation {
    /// The backend's handle for the incarnation (for most backends, the session uid).
    pub id: String,
    /// Pod or worker id.
    pub worker: String,
    /// Where the harness server listens, or the ingress that routes to it.
    pub address: String,
    /// Backend name.
    pub runtime: String,
    /// Monotonic; the journal rejects appends from a superseded incarnation.
    pub fence_token: i64,
    /// Request metadata the host attaches to every call it makes to the harness at `address`. A
    /// backend whose harness sits behind a shared ingress uses it to name the target sandbox; a
    /// backend that hands out a direct address leaves it empty. It is routing, not
    /// authentication: nothing here proves the caller's identity.
    pub call_metadata: BTreeMap<String, String>,
    /// Opaque identity of the compute instance behind `id` that differs between two instances
    /// reusing one id. A backend sets it only when the harness keeps its state in that instance's
    /// memory (`REQUIRES_MEMORY_SNAPSHOT`). The host records it in each turn's EXECUTION_START and
    /// on a FORK marker, and refuses a turn or resume placed on another instance
    /// ([`crate::ApiError::MemoryStateLost`]). On the incarnation passed to
    /// [`Runtime::snapshot`], a non-empty value is the instance the caller requires. Empty records
    /// nothing and skips the check.
    pub compute_instance: String,
    /// On the incarnation passed to [`Runtime::snapshot`]: the checkpoint the session's journal
    /// last recorded (see [`SessionSpec::recorded_checkpoint`]); empty means none. Suspend and a
    /// stateful fork set it. Create, restore and fork leave it empty.
    pub recorded_checkpoint: SnapshotRef,
}

/// Lazily counts a session's started turns on the harness being placed; see
/// [`SessionSpec::started_turns`].
pub type StartedTurnsFn = Arc<dyn Fn() -> Result<usize> + Send + Sync>;

/// Lazily reads the checkpoint a session's journal last recorded; see
/// [`SessionSpec::recorded_checkpoint`].
pub type RecordedCheckpointFn = Arc<dyn Fn() -> Result<SnapshotRef> + Send + Sync>;

/// What a [`Runtime`] needs to create an incarnation.
///
/// The two journal reads are functions, not values, so that a backend reads the journal only
/// after it has looked at the compute: every turn or checkpoint recorded before that look
/// (including by another host sharing the journal) is then visible. Each call must read current
/// journal state. They are synchronous journal reads; a backend that must not block its executor
/// calls them from a blocking context.
#[derive(Clone, Default)]
pub struct SessionSpec {
    /// The session.
    pub session_uid: String,
    /// Image or template the sandbox runs.
    pub image: String,
    /// Registry name of the harness being placed.
    pub harness: String,
    /// The session's agent principal (provenance).
    pub identity: IdentityRef,
    /// Counts the turns the journal records as started (an EXECUTION_START) on the harness being
    /// placed, whether they completed, failed or were interrupted: any of them may have changed
    /// that harness's in-memory state. For a fork child it counts the turns of the copied prefix
    /// that ran on this harness. A turn another harness ran is not counted; a turn the host cannot
    /// attribute is. `None` declares no started turns.
    pub started_turns: Option<StartedTurnsFn>,
    /// Reads the SnapshotRef of the session's latest SUSPEND whose `local` names the session, or
    /// an empty ref when there is none (a session never suspended, or a fork child before its own
    /// first suspend: a parent's SUSPEND in the copied prefix is not the child's). `None` declares
    /// no recorded checkpoint.
    pub recorded_checkpoint: Option<RecordedCheckpointFn>,
}

impl SessionSpec {
    /// Evaluates [`SessionSpec::started_turns`] now; 0 when it is `None`.
    ///
    /// # Errors
    ///
    /// Whatever the journal read reports. A backend that cannot read the count must not create
    /// fresh compute for a memory harness on the assumption that it is zero.
    pub fn started_turns(&self) -> Result<usize> {
        self.started_turns.as_ref().map_or(Ok(0), |count| count())
    }

    /// Evaluates [`SessionSpec::recorded_checkpoint`] now; the empty ref when it is `None`.
    ///
    /// # Errors
    ///
    /// Whatever the journal read reports.
    pub fn recorded_checkpoint(&self) -> Result<SnapshotRef> {
        self.recorded_checkpoint
            .as_ref()
            .map_or_else(|| Ok(SnapshotRef::default()), |read| read())
    }
}

impl fmt::Debug for SessionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |present: bool| if present { "Some(..)" } else { "None" };
        f.debug_struct("SessionSpec")
            .field("session_uid", &self.session_uid)
            .field("image", &self.image)
            .field("harness", &self.harness)
            .field("identity", &self.identity)
            .field(
                "started_turns",
                &format_args!("{}", set(self.started_turns.is_some())),
            )
            .field(
                "recorded_checkpoint",
                &format_args!("{}", set(self.recorded_checkpoint.is_some())),
            )
            .finish()
    }
}

/// Parameters of [`Runtime::fork`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForkOpts {
    /// The child session the new incarnation belongs to.
    pub child_session_uid: String,
}

/// The compute/sandbox SPI. Backends are interchangeable: the host matches
/// [`Runtime::capabilities`] against a harness's [`crate::Capabilities`] before placing it
/// ([`crate::Capabilities::can_place_on`]).
///
/// The host calls [`Runtime::create`] on every execution, so it must be idempotent for a session
/// whose compute already exists.
#[async_trait]
pub trait Runtime: Send + Sync {
    /// Starts (or attaches to) the incarnation for a session and returns its handle, including the
    /// address where the harness server listens.
    ///
    /// # Errors
    ///
    /// - [`crate::ApiError::MemoryStateLost`] instead of creating fresh compute for a
    ///   `REQUIRES_MEMORY_SNAPSHOT` session whose compute is gone when
    ///   [`SessionSpec::started_turns`] is non-zero; also when existing compute did not get back
    ///   the memory its snapshot held, or holds a checkpoint other than
    ///   [`SessionSpec::recorded_checkpoint`] (checked before resuming it, or on what the resume
    ///   reports).
    /// - [`crate::ApiError::ComputeBusy`] when the compute is mid-operation for another caller.
    /// - [`crate::ApiError::Status`] for backend failures.
    async fn create(&self, spec: &SessionSpec) -> Result<Incarnation>;

    /// Captures the incarnation's state. [`SnapshotKind::Local`] keeps it node-resident (warm).
    /// [`SnapshotKind::External`] owns the cold transition: it captures the required state,
    /// releases dedicated per-incarnation compute where applicable, and keeps the state and any
    /// handles [`Runtime::restore`] needs. A backend without memory snapshots may return a
    /// filesystem or journal handle; one without dedicated per-session compute may leave its
    /// shared harness server running.
    ///
    /// A non-empty [`Incarnation::compute_instance`] is the instance the caller requires behind
    /// [`Incarnation::id`]; [`Incarnation::recorded_checkpoint`] is the checkpoint the journal
    /// last recorded.
    ///
    /// # Errors
    ///
    /// - [`crate::ApiError::MemoryStateLost`] when another instance than the required one is there,
    ///   or none is (before capturing anything if the backend can tell, and in any case before
    ///   returning a ref: a snapshot of a replacement would hand callers compute that holds none of
    ///   the session's state); when the compute holds a checkpoint other than the recorded one;
    ///   or when it did not get back the memory its snapshot held.
    /// - [`crate::ApiError::CheckpointPending`] while the durable copy is still uploading; no ref
    ///   is returned and nothing may be journaled.
    /// - [`crate::ApiError::InvalidCheckpoint`] when the backend cannot produce a checkpoint with
    ///   the required durable handle and fidelity (compute may already be suspended).
    /// - [`crate::ApiError::ComputeBusy`] when the compute is mid-operation for another caller.
    async fn snapshot(&self, incarnation: &Incarnation, kind: SnapshotKind) -> Result<SnapshotRef>;

    /// Brings an incarnation back from a snapshot: sub-second on memory-capable backends; a
    /// filesystem-only backend restores the workspace and relies on the host replaying the log.
    ///
    /// # Errors
    ///
    /// - [`crate::ApiError::MemoryStateLost`] for a memory session whose compute no longer exists
    ///   (whatever the journal records, since the snapshot went with the compute); when the
    ///   compute did not get back the memory the snapshot held; or when it holds a checkpoint
    ///   other than `snapshot` (checked before the resume, or after it on what the resume reports).
    /// - [`crate::ApiError::InvalidCheckpoint`] when `snapshot` cannot be resumed with the required
    ///   fidelity; [`crate::ApiError::CheckpointPending`] while its durable copy is uploading.
    /// - [`crate::ApiError::ComputeBusy`] when the compute is mid-operation for another caller.
    async fn restore(&self, snapshot: &SnapshotRef) -> Result<Incarnation>;

    /// Creates a child incarnation from `snapshot`. A memory-snapshot backend clones the captured
    /// state so the child continues from the parent's RAM; a filesystem-only backend returns a
    /// fresh incarnation and relies on the host replaying the child's copied log prefix. A
    /// partially provisioned child must not leak: on any failure after the child exists, tear it
    /// down before returning. The host records the returned [`Incarnation::compute_instance`] on
    /// the child's FORK marker.
    ///
    /// # Errors
    ///
    /// - [`crate::ApiError::SnapshotSuperseded`] when the parent no longer holds `snapshot`.
    /// - [`crate::ApiError::ComputeBusy`] when another caller replaced or captured the child
    ///   compute just created before it could be resumed (no child is created).
    /// - [`crate::ApiError::MemoryStateLost`] when the child did not get back the snapshot's memory.
    async fn fork(&self, snapshot: &SnapshotRef, opts: &ForkOpts) -> Result<Incarnation>;

    /// Destroys the incarnation and frees its dedicated compute. Callers must not assume that a
    /// captured [`SnapshotRef`] remains restorable after a stop.
    ///
    /// # Errors
    ///
    /// [`crate::ApiError::Status`] when teardown failed; the compute may still exist.
    async fn stop(&self, incarnation: &Incarnation) -> Result<()>;

    /// Reports the incarnation's compute-lifecycle state.
    ///
    /// # Errors
    ///
    /// [`crate::ApiError::Status`] when the backend cannot tell.
    async fn status(&self, incarnation: &Incarnation) -> Result<ComputeState>;

    /// What this backend supports. Constant for the backend's lifetime.
    fn capabilities(&self) -> RuntimeCapabilities;

    /// This backend as an [`InstanceRestorer`], when it sets [`Incarnation::compute_instance`]
    /// and implements the extension (the v0.3.0 API's type assertion). The host then calls
    /// [`InstanceRestorer::restore_instance`] in place of [`Runtime::restore`]. The default is
    /// `None`.
    fn as_instance_restorer(&self) -> Option<&dyn InstanceRestorer> {
        None
    }
}

/// Turns an [`Incarnation`]'s address into a [`Harness`](crate::Harness) the controller can
/// drive. The runtime decides where a harness lives; the dialer knows how to reach it (a unix
/// socket or TCP address over `Harness.Connect`, or a harness hosted in this process). Keeping
/// the two apart lets placement stay ignorant of transports.
#[async_trait]
pub trait HarnessDialer: Send + Sync {
    /// A harness handle for `incarnation`, honouring its [`Incarnation::call_metadata`].
    ///
    /// # Errors
    ///
    /// [`crate::ApiError::Status`] (UNAVAILABLE) when nothing answers at the address, and
    /// INVALID_ARGUMENT for an address this dialer cannot parse.
    async fn dial(&self, incarnation: &Incarnation) -> Result<Arc<dyn crate::Harness>>;
}

/// Optional extension of [`Runtime`] for a backend that sets [`Incarnation::compute_instance`]
/// (reached through [`Runtime::as_instance_restorer`]).
#[async_trait]
pub trait InstanceRestorer: Send + Sync {
    /// [`Runtime::restore`] with a way to read the compute instance the journal last recorded for
    /// the session's harness, so the backend can tell that instance from a replacement before
    /// reattaching, and classify permanent loss after a failed restore. `recorded` returns `""`
    /// when no instance is recorded. The backend may call it during admission and again after a
    /// failed restore; each call reads current journal state, so another host's intervening turn
    /// is seen.
    ///
    /// # Errors
    ///
    /// - The error `recorded` returns may refuse admission before any resume.
    /// - [`crate::ApiError::MemoryStateLost`] only when the backend can show the recorded instance
    ///   gone or replaced or, with none recorded, finds an instance it cannot tell from a
    ///   replacement. Otherwise a failed restore returns the restore error: an instance that is
    ///   still there may fail a restore for another reason, and keeps that error whatever snapshot
    ///   it holds.
    /// - Otherwise as [`Runtime::restore`].
    async fn restore_instance(
        &self,
        snapshot: &SnapshotRef,
        recorded: &(dyn Fn() -> Result<String> + Send + Sync),
    ) -> Result<Incarnation>;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::ApiError;

    // v0.3.0 API: SessionSpec.StartedTurns / RecordedCheckpoint — nil declares none.
    #[test]
    fn absent_journal_reads_mean_no_turns_and_no_checkpoint() {
        let spec = SessionSpec::default();
        assert_eq!(spec.started_turns(), Ok(0));
        assert_eq!(spec.recorded_checkpoint(), Ok(SnapshotRef::default()));
    }

    // extensions §5: the reads are lazy, each call reads current journal state.
    #[test]
    fn journal_reads_run_on_each_call_and_report_errors() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&calls);
        let spec = SessionSpec {
            session_uid: "s1".into(),
            started_turns: Some(Arc::new(
                move || Ok(seen.fetch_add(1, Ordering::SeqCst) + 1),
            )),
            recorded_checkpoint: Some(Arc::new(|| {
                Err(ApiError::status(
                    crate::StatusCode::Internal,
                    "journal read failed",
                ))
            })),
            ..SessionSpec::default()
        };
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(spec.started_turns(), Ok(1));
        assert_eq!(spec.started_turns(), Ok(2));
        assert_eq!(
            spec.recorded_checkpoint(),
            Err(ApiError::status(
                crate::StatusCode::Internal,
                "journal read failed"
            ))
        );
        let debug = format!("{spec:?}");
        assert!(debug.contains("started_turns: Some(..)"), "{debug}");
    }

    #[test]
    fn snapshot_kind_names_round_trip() {
        for kind in [SnapshotKind::Local, SnapshotKind::External] {
            assert_eq!(SnapshotKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(SnapshotKind::parse("local"), None);
    }
}
