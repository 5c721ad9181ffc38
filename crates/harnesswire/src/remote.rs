//! [`RemoteHarness`]: a harness served elsewhere, driven over `Harness.Connect` as an in-process
//! [`Harness`] (the host side of semantics §9.3).
//!
//! For every event the remote harness sends, the matching call is made on the local sink and its
//! answer is sent back:
//!
//! | remote event | local sink call | sent back |
//! |---|---|---|
//! | MODEL_CALL | [`EventSink::model`] | `model` (completion and usage) |
//! | OUTPUT | [`EventSink::output`] (the message's text) | nothing |
//! | TOOL_CALL, ordinary | [`EventSink::tool_call`] | `tool` |
//! | TOOL_CALL, approval-gated, decided | [`EventSink::tool_call`] | `approval`, then `tool` |
//! | TOOL_CALL, approval-gated, parked | [`EventSink::tool_call`] | `park`; then PARKED and EOF are required |
//! | TOOL_RESULT | [`EventSink::report`] | nothing |
//! | USAGE | [`EventSink::usage`] | nothing |
//! | END | – | the run returns: `COMPLETED` is success, anything else an error |
//! | `mint_request` (extension) | the start's [`TokenMinter`], or a `FAILED_PRECONDITION` error without one | `mint_result` |
//!
//! A sink error ends the run with that error, unchanged (the remote stream is torn down); a park
//! is returned as the sink's [`ApiError::ApprovalParked`](agentsessions_api::ApiError::ApprovalParked) once the park exchange (semantics §9.5) is done.
//! A stream that ends without END is a failure, never success.

use std::time::Duration;

use agentsessions_api::{
    ApprovalRef, Descriptor, EventSink, Harness, Mediation, Message, Result as ApiResult, Start,
    TokenMinter, ToolCall, ToolResult, Usage, is_park_unwind,
};
use agentsessions_telemetry::propagation;
use agentsessions_wire::convert::{
    model_request_from_call, model_result_from_response, start_frame,
};
use agentsessions_wire::pb;
use agentsessions_wire::pb::controller_frame::Frame;
use agentsessions_wire::pb::event::Body;
use agentsessions_wire::pb::harness_client::HarnessClient;
use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::transport::Channel;
use tonic::{Request, Streaming};
use tracing::Instrument as _;

use crate::channel::channel;
use crate::error::{HarnessWireError, Result};
use crate::frames::{
    END_COMPLETED, MAX_FRAME_BYTES, controller_frame, is_approval_shaped, kind_name,
};
use crate::mint;
use crate::request_id;

/// How long [`Harness::describe`] waits by default (semantics §9.1).
pub const DEFAULT_DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Host frames buffered before the host waits for the transport.
const FRAME_BUFFER: usize = 8;

/// A remote harness as a [`Harness`]. Cheap to clone; clones share the channel.
#[derive(Debug, Clone)]
pub struct RemoteHarness {
    client: HarnessClient<Channel>,
    describe_timeout: Duration,
    metadata: MetadataMap,
}

impl RemoteHarness {
    /// A remote harness reached through `channel`.
    pub fn new(channel: Channel) -> Self {
        Self {
            client: HarnessClient::new(channel)
                .max_decoding_message_size(MAX_FRAME_BYTES)
                .max_encoding_message_size(MAX_FRAME_BYTES),
            describe_timeout: DEFAULT_DESCRIBE_TIMEOUT,
            metadata: MetadataMap::new(),
        }
    }

    /// A remote harness at `address` (see [`channel`] for the forms it takes). Nothing is dialed
    /// until the first call.
    ///
    /// # Errors
    ///
    /// Whatever [`channel`] reports.
    pub fn connect_lazy(address: &str) -> Result<Self> {
        channel(address).map(Self::new)
    }

    /// [`RemoteHarness::connect_lazy`] over TLS when `tls` is set (see
    /// [`channel_tls`](crate::channel::channel_tls)).
    ///
    /// # Errors
    ///
    /// Whatever [`channel_tls`](crate::channel::channel_tls) reports.
    pub fn connect_lazy_tls(
        address: &str,
        tls: Option<tonic::transport::ClientTlsConfig>,
    ) -> Result<Self> {
        crate::channel::channel_tls(address, tls).map(Self::new)
    }

    /// Bounds [`Harness::describe`] by `timeout` instead of [`DEFAULT_DESCRIBE_TIMEOUT`].
    #[must_use]
    pub fn with_describe_timeout(mut self, timeout: Duration) -> Self {
        self.describe_timeout = timeout;
        self
    }

    /// Sends `metadata` with every Describe and Connect call, e.g. the routing entries of an
    /// [`Incarnation::call_metadata`](agentsessions_api::Incarnation::call_metadata) that name the
    /// sandbox behind a shared ingress. The `x-request-id` entry is always this crate's own.
    #[must_use]
    pub fn with_metadata(mut self, metadata: MetadataMap) -> Self {
        self.metadata = metadata;
        self
    }

    /// A request carrying the configured metadata.
    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        *request.metadata_mut() = self.metadata.clone();
        request
    }

    async fn describe_remote(&self) -> Result<Descriptor> {
        let mut request = self.request(pb::DescribeRequest {});
        let id = request_id::outgoing();
        request_id::attach(request.metadata_mut(), &id);
        propagation::inject_grpc(request.metadata_mut());
        request.set_timeout(self.describe_timeout);
        let mut client = self.client.clone();
        let call = async {
            let descriptor = client.describe(request).await?.into_inner();
            Ok(Descriptor::try_from(descriptor)?)
        };
        tokio::time::timeout(self.describe_timeout, call)
            .instrument(tracing::info_span!("harness.describe", request_id = %id))
            .await
            .map_err(|_| HarnessWireError::DescribeTimeout {
                timeout: self.describe_timeout,
            })?
    }
}

#[async_trait]
impl Harness for RemoteHarness {
    /// Calls `Harness.Describe`, bounded by the describe timeout.
    ///
    /// # Errors
    ///
    /// An [`ApiError::Status`](agentsessions_api::ApiError::Status) carrying the RPC's status code (`UNAVAILABLE` when the harness
    /// cannot be reached), `DEADLINE_EXCEEDED` on timeout, `INTERNAL` for a descriptor this build
    /// cannot read.
    async fn describe(&self) -> ApiResult<Descriptor> {
        Ok(self.describe_remote().await?)
    }

    /// Opens `Harness.Connect`, sends the start frame and serves the remote harness's events
    /// through `sink` (see the module docs). Dropping the future closes the stream, which cancels
    /// the remote run.
    ///
    /// # Errors
    ///
    /// A sink error, unchanged (a park among them, after the park exchange); for a remote END
    /// other than `COMPLETED`, an [`ApiError::Status`](agentsessions_api::ApiError::Status) `remote harness ended <STATE>: <error>`
    /// with the END error's code; for a stream that ends without END, `UNAVAILABLE`; for a
    /// protocol violation by the remote harness, `INTERNAL`; for an empty execution id,
    /// `INVALID_ARGUMENT`.
    async fn run(&self, start: &Start, sink: &dyn EventSink) -> ApiResult<()> {
        let id = request_id::outgoing();
        let span = tracing::info_span!(
            "harness.connect",
            request_id = %id,
            execution_id = %start.execution_id
        );
        async {
            let result = self.drive(start, sink, &id).await;
            match &result {
                Ok(()) => tracing::info!("remote execution completed"),
                Err(err) => tracing::info!(error = %err, "remote execution did not complete"),
            }
            result
        }
        .instrument(span)
        .await
    }
}

impl RemoteHarness {
    async fn drive(&self, start: &Start, sink: &dyn EventSink, id: &str) -> ApiResult<()> {
        if start.execution_id.is_empty() {
            return Err(HarnessWireError::MissingExecutionId.into());
        }
        let (frames, outbound) = mpsc::channel(FRAME_BUFFER);
        frames
            .send(start_frame(start.clone()))
            .await
            .map_err(|_| HarnessWireError::ClosedWithoutEnd)?;
        let mut request = self.request(ReceiverStream::new(outbound));
        request_id::attach(request.metadata_mut(), id);
        // The remote harness continues this turn's trace (W3C trace context in the metadata).
        propagation::inject_grpc(request.metadata_mut());
        let mut client = self.client.clone();
        let events = client
            .connect(request)
            .await
            .map_err(HarnessWireError::from)?
            .into_inner();
        Conversation {
            execution_id: &start.execution_id,
            session: &start.session_uid,
            minter: start.identity.mint_token.as_ref(),
            frames,
            events,
            sink,
        }
        .run()
        .await
    }
}

/// One Connect stream, from the host's side.
struct Conversation<'a> {
    execution_id: &'a str,
    session: &'a str,
    /// The minter the host bound to this execution; a remote harness's mints use it and nothing
    /// else.
    minter: Option<&'a TokenMinter>,
    frames: mpsc::Sender<pb::ControllerFrame>,
    events: Streaming<pb::Event>,
    sink: &'a dyn EventSink,
}

impl Conversation<'_> {
    async fn run(mut self) -> ApiResult<()> {
        loop {
            let event = self.next_event().await?;
            let kind = pb::EventKind::try_from(event.kind).ok();
            tracing::debug!(kind = kind.map_or("unknown", kind_name), "harness event");
            match (kind, event.body) {
                (_, Some(Body::MintRequest(request))) => {
                    let result = mint::answer(self.minter, request).await;
                    self.send(Frame::MintResult(result)).await?;
                }
                (Some(pb::EventKind::EventModelCall), Some(Body::Model(call))) => {
                    let model_call_id = call.id.clone();
                    let request = model_request_from_call(call).map_err(HarnessWireError::from)?;
                    let response = self.sink.model(request).await?;
                    let result = model_result_from_response(&response, &model_call_id);
                    self.send(Frame::Model(result)).await?;
                }
                (Some(pb::EventKind::EventOutput), body) => {
                    let text = match body {
                        Some(Body::Message(message)) => Message::try_from(message)
                            .map_err(HarnessWireError::from)?
                            .text(),
                        _ => String::new(),
                    };
                    self.sink.output(text).await?;
                }
                (Some(pb::EventKind::EventToolCall), Some(Body::Tool(call))) => {
                    let call = ToolCall::try_from(call).map_err(HarnessWireError::from)?;
                    self.tool_call(call).await?;
                }
                (Some(pb::EventKind::EventToolResult), Some(Body::Result(result))) => {
                    let result = ToolResult::try_from(result).map_err(HarnessWireError::from)?;
                    if is_approval_shaped(&result) {
                        return Err(HarnessWireError::ApprovalShapedResult {
                            tool_call_id: result.id,
                        }
                        .into());
                    }
                    self.sink.report(result).await?;
                }
                (Some(pb::EventKind::EventUsage), Some(Body::Usage(usage))) => {
                    self.sink.usage(Usage::from(usage)).await?;
                }
                (Some(pb::EventKind::EventEnd), body) => {
                    let end = match body {
                        Some(Body::End(end)) => end,
                        _ => pb::HarnessEnd::default(),
                    };
                    return ended(end);
                }
                (
                    Some(
                        kind @ (pb::EventKind::EventApprovalRequest
                        | pb::EventKind::EventApprovalResult
                        | pb::EventKind::EventExecutionStart
                        | pb::EventKind::EventParked),
                    ),
                    _,
                ) => {
                    return Err(HarnessWireError::HostOwnedEvent {
                        kind: kind_name(kind),
                    }
                    .into());
                }
                (
                    Some(
                        kind @ (pb::EventKind::EventModelCall
                        | pb::EventKind::EventToolCall
                        | pb::EventKind::EventToolResult
                        | pb::EventKind::EventUsage),
                    ),
                    _,
                ) => {
                    return Err(HarnessWireError::MissingPayload {
                        kind: kind_name(kind),
                        field: payload_name(kind),
                    }
                    .into());
                }
                // Other kinds (INPUT, LIFECYCLE, ERROR, and kinds this build does not know) are
                // not the harness's to drive; they are ignored, as the reference host does.
                _ => {}
            }
        }
    }

    /// The next event of this execution.
    async fn next_event(&mut self) -> Result<pb::Event> {
        let event = self
            .events
            .message()
            .await?
            .ok_or(HarnessWireError::ClosedWithoutEnd)?;
        if event.execution_id != self.execution_id {
            return Err(HarnessWireError::ExecutionMismatch {
                want: self.execution_id.to_owned(),
                got: event.execution_id,
            });
        }
        Ok(event)
    }

    async fn send(&self, frame: Frame) -> Result<()> {
        self.frames
            .send(controller_frame(self.session, self.execution_id, frame))
            .await
            // The request stream is gone only once the call itself has ended.
            .map_err(|_| HarnessWireError::ClosedWithoutEnd)
    }

    async fn tool_call(&mut self, call: ToolCall) -> ApiResult<()> {
        let gated = call.mediation == Mediation::RequiresApproval;
        if gated && self.session.is_empty() {
            return Err(HarnessWireError::InvalidApprovalCall {
                missing: "a session uid",
            }
            .into());
        }
        if gated && call.id.is_empty() {
            return Err(HarnessWireError::InvalidApprovalCall {
                missing: "a tool call id",
            }
            .into());
        }
        let call_id = call.id.clone();
        let result = match self.sink.tool_call(call).await {
            Ok(result) => result,
            Err(err) => {
                let park = err
                    .approval_ref()
                    .filter(|park| {
                        gated
                            && park.execution_id == self.execution_id
                            && park.tool_call_id == call_id
                            && park.request_seq > 0
                            && is_park_unwind(&err, park)
                    })
                    .cloned();
                if let Some(park) = park {
                    self.park(park).await?;
                }
                return Err(err);
            }
        };
        if !gated {
            if is_approval_shaped(&result) {
                return Err(HarnessWireError::ApprovalShapedResult {
                    tool_call_id: result.id,
                }
                .into());
            }
            return Ok(self.send(Frame::Tool(result.into())).await?);
        }
        let Some(decision) = result.approval.clone() else {
            return Err(HarnessWireError::InvalidApproval {
                tool_call_id: call_id,
                reason: "the host completed the call without a decision",
            }
            .into());
        };
        self.send(Frame::Approval(decision.into())).await?;
        Ok(self.send(Frame::Tool(result.into())).await?)
    }

    /// The park exchange (semantics §9.5): tell the harness to park, then require its PARKED
    /// acknowledgement for exactly `park` and a clean end of stream.
    async fn park(&mut self, park: ApprovalRef) -> Result<()> {
        let unacknowledged = |err| match err {
            HarnessWireError::ClosedWithoutEnd => HarnessWireError::ParkExchange {
                reason: "the harness closed the stream without acknowledging the park",
            },
            other => other,
        };
        self.send(Frame::Park(park.clone().into()))
            .await
            .map_err(unacknowledged)?;
        let ack = self.next_event().await.map_err(unacknowledged)?;
        let acknowledged = ack.kind == i32::from(pb::EventKind::EventParked)
            && matches!(&ack.body, Some(Body::Parked(r)) if ApprovalRef::from(r.clone()) == park);
        if !acknowledged {
            return Err(HarnessWireError::ParkExchange {
                reason: "the harness did not acknowledge the park",
            });
        }
        match self.events.message().await? {
            None => Ok(()),
            Some(_) => Err(HarnessWireError::ParkExchange {
                reason: "the harness sent events after acknowledging the park",
            }),
        }
    }
}

/// The run's result for a remote END.
fn ended(end: pb::HarnessEnd) -> ApiResult<()> {
    if end.state == END_COMPLETED {
        return Ok(());
    }
    let error = end.error.unwrap_or_default();
    Err(HarnessWireError::RemoteEnded {
        state: end.state,
        code: error.code,
        description: error.description,
    }
    .into())
}

/// The body member an event kind requires.
fn payload_name(kind: pb::EventKind) -> &'static str {
    match kind {
        pb::EventKind::EventModelCall => "model",
        pb::EventKind::EventToolCall => "tool",
        pb::EventKind::EventToolResult => "result",
        pb::EventKind::EventUsage => "usage",
        _ => "body",
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{ApiError, StatusCode};

    use super::*;

    // semantics §9.3: END COMPLETED is success; any other state is an error naming the state and
    // carrying the END error's code and description.
    #[test]
    fn only_a_completed_end_is_success() {
        assert_eq!(
            ended(pb::HarnessEnd {
                state: "COMPLETED".into(),
                error: None
            }),
            Ok(())
        );
        let failed = ended(pb::HarnessEnd {
            state: "FAILED".into(),
            error: Some(pb::Error {
                code: 9,
                description: "bad config".into(),
            }),
        });
        assert_eq!(
            failed,
            Err(ApiError::status(
                StatusCode::FailedPrecondition,
                "remote harness ended FAILED: bad config"
            ))
        );
        assert!(matches!(
            ended(pb::HarnessEnd::default()),
            Err(ApiError::Status {
                code: StatusCode::Unknown,
                ..
            })
        ));
    }
}
