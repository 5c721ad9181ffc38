//! How the harness under test is reached: in process, or (with `harnesswire`) in another task
//! behind `Harness.Connect`.

use std::sync::Arc;

use agentsessions_api::Harness;
use async_trait::async_trait;

/// Puts a harness behind a transport. The returned harness is what the host drives; it must
/// keep every guarantee the in-process harness has.
#[async_trait]
pub trait Transport: Send + Sync {
    /// A short name for test output.
    fn name(&self) -> &'static str;

    /// Serves `harness` over this transport and returns the host-side handle.
    async fn attach(&self, harness: Arc<dyn Harness>) -> Arc<dyn Harness>;
}

/// The harness runs in the host's process: the handle is the harness itself.
#[derive(Debug, Default, Clone, Copy)]
pub struct InProcess;

#[async_trait]
impl Transport for InProcess {
    fn name(&self) -> &'static str {
        "in-process"
    }

    async fn attach(&self, harness: Arc<dyn Harness>) -> Arc<dyn Harness> {
        harness
    }
}
