//! A harness served over the wire and driven through `RemoteHarness` makes exactly the sink calls,
//! gets exactly the answers and returns the same result as the same harness called in process
//! (semantics §9.3/§9.4).

use std::collections::BTreeMap;
use std::sync::Arc;

use agentsessions_api::{
    ApiError, ApprovalRef, Event, EventBody, EventKind, Harness, Mediation, Message, ModelRequest,
    StatusCode, ToolCall, ToolChoice, ToolChoiceMode, ToolDefinition, ToolResult, is_park_unwind,
};
use agentsessions_harnesses::{ChatHarness, CounterHarness, EchoHarness};

use crate::support::{
    Call, EXEC, Observed, Scripted, ScriptedSink, Step, TestServer, decided, object, start,
};

/// Runs `local` in process and `remote` (a twin) over the wire with equal sinks; returns both
/// results and asserts the sinks saw the same calls.
async fn run_both<H: Harness + 'static>(
    local: &H,
    remote: Arc<H>,
    start: &agentsessions_api::Start,
    sink: impl Fn() -> ScriptedSink,
) -> (
    agentsessions_api::Result<()>,
    agentsessions_api::Result<()>,
    Vec<Call>,
) {
    let local_sink = sink();
    let local_result = local.run(start, &local_sink).await;
    let server = TestServer::serve(remote).await;
    let wire_sink = sink();
    let wire_result = server.remote().run(start, &wire_sink).await;
    assert_eq!(local_sink.calls(), wire_sink.calls());
    (local_result, wire_result, wire_sink.calls())
}

// semantics §10.5 + §9: echo over the wire is echo in process.
#[tokio::test]
async fn echo_over_the_wire_matches_in_process() {
    let (local, wire, calls) = run_both(
        &EchoHarness,
        Arc::new(EchoHarness),
        &start(),
        ScriptedSink::new,
    )
    .await;
    assert_eq!(local, Ok(()));
    assert_eq!(wire, Ok(()));
    assert_eq!(
        calls,
        vec![Call::Model(ModelRequest {
            model: "echo".into(),
            messages: vec![Message::text_message("user", "hello")],
            ..ModelRequest::default()
        })]
    );
}

// semantics §10.5 + §9.3: chat's history (converted to wire events and back) and config cross
// the start frame intact.
#[tokio::test]
async fn chat_with_history_over_the_wire_matches_in_process() {
    let chat = || ChatHarness::new("gpt-test").unwrap();
    let mut start = start();
    start.config = br#"{"system_prompt":"be brief"}"#.to_vec();
    start.history = vec![
        Event::new(
            EventKind::Input,
            EventBody::Message(Message::text_message("user", "q1")),
        )
        .with_execution("exec-0"),
        Event::new(
            EventKind::Output,
            EventBody::Message(Message::text_message("assistant", "a1")),
        )
        .with_execution("exec-0"),
    ]
    .into();
    let (local, wire, calls) = run_both(&chat(), Arc::new(chat()), &start, ScriptedSink::new).await;
    assert_eq!(local, Ok(()));
    assert_eq!(wire, Ok(()));
    // The chat harness reports the answer's usage after it (a USAGE record per model answer).
    let [Call::Model(request), Call::Usage(_)] = calls.as_slice() else {
        panic!("one model call and its usage expected, got {calls:?}");
    };
    assert_eq!(
        request.messages,
        vec![
            Message::text_message("system", "be brief"),
            Message::text_message("user", "q1"),
            Message::text_message("assistant", "a1"),
            Message::text_message("user", "hello"),
        ]
    );
}

// semantics §10.5: a bad chat config fails before any model call, over the wire too, and the
// remote END carries the fixed message and code.
#[tokio::test]
async fn chat_with_a_bad_config_fails_over_the_wire_without_a_model_call() {
    let chat = || ChatHarness::new("gpt-test").unwrap();
    let mut start = start();
    start.config = br#"{"system_prompt":null}"#.to_vec();
    let (local, wire, calls) = run_both(&chat(), Arc::new(chat()), &start, ScriptedSink::new).await;
    assert!(calls.is_empty());
    let local = local.unwrap_err().to_string();
    let Err(ApiError::Status { code, message }) = wire else {
        panic!("status error expected, got {wire:?}");
    };
    assert_eq!(code, StatusCode::InvalidArgument);
    assert!(
        message.starts_with("remote harness ended FAILED: "),
        "{message}"
    );
    assert!(message.ends_with(&local), "{message} / {local}");
}

// semantics §10.5: the counter's memory lives in the served process, one increment per run.
#[tokio::test]
async fn counter_over_the_wire_matches_in_process() {
    let local = CounterHarness::new();
    let served = Arc::new(CounterHarness::new());
    let server = TestServer::serve(Arc::clone(&served)).await;
    let remote = server.remote();
    let (local_sink, wire_sink) = (ScriptedSink::new(), ScriptedSink::new());
    for _ in 0..3 {
        local.run(&start(), &local_sink).await.unwrap();
        remote.run(&start(), &wire_sink).await.unwrap();
    }
    assert_eq!(local_sink.calls(), wire_sink.calls());
    assert_eq!(
        wire_sink.calls(),
        ["1", "2", "3"].map(|n| Call::Output(n.into())).to_vec()
    );
    assert_eq!(served.value(), 3);
}

fn full_script() -> Vec<Step> {
    vec![
        Step::Model(ModelRequest {
            model: "m-1".into(),
            messages: vec![
                Message::text_message("system", "sys"),
                Message::text_message("user", "list files"),
            ],
            params: Some(BTreeMap::from([("temperature".into(), "0".into())])),
            tools: vec![ToolDefinition {
                name: "fs.read".into(),
                description: "reads".into(),
                input_schema: Some(object(&[("type", "object")])),
            }],
            tool_choice: Some(ToolChoice {
                mode: ToolChoiceMode::Auto,
                name: String::new(),
            }),
        }),
        Step::UsageOfLastModel,
        Step::Output("partial answer".into()),
        Step::Tool(ToolCall {
            id: "t1".into(),
            tool: "fs.read".into(),
            args: Some({
                let mut args = object(&[("path", "/etc/hosts")]);
                args.insert("depth".into(), serde_json::json!(2.5));
                args
            }),
            mediation: Mediation::ControllerMediated,
            idempotency_key: "k1".into(),
        }),
        Step::Report(ToolResult {
            id: "t0".into(),
            output: Some(object(&[("grep", "3 hits")])),
            is_error: true,
            error: "partial".into(),
            ..ToolResult::default()
        }),
        Step::Tool(ToolCall {
            id: "t2".into(),
            tool: "fs.rm".into(),
            mediation: Mediation::RequiresApproval,
            idempotency_key: "k2".into(),
            ..ToolCall::default()
        }),
        Step::Tool(ToolCall {
            id: "t3".into(),
            tool: "fs.rm".into(),
            mediation: Mediation::RequiresApproval,
            idempotency_key: "k3".into(),
            ..ToolCall::default()
        }),
        Step::Model(ModelRequest {
            model: "m-2".into(),
            messages: vec![Message::text_message("user", "summarize")],
            ..ModelRequest::default()
        }),
        Step::UsageOfLastModel,
    ]
}

// semantics §9.3/§9.4/§5.1: model (request content, completion, usage), output, an ordinary
// tool call, a report, usage and two approval-gated calls (approved, denied: decision then
// receipt) cross the wire exactly; the harness sees the same answers it would in process,
// including the transient decision on a gated receipt.
#[tokio::test]
async fn scripted_harness_over_the_wire_matches_in_process() {
    let sink = || {
        ScriptedSink::with_tool_answers([
            Ok(ToolResult {
                id: "t1".into(),
                output: Some(object(&[("content", "127.0.0.1 localhost")])),
                ..ToolResult::default()
            }),
            Ok(decided("t2", true)),
            Ok(decided("t3", false)),
        ])
    };
    let local = Scripted::new(full_script());
    let remote = Arc::new(Scripted::new(full_script()));
    let (local_result, wire_result, calls) =
        run_both(&local, Arc::clone(&remote), &start(), sink).await;
    assert_eq!(local_result, Ok(()));
    assert_eq!(wire_result, Ok(()));
    assert_eq!(calls.len(), 9);
    assert_eq!(local.observed(), remote.observed());
    let observed = remote.observed();
    assert!(matches!(&observed[0], Observed::Model(r) if r.usage.output_tokens == 7));
    assert!(
        matches!(&observed[6], Observed::Tool(r) if r.approval.as_ref().is_some_and(|a| !a.approved))
    );
}

// semantics §9.5 / extensions §6: a park unwinds as ApprovalParked on the host (a clean park
// unwind for the ref), after the harness saw the same park in its sink call.
#[tokio::test]
async fn park_unwinds_as_approval_parked_on_the_host() {
    let park = ApprovalRef {
        execution_id: EXEC.into(),
        tool_call_id: "t9".into(),
        request_seq: 11,
    };
    let script = || {
        vec![
            Step::Output("before".into()),
            Step::Tool(ToolCall {
                id: "t9".into(),
                tool: "deploy".into(),
                mediation: Mediation::RequiresApproval,
                idempotency_key: "k9".into(),
                ..ToolCall::default()
            }),
            Step::Output("never".into()),
        ]
    };
    let sink = || ScriptedSink::with_tool_answers([Err(ApiError::ApprovalParked(park.clone()))]);
    let local = Scripted::new(script());
    let remote = Arc::new(Scripted::new(script()));
    let (local_result, wire_result, calls) =
        run_both(&local, Arc::clone(&remote), &start(), sink).await;
    assert_eq!(calls.len(), 2);
    let wire_err = wire_result.unwrap_err();
    assert!(is_park_unwind(&wire_err, &park), "{wire_err}");
    assert_eq!(wire_err, ApiError::ApprovalParked(park.clone()));
    assert!(is_park_unwind(&local_result.unwrap_err(), &park));
    assert_eq!(local.observed(), remote.observed());
    assert_eq!(
        remote.observed().last(),
        Some(&Observed::Error(ApiError::ApprovalParked(park)))
    );
}

// semantics §9.3: a remote END FAILED is an error carrying the harness's code and message.
#[tokio::test]
async fn a_failing_remote_harness_is_an_error_with_its_message() {
    let script = || {
        vec![
            Step::Output("working".into()),
            Step::Fail(ApiError::status(StatusCode::Internal, "disk on fire")),
        ]
    };
    let (local, wire, calls) = run_both(
        &Scripted::new(script()),
        Arc::new(Scripted::new(script())),
        &start(),
        ScriptedSink::new,
    )
    .await;
    assert_eq!(calls, vec![Call::Output("working".into())]);
    assert!(local.is_err());
    let Err(ApiError::Status { code, message }) = wire else {
        panic!("status error expected, got {wire:?}");
    };
    assert_eq!(code, StatusCode::Internal);
    assert_eq!(
        message,
        "remote harness ended FAILED: status INTERNAL: disk on fire"
    );
}

// semantics §9.3: a host sink error ends the run with that error, unchanged.
#[tokio::test]
async fn a_host_sink_error_is_returned_unchanged() {
    let refused = ApiError::ModelNotAllowed {
        model: "echo".into(),
    };
    let (local, wire, calls) = run_both(&EchoHarness, Arc::new(EchoHarness), &start(), || {
        ScriptedSink::failing_models(refused.clone())
    })
    .await;
    assert_eq!(calls.len(), 1);
    assert_eq!(local, Err(refused.clone()));
    assert_eq!(wire, Err(refused));
}
