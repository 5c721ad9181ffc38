//! Test doubles: a scripted harness, a recording and scripted sink, a served-harness fixture and
//! a raw `Harness` gRPC peer that says exactly what a test tells it to.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agentsessions_api::{
    ApiError, ApprovalResult, Capabilities, Descriptor, EventSink, Harness, JsonObject, Mediation,
    Message, ModelRequest, ModelResponse, Part, ReasoningPart, Result, Resumability, Start,
    TextPart, ToolCall, ToolResult, ToolSpec, Usage,
};
use agentsessions_harnesswire::{RemoteHarness, serve_tcp_listener};
use agentsessions_wire::pb;
use agentsessions_wire::pb::harness_server::HarnessServer;
use async_trait::async_trait;
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::Stream;
use tokio_stream::wrappers::TcpListenerStream;

pub(crate) const EXEC: &str = "exec-1";
pub(crate) const SESSION: &str = "sess-1";

/// One sink call, as the host-side sink saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Call {
    Model(ModelRequest),
    Output(String),
    ToolCall(ToolCall),
    Report(ToolResult),
    Usage(Usage),
}

/// A host-side sink: records every call; models answer `"echo:" + last text` with a reasoning
/// part and a usage; tool calls answer from a script, else a plain success.
#[derive(Debug, Default)]
pub(crate) struct ScriptedSink {
    calls: Mutex<Vec<Call>>,
    tool_answers: Mutex<VecDeque<Result<ToolResult>>>,
    model_error: Option<ApiError>,
    /// Notified on every output call.
    pub(crate) outputs: Notify,
}

impl ScriptedSink {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn with_tool_answers(answers: impl IntoIterator<Item = Result<ToolResult>>) -> Self {
        Self {
            tool_answers: Mutex::new(answers.into_iter().collect()),
            ..Self::default()
        }
    }

    pub(crate) fn failing_models(err: ApiError) -> Self {
        Self {
            model_error: Some(err),
            ..Self::default()
        }
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }
}

pub(crate) fn completion(request: &ModelRequest) -> ModelResponse {
    let last = request
        .messages
        .last()
        .map(Message::text)
        .unwrap_or_default();
    ModelResponse {
        message: Message {
            role: "assistant".into(),
            parts: vec![
                Part::Reasoning(ReasoningPart {
                    provider: "test".into(),
                    opaque: vec![0, 1, 2, 255],
                    ordinal: 1,
                    ..ReasoningPart::default()
                }),
                Part::Text(TextPart {
                    text: format!("echo:{last}"),
                }),
            ],
        },
        usage: Usage {
            model: request.model.clone(),
            input_tokens: i64::try_from(request.messages.len()).unwrap(),
            output_tokens: 7,
            reasoning_tokens: 1,
            cached_input_tokens: 0,
        },
    }
}

#[async_trait]
impl EventSink for ScriptedSink {
    async fn model(&self, request: ModelRequest) -> Result<ModelResponse> {
        let response = completion(&request);
        self.record(Call::Model(request));
        match &self.model_error {
            Some(err) => Err(err.clone()),
            None => Ok(response),
        }
    }

    async fn output(&self, text: String) -> Result<()> {
        self.record(Call::Output(text));
        self.outputs.notify_one();
        Ok(())
    }

    async fn tool_call(&self, call: ToolCall) -> Result<ToolResult> {
        let id = call.id.clone();
        self.record(Call::ToolCall(call));
        let scripted = self.tool_answers.lock().unwrap().pop_front();
        scripted.unwrap_or_else(|| {
            Ok(ToolResult {
                id,
                output: Some(object(&[("ok", "yes")])),
                content: vec![Part::Text(TextPart {
                    text: "done".into(),
                })],
                ..ToolResult::default()
            })
        })
    }

    async fn report(&self, result: ToolResult) -> Result<()> {
        self.record(Call::Report(result));
        Ok(())
    }

    async fn usage(&self, usage: Usage) -> Result<()> {
        self.record(Call::Usage(usage));
        Ok(())
    }
}

pub(crate) fn object(pairs: &[(&str, &str)]) -> JsonObject {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
        .collect()
}

/// One step of a [`Scripted`] harness.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Model(ModelRequest),
    Output(String),
    Tool(ToolCall),
    Report(ToolResult),
    /// Reports the usage of the last completion, as the SDK contract asks.
    UsageOfLastModel,
    Fail(ApiError),
}

/// What a [`Scripted`] harness got back from its sink.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Observed {
    Model(ModelResponse),
    Tool(ToolResult),
    Ok,
    Error(ApiError),
}

/// A harness that performs its steps in order and remembers every answer. A sink error is
/// returned wrapped (a harness may wrap a park).
#[derive(Debug, Default)]
pub(crate) struct Scripted {
    pub(crate) steps: Vec<Step>,
    pub(crate) observed: Mutex<Vec<Observed>>,
}

impl Scripted {
    pub(crate) fn new(steps: Vec<Step>) -> Self {
        Self {
            steps,
            observed: Mutex::default(),
        }
    }

    pub(crate) fn observed(&self) -> Vec<Observed> {
        self.observed.lock().unwrap().clone()
    }

    fn observe(&self, observed: Observed) {
        self.observed.lock().unwrap().push(observed);
    }

    pub(crate) fn descriptor() -> Descriptor {
        Descriptor {
            id: "scripted".into(),
            version: "7".into(),
            models: vec!["m-1".into(), "m-2".into()],
            tools: vec![ToolSpec {
                name: "fs.read".into(),
                description: "reads a file".into(),
                mediation: Mediation::ControllerMediated,
            }],
            capabilities: Capabilities {
                resumability: Resumability::StatelessReplay,
                fork_safe: true,
                requires_gpu: false,
                streaming: true,
                reasoning_replay: true,
            },
        }
    }
}

#[async_trait]
impl Harness for Scripted {
    async fn describe(&self) -> Result<Descriptor> {
        Ok(Self::descriptor())
    }

    async fn run(&self, _start: &Start, sink: &dyn EventSink) -> Result<()> {
        let mut last_usage = Usage::default();
        for step in &self.steps {
            let outcome = match step.clone() {
                Step::Model(request) => sink.model(request).await.map(|response| {
                    last_usage = response.usage.clone();
                    Observed::Model(response)
                }),
                Step::Output(text) => sink.output(text).await.map(|()| Observed::Ok),
                Step::Tool(call) => sink.tool_call(call).await.map(Observed::Tool),
                Step::Report(result) => sink.report(result).await.map(|()| Observed::Ok),
                Step::UsageOfLastModel => {
                    sink.usage(last_usage.clone()).await.map(|()| Observed::Ok)
                }
                Step::Fail(err) => return Err(err),
            };
            match outcome {
                Ok(observed) => self.observe(observed),
                Err(err) => {
                    self.observe(Observed::Error(err.clone()));
                    return Err(err.wrap("scripted step"));
                }
            }
        }
        Ok(())
    }
}

/// A harness that outputs `started`, then waits forever; it signals when its run future is
/// dropped and records the request id it runs under.
#[derive(Debug, Default)]
pub(crate) struct Blocker {
    pub(crate) dropped: Notify,
    pub(crate) was_dropped: AtomicBool,
    pub(crate) request_ids: Mutex<Vec<Option<String>>>,
}

struct DropFlag<'a>(&'a Blocker);

impl Drop for DropFlag<'_> {
    fn drop(&mut self) {
        self.0.was_dropped.store(true, Ordering::SeqCst);
        self.0.dropped.notify_one();
    }
}

#[async_trait]
impl Harness for Blocker {
    async fn describe(&self) -> Result<Descriptor> {
        self.request_ids
            .lock()
            .unwrap()
            .push(agentsessions_harnesswire::current_request_id());
        Ok(Descriptor {
            id: "blocker".into(),
            ..Descriptor::default()
        })
    }

    async fn run(&self, _start: &Start, sink: &dyn EventSink) -> Result<()> {
        self.request_ids
            .lock()
            .unwrap()
            .push(agentsessions_harnesswire::current_request_id());
        let _flag = DropFlag(self);
        sink.output("started".into()).await?;
        std::future::pending::<()>().await;
        Ok(())
    }
}

pub(crate) fn start() -> Start {
    Start {
        execution_id: EXEC.into(),
        session_uid: SESSION.into(),
        model: "m-1".into(),
        inputs: vec![Message::text_message("user", "hello")],
        ..Start::default()
    }
}

pub(crate) fn decided(call_id: &str, approved: bool) -> ToolResult {
    ToolResult {
        id: call_id.into(),
        is_error: !approved,
        error: if approved {
            String::new()
        } else {
            "denied".into()
        },
        output: approved.then(|| object(&[("rm", "done")])),
        code: if approved {
            agentsessions_api::ToolResultCode::Unspecified
        } else {
            agentsessions_api::ToolResultCode::ApprovalDenied
        },
        approval_request_seq: 5,
        approval_decision_seq: 6,
        approval: Some(ApprovalResult {
            tool_call_id: call_id.into(),
            approved,
            reason: "reviewed".into(),
            request_seq: 5,
        }),
        ..ToolResult::default()
    }
}

/// A harness served on `127.0.0.1:0` until dropped or stopped.
#[derive(Debug)]
pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<agentsessions_harnesswire::Result<()>>,
}

impl TestServer {
    pub(crate) async fn serve<H: Harness + ?Sized + 'static>(harness: Arc<H>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_tcp_listener(listener, harness, async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            stop: Some(stop),
            task,
        }
    }

    pub(crate) fn remote(&self) -> RemoteHarness {
        RemoteHarness::connect_lazy(&self.addr.to_string()).unwrap()
    }

    pub(crate) fn channel(&self) -> tonic::transport::Channel {
        agentsessions_harnesswire::channel(&self.addr.to_string()).unwrap()
    }

    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.unwrap().unwrap();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type EventStream =
    Pin<Box<dyn Stream<Item = std::result::Result<pb::Event, tonic::Status>> + Send>>;

/// A raw harness peer: answers Describe with the default descriptor and every Connect with the
/// scripted events, then ends the stream.
#[derive(Debug, Clone)]
pub(crate) struct RawPeer {
    pub(crate) events: Vec<std::result::Result<pb::Event, tonic::Status>>,
    /// Keeps the stream open (without further events) after the script instead of ending it.
    pub(crate) hang: bool,
}

#[async_trait]
impl pb::harness_server::Harness for RawPeer {
    async fn describe(
        &self,
        _request: tonic::Request<pb::DescribeRequest>,
    ) -> std::result::Result<tonic::Response<pb::HarnessDescriptor>, tonic::Status> {
        if self.hang {
            std::future::pending::<()>().await;
        }
        Ok(tonic::Response::new(pb::HarnessDescriptor::default()))
    }

    type ConnectStream = EventStream;

    async fn connect(
        &self,
        _request: tonic::Request<tonic::Streaming<pb::ControllerFrame>>,
    ) -> std::result::Result<tonic::Response<EventStream>, tonic::Status> {
        let scripted = tokio_stream::iter(self.events.clone());
        let stream: EventStream = if self.hang {
            Box::pin(tokio_stream::StreamExt::chain(
                scripted,
                tokio_stream::pending(),
            ))
        } else {
            Box::pin(scripted)
        };
        Ok(tonic::Response::new(stream))
    }
}

/// Serves a raw peer on `127.0.0.1:0`; the task ends with the test's runtime.
pub(crate) async fn serve_raw(peer: RawPeer) -> RemoteHarness {
    serve_raw_service(peer).await
}

/// Serves any hand-written `Harness` gRPC service on `127.0.0.1:0`; the task ends with the test's
/// runtime.
pub(crate) async fn serve_raw_service<S: pb::harness_server::Harness>(peer: S) -> RemoteHarness {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _task = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(HarnessServer::new(peer))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    RemoteHarness::connect_lazy(&addr.to_string()).unwrap()
}

/// A wire event for the test execution.
pub(crate) fn wire_event(kind: pb::EventKind, body: pb::event::Body) -> pb::Event {
    pb::Event {
        execution_id: EXEC.into(),
        kind: kind.into(),
        body: Some(body),
        ..pb::Event::default()
    }
}
