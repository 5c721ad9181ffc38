//! Peers that break the protocol, and cancellation, from both sides (semantics §9.3–§9.5).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentsessions_api::{ApiError, Harness, Message, Start, StatusCode};
use agentsessions_harnesses::EchoHarness;
use agentsessions_wire::convert::start_frame;
use agentsessions_wire::pb;
use agentsessions_wire::pb::controller_frame::Frame;
use agentsessions_wire::pb::event::Body;
use agentsessions_wire::pb::harness_client::HarnessClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::support::{
    Blocker, Call, EXEC, RawPeer, SESSION, ScriptedSink, TestServer, serve_raw, start, wire_event,
};

const PATIENCE: Duration = Duration::from_secs(10);

fn output_event(text: &str) -> pb::Event {
    wire_event(
        pb::EventKind::EventOutput,
        Body::Message(Message::text_message("assistant", text).into()),
    )
}

fn status_code(err: &ApiError) -> StatusCode {
    match err {
        ApiError::Status { code, .. } => *code,
        other => panic!("status error expected, got {other:?}"),
    }
}

// Deviation from semantics §9.3 (stated in the crate docs): a stream that ends without END is a
// failed run, never success.
#[tokio::test]
async fn a_stream_that_ends_without_end_is_a_failure() {
    let remote = serve_raw(RawPeer {
        events: vec![Ok(output_event("half"))],
        hang: false,
    })
    .await;
    let sink = ScriptedSink::new();
    let err = remote.run(&start(), &sink).await.unwrap_err();
    assert_eq!(status_code(&err), StatusCode::Unavailable);
    assert!(err.to_string().contains("without END"), "{err}");
    assert_eq!(sink.calls(), vec![Call::Output("half".into())]);
}

// semantics §2.8: a harness lost mid-turn (transport error) fails the run.
#[tokio::test]
async fn a_stream_that_fails_mid_run_is_a_failure() {
    let remote = serve_raw(RawPeer {
        events: vec![
            Ok(output_event("half")),
            Err(tonic::Status::unavailable("harness crashed")),
        ],
        hang: false,
    })
    .await;
    let err = remote
        .run(&start(), &ScriptedSink::new())
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), StatusCode::Unavailable);
    assert!(err.to_string().contains("harness crashed"), "{err}");
}

// semantics §9.3: every event must carry the stream's execution id; host-owned control events
// and bodiless tool calls are refused.
#[tokio::test]
async fn the_host_refuses_events_that_break_the_protocol() {
    let mut foreign = output_event("x");
    foreign.execution_id = "exec-other".into();
    let parked = wire_event(
        pb::EventKind::EventParked,
        Body::Parked(pb::ApprovalRef::default()),
    );
    let approval = wire_event(
        pb::EventKind::EventApprovalRequest,
        Body::Approval(pb::ApprovalRequest::default()),
    );
    let mut bodiless = wire_event(
        pb::EventKind::EventToolCall,
        Body::Usage(pb::Usage::default()),
    );
    bodiless.body = None;
    let cases = [
        (foreign, "execution \"exec-other\""),
        (parked, "host-owned control event PARKED"),
        (approval, "host-owned control event APPROVAL_REQUEST"),
        (bodiless, "TOOL_CALL event without its tool body"),
    ];
    for (event, want) in cases {
        let remote = serve_raw(RawPeer {
            events: vec![Ok(event)],
            hang: true,
        })
        .await;
        let sink = ScriptedSink::new();
        let err = tokio::time::timeout(PATIENCE, remote.run(&start(), &sink))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(status_code(&err), StatusCode::Internal, "{err}");
        assert!(err.to_string().contains(want), "{err} / {want}");
        assert!(sink.calls().is_empty());
    }
}

// semantics §9.3: kinds the harness does not drive are ignored.
#[tokio::test]
async fn events_the_harness_does_not_drive_are_ignored() {
    let end = wire_event(
        pb::EventKind::EventEnd,
        Body::End(pb::HarnessEnd {
            state: "COMPLETED".into(),
            error: None,
        }),
    );
    let mut unknown = output_event("x");
    unknown.kind = 99;
    let input = wire_event(
        pb::EventKind::EventInput,
        Body::Message(Message::text_message("user", "x").into()),
    );
    let remote = serve_raw(RawPeer {
        events: vec![Ok(unknown), Ok(input), Ok(end)],
        hang: false,
    })
    .await;
    let sink = ScriptedSink::new();
    assert_eq!(remote.run(&start(), &sink).await, Ok(()));
    assert!(sink.calls().is_empty());
}

// semantics §9.5: a harness that does not acknowledge the park makes the park fail with a real
// error (here: it ends the stream right after the tool call).
#[tokio::test]
async fn a_park_without_acknowledgement_is_a_real_error() {
    let call = wire_event(
        pb::EventKind::EventToolCall,
        Body::Tool(pb::ToolCall {
            id: "t9".into(),
            mediation: pb::Mediation::RequiresApproval.into(),
            ..pb::ToolCall::default()
        }),
    );
    let remote = serve_raw(RawPeer {
        events: vec![Ok(call.clone())],
        hang: false,
    })
    .await;
    let park = agentsessions_api::ApprovalRef {
        execution_id: EXEC.into(),
        tool_call_id: "t9".into(),
        request_seq: 3,
    };
    let sink = ScriptedSink::with_tool_answers([Err(ApiError::ApprovalParked(park.clone()))]);
    let err = remote.run(&start(), &sink).await.unwrap_err();
    assert!(err.to_string().contains("park exchange failed"), "{err}");
    assert!(!err.is(agentsessions_api::ApiErrorKind::ApprovalParked));

    // An acknowledgement for another request is no acknowledgement.
    let wrong_ack = wire_event(
        pb::EventKind::EventParked,
        Body::Parked(pb::ApprovalRef {
            execution_id: EXEC.into(),
            tool_call_id: "t9".into(),
            request_seq: 4,
        }),
    );
    let remote = serve_raw(RawPeer {
        events: vec![Ok(call), Ok(wrong_ack)],
        hang: true,
    })
    .await;
    let sink = ScriptedSink::with_tool_answers([Err(ApiError::ApprovalParked(park))]);
    let err = tokio::time::timeout(PATIENCE, remote.run(&start(), &sink))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        err.to_string().contains("did not acknowledge the park"),
        "{err}"
    );
}

// semantics §9.3 step 1: the host requires an execution id before opening the stream.
#[tokio::test]
async fn an_empty_execution_id_is_refused_before_connecting() {
    let remote = agentsessions_harnesswire::RemoteHarness::connect_lazy("127.0.0.1:1").unwrap();
    let start = Start {
        execution_id: String::new(),
        ..start()
    };
    let err = remote.run(&start, &ScriptedSink::new()).await.unwrap_err();
    assert_eq!(status_code(&err), StatusCode::InvalidArgument);
}

// SPI cancellation: dropping the host's run future closes the stream, and the served run future
// is dropped.
#[tokio::test]
async fn dropping_the_host_run_stops_the_remote_run() {
    let blocker = Arc::new(Blocker::default());
    let server = TestServer::serve(Arc::clone(&blocker)).await;
    let remote = server.remote();
    let sink = ScriptedSink::new();
    let start = start();
    tokio::select! {
        result = remote.run(&start, &sink) => panic!("the blocker never ends: {result:?}"),
        () = sink.outputs.notified() => {}
    }
    // The run future is dropped here.
    tokio::time::timeout(PATIENCE, blocker.dropped.notified())
        .await
        .unwrap();
    assert!(blocker.was_dropped.load(Ordering::SeqCst));
}

/// A raw host: a client stream whose frames the test sends itself.
struct RawHost {
    frames: mpsc::Sender<pb::ControllerFrame>,
    events: tonic::Streaming<pb::Event>,
}

impl RawHost {
    async fn open(server: &TestServer, first: pb::ControllerFrame) -> Result<Self, tonic::Status> {
        let (frames, outbound) = mpsc::channel(8);
        frames.send(first).await.unwrap();
        let mut client = HarnessClient::new(server.channel());
        let events = client
            .connect(ReceiverStream::new(outbound))
            .await?
            .into_inner();
        Ok(Self { frames, events })
    }

    async fn next(&mut self) -> Result<Option<pb::Event>, tonic::Status> {
        tokio::time::timeout(PATIENCE, self.events.message())
            .await
            .unwrap()
    }

    async fn send(&self, frame: Frame) {
        self.frames
            .send(pb::ControllerFrame {
                session: SESSION.into(),
                execution_id: EXEC.into(),
                frame: Some(frame),
            })
            .await
            .unwrap();
    }
}

fn end_of(event: &pb::Event) -> &pb::HarnessEnd {
    match &event.body {
        Some(Body::End(end)) if event.kind == i32::from(pb::EventKind::EventEnd) => end,
        other => panic!("END expected, got {other:?}"),
    }
}

// semantics §9.4: the first frame must be start with an execution id.
#[tokio::test]
async fn the_harness_side_refuses_a_stream_that_does_not_start() {
    let server = TestServer::serve(Arc::new(EchoHarness)).await;
    let cancel = pb::ControllerFrame {
        session: SESSION.into(),
        execution_id: EXEC.into(),
        frame: Some(Frame::Cancel(pb::Cancel::default())),
    };
    let mut no_id = start_frame(start());
    no_id.execution_id = String::new();
    for (first, want) in [(cancel, "must be start"), (no_id, "execution id")] {
        let status = match RawHost::open(&server, first).await {
            Err(status) => status,
            Ok(mut host) => host.next().await.unwrap_err(),
        };
        assert!(status.message().contains(want), "{status:?}");
    }
}

// semantics §9.4: a model result must answer the pending model call by id; a violation ends the
// execution with END FAILED.
#[tokio::test]
async fn the_harness_side_fails_on_a_mismatched_model_result() {
    let server = TestServer::serve(Arc::new(EchoHarness)).await;
    let mut host = RawHost::open(&server, start_frame(start())).await.unwrap();
    let call = host.next().await.unwrap().unwrap();
    let Some(Body::Model(model_call)) = &call.body else {
        panic!("MODEL_CALL expected, got {call:?}");
    };
    assert_eq!(model_call.id.len(), 16);
    assert_eq!(call.execution_id, EXEC);
    host.send(Frame::Model(pb::ModelResult {
        model_call_id: "not-the-id".into(),
        ..pb::ModelResult::default()
    }))
    .await;
    let end = host.next().await.unwrap().unwrap();
    let end = end_of(&end);
    assert_eq!(end.state, "FAILED");
    let error = end.error.clone().unwrap();
    assert_eq!(error.code, 13);
    assert!(error.description.contains("not-the-id"), "{error:?}");
    let status = host.next().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Internal);
}

// semantics §9.2: a cancel frame stops the execution: the run future is dropped and the stream
// ends with END CANCELED.
#[tokio::test]
async fn a_cancel_frame_drops_the_run_and_ends_canceled() {
    let blocker = Arc::new(Blocker::default());
    let server = TestServer::serve(Arc::clone(&blocker)).await;
    let mut host = RawHost::open(&server, start_frame(start())).await.unwrap();
    let started = host.next().await.unwrap().unwrap();
    assert_eq!(started.kind, i32::from(pb::EventKind::EventOutput));
    host.send(Frame::Cancel(pb::Cancel {
        reason: "USER".into(),
    }))
    .await;
    let end = host.next().await.unwrap().unwrap();
    let end = end_of(&end);
    assert_eq!(end.state, "CANCELED");
    assert_eq!(end.error.as_ref().map(|e| e.code), Some(1));
    assert_eq!(host.next().await.unwrap(), None);
    assert!(blocker.was_dropped.load(Ordering::SeqCst));
}

// semantics §9.4: the host closing its side drops the run.
#[tokio::test]
async fn the_host_closing_its_side_drops_the_run() {
    let blocker = Arc::new(Blocker::default());
    let server = TestServer::serve(Arc::clone(&blocker)).await;
    let mut host = RawHost::open(&server, start_frame(start())).await.unwrap();
    let _started = host.next().await.unwrap().unwrap();
    drop(host.frames);
    tokio::time::timeout(PATIENCE, blocker.dropped.notified())
        .await
        .unwrap();
    assert!(blocker.was_dropped.load(Ordering::SeqCst));
}

// semantics §9.4: an ordinary tool call's result must answer it by id and carry no approval
// fields; a gated call needs a session uid.
#[tokio::test]
async fn the_harness_side_checks_tool_answers() {
    use crate::support::{Scripted, Step};
    let call = |id: &str, mediation| agentsessions_api::ToolCall {
        id: id.into(),
        tool: "t".into(),
        mediation,
        ..agentsessions_api::ToolCall::default()
    };
    let script = vec![Step::Tool(call(
        "t1",
        agentsessions_api::Mediation::ControllerMediated,
    ))];
    let scripted = Arc::new(Scripted::new(script));
    let server = TestServer::serve(Arc::clone(&scripted)).await;
    let mut host = RawHost::open(&server, start_frame(start())).await.unwrap();
    let _tool_call = host.next().await.unwrap().unwrap();
    host.send(Frame::Tool(pb::ToolResult {
        id: "t1".into(),
        approval_request_seq: 4,
        ..pb::ToolResult::default()
    }))
    .await;
    let end = host.next().await.unwrap().unwrap();
    assert_eq!(end_of(&end).state, "FAILED");
    assert!(
        end_of(&end)
            .error
            .as_ref()
            .unwrap()
            .description
            .contains("approval fields"),
        "{end:?}"
    );

    let gated = Arc::new(Scripted::new(vec![Step::Tool(call(
        "t2",
        agentsessions_api::Mediation::RequiresApproval,
    ))]));
    let server = TestServer::serve(Arc::clone(&gated)).await;
    let no_session = Start {
        session_uid: String::new(),
        ..start()
    };
    let mut first = start_frame(no_session);
    first.session = String::new();
    let mut host = RawHost::open(&server, first).await.unwrap();
    let end = host.next().await.unwrap().unwrap();
    assert_eq!(end_of(&end).state, "FAILED");
    assert!(
        end_of(&end)
            .error
            .as_ref()
            .unwrap()
            .description
            .contains("needs a session uid"),
        "{end:?}"
    );
}
