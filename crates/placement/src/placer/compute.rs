//! What compute a session has (semantics §1.7): the journal's projection, and for an
//! incarnation the journal believes live, what its runtime reports now ([`Runtime::status`]), so
//! a stopped or vanished incarnation reads as gone rather than live.
//!
//! [`Runtime::status`]: agentsessions_api::Runtime::status

use std::collections::BTreeMap;
use std::time::Duration;

use agentsessions_api::{ComputeRef, ComputeState, Incarnation};
use agentsessions_journal::SessionInfo;

use super::Placer;

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
    /// when the journal says it holds compute. A reclaimed session is terminated. When the
    /// route is not served here, or the runtime cannot tell in time, the journal's view stands.
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
        let reported =
            tokio::time::timeout(STATUS_TIMEOUT, route.backend.runtime.status(&target)).await;
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
}
