//! [`StreamSink`]: the [`EventSink`] a served harness emits through. Each call becomes events on
//! the Connect stream, and model and tool calls wait for the host's answering frames
//! (semantics §9.4).
//!
//! Calls are serialized: one call's events and the answers it waits for are never interleaved
//! with another call's, whatever the harness does concurrently. A protocol violation by the host
//! latches a sticky failure that every later call returns (and that fails the execution even if
//! the harness swallows it); a park latches the park, which every later call returns.

use std::sync::Mutex;

use agentsessions_api::{
    ApiError, ApprovalRef, ApprovalResult, EventSink, Mediation, Message, ModelRequest,
    ModelResponse, Result as ApiResult, StatusCode, ToolCall, ToolResult, ToolResultCode, Usage,
};
use agentsessions_wire::convert::model_call_from_request;
use agentsessions_wire::pb;
use agentsessions_wire::pb::controller_frame::Frame;
use agentsessions_wire::pb::event::Body;
use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::error::HarnessWireError;
use crate::frames::{event, frame_name, is_approval_shaped};

/// The outbound half of a Connect stream: events, or a final error status.
pub(crate) type EventSender = mpsc::Sender<Result<pb::Event, tonic::Status>>;

/// What the sink latched; see the module docs.
#[derive(Debug, Default)]
struct Latch {
    parked: Option<ApprovalRef>,
    failure: Option<ApiError>,
}

/// The serve-side sink of one execution.
#[derive(Debug)]
pub(crate) struct StreamSink {
    execution_id: String,
    session: String,
    events: EventSender,
    /// Host frames other than `cancel`, in arrival order; the lock also serializes calls.
    replies: tokio::sync::Mutex<mpsc::Receiver<pb::ControllerFrame>>,
    latch: Mutex<Latch>,
}

impl StreamSink {
    pub(crate) fn new(
        execution_id: String,
        session: String,
        events: EventSender,
        replies: mpsc::Receiver<pb::ControllerFrame>,
    ) -> Self {
        Self {
            execution_id,
            session,
            events,
            replies: tokio::sync::Mutex::new(replies),
            latch: Mutex::default(),
        }
    }

    /// The park the host asked for, if any.
    pub(crate) fn parked(&self) -> Option<ApprovalRef> {
        self.lock_latch().parked.clone()
    }

    /// The latched protocol failure, if any.
    pub(crate) fn failure(&self) -> Option<ApiError> {
        self.lock_latch().failure.clone()
    }

    fn lock_latch(&self) -> std::sync::MutexGuard<'_, Latch> {
        // A poisoned latch still holds a consistent value: every write is one assignment.
        self.latch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The latched park or failure, which every call after it returns.
    fn check_latch(&self) -> ApiResult<()> {
        let latch = self.lock_latch();
        if let Some(parked) = &latch.parked {
            return Err(ApiError::ApprovalParked(parked.clone()));
        }
        match &latch.failure {
            Some(failure) => Err(failure.clone()),
            None => Ok(()),
        }
    }

    /// Latches a protocol violation and returns it as the call's error.
    fn fail(&self, err: HarnessWireError) -> ApiError {
        tracing::warn!(error = %err, "host broke the harness stream protocol");
        let err = ApiError::from(err);
        let mut latch = self.lock_latch();
        latch.failure.get_or_insert_with(|| err.clone());
        err
    }

    async fn emit(&self, kind: pb::EventKind, body: Body) -> ApiResult<()> {
        self.events
            .send(Ok(event(&self.execution_id, kind, body)))
            .await
            .map_err(|_| ApiError::from(HarnessWireError::HostClosed))
    }

    /// The next host frame for this execution.
    async fn next_frame(
        &self,
        replies: &mut mpsc::Receiver<pb::ControllerFrame>,
    ) -> ApiResult<pb::ControllerFrame> {
        let frame = replies
            .recv()
            .await
            .ok_or_else(|| ApiError::from(HarnessWireError::HostClosed))?;
        if frame.execution_id != self.execution_id {
            return Err(self.fail(HarnessWireError::ExecutionMismatch {
                want: self.execution_id.clone(),
                got: frame.execution_id,
            }));
        }
        Ok(frame)
    }

    /// The next host frame of a tool exchange, which must also be for this session.
    async fn next_tool_frame(
        &self,
        replies: &mut mpsc::Receiver<pb::ControllerFrame>,
    ) -> ApiResult<Option<Frame>> {
        let frame = self.next_frame(replies).await?;
        if frame.session != self.session {
            return Err(self.fail(HarnessWireError::SessionMismatch {
                want: self.session.clone(),
                got: frame.session,
            }));
        }
        Ok(frame.frame)
    }

    /// The answer to an ordinary (not approval-gated) tool call.
    fn ordinary_result(&self, call: &ToolCall, frame: Option<Frame>) -> ApiResult<ToolResult> {
        let Some(Frame::Tool(result)) = frame else {
            return Err(self.fail(HarnessWireError::UnexpectedFrame {
                want: "tool",
                got: frame_name(frame.as_ref()),
            }));
        };
        let result = self.receipt(call, result)?;
        if is_approval_shaped(&result) {
            return Err(self.fail(HarnessWireError::ApprovalShapedResult {
                tool_call_id: result.id,
            }));
        }
        Ok(result)
    }

    /// A tool result frame for `call`, converted.
    fn receipt(&self, call: &ToolCall, result: pb::ToolResult) -> ApiResult<ToolResult> {
        if result.id != call.id {
            return Err(self.fail(HarnessWireError::ToolResultMismatch {
                want: call.id.clone(),
                got: result.id,
            }));
        }
        ToolResult::try_from(result).map_err(|e| self.fail(e.into()))
    }

    /// The answer to an approval-gated call: a park, or a decision followed by its receipt.
    async fn gated_result(
        &self,
        call: &ToolCall,
        frame: Option<Frame>,
        replies: &mut mpsc::Receiver<pb::ControllerFrame>,
    ) -> ApiResult<ToolResult> {
        let invalid = |reason| HarnessWireError::InvalidApproval {
            tool_call_id: call.id.clone(),
            reason,
        };
        let decision = match frame {
            Some(Frame::Park(park)) => {
                let park = ApprovalRef::from(park);
                if park.execution_id != self.execution_id
                    || park.tool_call_id != call.id
                    || park.request_seq <= 0
                {
                    return Err(self.fail(HarnessWireError::InvalidPark {
                        tool_call_id: call.id.clone(),
                    }));
                }
                tracing::info!(request_seq = park.request_seq, "host parked the execution");
                self.lock_latch().parked = Some(park.clone());
                return Err(ApiError::ApprovalParked(park));
            }
            Some(Frame::Approval(decision)) => ApprovalResult::from(decision),
            other => {
                return Err(self.fail(HarnessWireError::UnexpectedFrame {
                    want: "park or approval",
                    got: frame_name(other.as_ref()),
                }));
            }
        };
        if decision.tool_call_id != call.id {
            return Err(self.fail(invalid("decision is for another call")));
        }
        if decision.request_seq <= 0 {
            return Err(self.fail(invalid("decision without a request seq")));
        }
        let frame = self.next_tool_frame(replies).await?;
        let Some(Frame::Tool(receipt)) = frame else {
            return Err(self.fail(HarnessWireError::UnexpectedFrame {
                want: "tool",
                got: frame_name(frame.as_ref()),
            }));
        };
        let mut receipt = self.receipt(call, receipt)?;
        if receipt.approval_request_seq != decision.request_seq {
            return Err(self.fail(invalid("receipt names another request")));
        }
        if receipt.approval_decision_seq <= 0 {
            return Err(self.fail(invalid("receipt without a decision seq")));
        }
        let denied = receipt.code == ToolResultCode::ApprovalDenied;
        if denied == decision.approved {
            return Err(self.fail(invalid("receipt status contradicts the decision")));
        }
        receipt.approval = Some(decision);
        Ok(receipt)
    }
}

#[async_trait]
impl EventSink for StreamSink {
    async fn model(&self, request: ModelRequest) -> ApiResult<ModelResponse> {
        let mut replies = self.replies.lock().await;
        self.check_latch()?;
        let id = crate::request_id::fresh();
        let call = model_call_from_request(&request, &id, "");
        self.emit(pb::EventKind::EventModelCall, Body::Model(call))
            .await?;
        let frame = self.next_frame(&mut replies).await?;
        let Some(Frame::Model(result)) = frame.frame else {
            return Err(self.fail(HarnessWireError::UnexpectedFrame {
                want: "model",
                got: frame_name(frame.frame.as_ref()),
            }));
        };
        if result.model_call_id != id {
            return Err(self.fail(HarnessWireError::ModelCallMismatch {
                want: id,
                got: result.model_call_id,
            }));
        }
        ModelResponse::try_from(result).map_err(|e| self.fail(e.into()))
    }

    async fn output(&self, text: String) -> ApiResult<()> {
        let _serialized = self.replies.lock().await;
        self.check_latch()?;
        let message = Message::text_message("assistant", text);
        self.emit(pb::EventKind::EventOutput, Body::Message(message.into()))
            .await
    }

    async fn tool_call(&self, call: ToolCall) -> ApiResult<ToolResult> {
        let mut replies = self.replies.lock().await;
        self.check_latch()?;
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
        // A number the Struct form would round must fail here, before the call leaves the
        // harness: the host would otherwise see (and run) a different call than the one made.
        if let Some(args) = &call.args
            && let Err(reason) = agentsessions_wire::convert::check_struct_exact(args, "args")
        {
            return Err(ApiError::status(
                StatusCode::InvalidArgument,
                format!("invalid tool arguments for call {:?}: {reason}", call.id),
            ));
        }
        self.emit(
            pb::EventKind::EventToolCall,
            Body::Tool(call.clone().into()),
        )
        .await?;
        let frame = self.next_tool_frame(&mut replies).await?;
        if gated {
            self.gated_result(&call, frame, &mut replies).await
        } else {
            self.ordinary_result(&call, frame)
        }
    }

    async fn report(&self, result: ToolResult) -> ApiResult<()> {
        let _serialized = self.replies.lock().await;
        self.check_latch()?;
        if is_approval_shaped(&result) {
            return Err(HarnessWireError::ApprovalShapedResult {
                tool_call_id: result.id,
            }
            .into());
        }
        self.emit(pb::EventKind::EventToolResult, Body::Result(result.into()))
            .await
    }

    async fn usage(&self, usage: Usage) -> ApiResult<()> {
        let _serialized = self.replies.lock().await;
        self.check_latch()?;
        self.emit(pb::EventKind::EventUsage, Body::Usage(usage.into()))
            .await
    }
}
