//! Request ids: the `x-request-id` metadata that ties a host's logs to the harness's for one RPC.
//!
//! The host side sends the id in scope ([`with_request_id`]) or a fresh one; the serving side reads
//! it (or mints one when it is absent or unusable), logs it on the RPC's span, and runs the harness
//! inside [`with_request_id`], so [`current_request_id`] inside [`agentsessions_api::Harness::run`]
//! returns it and a harness that calls further services can pass it on.

use std::future::Future;

use tonic::metadata::{MetadataMap, MetadataValue};

/// The metadata key request ids travel under.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Longest id accepted from a peer; anything longer is replaced by a fresh one.
const MAX_REQUEST_ID_LEN: usize = 128;

tokio::task_local! {
    static REQUEST_ID: String;
}

/// Runs `future` with `id` as the current request id: outgoing harness RPCs made inside it carry
/// it, and [`current_request_id`] returns it.
pub async fn with_request_id<F: Future>(id: impl Into<String>, future: F) -> F::Output {
    REQUEST_ID.scope(id.into(), future).await
}

/// The request id in scope (see [`with_request_id`]); `None` outside any scope.
pub fn current_request_id() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// The id an outgoing RPC carries: the one in scope when it is usable, else a fresh one.
pub(crate) fn outgoing() -> String {
    current_request_id()
        .filter(|id| is_usable(id))
        .unwrap_or_else(fresh)
}

/// The id of an incoming RPC: its `x-request-id` when usable, else a fresh one.
pub fn incoming(metadata: &MetadataMap) -> String {
    metadata
        .get(REQUEST_ID_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|id| is_usable(id))
        .map_or_else(fresh, ToOwned::to_owned)
}

/// Sets `id` as the `x-request-id` of `metadata` (ids that are not usable were replaced before).
pub fn attach(metadata: &mut MetadataMap, id: &str) {
    if let Ok(value) = MetadataValue::try_from(id) {
        let _previous = metadata.insert(REQUEST_ID_HEADER, value);
    }
}

/// A fresh random id: 16 lowercase hex digits.
pub(crate) fn fresh() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Peer-supplied ids end up in logs, so only short, printable, space-free ASCII is kept.
fn is_usable(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_REQUEST_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_scoped_id_is_current_and_outgoing() {
        assert_eq!(current_request_id(), None);
        let inside = with_request_id("req-1", async { (current_request_id(), outgoing()) }).await;
        assert_eq!(inside, (Some("req-1".to_owned()), "req-1".to_owned()));
        let fresh_id = outgoing();
        assert_eq!(fresh_id.len(), 16);
        assert!(fresh_id.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn incoming_ids_are_kept_only_when_usable() {
        let mut metadata = MetadataMap::new();
        attach(&mut metadata, "abc-123");
        assert_eq!(incoming(&metadata), "abc-123");
        for bad in ["", "has space", &"x".repeat(200)] {
            let mut metadata = MetadataMap::new();
            if let Ok(value) = MetadataValue::try_from(bad) {
                metadata.insert(REQUEST_ID_HEADER, value);
            }
            let id = incoming(&metadata);
            assert_ne!(id, bad);
            assert_eq!(id.len(), 16);
        }
        assert_eq!(incoming(&MetadataMap::new()).len(), 16);
    }
}
