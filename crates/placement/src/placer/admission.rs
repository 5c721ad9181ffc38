//! The admission gate (semantics §2.3 step 4, §4.1): what a harness must show before compute
//! exists for it, and again once its incarnation is dialed, plus the recorded-instance check of
//! extensions §5.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentsessions_api::{ApiError, Descriptor, Harness, Incarnation};
use agentsessions_controller::ControllerError;

use super::Placer;
use crate::backend::DescriptorSource;
use crate::describe::describe_within;
use crate::error::{PlacementError, Result};
use crate::registry::Route;
use crate::states::SessionState;

/// How long [`Placer::default_model`] waits for a harness to describe itself: creating a session
/// never waits on a harness that does not answer for as long as admitting a turn may.
const MODEL_DESCRIBE_TIMEOUT: Duration = Duration::from_secs(2);

impl Placer {
    /// The admission gate of semantics §4.1 on one descriptor, plus the model policy of
    /// extensions §4: a descriptor declaring a model outside the policy is refused.
    pub(super) fn gate(&self, route: &Route, descriptor: &Descriptor) -> Result<()> {
        let expected = route.backend.expected_id();
        if !expected.is_empty() && descriptor.id != expected {
            return Err(PlacementError::DescriptorMismatch {
                harness: route.name.clone(),
                expected: expected.to_owned(),
                reported: descriptor.id.clone(),
            });
        }
        if !descriptor
            .capabilities
            .can_place_on(route.backend.capabilities())
        {
            return Err(PlacementError::Unplaceable {
                harness: route.name.clone(),
                reason: "it requires memory snapshots and its runtime cannot take them; serve it \
                         on a memory-snapshot runtime"
                    .into(),
            });
        }
        if let Some(policy) = &self.settings.policy {
            policy
                .validate_descriptor(descriptor)
                .map_err(|e| match e {
                    ApiError::ModelNotAllowed { model } => {
                        ControllerError::ModelNotAllowed { model }
                    }
                    other => ControllerError::InvalidModelPolicy(other.to_string()),
                })?;
        }
        Ok(())
    }

    /// Describes through the route's descriptor source and gates, before any compute exists.
    pub(super) async fn admit(
        &self,
        route: &Route,
        deadline: Option<SystemTime>,
    ) -> Result<Descriptor> {
        let descriptor = match &route.backend.source {
            DescriptorSource::Declared(d) => d.clone(),
            DescriptorSource::Probe(h) => describe_within(h.as_ref(), deadline)
                .await
                .map_err(|failure| failure.into_admission_error(&route.name))?,
        };
        self.gate(route, &descriptor)?;
        Ok(descriptor)
    }

    /// The model the turns of a session on `route` resolve to, for the session's row (semantics
    /// §1.6, extensions §4): the model policy's default, which every turn journals as its
    /// EXECUTION_START's `model` and hands the harness; without a policy, the one model the
    /// route's descriptor declares (the model that harness calls). Empty when neither says: no
    /// policy and a descriptor declaring none or several, or a harness that does not describe
    /// itself in time (nothing is refused here; admission refuses at the turn).
    pub async fn default_model(&self, route: &Route) -> String {
        if let Some(policy) = &self.settings.policy
            && let Ok(model) = policy.resolve("")
        {
            return model;
        }
        let described = match &route.backend.source {
            DescriptorSource::Declared(d) => Ok(d.clone()),
            DescriptorSource::Probe(h) => {
                let deadline = SystemTime::now() + MODEL_DESCRIBE_TIMEOUT;
                describe_within(h.as_ref(), Some(deadline)).await
            }
        };
        match described {
            Ok(descriptor) => match descriptor.models.as_slice() {
                [model] => model.clone(),
                _ => String::new(),
            },
            Err(failure) => {
                tracing::debug!(harness = %route.name, error = %failure.into_api_error(), "no descriptor to take a session's model from");
                String::new()
            }
        }
    }

    /// Dials the incarnation and repeats the gate on the dialed harness (the live re-check).
    pub(super) async fn dial(
        &self,
        route: &Route,
        incarnation: &Incarnation,
        deadline: Option<SystemTime>,
    ) -> Result<Arc<dyn Harness>> {
        let harness = route
            .backend
            .dialer
            .dial(incarnation)
            .await
            .map_err(|source| PlacementError::Dial {
                harness: route.name.clone(),
                address: incarnation.address.clone(),
                source,
            })?;
        let descriptor = describe_within(harness.as_ref(), deadline)
            .await
            .map_err(|failure| failure.into_admission_error(&route.name))?;
        self.gate(route, &descriptor)?;
        Ok(harness)
    }

    /// Refuses compute that is not the instance the journal recorded (extensions §5).
    pub(super) fn check_instance(
        session: &str,
        harness: &str,
        state: &SessionState,
        incarnation: &Incarnation,
    ) -> Result<()> {
        if incarnation.compute_instance.is_empty() {
            return Ok(());
        }
        let recorded = state.facts().recorded_instance(harness);
        if !recorded.is_empty() && recorded != incarnation.compute_instance {
            return Err(PlacementError::InstanceMismatch {
                session: session.to_owned(),
                recorded,
                placed: incarnation.compute_instance.clone(),
            });
        }
        Ok(())
    }
}
