//! The [`Placer`]: every operation that puts a session's harness on compute or takes it off
//! (semantics §2.3, §4, §5.2 step 4, extensions §3 and §5).
//!
//! ```text
//! turn    guard ─ unfinished? ─ exec | resume ─ settle compute   (an Exec RPC: the caller's row, one event channel)
//! exec    guard ─ checks ─ gate ─ create ─ dial ─ re-gate ─ instance ─ Controller::exec (fence minted in its opening commit)
//! resume  guard ─ route ─ park? ─ gate ─ restore ─ dial ─ re-gate ─ instance ─ fence ─ resume ─ RESUME
//! suspend route ─ guard ─ snapshot(EXTERNAL) ─ fence ─ SUSPEND{ref}
//! fork    gate ─ [memory: fence ─ snapshot ─ SUSPEND at at_seq] ─ N × (runtime fork ─ prefix ─ FORK)
//! ```
//!
//! One fence is minted per Exec/Resume invocation and bound to both the incarnation and the
//! controller, so any later writer supersedes it mid flight. An Exec mints it in the same commit
//! as the turn's opening records, after their cursor check, so a caller that lost the race to
//! the head never supersedes the one that won it. Nothing is provisioned or journaled
//! before the admission gate passes.
//!
//! This module holds the [`Placer`] itself, its construction and the routing shared by its
//! calls; each family of calls has its own file:
//! - `admission` — the admission gate (through [`crate::describe`]), the dial and instance
//!   checks.
//! - `turns` — the turn of an Exec RPC ([`Placer::run_turn`]), Exec, Resume, Approve, Cancel
//!   and the approval park hand-off.
//! - `fork` — Fork, stateless and memory.
//! - `teardown` — Suspend, Delete and the reclaimer.
//! - `compute` — the session's compute state, as the journal recorded it and its runtime
//!   reports it.

mod admission;
mod compute;
mod fork;
mod teardown;
mod turns;

use std::sync::Arc;

use agentsessions_api::{
    ApiError, Event, EventBody, EventKind, Lifecycle, LifecycleKind, ModelPolicy, ModelProvider,
    SnapshotRef,
};
use agentsessions_controller::{IdSource, TokenMinting, ToolExecutor, TurnSettings};
use agentsessions_journal::{Journal, SessionInfo};

use crate::error::{PlacementError, Result, RuntimeOp};
use crate::guard::{Held, SessionGuards};
use crate::progress::ProgressBus;
use crate::registry::{Registry, Route};
use crate::states::{SessionState, SessionStates};

pub use compute::SessionCompute;
pub use fork::{ForkCall, ForkOutcome, MAX_FORK_COUNT};
pub use teardown::ReclaimReport;
pub use turns::{ExecCall, ResumeCall, TurnCall, TurnRun};

/// Places sessions' harnesses on their routes' runtimes and drives the controller. Cheap to
/// clone; one per host.
#[derive(Clone)]
pub struct Placer {
    journal: Arc<dyn Journal>,
    model: Arc<dyn ModelProvider>,
    registry: Registry,
    guards: SessionGuards,
    /// Each session's decoded log between operations (validated against the head every time).
    states: SessionStates,
    /// What every controller this placer builds shares.
    settings: TurnSettings,
    /// The progress of running tools, for the streams watching their sessions.
    progress: Arc<ProgressBus>,
}

impl std::fmt::Debug for Placer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placer")
            .field("registry", &self.registry)
            .field("stream_deltas", &self.settings.stream_deltas)
            .finish_non_exhaustive()
    }
}

fn lifecycle(kind: LifecycleKind, detail: String, snapshot: Option<SnapshotRef>) -> Event {
    Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind,
            detail,
            snapshot,
            compute_instance: String::new(),
        }),
    )
}

fn runtime_err(op: RuntimeOp, session: &str) -> impl FnOnce(ApiError) -> PlacementError {
    let session = session.to_owned();
    move |source| PlacementError::Runtime {
        op,
        session,
        source,
    }
}

/// The registry name recorded by the last execution when it has not ended (as
/// [`crate::history::pending_harness`], from the kept reading).
fn pending_harness(state: &SessionState) -> Option<String> {
    let last = state.view().log().ok()?.last()?;
    if last.completed() {
        return None;
    }
    last.start
        .as_ref()
        .map(|s| s.harness.clone())
        .filter(|h| !h.is_empty())
}

impl Placer {
    /// A placer over `journal` serving `registry`'s routes, calling models through `model`.
    pub fn new(
        journal: Arc<dyn Journal>,
        model: Arc<dyn ModelProvider>,
        registry: Registry,
    ) -> Self {
        Self {
            journal,
            model,
            registry,
            guards: SessionGuards::default(),
            states: SessionStates::default(),
            settings: TurnSettings::default(),
            progress: Arc::new(ProgressBus::default()),
        }
    }

    /// Where the host's tool executor reports running calls' progress, and where the streams
    /// watching a session take it from (extensions §10).
    pub fn progress(&self) -> &Arc<ProgressBus> {
        &self.progress
    }

    /// Keeps at most `budget` bytes of session states between operations (default
    /// [`crate::DEFAULT_STATE_BUDGET`]); 0 keeps none, so every operation reads the whole log.
    #[must_use]
    pub fn with_state_budget(mut self, budget: usize) -> Self {
        self.states = SessionStates::with_budget(budget);
        self
    }

    /// The session states this placer keeps.
    pub fn states(&self) -> &SessionStates {
        &self.states
    }

    /// `uid`'s state at the journal's head (see [`SessionStates::current`]).
    async fn state(&self, uid: &str) -> Result<Arc<SessionState>> {
        Ok(self.states.current(self.journal.as_ref(), uid).await?)
    }

    /// Takes execution, model-call and fork-child session ids from `ids` instead of random ones
    /// (STYLE rule 3: ids are inputs), e.g. for deterministic tests.
    #[must_use]
    pub fn with_ids(mut self, ids: Arc<dyn IdSource>) -> Self {
        self.settings.ids = ids;
        self
    }

    /// Runs controller-mediated and approved tool calls through `tools`.
    #[must_use]
    pub fn with_tools(mut self, tools: Arc<dyn ToolExecutor>) -> Self {
        self.settings.tools = Some(tools);
        self
    }

    /// Hands each live turn's harness a delegated-token minter from `minting` (bound to the
    /// session, the execution and the session's owner and agent principal).
    #[must_use]
    pub fn with_token_minting(mut self, minting: Arc<dyn TokenMinting>) -> Self {
        self.settings.minting = Some(minting);
        self
    }

    /// Every turn's records are journaled without the secrets `redactor` knows
    /// (`docs/security.md`, "Redaction").
    #[must_use]
    pub fn with_redactor(mut self, redactor: Arc<agentsessions_api::Redactor>) -> Self {
        self.settings.redactor = redactor;
        self
    }

    /// Whether turns ask providers to stream deltas (transport only).
    #[must_use]
    pub fn with_stream_deltas(mut self, stream: bool) -> Self {
        self.settings.stream_deltas = stream;
        self
    }

    /// Admits only the models of `policy` (extensions §4): every turn's model requests, and the
    /// models a harness's descriptor declares, checked at admission before compute exists.
    #[must_use]
    pub fn with_policy(mut self, policy: ModelPolicy) -> Self {
        self.settings.policy = Some(policy);
        self
    }

    /// The routes.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The journal.
    pub fn journal(&self) -> &Arc<dyn Journal> {
        &self.journal
    }

    /// A fresh session uid from the placer's id source, for a session the host creates.
    pub fn new_session_uid(&self) -> String {
        self.settings.ids.session_uid()
    }

    /// Stops every turn running on this host, and every turn that starts from now on, because
    /// the host is shutting down: each writes an ERROR note ("host shutting down; resume to
    /// continue") instead of an END and stays resumable. Returns how many were running.
    pub fn interrupt_turns(&self) -> usize {
        self.settings.cancellations.interrupt_all()
    }

    /// Whether an operation holds `session` on this host.
    pub fn is_busy(&self, session: &str) -> bool {
        self.guards.is_busy(session)
    }

    /// Takes `uid`'s guard for an operation with effects. A session pending deletion is refused
    /// as such even while another operation (its reclaimer, say) holds it: waiting for the guard
    /// would not help, so `DeletionPending` is the honest answer, not `SessionBusy`.
    async fn take_guard(&self, uid: &str) -> Result<Held> {
        match self.guards.try_take(uid) {
            Err(PlacementError::SessionBusy(busy)) => {
                let deleted = match self.info(uid).await {
                    Ok(info) => self.live_state(&info).await.err(),
                    Err(_) => None,
                };
                Err(Self::busy_or_deleted(busy, deleted))
            }
            taken => taken,
        }
    }

    /// [`Placer::take_guard`] for a session the caller has read.
    async fn take_guard_of(&self, info: &SessionInfo) -> Result<Held> {
        match self.guards.try_take(&info.row.uid) {
            Err(PlacementError::SessionBusy(busy)) => {
                let deleted = self.live_state(info).await.err();
                Err(Self::busy_or_deleted(busy, deleted))
            }
            taken => taken,
        }
    }

    fn busy_or_deleted(busy: String, deleted: Option<PlacementError>) -> PlacementError {
        match deleted {
            Some(deleted @ PlacementError::DeletionPending(_)) => deleted,
            _ => PlacementError::SessionBusy(busy),
        }
    }

    async fn info(&self, uid: &str) -> Result<SessionInfo> {
        Ok(self.journal.session_info(uid).await?)
    }

    /// The session's state, refusing a session pending deletion: by its stored state (an
    /// unknown one counts as deleted) or by a delete marker in a log written before that state
    /// was stored.
    async fn live_state(&self, info: &SessionInfo) -> Result<Arc<SessionState>> {
        let uid = info.row.uid.as_str();
        if info.deletion.is_deleted() {
            return Err(PlacementError::DeletionPending(uid.to_owned()));
        }
        let state = self.state(uid).await?;
        if state.facts().deleted() {
            return Err(PlacementError::DeletionPending(uid.to_owned()));
        }
        Ok(state)
    }

    /// The route for Resume/Suspend/recovery: the pending execution's recorded harness when there
    /// is one (it must be served here), else the stored one; the pin rule applies to the choice.
    fn recorded_route(&self, uid: &str, info: &SessionInfo, state: &SessionState) -> Result<Route> {
        let chosen = match pending_harness(state) {
            Some(recorded) if !self.registry.contains(&recorded) => {
                return Err(PlacementError::RecordedHarnessNotServed {
                    session: uid.to_owned(),
                    harness: recorded,
                });
            }
            Some(recorded) => recorded,
            None => info.row.harness.clone(),
        };
        self.registry.check_route(uid, &info.row.harness, &chosen)?;
        self.registry.resolve(&chosen)
    }
}
