//! Taking a session off compute: a cold Suspend (semantics §4.2), the durable intent to Delete
//! and the reclaimer that releases a deleted session's compute (extensions §3), and the
//! best-effort stop of fork children after a failed fan-out.

use std::time::Duration;

use agentsessions_api::{
    ApiError, Incarnation, LifecycleKind, SnapshotKind, SnapshotRef, StatusCode,
};

use super::{Placer, lifecycle, runtime_err};
use crate::error::{PlacementError, Result, RuntimeOp};
use crate::registry::Route;
use agentsessions_journal::LogExt as _;

/// Bound on each best-effort Stop of a fork child after a failed fan-out.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

impl Placer {
    /// Suspends the session cold (semantics §4.2): Snapshot(EXTERNAL), then LIFECYCLE SUSPEND
    /// carrying the ref under a fresh fence. Never stops compute.
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`, `DeletionPending`, routing refusals, `SessionBusy`, runtime
    /// failures (MemoryStateLost, CheckpointPending, …; nothing journaled), journal failures.
    pub async fn suspend(&self, session: &str) -> Result<SnapshotRef> {
        let info = self.info(session).await?;
        let state = self.live_state(&info).await?;
        let scan = state.view().approvals()?;
        let open_gate = scan
            .selected()
            .is_some_and(|g| !g.completed && g.receipt.is_none());
        let route = if open_gate {
            self.recorded_route(session, &info, &state)?
        } else {
            self.registry.check_route(session, &info.row.harness, "")?;
            self.registry.resolve(&info.row.harness)?
        };
        let _held = self.take_guard(session).await?;
        let target = Incarnation {
            id: session.to_owned(),
            compute_instance: state.facts().recorded_instance(&route.name),
            recorded_checkpoint: state.facts().recorded_checkpoint(),
            ..Incarnation::default()
        };
        let snapshot = route
            .backend
            .runtime
            .snapshot(&target, SnapshotKind::External)
            .await
            .map_err(runtime_err(RuntimeOp::Snapshot, session))?;
        let fence = self.journal.new_fence(session).await?;
        let head = self.journal.head(session).await?;
        self.journal
            .append_one(
                session,
                head,
                fence,
                lifecycle(
                    LifecycleKind::Suspend,
                    String::new(),
                    Some(snapshot.clone()),
                ),
            )
            .await?;
        Ok(snapshot)
    }

    /// Best-effort teardown of children provisioned by a failed fan-out.
    pub(super) async fn stop_all(&self, route: &Route, incarnations: &[Incarnation]) {
        for incarnation in incarnations {
            let stopped =
                tokio::time::timeout(STOP_TIMEOUT, route.backend.runtime.stop(incarnation)).await;
            if !matches!(stopped, Ok(Ok(()))) {
                tracing::warn!(child = %incarnation.id, "could not stop a fork child after a failed fork");
            }
        }
    }

    /// Records the durable intent to delete (extensions §3): LIFECYCLE DELETE under a fresh fence.
    /// Idempotent: returns false when the intent was already recorded. Compute is left to a
    /// reclaimer.
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`, `SessionBusy`, journal failures.
    pub async fn delete(&self, session: &str) -> Result<bool> {
        let info = self.info(session).await?;
        if info.deletion.is_deleted() {
            return Ok(false);
        }
        if self.state(session).await?.facts().deleted() {
            return Ok(false);
        }
        let _held = self.guards.try_take(session)?;
        let fence = self.journal.new_fence(session).await?;
        let head = self.journal.head(session).await?;
        self.journal
            .append_one(
                session,
                head,
                fence,
                lifecycle(LifecycleKind::Delete, String::new(), None),
            )
            .await?;
        Ok(true)
    }

    /// Releases what a deleted session still holds (extensions §3): stops its incarnation on
    /// its route's runtime, which frees the compute and whatever snapshots the backend keeps for
    /// it, then marks the session reclaimed. Its records stay: fork children may read them as
    /// their prefix, and Get and Replay keep working. Idempotent.
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`; `Journal(InvalidArgument)` for a session that is not being
    /// deleted; `SessionBusy` while an operation still holds it; `UnknownHarness` when its
    /// harness is not served here (this host cannot reach its compute); `Runtime { op: Stop }`.
    pub async fn reclaim(&self, session: &str) -> Result<()> {
        let info = self.info(session).await?;
        agentsessions_journal::rules::check_reclaimable(session, &info.deletion)?;
        if info.reclaimed_at.is_some() {
            return Ok(());
        }
        let _held = self.guards.try_take(session)?;
        let route = self.registry.resolve(&info.row.harness)?;
        let state = self.state(session).await?;
        let target = Incarnation {
            id: session.to_owned(),
            compute_instance: state.facts().recorded_instance(&route.name),
            recorded_checkpoint: state.facts().recorded_checkpoint(),
            ..Incarnation::default()
        };
        tokio::time::timeout(STOP_TIMEOUT, route.backend.runtime.stop(&target))
            .await
            .unwrap_or_else(|_| {
                Err(ApiError::status(
                    StatusCode::DeadlineExceeded,
                    format!("stop did not finish within {}s", STOP_TIMEOUT.as_secs()),
                ))
            })
            .map_err(runtime_err(RuntimeOp::Stop, session))?;
        self.journal.mark_reclaimed(session).await?;
        tracing::info!(session_uid = session, "deleted session reclaimed");
        Ok(())
    }

    /// One reclaimer pass: [`Placer::reclaim`] on up to `limit` deleted, unreclaimed sessions.
    /// A session that cannot be reclaimed now stays queued for the next pass.
    ///
    /// # Errors
    /// Only the failure to read the queue; each session's failure is in the report.
    pub async fn reclaim_pending(&self, limit: usize) -> Result<ReclaimReport> {
        let mut report = ReclaimReport::default();
        for session in self.journal.pending_deletions(limit).await? {
            match self.reclaim(&session).await {
                Ok(()) => report.reclaimed.push(session),
                Err(err) => {
                    tracing::warn!(session_uid = %session, error = %err, "deleted session not reclaimed yet");
                    report.failed.push((session, err));
                }
            }
        }
        Ok(report)
    }
}

/// What one reclaimer pass did.
#[derive(Debug, Default)]
pub struct ReclaimReport {
    /// Sessions reclaimed in this pass.
    pub reclaimed: Vec<String>,
    /// Sessions left queued, with why.
    pub failed: Vec<(String, PlacementError)>,
}
