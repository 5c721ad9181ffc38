//! The one bounded Describe of this crate (semantics §2.3 step 4, §9.1): every Describe the
//! placement layer makes, at admission, on a dialed incarnation or for a route's descriptor,
//! goes through [`describe_within`], so each is bounded the same way and a caller's deadline is
//! never overrun.

use std::time::{Duration, SystemTime};

use agentsessions_api::{ApiError, Descriptor, Harness, StatusCode};

use crate::error::PlacementError;

/// The longest a harness may take to describe itself.
pub const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a bounded Describe produced no descriptor.
#[derive(Debug)]
pub enum DescribeFailure {
    /// The harness answered with an error.
    Failed(ApiError),
    /// The caller's deadline, shorter than [`DESCRIBE_TIMEOUT`], passed first.
    CallerDeadline,
    /// [`DESCRIBE_TIMEOUT`] passed without an answer.
    TimedOut,
}

impl DescribeFailure {
    /// The failure as the admission gate reports it for harness `name`.
    pub fn into_admission_error(self, name: &str) -> PlacementError {
        let harness = name.to_owned();
        match self {
            Self::Failed(source) if unavailable(&source) => {
                PlacementError::HarnessUnavailable { harness, source }
            }
            Self::Failed(source) => PlacementError::DescribeFailed { harness, source },
            Self::CallerDeadline => PlacementError::AdmissionInterrupted { harness },
            Self::TimedOut => PlacementError::HarnessUnavailable {
                harness,
                source: timed_out(),
            },
        }
    }

    /// The failure as a harness error (a timeout is `DEADLINE_EXCEEDED`).
    pub fn into_api_error(self) -> ApiError {
        match self {
            Self::Failed(source) => source,
            Self::CallerDeadline => {
                ApiError::status(StatusCode::DeadlineExceeded, "the caller's deadline passed")
            }
            Self::TimedOut => timed_out(),
        }
    }
}

fn timed_out() -> ApiError {
    ApiError::status(
        StatusCode::DeadlineExceeded,
        "the harness did not describe itself within 10s",
    )
}

/// Whether a Describe error means the harness could not be reached (rather than refused).
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

/// Describes `harness` within [`DESCRIBE_TIMEOUT`], and never past `deadline` when one is set.
///
/// # Errors
/// [`DescribeFailure`]: the harness's error, or which bound passed first.
pub async fn describe_within(
    harness: &dyn Harness,
    deadline: Option<SystemTime>,
) -> Result<Descriptor, DescribeFailure> {
    describe_bounded_by(harness, deadline, DESCRIBE_TIMEOUT).await
}

async fn describe_bounded_by(
    harness: &dyn Harness,
    deadline: Option<SystemTime>,
    limit: Duration,
) -> Result<Descriptor, DescribeFailure> {
    let remaining = deadline.map(|d| {
        d.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
    });
    let bound = remaining.map_or(limit, |r| r.min(limit));
    let caller_bound = remaining.is_some_and(|r| r <= limit);
    match tokio::time::timeout(bound, harness.describe()).await {
        Ok(Ok(descriptor)) => Ok(descriptor),
        Ok(Err(source)) => Err(DescribeFailure::Failed(source)),
        Err(_) if caller_bound => Err(DescribeFailure::CallerDeadline),
        Err(_) => Err(DescribeFailure::TimedOut),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use agentsessions_api::{EventSink, Start};
    use async_trait::async_trait;

    use super::*;

    /// Never answers Describe.
    struct Silent;

    #[async_trait]
    impl Harness for Silent {
        async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
            std::future::pending().await
        }

        async fn run(
            &self,
            _start: &Start,
            _sink: &dyn EventSink,
        ) -> agentsessions_api::Result<()> {
            Ok(())
        }
    }

    // semantics §2.3 step 4: a silent harness is cut off at the describe bound.
    #[tokio::test]
    async fn a_silent_harness_times_out_at_the_bound() {
        let bound = Duration::from_millis(20);
        let failure = describe_bounded_by(&Silent, None, bound).await.unwrap_err();
        assert!(matches!(failure, DescribeFailure::TimedOut));
        assert!(matches!(
            failure.into_admission_error("h"),
            PlacementError::HarnessUnavailable { .. }
        ));
    }

    // semantics §2.3 step 4: a caller deadline shorter than the bound wins and says so.
    #[tokio::test]
    async fn a_shorter_caller_deadline_interrupts_admission() {
        let deadline = SystemTime::now() + Duration::from_millis(20);
        let failure = describe_within(&Silent, Some(deadline)).await.unwrap_err();
        assert!(matches!(failure, DescribeFailure::CallerDeadline));
        assert!(matches!(
            failure.into_admission_error("h"),
            PlacementError::AdmissionInterrupted { .. }
        ));
    }
}
