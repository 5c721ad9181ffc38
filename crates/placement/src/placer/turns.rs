//! Turns: Exec and Resume (which place the harness and drive the controller), the turn an Exec
//! RPC runs ([`Placer::run_turn`]: a new turn, or the continuation of an unfinished one), the
//! approval park hand-off, and the host-only Approve and Cancel (semantics §2.3, §4.3, §5.2
//! step 4, §5.5, §5.6; extensions §9: new input never silently abandons a turn, a decision is
//! recorded only where it can be carried out, and Cancel ends a turn in any state).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentsessions_api::{
    ApiError, ApprovalDecision, ApprovalRef, Descriptor, EventSink, Harness, IdentityContext,
    Incarnation, LifecycleKind, SessionSpec, SnapshotKind, SnapshotRef, Start, StatusCode,
    Timestamp,
};
use agentsessions_controller::approval::DecisionAdmission;
use agentsessions_controller::settlement::{check_new_input, unfinished_in};
use agentsessions_controller::{
    Controller, ControllerError, ExecRequest, LogView, Observer as _, ResumeOutcome, TurnOutcome,
};
use agentsessions_journal::{JournalError, LogRecord, SessionInfo};
use async_trait::async_trait;

use super::{Placer, lifecycle, runtime_err};
use crate::error::{PlacementError, Result, RuntimeOp};
use crate::registry::Route;
use crate::states::SessionState;
use crate::turn_events::{self, TurnEvents, TurnFeed};
use agentsessions_journal::LogExt as _;

/// How long Cancel waits for the cancelled turn to unwind.
const CANCEL_UNWIND_WAIT: Duration = Duration::from_secs(5);

/// One Exec.
#[derive(Clone, Default)]
pub struct ExecCall {
    /// The session (must exist).
    pub session: String,
    /// Per-turn harness override; empty = the session's stored harness.
    pub harness: String,
    /// The turn.
    pub request: ExecRequest,
}

impl std::fmt::Debug for ExecCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecCall")
            .field("session", &self.session)
            .field("harness", &self.harness)
            .finish_non_exhaustive()
    }
}

/// One Resume.
#[derive(Debug, Clone, Default)]
pub struct ResumeCall {
    /// The session.
    pub session: String,
    /// Bound on the re-driven turn.
    pub deadline: Option<SystemTime>,
    /// Strict cursor check before anything runs (a continuation through Exec); `None` skips it.
    pub expected_last_seq: Option<i64>,
}

/// The turn of one Exec RPC ([`Placer::run_turn`]).
#[derive(Clone, Default)]
pub struct TurnCall {
    /// The session as the caller read it to authorize the turn. The turn takes its row (owner,
    /// harness, principal, deletion) from here and reads no other copy of it; what can change
    /// under it is read from the log, under the session's guard.
    pub session: SessionInfo,
    /// Per-turn harness override; empty = the session's stored harness.
    pub harness: String,
    /// The turn.
    pub request: ExecRequest,
}

impl std::fmt::Debug for TurnCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnCall")
            .field("session", &self.session.row.uid)
            .field("harness", &self.harness)
            .finish_non_exhaustive()
    }
}

/// What [`Placer::run_turn`] ran.
#[derive(Debug, Clone)]
pub enum TurnRun {
    /// A new turn (semantics §2.3).
    Ran(TurnOutcome),
    /// The session's unfinished turn, continued as Resume does: an inputless Exec on a turn
    /// stopped at an approval gate or before its END (semantics §5.6, extensions §9).
    Continued(ResumeOutcome),
}

/// The gate-recovery rule: an inputless Exec that does not abandon the session's turn
/// continues it when it stopped at an approval gate (semantics §5.6) or before its END
/// (extensions §9). A log that does not read as executions is not continued: the new turn
/// refuses it with its own error.
fn continues_unfinished(request: &ExecRequest, view: &LogView) -> bool {
    if !request.inputs.is_empty() || request.abandon_unfinished {
        return false;
    }
    let gated = view
        .approvals()
        .ok()
        .and_then(|scan| scan.selected().map(|gate| !gate.completed))
        .unwrap_or(false);
    gated || matches!(unfinished_in(view), Ok(Some(_)))
}

/// Stands in for the harness where the controller needs one but never runs it (Approve).
struct NoHarness;

#[async_trait]
impl Harness for NoHarness {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Err(ApiError::status(
            StatusCode::FailedPrecondition,
            "recording a decision does not run a harness",
        ))
    }

    async fn run(&self, _start: &Start, _sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        Err(ApiError::status(
            StatusCode::FailedPrecondition,
            "recording a decision does not run a harness",
        ))
    }
}

impl Placer {
    /// What the runtime is told about the session. The journal reads are taken under the
    /// session guard right before the runtime call, so on one host nothing can move them.
    fn spec(session: &str, harness: &str, state: &SessionState) -> SessionSpec {
        let turns = state.facts().started_turns(harness);
        let checkpoint = state.facts().recorded_checkpoint();
        SessionSpec {
            session_uid: session.to_owned(),
            harness: harness.to_owned(),
            started_turns: Some(Arc::new(move || Ok(turns))),
            recorded_checkpoint: Some(Arc::new(move || Ok(checkpoint.clone()))),
            ..SessionSpec::default()
        }
    }

    /// The turn's controller. The session's stored owner and agent principal go to the harness
    /// (and to the minter bound to each live turn, when the host mints tokens).
    fn controller(
        &self,
        name: &str,
        harness: Arc<dyn Harness>,
        info: &SessionInfo,
        fence: i64,
        instance: &str,
        feed: Arc<TurnFeed>,
    ) -> Controller {
        let identity = IdentityContext {
            principal: info.row.identity.clone(),
            mint_token: None,
        };
        Controller::new(
            Arc::clone(&self.journal),
            harness,
            Arc::clone(&self.model),
            info.row.uid.as_str(),
        )
        .with_settings(self.settings.clone())
        .with_identity(identity)
        .with_owner(info.row.owner.clone())
        .with_fence(fence)
        .with_registry_name(name)
        .with_compute_instance(instance)
        .with_observer(feed)
    }

    /// The turn of one Exec RPC, on the session the caller read and authorized: the events
    /// its reader takes (bounded; see [`crate::turn_events`]), and the turn, which runs when
    /// polled. Under the session's guard it decides what the request runs: the session's
    /// unfinished turn, continued as [`Placer::resume`] does, for an inputless request that does
    /// not abandon it (semantics §5.6, extensions §9), else a new turn as [`Placer::exec`]. Once
    /// the turn returned, the session's compute state is settled with its runtime
    /// ([`Placer::settle_compute`]) from the log, without reading the session's row again.
    ///
    /// The events end once the turn returned and its last record was handed out.
    ///
    /// # Errors
    /// As [`Placer::exec`] for a new turn, as [`Placer::resume`] for a continuation (its cursor
    /// check is the request's `expected_last_seq`).
    pub fn run_turn(
        &self,
        call: TurnCall,
    ) -> (TurnEvents, impl Future<Output = Result<TurnRun>> + Send) {
        let (feed, events) = turn_events::channel(Arc::clone(&self.journal), &call.session.row.uid);
        (events, self.drive_turn(call, feed))
    }

    async fn drive_turn(&self, call: TurnCall, feed: TurnFeed) -> Result<TurnRun> {
        let ends = feed.ending();
        let TurnCall {
            session: info,
            harness,
            request,
        } = call;
        let held = Arc::new(self.take_guard_of(&info).await?);
        let run = async {
            let state = self.live_state(&info).await?;
            // Under the guard, the head stays put until the turn appends.
            feed.starting_after(state.head());
            let feed = feed.noting(&held);
            if continues_unfinished(&request, state.view()) {
                let resume = ResumeCall {
                    session: info.row.uid.clone(),
                    deadline: request.deadline,
                    expected_last_seq: request.expected_last_seq,
                };
                self.resume_held(&info, state, &resume, &feed)
                    .await
                    .map(TurnRun::Continued)
            } else {
                self.exec_held(&info, state, &harness, request, &feed)
                    .await
                    .map(TurnRun::Ran)
            }
        }
        .await;
        // The events end before the guard goes, so what the journal announces after belongs
        // to another turn, never read as this one's.
        drop(ends);
        drop(held);
        // The turn is over: what its runtime kept of it is the session's compute now.
        if let Err(err) = self.settle_after(&info).await {
            tracing::debug!(session_uid = %info.row.uid, error = %err, "compute state not settled");
        }
        run
    }

    /// Runs one turn (semantics §2.3).
    ///
    /// # Errors
    /// [`PlacementError::SessionBusy`]; `Journal(SessionNotFound)`; `DeletionPending`;
    /// `Controller(ApprovalBlocked)` and `Controller(UnfinishedTurn)` while the last turn has not
    /// ended and the request does not abandon it (extensions §9);
    /// `Journal(Conflict)` for a stale cursor (before any fence);
    /// routing and admission refusals (nothing provisioned or journaled); runtime, dial and
    /// instance failures (nothing journaled); the controller's errors. An approval park comes
    /// back as `Controller(Parked)` after the hand-off (SUSPEND recorded).
    pub async fn exec(&self, call: ExecCall) -> Result<TurnOutcome> {
        let uid = call.session.as_str();
        let held = Arc::new(self.take_guard(uid).await?);
        let info = self.info(uid).await?;
        let state = self.live_state(&info).await?;
        let feed = TurnFeed::unread().noting(&held);
        self.exec_held(&info, state, &call.harness, call.request, &feed)
            .await
    }

    /// [`Placer::exec`] once the session is held and read.
    async fn exec_held(
        &self,
        info: &SessionInfo,
        state: Arc<SessionState>,
        harness: &str,
        request: ExecRequest,
        feed: &Arc<TurnFeed>,
    ) -> Result<TurnOutcome> {
        let uid = info.row.uid.as_str();
        // A stale cursor is refused before a fence is minted: minting would supersede the writer
        // that moved the head (perhaps on another host) and cost it its turn. It goes first: a
        // caller that lost the race to a turn is told so, not that the turn has not ended.
        let head = state.head();
        if let Some(expected) = request.expected_last_seq
            && expected != head
        {
            return Err(JournalError::Conflict {
                session: uid.to_owned(),
                expected,
                actual: head,
            }
            .into());
        }
        // Refused before any compute is provisioned; an abandoned turn is closed by the
        // controller in the new turn's opening commit.
        check_new_input(state.view(), request.abandon_unfinished)?;
        self.registry.check_route(uid, &info.row.harness, harness)?;
        let name = if harness.is_empty() {
            &info.row.harness
        } else {
            harness
        };
        let route = self.registry.resolve(name)?;
        let deadline = request.deadline;
        self.admit(&route, deadline).await?;
        let spec = Self::spec(uid, &route.name, &state);
        let mut incarnation = route
            .backend
            .runtime
            .create(&spec)
            .await
            .map_err(runtime_err(RuntimeOp::Create, uid))?;
        let harness = self.dial(&route, &incarnation, deadline).await?;
        Self::check_instance(uid, &route.name, &state, &incarnation)?;
        // The incarnation's fence is minted in the turn's opening commit, after its cursor
        // check: a caller that lost the race to the head changes nothing, not even the fence.
        let controller = self
            .controller(
                &route.name,
                harness,
                info,
                0,
                &incarnation.compute_instance,
                Arc::clone(feed),
            )
            .minting_fence();
        let turn = controller.exec_view(request, state.view()).await;
        // The turn's history shared the state's records: let them go before the next operation
        // extends the state.
        drop(state);
        match turn {
            Err(ControllerError::Parked(park)) => {
                incarnation.fence_token = controller.fence();
                drop(controller);
                self.hand_off(&route, &incarnation, &park, feed).await?;
                Err(ControllerError::Parked(park).into())
            }
            other => Ok(other?),
        }
    }

    /// The approval park hand-off (semantics §5.2 step 4): the park must be the journal's open
    /// request; the incarnation is snapshotted and a SUSPEND is written at the captured head with
    /// the invocation's fence.
    async fn hand_off(
        &self,
        route: &Route,
        incarnation: &Incarnation,
        park: &ApprovalRef,
        feed: &TurnFeed,
    ) -> Result<()> {
        let uid = incarnation.id.as_str();
        let state = self.state(uid).await?;
        let scan = state.view().approvals()?;
        let matches = scan
            .selected()
            .is_some_and(|gate| gate.is_pending() && gate.park_ref() == *park);
        if !matches {
            return Err(ControllerError::ReplayDiverged(format!(
                "the park for tool call {:?} is not the session's open approval request",
                park.tool_call_id
            ))
            .into());
        }
        let mut target = incarnation.clone();
        target.recorded_checkpoint = state.facts().recorded_checkpoint();
        let snapshot = route
            .backend
            .runtime
            .snapshot(&target, SnapshotKind::External)
            .await
            .map_err(runtime_err(RuntimeOp::Snapshot, uid))?;
        let record = self
            .journal
            .append_one(
                uid,
                state.head(),
                incarnation.fence_token,
                lifecycle(LifecycleKind::Suspend, String::new(), Some(snapshot)),
            )
            .await?;
        feed.record(&record);
        Ok(())
    }

    /// Resumes the session (semantics §4.3): re-drives an interrupted execution at most once per
    /// effect, or does nothing when none is pending, and records LIFECYCLE RESUME.
    ///
    /// # Errors
    /// As [`Placer::exec`], plus `RecordedHarnessNotServed`, `Controller(InheritedToolIntent)`; an
    /// undecided approval comes back as `Controller(Parked)` without touching compute.
    pub async fn resume(&self, call: ResumeCall) -> Result<ResumeOutcome> {
        let uid = call.session.as_str();
        let held = Arc::new(self.take_guard(uid).await?);
        let info = self.info(uid).await?;
        let state = self.live_state(&info).await?;
        let feed = TurnFeed::unread().noting(&held);
        self.resume_held(&info, state, &call, &feed).await
    }

    /// [`Placer::resume`] once the session is held and read.
    async fn resume_held(
        &self,
        info: &SessionInfo,
        state: Arc<SessionState>,
        call: &ResumeCall,
        feed: &Arc<TurnFeed>,
    ) -> Result<ResumeOutcome> {
        let uid = info.row.uid.as_str();
        let route = self.recorded_route(uid, info, &state)?;
        let head = state.head();
        if let Some(expected) = call.expected_last_seq
            && expected != head
        {
            return Err(JournalError::Conflict {
                session: uid.to_owned(),
                expected,
                actual: head,
            }
            .into());
        }
        let scan = state.view().approvals()?;
        if let Some(gate) = scan.selected()
            && !gate.completed
            && gate.receipt.is_none()
        {
            if gate.inherited {
                return Err(ControllerError::InheritedToolIntent {
                    tool_call_id: gate.call.id.clone(),
                }
                .into());
            }
            if gate.request_seq > 0 && gate.decision.is_none() {
                // Waiting for a decision: no runtime work until one is recorded.
                return Err(ControllerError::Parked(gate.park_ref()).into());
            }
        }
        self.admit(&route, call.deadline).await?;
        let checkpoint = state.facts().recorded_checkpoint();
        let source = if checkpoint.is_empty() {
            SnapshotRef {
                local: uid.to_owned(),
                ..SnapshotRef::default()
            }
        } else {
            checkpoint
        };
        let recorded = state.facts().recorded_instance(&route.name);
        let runtime = &route.backend.runtime;
        let restored = match runtime.as_instance_restorer() {
            Some(restorer) => {
                let read = move || Ok(recorded.clone());
                restorer.restore_instance(&source, &read).await
            }
            None => runtime.restore(&source).await,
        };
        let mut incarnation = restored.map_err(runtime_err(RuntimeOp::Restore, uid))?;
        let harness = self.dial(&route, &incarnation, call.deadline).await?;
        Self::check_instance(uid, &route.name, &state, &incarnation)?;
        let fence = self.journal.new_fence(uid).await?;
        incarnation.fence_token = fence;
        let controller = self.controller(
            &route.name,
            harness,
            info,
            fence,
            &incarnation.compute_instance,
            Arc::clone(feed),
        );
        let resumed = controller.resume_view(call.deadline, state.view()).await;
        drop(state);
        match resumed {
            Err(ControllerError::Parked(park)) => {
                drop(controller);
                self.hand_off(&route, &incarnation, &park, feed).await?;
                Err(ControllerError::Parked(park).into())
            }
            Err(e) => Err(e.into()),
            Ok(outcome) => {
                let head = self.journal.head(uid).await?;
                let record = self
                    .journal
                    .append_one(
                        uid,
                        head,
                        fence,
                        lifecycle(LifecycleKind::Resume, String::new(), None),
                    )
                    .await?;
                feed.record(&record);
                Ok(outcome)
            }
        }
    }

    /// Records an approval decision (semantics §5.5) under the session guard. Never runs the
    /// harness. A new decision is refused up front, journaling nothing, when this host could
    /// not carry it out: the turn's harness is not served here, or (to approve) no tool
    /// executor here runs the call's tool (extensions §9).
    ///
    /// # Errors
    /// `SessionBusy`, `Journal(SessionNotFound)`, `DeletionPending`,
    /// `Controller(InvalidApprovalDecision)`, [`PlacementError::DecisionNotCarried`], journal
    /// failures.
    pub async fn approve(&self, session: &str, decision: &ApprovalDecision) -> Result<LogRecord> {
        let _held = self.take_guard(session).await?;
        let info = self.info(session).await?;
        let state = self.live_state(&info).await?;
        let scan = state.view().approvals()?;
        if let DecisionAdmission::Record = scan.admit_decision(decision)? {
            self.check_carried(session, &info, &state, decision)?;
        }
        let controller = Controller::new(
            Arc::clone(&self.journal),
            Arc::new(NoHarness),
            Arc::clone(&self.model),
            session,
        )
        .with_settings(self.settings.clone());
        Ok(controller
            .approve_view(decision, Timestamp::now(), state.view())
            .await?)
    }

    /// Why this host could not carry out `decision`, a new decision on `session`'s selected
    /// gate: the turn's recorded harness is not served here, or (to approve) no tool executor
    /// here runs the call's tool. Checked before anything is journaled, so a decision is never
    /// recorded where the turn would then be stuck.
    fn check_carried(
        &self,
        session: &str,
        info: &SessionInfo,
        state: &SessionState,
        decision: &ApprovalDecision,
    ) -> Result<()> {
        let not_carried = |missing: String| PlacementError::DecisionNotCarried {
            session: session.to_owned(),
            tool_call_id: decision.tool_call_id.clone(),
            missing,
        };
        if let Err(
            PlacementError::RecordedHarnessNotServed { harness, .. }
            | PlacementError::UnknownHarness { name: harness, .. },
        ) = self.recorded_route(session, info, state)
        {
            return Err(not_carried(format!(
                "the turn's harness {harness:?} is not served here"
            )));
        }
        if !decision.approved {
            return Ok(());
        }
        let scan = state.view().approvals()?;
        let tool = scan
            .gates
            .iter()
            .find(|gate| {
                gate.execution_id == decision.execution_id
                    && gate.call.id == decision.tool_call_id
                    && gate.request_seq == decision.request_seq
            })
            .map(|gate| gate.call.tool.as_str())
            .unwrap_or_default();
        match &self.settings.tools {
            None => Err(not_carried(format!(
                "no tool executor is configured here to run tool {tool:?}"
            ))),
            Some(tools) if !tools.runs(tool) => Err(not_carried(format!(
                "no tool executor here runs tool {tool:?} (no configured tool source offers it)"
            ))),
            Some(_) => Ok(()),
        }
    }

    /// Cancels `session`'s turn (`execution_id` empty = whichever it is) and returns the
    /// cancelled execution id. A turn running on this host is stopped, and waited for briefly
    /// to unwind (LIFECYCLE CANCEL and its END written). Any other unfinished turn — parked at
    /// an approval, or interrupted — is closed here without running it on: its open tool calls
    /// are settled (outcome unknown, or not run for an undecided approval), then CANCEL and END
    /// CANCELED (extensions §9).
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`; `SessionBusy` while another operation holds the session;
    /// `DeletionPending`; `NothingToCancel` when the last turn has ended (or is not
    /// `execution_id`).
    pub async fn cancel(&self, session: &str, execution_id: &str, reason: &str) -> Result<String> {
        let info = self.info(session).await?;
        let running = if execution_id.is_empty() {
            self.guards.running_execution(session)
        } else {
            Some(execution_id.to_owned())
        };
        let reason = if reason.is_empty() {
            "cancelled by request"
        } else {
            reason
        };
        if let Some(execution) = running.filter(|id| self.settings.cancellations.cancel(id, reason))
        {
            let unwound_by = tokio::time::Instant::now() + CANCEL_UNWIND_WAIT;
            while self.guards.is_busy(session) && tokio::time::Instant::now() < unwound_by {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            return Ok(execution);
        }
        let nothing = || PlacementError::NothingToCancel {
            session: session.to_owned(),
            detail: if execution_id.is_empty() {
                String::new()
            } else {
                format!(" under execution {execution_id:?}")
            },
        };
        let _held = self.take_guard(session).await?;
        let state = self.live_state(&info).await?;
        let asked = |id: &str| execution_id.is_empty() || execution_id == id;
        match unfinished_in(state.view())? {
            Some(left) if asked(&left.execution.id) => {}
            _ => return Err(nothing()),
        }
        let controller = Controller::new(
            Arc::clone(&self.journal),
            Arc::new(NoHarness),
            Arc::clone(&self.model),
            session,
        )
        .with_settings(self.settings.clone());
        let closed = controller.close_unfinished(reason, state.view()).await?;
        closed.map(|turn| turn.execution_id).ok_or_else(nothing)
    }

    /// Whether resuming `session` would run its turn on: a decided approval whose turn has not
    /// finished (extensions §2: such a resume also needs exec).
    ///
    /// # Errors
    /// Journal failures; an approval history that does not scan.
    pub async fn resume_drives_effects(&self, session: &str) -> Result<bool> {
        let state = self.state(session).await?;
        let scan = state.view().approvals()?;
        Ok(scan
            .selected()
            .is_some_and(|g| !g.inherited && !g.completed && g.decision.is_some()))
    }
}
