//! [`Observed`]: any [`Runtime`] with a span and metrics around each operation (create,
//! snapshot, restore, fork, stop). Every backend's runtime is wrapped once, where the
//! [`Backend`](crate::Backend) is made, so no runtime implements this itself.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use agentsessions_api::{
    ComputeState, ForkOpts, Incarnation, InstanceRestorer, Result, Runtime, RuntimeCapabilities,
    SessionSpec, SnapshotKind, SnapshotRef,
};
use agentsessions_telemetry::metrics;
use async_trait::async_trait;
use tracing::Instrument as _;
use tracing::field::Empty;

/// A runtime whose operations are traced and counted.
pub(crate) struct Observed {
    inner: Arc<dyn Runtime>,
}

impl Observed {
    /// Wraps `inner`.
    pub(crate) fn wrap(inner: Arc<dyn Runtime>) -> Arc<dyn Runtime> {
        Arc::new(Self { inner })
    }
}

/// Runs runtime `operation` on `subject` (the session uid it creates compute for, or the
/// incarnation it acts on) in its span, recording its outcome and latency.
async fn observe<T>(
    operation: &'static str,
    subject: &str,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    let span = tracing::info_span!(
        "runtime",
        otel.name = %format!("runtime {operation}"),
        operation,
        subject = %subject,
        otel.status_code = Empty,
        error.r#type = Empty,
    );
    let started = Instant::now();
    let result = work.instrument(span.clone()).await;
    if let Err(e) = &result {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", e.status_code().to_string());
    }
    metrics().runtime_operation(operation, result.is_ok(), started.elapsed());
    result
}

#[async_trait]
impl Runtime for Observed {
    async fn create(&self, spec: &SessionSpec) -> Result<Incarnation> {
        observe("create", &spec.session_uid, self.inner.create(spec)).await
    }

    async fn snapshot(&self, incarnation: &Incarnation, kind: SnapshotKind) -> Result<SnapshotRef> {
        observe(
            "snapshot",
            &incarnation.id,
            self.inner.snapshot(incarnation, kind),
        )
        .await
    }

    async fn restore(&self, snapshot: &SnapshotRef) -> Result<Incarnation> {
        observe("restore", "", self.inner.restore(snapshot)).await
    }

    async fn fork(&self, snapshot: &SnapshotRef, opts: &ForkOpts) -> Result<Incarnation> {
        observe(
            "fork",
            &opts.child_session_uid,
            self.inner.fork(snapshot, opts),
        )
        .await
    }

    async fn stop(&self, incarnation: &Incarnation) -> Result<()> {
        observe("stop", &incarnation.id, self.inner.stop(incarnation)).await
    }

    async fn status(&self, incarnation: &Incarnation) -> Result<ComputeState> {
        // Polled, not an operation: no span, no count.
        self.inner.status(incarnation).await
    }

    fn capabilities(&self) -> RuntimeCapabilities {
        self.inner.capabilities()
    }

    fn as_instance_restorer(&self) -> Option<&dyn InstanceRestorer> {
        self.inner.as_instance_restorer()
    }
}
