//! [`CountingProvider`]: a wrapper that counts calls, so a test can prove that replay made no
//! model call at all (I1).

use std::sync::atomic::{AtomicU64, Ordering};

use agentsessions_api::{self as api, DeltaSink, ModelProvider, ModelRequest, ModelResponse};
use async_trait::async_trait;

/// Forwards every call to the wrapped provider and counts it, failed and cancelled calls
/// included: a call counts as soon as it starts.
#[derive(Debug, Default)]
pub struct CountingProvider<P> {
    inner: P,
    calls: AtomicU64,
}

impl<P> CountingProvider<P> {
    /// Wraps `inner` with a count of zero.
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            calls: AtomicU64::new(0),
        }
    }

    /// How many times [`ModelProvider::complete`] has been called.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Unwraps the provider, dropping the count.
    pub fn into_inner(self) -> P {
        self.inner
    }
}

#[async_trait]
impl<P: ModelProvider> ModelProvider for CountingProvider<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn default_model(&self) -> &str {
        self.inner.default_model()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: Option<&dyn DeltaSink>,
    ) -> api::Result<ModelResponse> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.complete(request, deltas).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offline::EchoModel;

    #[tokio::test]
    async fn counts_each_call_and_forwards_it() {
        let provider = CountingProvider::new(EchoModel::new());
        assert_eq!(provider.calls(), 0);
        let request = ModelRequest::default();
        let response = provider.complete(&request, None).await.unwrap();
        provider.complete(&request, None).await.unwrap();
        assert_eq!(provider.calls(), 2);
        assert_eq!(response.message.text(), "echo:");
        assert_eq!(provider.name(), "offline-echo");
    }
}
