//! What every RPC does around its handler, written once: the verified caller, a span carrying
//! the request id (returned to the caller in the response metadata) and continuing the caller's
//! W3C trace context, one outcome log line (never payloads), the RPC metrics, and the error
//! leaving through the table of [`crate::error`].

use std::future::Future;
use std::time::Instant;

use agentsessions_harnesswire::request_id;
use agentsessions_telemetry::{metrics, propagation};
use tonic::{Code, Request, Response, Status};
use tracing::{Instrument, Span};

use crate::authz::Call;
use crate::error::Result;

/// A tonic handler's result.
pub(crate) type Rpc<T> = std::result::Result<Response<T>, Status>;

/// One incoming call: who made it, under which request id, and the span its work runs in.
pub(crate) struct Incoming {
    pub(crate) call: Call,
    pub(crate) request_id: String,
    pub(crate) span: Span,
}

impl Incoming {
    /// Opens `request` to the full RPC name `method` (`/agentsessions.v1.Sessions/Exec`): the
    /// call and its message.
    pub(crate) fn open<T>(method: &'static str, request: Request<T>) -> (Self, T) {
        let (metadata, extensions, message) = request.into_parts();
        let request_id = request_id::incoming(&metadata);
        let operation = method.rsplit('/').next().unwrap_or(method);
        // `otel.*` and `rpc.*` name the span and its attributes when it is exported (RPC
        // semantic conventions); the log lines show them as fields.
        let span = tracing::info_span!(
            "rpc",
            component = "grpc",
            operation,
            request_id = %request_id,
            otel.name = method.trim_start_matches('/'),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            rpc.system = "grpc",
            rpc.method = operation,
            rpc.grpc.status_code = tracing::field::Empty,
        );
        propagation::parent_from_grpc(&span, &metadata);
        let incoming = Self {
            call: Call::of(&extensions, method),
            request_id,
            span,
        };
        (incoming, message)
    }

    /// Runs `work` inside this call's span and request id.
    pub(crate) fn run<F: Future>(&self, work: F) -> impl Future<Output = F::Output> + use<F> {
        request_id::with_request_id(self.request_id.clone(), work).instrument(self.span.clone())
    }

    /// `status`, carrying this call's request id.
    pub(crate) fn refuse(&self, mut status: Status) -> Status {
        request_id::attach(status.metadata_mut(), &self.request_id);
        status
    }

    /// A response carrying this call's request id.
    pub(crate) fn respond<R>(&self, value: R) -> Response<R> {
        let mut response = Response::new(value);
        request_id::attach(response.metadata_mut(), &self.request_id);
        response
    }
}

/// Runs a unary RPC (or the opening of a streaming one): `handler` gets the verified caller and
/// the request message; its error becomes the status of the table, carrying the request id.
pub(crate) async fn unary<T, R, H, F>(
    method: &'static str,
    request: Request<T>,
    handler: H,
) -> Rpc<R>
where
    H: FnOnce(Call, T) -> F,
    F: Future<Output = Result<R>>,
{
    let (incoming, message) = Incoming::open(method, request);
    let started = Instant::now();
    let result = incoming.run(handler(incoming.call.clone(), message)).await;
    let _entered = incoming.span.enter();
    match finished(method, started, result) {
        Ok(value) => Ok(incoming.respond(value)),
        Err(mut status) => {
            request_id::attach(status.metadata_mut(), &incoming.request_id);
            Err(status)
        }
    }
}

/// Logs how call `method` ended (inside its span), counts it, and turns its error into the
/// table's status.
pub(crate) fn finished<R>(
    method: &'static str,
    started: Instant,
    result: Result<R>,
) -> std::result::Result<R, Status> {
    let elapsed = started.elapsed();
    let duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    let code = match &result {
        Ok(_) => Code::Ok,
        Err(err) => err.code(),
    };
    let span = tracing::Span::current();
    span.record("rpc.grpc.status_code", i32::from(code));
    if code != Code::Ok {
        span.record("otel.status_code", "ERROR");
    }
    let operation = method.rsplit('/').next().unwrap_or(method);
    metrics().rpc(operation, code_name(code), elapsed);
    match result {
        Ok(value) => {
            tracing::info!(outcome = "success", duration_ms, "finished");
            Ok(value)
        }
        Err(err) => {
            tracing::info!(
                outcome = "error",
                error_kind = err.kind(),
                code = ?err.code(),
                duration_ms,
                "finished"
            );
            Err(err.status())
        }
    }
}

/// The canonical name of a gRPC status code, as metrics label it.
fn code_name(code: Code) -> &'static str {
    // The one code -> name table is the API's (`StatusCode::as_str`).
    agentsessions_api::StatusCode::from_number(i32::from(code))
        .unwrap_or(agentsessions_api::StatusCode::Unknown)
        .as_str()
}
