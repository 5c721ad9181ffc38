//! What compute a session has (semantics §1.7): the journal's projection, and for an
//! incarnation the journal believes live, what its runtime reports now ([`Runtime::status`]), so
//! a stopped or vanished incarnation reads as gone rather than live. While an operation holds the
//! session on this host, that operation moves the projection and the journal's view stands.
//!
//! The projection each append moves says what the log implies: any turn record reads LIVE. A
//! runtime that keeps no incarnation once a turn ends (a harness object in this process, the
//! local runtime's shared server, an attached remote) reports NONE, and one that lost its
//! incarnation reports what is left; [`Placer::settle_compute`] writes that answer back into the
//! journal once an operation ends, so listings and the sessions gauge, which read the journal
//! alone, show the same state a Get does (docs/extensions.md, "Compute state").
//!
//! [`Runtime::status`]: agentsessions_api::Runtime::status

use std::collections::BTreeMap;
use std::time::Duration;

use agentsessions_api::{ComputeRef, ComputeState, Incarnation};
use agentsessions_journal::SessionInfo;
use agentsessions_journal::projection::project_compute_state;

use super::Placer;
use crate::error::Result;

/// Bound on a runtime's status answer; past it the journal's view stands, so a slow backend
/// cannot hold up a Get or a List.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// A session's compute as this host sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCompute {
    /// The compute axis; never [`ComputeState::Unspecified`].
    pub state: ComputeState,
    /// The incarnation while it holds compute (live or warm); `None` otherwise.
    pub compute: Option<ComputeRef>,
}

impl SessionCompute {
    /// The journal's projection alone, with no runtime asked (a session that never ran has no
    /// compute).
    pub fn recorded(info: &SessionInfo) -> Self {
        Self {
            state: match info.compute_state {
                ComputeState::Unspecified => ComputeState::None,
                other => other,
            },
            compute: None,
        }
    }
}

fn holds_compute(state: ComputeState) -> bool {
    matches!(state, ComputeState::Live | ComputeState::Warm)
}

impl Placer {
    /// The session's compute: the journal's projection, checked with the runtime of its route
    /// when the journal says it holds compute and no operation holds the session on this host.
    /// A reclaimed session is terminated. When the route is not served here, or the runtime
    /// cannot tell in time, the journal's view stands.
    pub async fn session_compute(&self, info: &SessionInfo) -> SessionCompute {
        if info.reclaimed_at.is_some() {
            return SessionCompute {
                state: ComputeState::Terminated,
                compute: None,
            };
        }
        let recorded = SessionCompute::recorded(info);
        if !holds_compute(recorded.state) {
            return recorded;
        }
        let uid = info.row.uid.as_str();
        let Ok(state) = self.state(uid).await else {
            return recorded;
        };
        let harness = super::pending_harness(&state).unwrap_or_else(|| info.row.harness.clone());
        let Ok(route) = self.registry.resolve(&harness) else {
            return recorded;
        };
        let target = Incarnation {
            id: uid.to_owned(),
            compute_instance: state.facts().recorded_instance(&route.name),
            recorded_checkpoint: state.facts().recorded_checkpoint(),
            fence_token: info.fence,
            ..Incarnation::default()
        };
        let reported = if self.is_busy(uid) {
            // The running operation moves the projection; its incarnation is in use.
            Ok(Ok(recorded.state))
        } else {
            tokio::time::timeout(STATUS_TIMEOUT, route.backend.runtime.status(&target)).await
        };
        let state = match reported {
            Ok(Ok(ComputeState::Unspecified)) => recorded.state,
            Ok(Ok(state)) => state,
            Ok(Err(err)) => {
                tracing::debug!(session_uid = uid, error = %err, "runtime cannot tell the compute state");
                recorded.state
            }
            Err(_) => {
                tracing::debug!(session_uid = uid, "runtime status timed out");
                recorded.state
            }
        };
        let compute = holds_compute(state).then(|| ComputeRef {
            snapshot: (!target.recorded_checkpoint.is_empty())
                .then(|| target.recorded_checkpoint.clone()),
            capabilities: route.backend.capabilities(),
            attributes: if target.compute_instance.is_empty() {
                BTreeMap::new()
            } else {
                BTreeMap::from([(
                    "compute_instance".to_owned(),
                    target.compute_instance.clone(),
                )])
            },
            fence_token: info.fence,
            ..ComputeRef::default()
        });
        SessionCompute { state, compute }
    }

    /// Settles the journal's compute projection with what the session's runtime reports
    /// ([`Placer::session_compute`]), at the head the journal has now, and returns whether it
    /// changed it. A host calls it once an operation on the session has ended (a turn, a
    /// resume), so a session whose incarnation went with its turn reads NONE in listings and
    /// gauges, not LIVE. It changes nothing while another operation holds the session here
    /// (that one moves the projection), for a reclaimed session, or when the runtime cannot
    /// tell; and nothing when the log moved on meanwhile (the newer records' projection
    /// stands: [`Catalog::settle_compute_state`]).
    ///
    /// [`Catalog::settle_compute_state`]: agentsessions_journal::Catalog::settle_compute_state
    ///
    /// # Errors
    /// Journal failures (`Journal(SessionNotFound)` for an unknown session).
    pub async fn settle_compute(&self, uid: &str) -> Result<bool> {
        let info = self.info(uid).await?;
        self.settle_with(&info).await
    }

    /// [`Placer::settle_compute`] once a turn ended on the session `before` described, without
    /// reading its row again: the row's head and compute projection are moved over the records
    /// appended since (from the kept state, one tail read) the way each append moved them.
    ///
    /// # Errors
    /// Journal failures.
    pub(crate) async fn settle_after(&self, before: &SessionInfo) -> Result<bool> {
        let state = self.state(&before.row.uid).await?;
        let records = state.records();
        let appended = records
            .get(records.partition_point(|r| r.seq <= before.last_seq)..)
            .unwrap_or_default();
        let now = SessionInfo {
            last_seq: state.head(),
            compute_state: appended.iter().fold(before.compute_state, |current, r| {
                project_compute_state(current, &r.event)
            }),
            fence: appended
                .iter()
                .map(|r| r.fence)
                .fold(before.fence, i64::max),
            ..before.clone()
        };
        drop(state);
        self.settle_with(&now).await
    }

    /// [`Placer::settle_compute`] for a session no operation of this host may have ended just
    /// now: it settles only when the log shows no turn that may still run anywhere (its last
    /// execution ended, or it never ran one). A host runs it over the sessions the journal says
    /// hold compute, such as rows whose turns ended before their host settled at turn end. A
    /// turn that another host starts meanwhile moves the head, and the settle is refused.
    ///
    /// # Errors
    /// Journal failures (`Journal(SessionNotFound)` for an unknown session).
    pub async fn settle_idle_compute(&self, uid: &str) -> Result<bool> {
        let info = self.info(uid).await?;
        let state = self.state(uid).await?;
        let idle = state.head() == info.last_seq
            && state
                .view()
                .log()
                .ok()
                .is_some_and(|log| log.last().is_none_or(|last| last.completed()));
        drop(state);
        if !idle {
            return Ok(false);
        }
        self.settle_with(&info).await
    }

    async fn settle_with(&self, info: &SessionInfo) -> Result<bool> {
        let uid = info.row.uid.as_str();
        let recorded = SessionCompute::recorded(info).state;
        if info.reclaimed_at.is_some() || self.is_busy(uid) {
            return Ok(false);
        }
        let seen = self.session_compute(info).await.state;
        if seen == recorded {
            return Ok(false);
        }
        let settled = self
            .journal
            .settle_compute_state(uid, info.last_seq, seen)
            .await?;
        if settled {
            tracing::debug!(
                session_uid = uid,
                recorded = recorded.as_str(),
                settled = seen.as_str(),
                "compute state settled with the runtime"
            );
        }
        Ok(settled)
    }
}
