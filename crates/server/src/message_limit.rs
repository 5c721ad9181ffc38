//! [`MessageLimited`]: the Sessions service with tonic's "message too large" refusal relabelled
//! through the error table.
//!
//! tonic refuses a request larger than its decoding limit before any handler runs, with
//! `OUT_OF_RANGE`; gRPC's own status-code guide, and this service's table, call that
//! `RESOURCE_EXHAUSTED` ([`ServerError::MessageTooLarge`]). The refusal is a trailers-only
//! response, so its code is in the response headers, where this wrapper rewrites it. The body
//! is never read whole: tonic checks the length prefix first, so memory stays bounded.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::codegen::Service;
use tonic::codegen::http::{HeaderMap, Request, Response};
use tonic::server::NamedService;
use tonic::{Code, Status};

use crate::error::ServerError;

/// The start of tonic's message when a request exceeds the decoding limit.
const TONIC_TOO_LARGE: &str = "Error, decoded message length too large";

/// A gRPC service whose oversized-request refusals carry the table's status.
#[derive(Debug, Clone)]
pub struct MessageLimited<S> {
    inner: S,
    limit: usize,
}

impl<S> MessageLimited<S> {
    /// `inner`, whose decoding limit is `limit` bytes.
    pub fn new(inner: S, limit: usize) -> Self {
        Self { inner, limit }
    }
}

impl<S, B, R> Service<Request<B>> for MessageLimited<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let limit = self.limit;
        let answer = self.inner.call(request);
        Box::pin(async move {
            let mut response = answer.await?;
            relabel(response.headers_mut(), limit);
            Ok(response)
        })
    }
}

impl<S: NamedService> NamedService for MessageLimited<S> {
    const NAME: &'static str = S::NAME;
}

/// Rewrites tonic's oversized-request status in `headers`, if that is what they carry.
fn relabel(headers: &mut HeaderMap, limit: usize) {
    let Some(status) = Status::from_header_map(headers) else {
        return;
    };
    if status.code() != Code::OutOfRange || !status.message().starts_with(TONIC_TOO_LARGE) {
        return;
    }
    let err = ServerError::MessageTooLarge { limit };
    tracing::info!(
        component = "grpc",
        outcome = "error",
        error_kind = err.kind(),
        "request refused: {}",
        status.message()
    );
    if let Err(unwritable) = err.status().add_header(headers) {
        tracing::warn!(error = %unwritable, "cannot relabel an oversized request's status");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_oversized_request_status_is_relabelled() {
        let mut oversized = HeaderMap::new();
        Status::out_of_range(format!(
            "{TONIC_TOO_LARGE}: found 9 bytes, the limit is: 8 bytes"
        ))
        .add_header(&mut oversized)
        .unwrap();
        relabel(&mut oversized, 8);
        let status = Status::from_header_map(&oversized).unwrap();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status.message().contains("max_message_bytes (8 bytes)"));

        let mut other = HeaderMap::new();
        Status::out_of_range("seq past the head")
            .add_header(&mut other)
            .unwrap();
        relabel(&mut other, 8);
        assert_eq!(
            Status::from_header_map(&other).unwrap().code(),
            Code::OutOfRange
        );
    }
}
