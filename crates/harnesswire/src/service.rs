//! [`HarnessService`]: the serving side of `Harness.Describe` and `Harness.Connect` around any
//! [`Harness`] (semantics §9.4).
//!
//! One Connect stream runs one execution:
//!
//! ```text
//! host                                   HarnessService
//!  | ControllerFrame{start}  ----------->  Harness::run(start, StreamSink)
//!  |                         <-----------  MODEL_CALL{id}            (sink.model)
//!  | ControllerFrame{model}  ----------->  ...returns the completion
//!  |                         <-----------  OUTPUT / TOOL_RESULT / USAGE (fire and forget)
//!  |                         <-----------  TOOL_CALL                 (sink.tool_call)
//!  | {tool} | {approval}{tool} | {park} ->  ...result, or the park error
//!  |                         <-----------  END{COMPLETED | FAILED}, or PARKED then EOF
//! ```
//!
//! When the start says `can_mint_tokens`, the harness's start carries a minter whose mints
//! cross the stream as `mint_request` events and `mint_result` frames, matched by request id
//! ([`crate::mint`]); otherwise it has none.
//!
//! The run is driven by the response stream itself, not a spawned task: when the host cancels
//! (a `cancel` frame, closing its side, or resetting the stream) the run future is dropped, which
//! is the SPI's cancellation. After a `cancel` frame the stream ends with `END{CANCELED}`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use agentsessions_api::{ApiError, Harness, Start, is_park_unwind};
use agentsessions_telemetry::propagation;
use agentsessions_wire::convert::start_from_pb;
use agentsessions_wire::pb;
use agentsessions_wire::pb::controller_frame::Frame;
use agentsessions_wire::pb::event::Body;
use agentsessions_wire::pb::harness_server::HarnessServer;
use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument as _;

use crate::error::{HarnessWireError, api_error_to_status, end_error};
use crate::frames::{END_CANCELED, END_COMPLETED, END_FAILED, MAX_FRAME_BYTES, event, frame_name};
use crate::mint::MintDesk;
use crate::request_id;
use crate::stream_sink::{EventSender, StreamSink};

/// Events buffered between the run and the transport before the run waits.
const EVENT_BUFFER: usize = 16;
/// Host frames queued for the run's sink. The sink asks for one answer at a time (its calls are
/// serialized), so a host that keeps the protocol has at most one frame queued; beyond this,
/// frames were never asked for and are dropped rather than buffered without limit.
const REPLY_BUFFER: usize = 8;

/// Serves one [`Harness`] as the `agentsessions.v1.Harness` gRPC service. Cheap to clone; every
/// clone serves the same harness, and each Connect stream runs one execution of it.
#[derive(Debug)]
pub struct HarnessService<H: ?Sized> {
    harness: Arc<H>,
}

impl<H: ?Sized> Clone for HarnessService<H> {
    fn clone(&self) -> Self {
        Self {
            harness: Arc::clone(&self.harness),
        }
    }
}

impl<H: Harness + ?Sized + 'static> HarnessService<H> {
    /// A service for `harness`.
    pub fn new(harness: Arc<H>) -> Self {
        Self { harness }
    }

    /// The tonic service to add to a server, accepting frames up to 64 MiB (a Start frame holds
    /// the whole history).
    pub fn into_server(self) -> HarnessServer<Self> {
        HarnessServer::new(self)
            .max_decoding_message_size(MAX_FRAME_BYTES)
            .max_encoding_message_size(MAX_FRAME_BYTES)
    }
}

#[async_trait]
impl<H: Harness + ?Sized + 'static> pb::harness_server::Harness for HarnessService<H> {
    async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::HarnessDescriptor>, Status> {
        let id = request_id::incoming(request.metadata());
        let span = tracing::info_span!("harness.describe", request_id = %id);
        propagation::parent_from_grpc(&span, request.metadata());
        let described = request_id::with_request_id(id.clone(), self.harness.describe())
            .instrument(span.clone())
            .await;
        match described {
            Ok(descriptor) => {
                let mut response = Response::new(descriptor.into());
                request_id::attach(response.metadata_mut(), &id);
                Ok(response)
            }
            Err(err) => {
                tracing::warn!(parent: &span, error = %err, "describe failed");
                Err(api_error_to_status(&err))
            }
        }
    }

    type ConnectStream = ConnectStream;

    async fn connect(
        &self,
        request: Request<Streaming<pb::ControllerFrame>>,
    ) -> Result<Response<ConnectStream>, Status> {
        let id = request_id::incoming(request.metadata());
        let span = tracing::info_span!(
            "harness.connect",
            request_id = %id,
            execution_id = tracing::field::Empty
        );
        propagation::parent_from_grpc(&span, request.metadata());
        let (events, receiver) = mpsc::channel(EVENT_BUFFER);
        let harness = Arc::clone(&self.harness);
        let driver =
            request_id::with_request_id(id.clone(), drive(harness, request.into_inner(), events))
                .instrument(span);
        let mut response = Response::new(ConnectStream {
            driver: Some(Box::pin(driver)),
            events: receiver,
        });
        request_id::attach(response.metadata_mut(), &id);
        Ok(response)
    }
}

/// The response stream of one Connect call. Polling it drives the execution; dropping it (the
/// host went away) drops the run.
pub struct ConnectStream {
    driver: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    events: mpsc::Receiver<Result<pb::Event, Status>>,
}

impl std::fmt::Debug for ConnectStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectStream")
            .field("running", &self.driver.is_some())
            .finish_non_exhaustive()
    }
}

impl Stream for ConnectStream {
    type Item = Result<pb::Event, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(driver) = self.driver.as_mut()
            && driver.as_mut().poll(cx).is_ready()
        {
            // The driver dropped its sender; the receiver ends once it is drained.
            self.driver = None;
        }
        self.events.poll_recv(cx)
    }
}

/// How the run ended, as far as the stream is concerned.
enum Outcome {
    Finished(agentsessions_api::Result<()>),
    Cancelled(String),
    HostGone,
}

/// Runs one execution: reads the start frame, runs the harness while routing host frames to the
/// sink (and watching for cancellation), then reports the outcome.
async fn drive<H: Harness + ?Sized>(
    harness: Arc<H>,
    mut inbound: Streaming<pb::ControllerFrame>,
    events: EventSender,
) {
    let (start, mints) = match inbound.message().await {
        Ok(Some(frame)) => match open(frame, &events) {
            Ok(opened) => opened,
            Err(err) => {
                tracing::warn!(error = %err, "refused the stream's first frame");
                let _closed = events.send(Err(err.into())).await;
                return;
            }
        },
        Ok(None) => return tracing::debug!("host closed the stream before start"),
        Err(status) => {
            return tracing::debug!(code = ?status.code(), "stream failed before start");
        }
    };
    tracing::Span::current().record("execution_id", start.execution_id.as_str());
    tracing::info!("execution started");

    let (replies, replies_rx) = mpsc::channel(REPLY_BUFFER);
    let sink = StreamSink::new(
        start.execution_id.clone(),
        start.session_uid.clone(),
        events.clone(),
        replies_rx,
    );
    let outcome = {
        let mut run = harness.run(&start, &sink);
        loop {
            tokio::select! {
                // A finished run wins over a host that leaves at the same moment.
                biased;
                result = &mut run => break Outcome::Finished(result),
                frame = inbound.message() => match frame {
                    Ok(Some(pb::ControllerFrame { frame: Some(Frame::Cancel(cancel)), .. })) => {
                        break Outcome::Cancelled(cancel.reason);
                    }
                    Ok(Some(pb::ControllerFrame { frame: Some(Frame::MintResult(result)), .. })) => {
                        match &mints {
                            Some(mints) => mints.answer(result),
                            None => tracing::warn!("dropped a mint result; this execution cannot mint"),
                        }
                    }
                    // A receiver that is gone means the run is finishing; the frame is moot. A
                    // full queue holds only frames the sink never asked for (see REPLY_BUFFER).
                    Ok(Some(frame)) => {
                        if let Err(mpsc::error::TrySendError::Full(frame)) = replies.try_send(frame) {
                            tracing::warn!(frame = frame_name(frame.frame.as_ref()), "dropped a host frame nobody asked for");
                        }
                    }
                    Ok(None) => break Outcome::HostGone,
                    Err(status) => {
                        tracing::debug!(code = ?status.code(), "host stream failed");
                        break Outcome::HostGone;
                    }
                },
            }
        }
    };
    if let Some(mints) = &mints {
        mints.close();
    }
    let execution_id = start.execution_id.as_str();
    let end = |state: &str, error: Option<pb::Error>| {
        event(
            execution_id,
            pb::EventKind::EventEnd,
            Body::End(pb::HarnessEnd {
                state: state.to_owned(),
                error,
            }),
        )
    };
    match outcome {
        Outcome::Finished(result) => {
            let (parked, failure) = (sink.parked(), sink.failure());
            match (parked, result) {
                (Some(park), Err(err)) if !is_park_unwind(&err, &park) => {
                    fail(&events, end(END_FAILED, Some(end_error(&err))), &err).await;
                }
                (Some(park), _) => {
                    tracing::info!(request_seq = park.request_seq, "execution parked");
                    let parked = event(
                        execution_id,
                        pb::EventKind::EventParked,
                        Body::Parked(park.into()),
                    );
                    let _closed = events.send(Ok(parked)).await;
                }
                (None, Err(err)) => {
                    fail(&events, end(END_FAILED, Some(end_error(&err))), &err).await;
                }
                (None, Ok(())) => match failure {
                    Some(err) => {
                        fail(&events, end(END_FAILED, Some(end_error(&err))), &err).await;
                    }
                    None => {
                        tracing::info!("execution completed");
                        let _closed = events.send(Ok(end(END_COMPLETED, None))).await;
                    }
                },
            }
        }
        Outcome::Cancelled(reason) => {
            tracing::info!(reason = %reason, "host cancelled the execution");
            let err = ApiError::Cancelled.wrap(format!("cancelled by the host ({reason})"));
            let _closed = events
                .send(Ok(end(END_CANCELED, Some(end_error(&err)))))
                .await;
        }
        Outcome::HostGone => tracing::info!("host went away; execution dropped"),
    }
}

/// Sends `END{FAILED}` and then ends the stream with the error's status.
async fn fail(events: &EventSender, end: pb::Event, err: &ApiError) {
    tracing::warn!(error = %err, "execution failed");
    if events.send(Ok(end)).await.is_ok() {
        let _closed = events.send(Err(api_error_to_status(err))).await;
    }
}

/// The domain start of a stream's first frame, with the desk its minter mints through when the
/// host lets it mint tokens.
fn open(
    frame: pb::ControllerFrame,
    events: &EventSender,
) -> Result<(Start, Option<MintDesk>), HarnessWireError> {
    let pb::ControllerFrame {
        session,
        execution_id,
        frame,
    } = frame;
    let Some(Frame::Start(start)) = frame else {
        return Err(HarnessWireError::FirstFrameNotStart {
            got: frame_name(frame.as_ref()),
        });
    };
    if execution_id.is_empty() {
        return Err(HarnessWireError::MissingExecutionId);
    }
    let can_mint = start.identity.as_ref().is_some_and(|i| i.can_mint_tokens);
    let mints = can_mint.then(|| MintDesk::new(execution_id.clone(), events.clone()));
    let mut start = start_from_pb(start, execution_id, mints.as_ref().map(MintDesk::minter))?;
    if start.session_uid.is_empty() {
        start.session_uid = session;
    } else if !session.is_empty() && session != start.session_uid {
        return Err(HarnessWireError::SessionMismatch {
            want: start.session_uid,
            got: session,
        });
    }
    Ok((start, mints))
}
