//! The controller's rules, in process, against the memory journal.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use agentsessions_api::{
    ApprovalDecision, EventBody, EventKind, ModelPolicy, Resumability, Timestamp, ToolResultCode,
    Usage,
};
use agentsessions_controller::{ControllerError, ExecRequest};
use agentsessions_journal::LogExt as _;
use agentsessions_journal::{JournalError, verify_records};
use agentsessions_wire::model_input_hash;
use serde_json::json;
use support::*;

fn exec(text: &str) -> ExecRequest {
    ExecRequest {
        inputs: vec![user(text)],
        ..ExecRequest::default()
    }
}

// semantics §2.4: EXECUTION_START, INPUT, MODEL_CALL, OUTPUT, END, one host-assigned id.
#[tokio::test]
async fn echo_turn_has_the_journaled_shape() {
    let journal = memory();
    let model = Arc::new(CountModel::default());
    let c = controller(&journal, Arc::new(EchoHarness::default()), model.clone());
    let outcome = c.exec(exec("hi")).await.unwrap();
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records),
        ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "END"]
    );
    let id = &records[0].event.execution_id;
    assert_eq!(id.len(), 16);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(records.iter().all(|r| &r.event.execution_id == id));
    let Some(EventBody::ExecutionStart(start)) = &records[0].event.body else {
        panic!("no marker")
    };
    assert_eq!(start.input_count, Some(1));
    assert_eq!(start.harness, "echo");
    assert_eq!(start.harness_version, "1");
    let Some(EventBody::ModelCall(call)) = &records[2].event.body else {
        panic!("no model call")
    };
    let request = agentsessions_api::ModelRequest {
        model: "echo".into(),
        messages: vec![user("hi")],
        ..Default::default()
    };
    assert_eq!(call.input_hash, model_input_hash(&request));
    assert_eq!(call.id.len(), 16);
    assert_eq!(outcome.outputs, ["resp#1:hi"]);
    assert_eq!(outcome.records.len(), 5);
    verify_records(&records).unwrap();
}

// I1, I5: replay serves recorded completions, never calls the model, regenerates every effect.
#[tokio::test]
async fn replay_reproduces_nondeterministic_output_without_the_model() {
    let journal = memory();
    let live = Arc::new(CountModel::default());
    let c = controller(&journal, Arc::new(EchoHarness::default()), live.clone());
    let first = c.exec(exec("one")).await.unwrap();
    c.exec(exec("two")).await.unwrap();
    let before = read(&journal).await;
    let replay_model = Arc::new(CountModel::default());
    let r = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        replay_model.clone(),
    );
    let report = r.replay().await.unwrap();
    assert_eq!(report.outputs, ["resp#1:one", "resp#2:two"]);
    assert_eq!(report.outputs[0], first.outputs[0]);
    assert_eq!(replay_model.calls(), 0);
    assert_eq!(report.model_calls, 0);
    assert_eq!(report.executions, 2);
    assert_eq!(report.effects, 4);
    assert_eq!(
        report.reproduced, report.effects,
        "every effect byte-identical"
    );
    assert_eq!(read(&journal).await, before, "replay writes nothing");
}

// semantics §3.3: a harness asking a different model input diverges; the model is not called.
#[tokio::test]
async fn replay_divergence_is_an_error_not_a_recall() {
    let journal = memory();
    let c = controller(
        &journal,
        Arc::new(ScriptHarness::new(vec![Step::Model("a".into())])),
        Arc::new(CountModel::default()),
    );
    c.exec(exec("x")).await.unwrap();
    let model = Arc::new(CountModel::default());
    let r = controller(
        &journal,
        Arc::new(ScriptHarness::new(vec![Step::Model("b".into())])),
        model.clone(),
    );
    let err = r.replay().await.unwrap_err();
    assert!(
        matches!(err, ControllerError::ReplayDiverged(ref m) if m.contains("hash")),
        "{err}"
    );
    assert_eq!(model.calls(), 0);
    // Doing less than recorded diverges too.
    let lazy = controller(
        &journal,
        Arc::new(ScriptHarness::new(vec![])),
        model.clone(),
    );
    assert!(matches!(
        lazy.replay().await.unwrap_err(),
        ControllerError::ReplayDiverged(_)
    ));
}

// semantics §1.4 / conformance 6: a second writer at the same expected seq loses; nothing added.
#[tokio::test]
async fn single_writer_cas() {
    let journal = memory();
    let model = Arc::new(CountModel::default());
    let a = controller(&journal, Arc::new(EchoHarness::default()), model.clone());
    let b = controller(&journal, Arc::new(EchoHarness::default()), model.clone());
    a.exec(ExecRequest {
        expected_last_seq: Some(0),
        ..exec("one")
    })
    .await
    .unwrap();
    let err = b
        .exec(ExecRequest {
            expected_last_seq: Some(0),
            ..exec("two")
        })
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        ControllerError::Journal(JournalError::Conflict { .. })
    ));
    assert_eq!(err.status_code(), agentsessions_api::StatusCode::Aborted);
    assert_eq!(read(&journal).await.len(), 5);
    assert_eq!(model.calls(), 1);
}

// semantics §1.4: a superseded incarnation's fence is refused.
#[tokio::test]
async fn stale_fence_is_refused() {
    let journal = memory();
    let old = journal.new_fence("s").await.unwrap();
    let _new = journal.new_fence("s").await.unwrap();
    let c = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    )
    .with_fence(old);
    let err = c.exec(exec("x")).await.unwrap_err();
    assert!(matches!(
        err,
        ControllerError::Journal(JournalError::Fenced { .. })
    ));
    assert!(read(&journal).await.is_empty());
}

// semantics §3.4 (model cut): MODEL_CALL recorded, OUTPUT lost → one live call, no second
// MODEL_CALL.
#[tokio::test]
async fn resume_after_model_call_redrives_the_completion_once() {
    let journal = memory();
    let c = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    );
    c.exec(exec("hi")).await.unwrap();
    let crashed = truncated(&journal, 4).await; // START, INPUT, MODEL_CALL
    let model = Arc::new(CountModel::default());
    let r = controller(&crashed, Arc::new(EchoHarness::default()), model.clone());
    let outcome = r.resume().await.unwrap();
    assert!(outcome.resumed);
    assert_eq!(model.calls(), 1);
    let records = read(&crashed).await;
    assert_eq!(
        kinds(&records),
        ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "END"]
    );
    verify_records(&records).unwrap();
    assert!(
        !r.resume().await.unwrap().resumed,
        "second resume is a no-op"
    );
    assert_eq!(model.calls(), 1);
}

// conformance 3: END lost → resume serves everything, calls nothing, writes END.
#[tokio::test]
async fn resume_after_output_calls_no_model() {
    let journal = memory();
    let c = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    );
    let live = c.exec(exec("hi")).await.unwrap();
    let crashed = truncated(&journal, 5).await;
    let model = Arc::new(CountModel::default());
    let r = controller(&crashed, Arc::new(EchoHarness::default()), model.clone());
    let outcome = r.resume().await.unwrap();
    assert!(outcome.resumed);
    assert_eq!(model.calls(), 0);
    assert_eq!(outcome.turn.outputs, live.outputs);
    let records = read(&crashed).await;
    assert_eq!(records.last().unwrap().event.kind, EventKind::End);
    let id = &records[0].event.execution_id;
    assert!(records.iter().all(|r| &r.event.execution_id == id));
}

// semantics §3.4: crash right after INPUT → the model runs live once.
#[tokio::test]
async fn resume_after_input_runs_the_turn() {
    let journal = memory();
    let c = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    );
    c.exec(exec("hi")).await.unwrap();
    let crashed = truncated(&journal, 3).await;
    let model = Arc::new(CountModel::default());
    let outcome = controller(&crashed, Arc::new(EchoHarness::default()), model.clone())
        .resume()
        .await
        .unwrap();
    assert!(outcome.resumed);
    assert_eq!(model.calls(), 1);
    assert_eq!(read(&crashed).await.len(), 5);
}

// conformance 4: usage recorded before the crash is served, not duplicated.
#[tokio::test]
async fn crash_after_usage_does_not_duplicate_accounting() {
    let usage = Usage {
        model: "usage".into(),
        input_tokens: 10,
        output_tokens: 20,
        reasoning_tokens: 5,
        cached_input_tokens: 3,
    };
    let harness = || {
        Arc::new(ScriptHarness::new(vec![
            Step::Model("hi".into()),
            Step::Usage(usage.clone()),
        ]))
    };
    let journal = memory();
    controller(&journal, harness(), Arc::new(CountModel::default()))
        .exec(exec("hi"))
        .await
        .unwrap();
    let crashed = truncated(&journal, 6).await; // drop END
    let model = Arc::new(CountModel::default());
    let r = controller(&crashed, harness(), model.clone());
    assert!(r.resume().await.unwrap().resumed);
    assert_eq!(model.calls(), 0);
    let records = read(&crashed).await;
    let usages: Vec<_> = records
        .iter()
        .filter(|r| r.event.kind == EventKind::Usage)
        .collect();
    assert_eq!(usages.len(), 1);
    assert_eq!(usages[0].event.body, Some(EventBody::Usage(usage.clone())));
    assert_eq!(records.last().unwrap().event.kind, EventKind::End);
    assert_eq!(r.replay().await.unwrap().model_calls, 0);
}

// conformance 8 / I3: a lost TOOL_RESULT is re-driven once with the recorded key; the executor
// deduplicates, so the effect happened once.
#[tokio::test]
async fn crash_mid_tool_call_is_at_most_once() {
    let tool = Arc::new(IdempotentTool::default());
    let harness = || {
        Arc::new(ScriptHarness::new(vec![Step::Tool(mediated_call(
            "t1", "k1",
        ))]))
    };
    let journal = memory();
    controller(&journal, harness(), Arc::new(CountModel::default()))
        .with_tools(tool.clone())
        .exec(exec("go"))
        .await
        .unwrap();
    assert_eq!(tool.effects("k1"), 1);
    assert_eq!(
        kinds(&read(&journal).await),
        [
            "EXECUTION_START",
            "INPUT",
            "TOOL_CALL",
            "TOOL_RESULT",
            "END"
        ]
    );
    let crashed = truncated(&journal, 4).await; // keep the intent, lose the result
    let r =
        controller(&crashed, harness(), Arc::new(CountModel::default())).with_tools(tool.clone());
    assert!(r.resume().await.unwrap().resumed);
    assert_eq!(tool.attempts(), 2, "re-driven with the recorded call");
    assert_eq!(tool.effects("k1"), 1, "deduplicated by key");
    let records = read(&crashed).await;
    assert_eq!(
        records
            .iter()
            .filter(|r| r.event.kind == EventKind::ToolResult)
            .count(),
        1
    );
    assert_eq!(records.last().unwrap().event.kind, EventKind::End);
    verify_records(&records).unwrap();
    // Replay serves the recorded result: no further attempt.
    r.replay().await.unwrap();
    assert_eq!(tool.attempts(), 2);
}

// conformance 9, 10: keyless and unmediated calls are refused before any record.
#[tokio::test]
async fn tool_calls_need_mediation_and_a_key() {
    let journal = memory();
    let tool = Arc::new(IdempotentTool::default());
    let err = controller(
        &journal,
        Arc::new(ScriptHarness::new(vec![Step::Tool(mediated_call(
            "t1", "",
        ))])),
        Arc::new(CountModel::default()),
    )
    .with_tools(tool.clone())
    .exec(exec("go"))
    .await
    .unwrap_err();
    assert!(
        matches!(err, ControllerError::MissingIdempotencyKey { .. }),
        "{err}"
    );
    let mut unmediated = mediated_call("u1", "");
    unmediated.mediation = agentsessions_api::Mediation::Unspecified;
    let err = controller(
        &journal,
        Arc::new(ScriptHarness::new(vec![Step::Tool(unmediated)])),
        Arc::new(CountModel::default()),
    )
    .with_tools(tool.clone())
    .exec(exec("go"))
    .await
    .unwrap_err();
    assert!(
        matches!(err, ControllerError::UnmediatedToolCall { .. }),
        "{err}"
    );
    let records = read(&journal).await;
    assert!(
        records
            .iter()
            .all(|r| !matches!(r.event.kind, EventKind::ToolCall | EventKind::ToolResult))
    );
    assert_eq!(tool.attempts(), 0);
    verify_records(&records).unwrap();
}

// conformance 17/20: arguments a float64 cannot hold fail the turn even when the harness
// swallows the refusal; nothing reaches the executor.
#[tokio::test]
async fn invalid_tool_arguments_fail_before_effects() {
    let journal = memory();
    let tool = Arc::new(IdempotentTool::default());
    let mut call = mediated_call("call-1", "key-1");
    call.args = json!({"secret": 9_007_199_254_740_993_u64})
        .as_object()
        .cloned();
    let err = controller(
        &journal,
        Arc::new(ScriptHarness::new(vec![
            Step::ToolIgnoringError(call),
            Step::Tool(mediated_call("call-2", "key-2")),
        ])),
        Arc::new(CountModel::default()),
    )
    .with_tools(tool.clone())
    .exec(exec("go"))
    .await
    .unwrap_err();
    assert!(
        matches!(err, ControllerError::InvalidToolArgs { .. }),
        "{err}"
    );
    assert_eq!(tool.attempts(), 0);
    let after_marker: Vec<_> = read(&journal).await.into_iter().skip(2).collect();
    assert_eq!(kinds(&after_marker), ["ERROR"]);
}

// semantics §5: park, block, decide (idempotently), resume with a receipt, replay.
#[tokio::test]
async fn approval_park_decide_resume_replay() {
    let tool = Arc::new(IdempotentTool::default());
    let harness = || {
        Arc::new(ScriptHarness::new(vec![
            Step::Tool(gated_call("call", "k")),
            Step::Output("continued".into()),
        ]))
    };
    let journal = memory();
    let c =
        controller(&journal, harness(), Arc::new(CountModel::default())).with_tools(tool.clone());
    let err = c.exec(exec("pay")).await.unwrap_err();
    let ControllerError::Parked(park) = err else {
        panic!("expected a park, got {err}")
    };
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records),
        ["EXECUTION_START", "INPUT", "TOOL_CALL", "APPROVAL_REQUEST"]
    );
    assert_eq!(park.request_seq, 4);
    assert_eq!(park.tool_call_id, "call");
    assert_eq!(park.execution_id, records[0].event.execution_id);
    // New input is blocked while the gate is open.
    let blocked = c.exec(exec("more")).await.unwrap_err();
    assert!(matches!(blocked, ControllerError::ApprovalBlocked { .. }));
    // Resume without a decision parks again, writing nothing.
    assert!(matches!(
        c.resume().await.unwrap_err(),
        ControllerError::Parked(_)
    ));
    assert_eq!(read(&journal).await.len(), 4);

    let decision = ApprovalDecision {
        execution_id: park.execution_id.clone(),
        tool_call_id: "call".into(),
        request_seq: park.request_seq,
        approved: true,
        reason: "reviewed".into(),
        identity: Default::default(),
    };
    let at = Timestamp {
        seconds: 1_700_000_000,
        nanos: 0,
    };
    let recorded = c.approve(&decision, at).await.unwrap();
    assert_eq!(recorded.event.kind, EventKind::ApprovalResult);
    assert_eq!(recorded.event.timestamp, Some(at));
    let again = c.approve(&decision, Timestamp::now()).await.unwrap();
    assert_eq!(again, recorded, "same decision is idempotent");
    let flipped = ApprovalDecision {
        approved: false,
        ..decision.clone()
    };
    assert!(matches!(
        c.approve(&flipped, at).await.unwrap_err(),
        ControllerError::InvalidApprovalDecision(_)
    ));

    // The decision minted a fresh fence; the resuming incarnation holds it.
    let fence = journal.session_info("s").await.unwrap().fence;
    let r = controller(&journal, harness(), Arc::new(CountModel::default()))
        .with_tools(tool.clone())
        .with_fence(fence);
    let outcome = r.resume().await.unwrap();
    assert!(outcome.resumed);
    assert_eq!(tool.effects("k"), 1);
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records),
        [
            "EXECUTION_START",
            "INPUT",
            "TOOL_CALL",
            "APPROVAL_REQUEST",
            "APPROVAL_RESULT",
            "TOOL_RESULT",
            "OUTPUT",
            "END"
        ]
    );
    let Some(EventBody::Result(receipt)) = &records[5].event.body else {
        panic!("no receipt")
    };
    assert_eq!(receipt.approval_request_seq, 4);
    assert_eq!(receipt.approval_decision_seq, 5);
    assert_eq!(receipt.code, ToolResultCode::Unspecified);
    assert!(
        receipt.approval.is_none(),
        "the decision is never journaled in the receipt"
    );
    // Replay serves the receipt: no new effect.
    let report = r.replay().await.unwrap();
    assert_eq!(report.outputs, ["continued"]);
    assert_eq!(tool.effects("k"), 1);
    verify_records(&records).unwrap();
    // The decision stays idempotent after the receipt.
    assert_eq!(c.approve(&decision, at).await.unwrap(), recorded);
}

// semantics §5.5: a denial writes the denial receipt and never runs the executor.
#[tokio::test]
async fn denied_approval_writes_denial_receipt() {
    let tool = Arc::new(IdempotentTool::default());
    let harness = || {
        Arc::new(ScriptHarness::new(vec![Step::Tool(gated_call(
            "call", "k",
        ))]))
    };
    let journal = memory();
    let c =
        controller(&journal, harness(), Arc::new(CountModel::default())).with_tools(tool.clone());
    let ControllerError::Parked(park) = c.exec(exec("pay")).await.unwrap_err() else {
        panic!("no park")
    };
    c.approve(
        &ApprovalDecision {
            execution_id: park.execution_id,
            tool_call_id: park.tool_call_id,
            request_seq: park.request_seq,
            approved: false,
            reason: "no".into(),
            identity: Default::default(),
        },
        Timestamp::now(),
    )
    .await
    .unwrap();
    let fence = journal.session_info("s").await.unwrap().fence;
    controller(&journal, harness(), Arc::new(CountModel::default()))
        .with_tools(tool.clone())
        .with_fence(fence)
        .resume()
        .await
        .unwrap();
    assert_eq!(tool.attempts(), 0);
    let records = read(&journal).await;
    let Some(EventBody::Result(receipt)) = &records[5].event.body else {
        panic!("no receipt")
    };
    assert!(receipt.is_error);
    assert_eq!(receipt.code, ToolResultCode::ApprovalDenied);
    assert_eq!(receipt.error, "Tool execution denied by approval decision.");
}

// semantics §5.5: approved without an executor stops silently; the decision stays recoverable.
#[tokio::test]
async fn approved_without_executor_writes_nothing() {
    let harness = || {
        Arc::new(ScriptHarness::new(vec![Step::Tool(gated_call(
            "call", "k",
        ))]))
    };
    let journal = memory();
    let c = controller(&journal, harness(), Arc::new(CountModel::default()));
    let ControllerError::Parked(park) = c.exec(exec("pay")).await.unwrap_err() else {
        panic!("no park")
    };
    c.approve(
        &ApprovalDecision {
            execution_id: park.execution_id,
            tool_call_id: park.tool_call_id,
            request_seq: park.request_seq,
            approved: true,
            reason: String::new(),
            identity: Default::default(),
        },
        Timestamp::now(),
    )
    .await
    .unwrap();
    let fence = journal.session_info("s").await.unwrap().fence;
    let before = read(&journal).await.len();
    let err = controller(&journal, harness(), Arc::new(CountModel::default()))
        .with_fence(fence)
        .resume()
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::MissingToolExecutor), "{err}");
    assert_eq!(read(&journal).await.len(), before);
}

// semantics §5.2: a memory harness cannot use approvals.
#[tokio::test]
async fn approval_needs_a_stateless_harness() {
    let journal = memory();
    let harness = Arc::new(ScriptHarness::with_resumability(
        vec![Step::Tool(gated_call("call", "k"))],
        Resumability::RequiresMemorySnapshot,
    ));
    let err = controller(&journal, harness, Arc::new(CountModel::default()))
        .exec(exec("pay"))
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::ApprovalUnavailable), "{err}");
}

// Cancel: LIFECYCLE_CANCEL and END CANCELED; the provider call is dropped, not orphaned.
#[tokio::test]
async fn cancel_stops_the_turn_and_the_provider_call() {
    let journal = memory();
    let model = Arc::new(StuckModel::default());
    let c = controller(&journal, Arc::new(EchoHarness::default()), model.clone());
    let cancellations = c.cancellations().clone();
    let turn = tokio::spawn(async move { c.exec(exec("hi")).await });
    while !model.started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let id = read(&journal).await[0].event.execution_id.clone();
    assert!(cancellations.cancel(&id, "user asked"));
    let err = turn.await.unwrap().unwrap_err();
    assert!(matches!(err, ControllerError::Cancelled { ref reason } if reason == "user asked"));
    assert!(
        model.dropped.load(Ordering::SeqCst),
        "provider call was dropped"
    );
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records),
        ["EXECUTION_START", "INPUT", "MODEL_CALL", "LIFECYCLE", "END"]
    );
    let Some(EventBody::End(end)) = &records[4].event.body else {
        panic!("no end")
    };
    assert_eq!(end.state, "CANCELED");
    assert_eq!(records[4].event.execution_id, id);
    verify_records(&records).unwrap();
    // A cancelled execution is finished: resume has nothing to do.
    let r = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    );
    assert!(!r.resume().await.unwrap().resumed);
    assert!(!cancellations.cancel(&id, "late"), "no longer running");
}

// Deadline: the turn stops at its deadline with an ERROR; it stays resumable.
#[tokio::test]
async fn deadline_interrupts_and_leaves_the_turn_resumable() {
    let journal = memory();
    let model = Arc::new(StuckModel::default());
    let c = controller(&journal, Arc::new(EchoHarness::default()), model.clone());
    let err = c
        .exec(ExecRequest {
            deadline: Some(SystemTime::now() + Duration::from_millis(150)),
            ..exec("hi")
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::DeadlineExceeded));
    assert!(model.dropped.load(Ordering::SeqCst));
    assert_eq!(
        kinds(&read(&journal).await),
        ["EXECUTION_START", "INPUT", "MODEL_CALL", "ERROR"]
    );
    let live = Arc::new(CountModel::default());
    let r = controller(&journal, Arc::new(EchoHarness::default()), live.clone());
    assert!(r.resume().await.unwrap().resumed);
    assert_eq!(live.calls(), 1, "the model cut is re-driven once");
}

// Host shutdown: a running turn stops where it is with an ERROR note a person understands (not
// a task-cancellation message), no END, so a resume continues it.
#[tokio::test]
async fn host_shutdown_interrupts_with_a_plain_error_and_leaves_the_turn_resumable() {
    let journal = memory();
    let model = Arc::new(StuckModel::default());
    let c = controller(&journal, Arc::new(EchoHarness::default()), model.clone());
    let cancellations = c.cancellations().clone();
    let turn = tokio::spawn(async move { c.exec(exec("hi")).await });
    while !model.started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(cancellations.interrupt_all(), 1);
    let err = turn.await.unwrap().unwrap_err();
    assert!(matches!(err, ControllerError::HostShuttingDown), "{err}");
    assert!(model.dropped.load(Ordering::SeqCst));
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records),
        ["EXECUTION_START", "INPUT", "MODEL_CALL", "ERROR"]
    );
    let Some(EventBody::Error(error)) = &records[3].event.body else {
        panic!("no error body")
    };
    assert_eq!(error.description, "host shutting down; resume to continue");
    let live = Arc::new(CountModel::default());
    let r = controller(&journal, Arc::new(EchoHarness::default()), live.clone());
    assert!(r.resume().await.unwrap().resumed);
    assert_eq!(live.calls(), 1, "the model cut is re-driven once");
}

// Deadline on paused time: an hour-long deadline fires without an hour passing, and the turn
// is cut exactly as with a real clock (STYLE rule 11: time is an input).
#[tokio::test(start_paused = true)]
async fn an_hour_long_deadline_fires_on_paused_time() {
    let journal = memory();
    let model = Arc::new(StuckModel::default());
    let c = controller(&journal, Arc::new(EchoHarness::default()), model.clone());
    let began = tokio::time::Instant::now();
    let err = c
        .exec(ExecRequest {
            deadline: Some(SystemTime::now() + Duration::from_secs(3600)),
            ..exec("hi")
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::DeadlineExceeded));
    assert!(
        began.elapsed() >= Duration::from_secs(3590),
        "{:?}",
        began.elapsed()
    );
    assert!(model.dropped.load(Ordering::SeqCst));
    assert_eq!(
        kinds(&read(&journal).await),
        ["EXECUTION_START", "INPUT", "MODEL_CALL", "ERROR"]
    );
}

// extensions §4: the policy default is journaled and handed to the harness; a model outside it
// fails the execution even if the harness swallows the refusal.
#[tokio::test]
async fn model_policy() {
    let journal = memory();
    let harness = Arc::new(ScriptHarness::new(vec![Step::Model("hi".into())]));
    let policy = ModelPolicy::new("small", ["small", "large"]);
    let model = Arc::new(CountModel::default());
    controller(&journal, harness.clone(), model.clone())
        .with_policy(policy.clone())
        .exec(exec("x"))
        .await
        .unwrap();
    let records = read(&journal).await;
    let Some(EventBody::ExecutionStart(start)) = &records[0].event.body else {
        panic!()
    };
    assert_eq!(start.model, "small");
    assert_eq!(harness.last_start().unwrap().model, "small");

    struct Swallowing;
    #[async_trait::async_trait]
    impl agentsessions_api::Harness for Swallowing {
        async fn describe(&self) -> agentsessions_api::Result<agentsessions_api::Descriptor> {
            Ok(descriptor("swallow", Resumability::StatelessReplay))
        }
        async fn run(
            &self,
            _start: &agentsessions_api::Start,
            sink: &dyn agentsessions_api::EventSink,
        ) -> agentsessions_api::Result<()> {
            let _ = sink
                .model(agentsessions_api::ModelRequest {
                    model: "forbidden".into(),
                    ..Default::default()
                })
                .await;
            Ok(())
        }
    }
    let err = controller(&journal, Arc::new(Swallowing), model.clone())
        .with_policy(policy)
        .exec(exec("y"))
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::ModelNotAllowed { ref model } if model == "forbidden"));
    assert_eq!(model.calls(), 1, "the forbidden model was never called");
    let bad = ModelPolicy::new("", ["a"]);
    let err = controller(&journal, Arc::new(EchoHarness::default()), model.clone())
        .with_policy(bad)
        .exec(exec("z"))
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::InvalidModelPolicy(_)));
}

// semantics §2.7 / conformance 12–13: deltas are transport only; the journal does not change;
// replay emits none.
#[tokio::test]
async fn streaming_changes_nothing_in_the_journal() {
    let plain = memory();
    controller(
        &plain,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    )
    .exec(exec("hi"))
    .await
    .unwrap();
    let streamed = memory();
    let recorder = Arc::new(Recorder::default());
    controller(
        &streamed,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::streaming()),
    )
    .with_observer(recorder.clone())
    .with_stream_deltas(true)
    .exec(exec("hi"))
    .await
    .unwrap();
    let a = read(&plain).await;
    let b = read(&streamed).await;
    assert_eq!(kinds(&a), kinds(&b));
    assert_eq!(a[3].event.body, b[3].event.body, "same OUTPUT");
    let deltas = recorder.deltas.lock().unwrap().clone();
    let text: String = deltas.iter().map(|d| d.chunk.as_str()).collect();
    assert_eq!(text, "resp#1:hi");
    assert!(deltas.last().unwrap().done);
    assert!(
        deltas
            .iter()
            .all(|d| d.execution_id == b[0].event.execution_id)
    );
    assert_eq!(
        recorder.records.lock().unwrap().len(),
        5,
        "every record observed"
    );
    let replay_recorder = Arc::new(Recorder::default());
    controller(
        &streamed,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::streaming()),
    )
    .with_observer(replay_recorder.clone())
    .with_stream_deltas(true)
    .replay()
    .await
    .unwrap();
    assert_eq!(replay_recorder.delta_count(), 0);
}

// I4: a memory harness is handed no history.
#[tokio::test]
async fn memory_harness_gets_empty_history() {
    let journal = memory();
    let stateless = Arc::new(ScriptHarness::new(vec![Step::Output("a".into())]));
    let c = controller(&journal, stateless.clone(), Arc::new(CountModel::default()));
    c.exec(exec("1")).await.unwrap();
    c.exec(exec("2")).await.unwrap();
    assert_eq!(stateless.last_start().unwrap().history.len(), 4);
    let memory_harness = Arc::new(ScriptHarness::with_resumability(
        vec![Step::Output("b".into())],
        Resumability::RequiresMemorySnapshot,
    ));
    controller(
        &journal,
        memory_harness.clone(),
        Arc::new(CountModel::default()),
    )
    .exec(exec("3"))
    .await
    .unwrap();
    assert!(memory_harness.last_start().unwrap().history.is_empty());
}

// semantics §3.5: replay refuses another harness name or version.
#[tokio::test]
async fn replay_checks_harness_identity() {
    let journal = memory();
    controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    )
    .exec(exec("hi"))
    .await
    .unwrap();
    let err = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    )
    .with_registry_name("other")
    .replay()
    .await
    .unwrap_err();
    assert!(
        matches!(err, ControllerError::HarnessMismatch { .. }),
        "{err}"
    );
    let v2 = Arc::new(ScriptHarness::new(vec![]));
    let err = controller(&journal, v2, Arc::new(CountModel::default()))
        .with_registry_name("echo")
        .replay()
        .await;
    // Same name, but the script harness is version "1" too: identity passes, the effects diverge.
    assert!(matches!(
        err.unwrap_err(),
        ControllerError::ReplayDiverged(_)
    ));
}

// semantics §2.4 step 10: a failing harness leaves ERROR, not END, and the error surfaces.
#[tokio::test]
async fn failed_run_writes_error_and_stays_resumable() {
    let journal = memory();
    let err = controller(
        &journal,
        Arc::new(ScriptHarness::new(vec![Step::Fail("boom".into())])),
        Arc::new(CountModel::default()),
    )
    .exec(exec("x"))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("boom"));
    let records = read(&journal).await;
    assert_eq!(records.last().unwrap().event.kind, EventKind::Error);
    // A provider failure leaves the MODEL_CALL unanswered (a model cut).
    let journal = memory();
    controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(FailingModel),
    )
    .exec(exec("x"))
    .await
    .unwrap_err();
    assert_eq!(
        kinds(&read(&journal).await),
        ["EXECUTION_START", "INPUT", "MODEL_CALL", "ERROR"]
    );
    let model = Arc::new(CountModel::default());
    controller(&journal, Arc::new(EchoHarness::default()), model.clone())
        .resume()
        .await
        .unwrap();
    assert_eq!(model.calls(), 1);
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records),
        [
            "EXECUTION_START",
            "INPUT",
            "MODEL_CALL",
            "ERROR",
            "OUTPUT",
            "END"
        ]
    );
    // ERROR is not an effect: the resumed execution replays cleanly.
    let report = controller(&journal, Arc::new(EchoHarness::default()), model.clone())
        .replay()
        .await
        .unwrap();
    assert_eq!(report.outputs, ["resp#1:x"]);
}

// semantics §3.7: a fork child never re-drives a tool intent it inherited.
#[tokio::test]
async fn inherited_tool_intent_is_refused() {
    let tool = Arc::new(IdempotentTool::default());
    let harness = || {
        Arc::new(ScriptHarness::new(vec![Step::Tool(mediated_call(
            "t1", "k1",
        ))]))
    };
    let journal = memory();
    controller(&journal, harness(), Arc::new(CountModel::default()))
        .with_tools(tool.clone())
        .exec(exec("go"))
        .await
        .unwrap();
    let child = truncated(&journal, 4).await; // intent without result
    let head = child.head("s").await.unwrap();
    child
        .append_one(
            "s",
            head,
            0,
            agentsessions_api::Event::new(
                EventKind::Lifecycle,
                EventBody::Lifecycle(agentsessions_api::Lifecycle {
                    kind: agentsessions_api::LifecycleKind::Fork,
                    ..Default::default()
                }),
            ),
        )
        .await
        .unwrap();
    let err = controller(&child, harness(), Arc::new(CountModel::default()))
        .with_tools(tool.clone())
        .resume()
        .await
        .unwrap_err();
    assert!(
        matches!(err, ControllerError::InheritedToolIntent { .. }),
        "{err}"
    );
    assert_eq!(tool.attempts(), 1, "never re-driven by the child");
}
