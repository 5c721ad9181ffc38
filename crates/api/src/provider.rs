//! The model-provider seam: what the host (never the harness) calls to get a completion.
//!
//! The controller mediates every model call (semantics §2.5): it records MODEL_CALL, calls a
//! [`ModelProvider`], and records the completion. Providers live in their own crate (OpenAI-
//! compatible, Anthropic, offline); the neutral core knows only this trait. Cancellation is
//! dropping the future returned by [`ModelProvider::complete`]; an HTTP provider must abort its
//! request when that happens.

use async_trait::async_trait;

use crate::{ModelRequest, ModelResponse, Result};

/// Receives text chunks while a streaming provider produces a completion. Deltas are transport
/// only: the host relays them to watchers and never journals or hashes them (semantics §2.7).
pub trait DeltaSink: Send + Sync {
    /// One non-empty chunk of assistant text, in arrival order, for content part `part_index`.
    fn chunk(&self, part_index: i32, text: &str);
}

/// A model provider the host calls on the harness's behalf.
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// Short stable name for logs and startup output (`"openai"`, `"offline-echo"`, …).
    fn name(&self) -> &str;

    /// The model used when a request names none (empty `model`).
    fn default_model(&self) -> &str;

    /// Produces one completion for `request`. When `deltas` is `Some` and the provider can
    /// stream, it reports text chunks as they arrive; the returned [`ModelResponse`] is the
    /// complete message either way, identical whether or not anyone watched.
    ///
    /// # Errors
    ///
    /// [`crate::ApiError::Status`] with the provider's own message: `UNAVAILABLE` when the
    /// provider could not be reached or asked to retry later, `RESOURCE_EXHAUSTED` for rate limits
    /// that outlasted retries, `UNAUTHENTICATED`/`PERMISSION_DENIED` for credential problems,
    /// `INVALID_ARGUMENT` for a request the provider cannot express, `INTERNAL` for malformed
    /// provider answers. A provider never silently produces a second completion for one call.
    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: Option<&dyn DeltaSink>,
    ) -> Result<ModelResponse>;
}
