//! The admission gate (semantics §2.3 step 4, §4.1): what a harness must show before compute
//! exists for it, and again once its incarnation is dialed, plus the recorded-instance check of
//! extensions §5.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentsessions_api::{ApiError, Descriptor, Harness, Incarnation, StatusCode};
use agentsessions_journal::LogRecord;

use super::Placer;
use crate::backend::DescriptorSource;
use crate::error::{PlacementError, Result};
use crate::history;
use crate::registry::Route;

/// Bound on a harness's Describe during admission (semantics §2.3 step 4).
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

fn unavailable(err: &ApiError) -> bool {
    err.leaves().any(|leaf| {
        matches!(
            leaf,
            ApiError::Status {
                code: StatusCode::Unavailable | StatusCode::DeadlineExceeded,
                ..
            }
        )
    })
}

/// Describes `harness` within the admission bound, never past the caller's deadline.
async fn describe_bounded(
    name: &str,
    harness: &dyn Harness,
    deadline: Option<SystemTime>,
) -> Result<Descriptor> {
    let remaining = deadline.map(|d| {
        d.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
    });
    let bound = remaining.map_or(DESCRIBE_TIMEOUT, |r| r.min(DESCRIBE_TIMEOUT));
    let caller_bound = remaining.is_some_and(|r| r <= DESCRIBE_TIMEOUT);
    match tokio::time::timeout(bound, harness.describe()).await {
        Ok(Ok(descriptor)) => Ok(descriptor),
        Ok(Err(source)) if unavailable(&source) => Err(PlacementError::HarnessUnavailable {
            harness: name.to_owned(),
            source,
        }),
        Ok(Err(source)) => Err(PlacementError::DescribeFailed {
            harness: name.to_owned(),
            source,
        }),
        Err(_) if caller_bound => Err(PlacementError::AdmissionInterrupted {
            harness: name.to_owned(),
        }),
        Err(_) => Err(PlacementError::HarnessUnavailable {
            harness: name.to_owned(),
            source: ApiError::status(
                StatusCode::DeadlineExceeded,
                "the harness did not describe itself within 10s",
            ),
        }),
    }
}

impl Placer {
    /// The admission gate of semantics §4.1 on one descriptor.
    pub(super) fn gate(route: &Route, descriptor: &Descriptor) -> Result<()> {
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
            DescriptorSource::Probe(h) => {
                describe_bounded(&route.name, h.as_ref(), deadline).await?
            }
        };
        Self::gate(route, &descriptor)?;
        Ok(descriptor)
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
        let descriptor = describe_bounded(&route.name, harness.as_ref(), deadline).await?;
        Self::gate(route, &descriptor)?;
        Ok(harness)
    }

    /// Refuses compute that is not the instance the journal recorded (extensions §5).
    pub(super) fn check_instance(
        session: &str,
        harness: &str,
        records: &[LogRecord],
        incarnation: &Incarnation,
    ) -> Result<()> {
        if incarnation.compute_instance.is_empty() {
            return Ok(());
        }
        let recorded = history::recorded_instance(records, harness);
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
