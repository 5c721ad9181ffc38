//! The conformance checks of hashing-and-conformance (d), each a function over a [`Transport`]:
//! the harness under test runs in process or behind `Harness.Connect`, and every check holds
//! either way. Each check states the invariant it proves.
// Checks are assertions: a failed unwrap is a failed check with its cause.
#![allow(clippy::missing_panics_doc, clippy::unwrap_used)]

use std::sync::Arc;

use agentsessions_api::{
    EventBody, EventKind, Harness, Mediation, ModelProvider, ModelRequest, ToolCall, Usage,
};
use agentsessions_controller::{Controller, ControllerError, ExecRequest, ToolExecutor};
use agentsessions_harnesses::{ChatHarness, EchoHarness};
use agentsessions_journal::{Journal, LogRecord};
use agentsessions_model::{
    AnthropicConfig, AnthropicProvider, CountingProvider, EchoModel, OpenAiConfig, OpenAiProvider,
    RandomTextModel,
};

use crate::fixtures::{
    ApprovalHarness, CountingEndpoint, DeltaCounter, FailingHarness, IdempotentTool, SESSION,
    StartCapture, Store, ToolHarness, UsageHarness, assert_verifies, records, truncate_from, user,
};
use crate::transport::Transport;
use agentsessions_journal::LogExt as _;

fn exec(text: &str, expected: Option<i64>) -> ExecRequest {
    ExecRequest {
        inputs: vec![user(text)],
        expected_last_seq: expected,
        ..ExecRequest::default()
    }
}

fn outputs(records: &[LogRecord]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.event.kind == EventKind::Output)
        .filter_map(|r| r.event.message().map(agentsessions_api::Message::text))
        .collect()
}

fn count(records: &[LogRecord], kind: EventKind) -> usize {
    records.iter().filter(|r| r.event.kind == kind).count()
}

async fn echo(t: &dyn Transport) -> Arc<dyn Harness> {
    t.attach(Arc::new(EchoHarness::new())).await
}

fn controller(
    journal: &Arc<dyn Journal>,
    harness: Arc<dyn Harness>,
    model: Arc<dyn ModelProvider>,
) -> Controller {
    Controller::new(Arc::clone(journal), harness, model, SESSION)
}

fn random() -> Arc<CountingProvider<RandomTextModel>> {
    Arc::new(CountingProvider::new(RandomTextModel::new(0x5eed)))
}

/// 1 — I1, I5: replay reproduces a genuinely nondeterministic output with zero model calls.
pub async fn replay_reconstructs_nondeterministic_output(t: &dyn Transport) {
    let store = Store::new();
    let live_model = random();
    let live = {
        let journal = store.open();
        controller(&journal, echo(t).await, live_model.clone())
            .exec(exec("hi", Some(0)))
            .await
            .unwrap()
    };
    assert_eq!(live.outputs.len(), 1);
    let again = live_model
        .complete(
            &ModelRequest {
                model: "echo".into(),
                messages: vec![user("hi")],
                ..ModelRequest::default()
            },
            None,
        )
        .await
        .unwrap();
    assert_ne!(
        again.message.text(),
        live.outputs[0],
        "the model is nondeterministic"
    );
    let journal = store.open();
    let replay_model = random();
    let report = controller(&journal, echo(t).await, replay_model.clone())
        .replay()
        .await
        .unwrap();
    assert_eq!(report.outputs, live.outputs);
    assert_eq!(replay_model.calls(), 0);
    assert_eq!(
        report.reproduced, report.effects,
        "every effect byte-identical"
    );
    assert_verifies(&journal, SESSION).await;
}

/// 2 — multi-turn continuation across process restarts (reopen the file each turn).
pub async fn multi_turn_resume_continue(t: &dyn Transport) {
    let store = Store::new();
    let mut head = 0;
    for text in ["one", "two", "three"] {
        let journal = store.open();
        controller(&journal, echo(t).await, Arc::new(EchoModel::new()))
            .exec(exec(text, Some(head)))
            .await
            .unwrap();
        head = journal.head(SESSION).await.unwrap();
    }
    let journal = store.open();
    assert_verifies(&journal, SESSION).await;
    assert_eq!(
        outputs(&records(&journal, SESSION).await),
        ["echo:one", "echo:two", "echo:three"]
    );
}

/// 3 — I3/I4: a turn whose END was lost is re-driven with zero model calls.
pub async fn crash_mid_turn_redrive_at_most_once(t: &dyn Transport) {
    let store = Store::new();
    let live = {
        let journal = store.open();
        controller(&journal, echo(t).await, random())
            .exec(exec("hi", Some(0)))
            .await
            .unwrap()
    };
    truncate_from(&store.path(), SESSION, 5);
    let journal = store.open();
    let model = random();
    let outcome = controller(&journal, echo(t).await, model.clone())
        .resume()
        .await
        .unwrap();
    assert!(outcome.resumed);
    assert_eq!(model.calls(), 0);
    let all = records(&journal, SESSION).await;
    assert_eq!(all.last().map(|r| r.event.kind), Some(EventKind::End));
    let id = &all[0].event.execution_id;
    assert!(!id.is_empty() && all.iter().all(|r| &r.event.execution_id == id));
    assert_eq!(outputs(&all), live.outputs);
    assert_verifies(&journal, SESSION).await;
}

/// 4 — recorded usage is served on recovery, never duplicated.
pub async fn crash_after_usage_does_not_duplicate_accounting(t: &dyn Transport) {
    let usage = Usage {
        model: "usage".into(),
        input_tokens: 10,
        output_tokens: 20,
        reasoning_tokens: 5,
        cached_input_tokens: 0,
    };
    let harness = UsageHarness {
        usage: usage.clone(),
    };
    let store = Store::new();
    {
        let journal = store.open();
        controller(
            &journal,
            t.attach(Arc::new(harness.clone())).await,
            random(),
        )
        .exec(exec("hi", Some(0)))
        .await
        .unwrap();
    }
    // The live run's usage: the model's answer's (journaled with it, semantics §3.3) and the
    // harness's own report. The crash comes after the last of them, before END.
    let usage_bodies = |all: &[LogRecord]| -> Vec<Option<EventBody>> {
        all.iter()
            .filter(|r| r.event.kind == EventKind::Usage)
            .map(|r| r.event.body.clone())
            .collect()
    };
    let (live_usage, end_seq) = {
        let live = records(&store.open(), SESSION).await;
        let end = live.last().map(|r| (r.event.kind, r.seq));
        assert!(matches!(end, Some((EventKind::End, _))), "{end:?}");
        (usage_bodies(&live), end.map_or(0, |(_, seq)| seq))
    };
    assert!(live_usage.contains(&Some(EventBody::Usage(usage))));
    truncate_from(&store.path(), SESSION, end_seq);
    let journal = store.open();
    let model = random();
    let c = controller(&journal, t.attach(Arc::new(harness)).await, model.clone());
    assert!(c.resume().await.unwrap().resumed);
    assert_eq!(model.calls(), 0);
    let all = records(&journal, SESSION).await;
    assert_eq!(
        usage_bodies(&all),
        live_usage,
        "usage served, never duplicated"
    );
    assert_eq!(all.last().map(|r| r.event.kind), Some(EventKind::End));
    assert_eq!(c.replay().await.unwrap().model_calls, 0);
    assert_eq!(model.calls(), 0);
}

/// 5 — a fork child's records up to the fork point are the parent's, hash for hash.
pub async fn fork_equivalence(t: &dyn Transport) {
    let store = Store::new();
    let journal = store.open();
    Controller::new(
        Arc::clone(&journal),
        echo(t).await,
        Arc::new(EchoModel::new()),
        "parent",
    )
    .exec(exec("hi", Some(0)))
    .await
    .unwrap();
    let parent = records(&journal, "parent").await;
    let at = parent.last().map_or(0, |r| r.seq);
    fork(&journal, "parent", at, "child").await;
    let child = records(&journal, "child").await;
    assert_eq!(
        child.len(),
        parent.len() + 1,
        "the prefix plus the FORK marker"
    );
    for (c, p) in child.iter().zip(&parent) {
        assert_eq!(c.hash, p.hash, "seq {}", c.seq);
    }
    assert_eq!(child[parent.len()].prev_hash, parent[parent.len() - 1].hash);
    // The child goes on alone (a new incarnation, a new fence); the parent does not see it.
    let fence = journal.new_fence("child").await.unwrap();
    Controller::new(
        Arc::clone(&journal),
        echo(t).await,
        Arc::new(EchoModel::new()),
        "child",
    )
    .with_fence(fence)
    .exec(exec("only in the child", None))
    .await
    .unwrap();
    assert_eq!(records(&journal, "parent").await, parent);
    assert_verifies(&journal, "parent").await;
    assert_verifies(&journal, "child").await;
}

/// Forks `parent` at `at` as the journal does for the Fork RPC: the shared prefix, then the
/// FORK marker with the child's fence.
async fn fork(journal: &Arc<dyn Journal>, parent: &str, at: i64, child: &str) {
    let fence = journal.fork_session(parent, at, child).await.unwrap();
    let marker = agentsessions_api::Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(agentsessions_api::Lifecycle {
            kind: agentsessions_api::LifecycleKind::Fork,
            detail: format!("{parent}@{at}"),
            ..agentsessions_api::Lifecycle::default()
        }),
    );
    journal.append_one(child, at, fence, marker).await.unwrap();
}

/// 6 — one writer: a second Exec at the same expected seq fails and appends nothing.
pub async fn single_writer(t: &dyn Transport) {
    let store = Store::new();
    let journal = store.open();
    let model: Arc<dyn ModelProvider> = Arc::new(EchoModel::new());
    controller(&journal, echo(t).await, Arc::clone(&model))
        .exec(exec("one", Some(0)))
        .await
        .unwrap();
    let before = records(&journal, SESSION).await;
    let err = controller(&journal, echo(t).await, model)
        .exec(exec("two", Some(0)))
        .await
        .unwrap_err();
    assert_eq!(
        err.status_code(),
        agentsessions_api::StatusCode::Aborted,
        "{err}"
    );
    assert_eq!(records(&journal, SESSION).await, before);
}

/// 8 — I3: a lost TOOL_RESULT is re-driven with the recorded key and deduplicated.
pub async fn crash_mid_tool_call_at_most_once(t: &dyn Transport) {
    let tool = Arc::new(IdempotentTool::default());
    let store = Store::new();
    {
        let journal = store.open();
        controller(
            &journal,
            t.attach(Arc::new(ToolHarness::new("k1"))).await,
            random(),
        )
        .with_tools(tool.clone())
        .exec(exec("go", Some(0)))
        .await
        .unwrap();
        let all = records(&journal, SESSION).await;
        let kinds: Vec<_> = all.iter().map(|r| r.event.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "EXECUTION_START",
                "INPUT",
                "TOOL_CALL",
                "TOOL_RESULT",
                "END"
            ]
        );
    }
    assert_eq!(tool.effects("k1"), 1);
    truncate_from(&store.path(), SESSION, 4);
    let journal = store.open();
    let outcome = controller(
        &journal,
        t.attach(Arc::new(ToolHarness::new("k1"))).await,
        random(),
    )
    .with_tools(tool.clone())
    .resume()
    .await
    .unwrap();
    assert!(outcome.resumed);
    assert_eq!(tool.effects("k1"), 1);
    let all = records(&journal, SESSION).await;
    assert_eq!(count(&all, EventKind::ToolResult), 1);
    assert_eq!(all.last().map(|r| r.event.kind), Some(EventKind::End));
    assert_verifies(&journal, SESSION).await;
}

/// 9 — a controller-mediated call without an idempotency key is refused before any record.
pub async fn controller_mediated_tool_requires_key(t: &dyn Transport) {
    let store = Store::new();
    let journal = store.open();
    let err = controller(
        &journal,
        t.attach(Arc::new(ToolHarness::new(""))).await,
        random(),
    )
    .with_tools(Arc::new(IdempotentTool::default()))
    .exec(exec("go", Some(0)))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("idempotency key"), "{err}");
    let all = records(&journal, SESSION).await;
    assert_eq!(count(&all, EventKind::ToolCall), 0);
    assert_verifies(&journal, SESSION).await;
}

/// 10 — a call without host mediation is refused; nothing is recorded for it.
pub async fn unmediated_tool_call_rejected(t: &dyn Transport) {
    let store = Store::new();
    let journal = store.open();
    let call = ToolCall {
        id: "u1".into(),
        tool: "x".into(),
        ..ToolCall::default()
    };
    let err = controller(
        &journal,
        t.attach(Arc::new(ToolHarness::with_call(call))).await,
        random(),
    )
    .with_tools(Arc::new(IdempotentTool::default()))
    .exec(exec("go", Some(0)))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("not controller-mediated"), "{err}");
    let all = records(&journal, SESSION).await;
    assert_eq!(count(&all, EventKind::ToolResult), 0);
    assert_verifies(&journal, SESSION).await;
}

const OPENAI_ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"live answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
const ANTHROPIC_ANSWER: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"test-model","content":[{"type":"text","text":"live answer"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}"#;

async fn provider_round_trip(
    t: &dyn Transport,
    endpoint: &CountingEndpoint,
    model: Arc<dyn ModelProvider>,
) {
    let store = Store::new();
    let journal = store.open();
    for harness in [
        echo(t).await,
        t.attach(Arc::new(ChatHarness::new("test-model").unwrap()))
            .await,
    ] {
        let before = endpoint.requests();
        let session = format!("provider-{before}");
        let live = Controller::new(
            Arc::clone(&journal),
            Arc::clone(&harness),
            Arc::clone(&model),
            &session,
        )
        .exec(exec("hi", Some(0)))
        .await
        .unwrap();
        assert_eq!(endpoint.requests(), before + 1);
        assert_eq!(live.outputs, ["live answer"]);
        let report = Controller::new(Arc::clone(&journal), harness, Arc::clone(&model), &session)
            .replay()
            .await
            .unwrap();
        assert_eq!(report.outputs, live.outputs);
        assert_eq!(
            endpoint.requests(),
            before + 1,
            "replay sent no HTTP request"
        );
    }
}

/// 11 — replay never reaches a real provider: the HTTP endpoint counts exactly one request per
/// live turn (OpenAI-compatible and Anthropic wire formats; echo and chat harnesses).
pub async fn replay_never_reaches_the_provider(t: &dyn Transport) {
    let openai = CountingEndpoint::start(OPENAI_ANSWER).await;
    let mut config = OpenAiConfig::new("test-model");
    config.base_url.clone_from(&openai.base_url);
    let provider = Arc::new(OpenAiProvider::new(config).unwrap());
    provider_round_trip(t, &openai, provider).await;

    let anthropic = CountingEndpoint::start(ANTHROPIC_ANSWER).await;
    let mut config = AnthropicConfig::new("test-model");
    config.base_url.clone_from(&anthropic.base_url);
    config.api_key = "test-key".into();
    let provider = Arc::new(AnthropicProvider::new(config).unwrap());
    provider_round_trip(t, &anthropic, provider).await;
}

/// 12 — streaming is transport only: the journal has the same shape and outputs either way.
pub async fn streaming_does_not_change_the_journal(t: &dyn Transport) {
    let plain = Store::new();
    let streamed = Store::new();
    let a = {
        let journal = plain.open();
        controller(&journal, echo(t).await, random())
            .exec(exec("hi", Some(0)))
            .await
            .unwrap();
        records(&journal, SESSION).await
    };
    let counter = Arc::new(DeltaCounter::default());
    let journal = streamed.open();
    controller(&journal, echo(t).await, random())
        .with_observer(counter.clone())
        .with_stream_deltas(true)
        .exec(exec("hi", Some(0)))
        .await
        .unwrap();
    let b = records(&journal, SESSION).await;
    assert!(!counter.deltas().is_empty(), "deltas were streamed");
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.event.kind, y.event.kind);
    }
    assert_eq!(outputs(&a), outputs(&b));
    assert_eq!(count(&b, EventKind::Output), 1);
    assert_verifies(&journal, SESSION).await;
}

/// 13 — replay emits no deltas; live deltas carry the turn's execution id.
pub async fn replay_emits_no_deltas(t: &dyn Transport) {
    let store = Store::new();
    let journal = store.open();
    let counter = Arc::new(DeltaCounter::default());
    controller(&journal, echo(t).await, random())
        .with_observer(counter.clone())
        .with_stream_deltas(true)
        .exec(exec("hi", Some(0)))
        .await
        .unwrap();
    let all = records(&journal, SESSION).await;
    let deltas = counter.deltas();
    assert!(!deltas.is_empty());
    assert!(
        deltas
            .iter()
            .all(|d| d.execution_id == all[0].event.execution_id)
    );
    let replay_counter = Arc::new(DeltaCounter::default());
    let model = random();
    controller(&journal, echo(t).await, model.clone())
        .with_observer(replay_counter.clone())
        .with_stream_deltas(true)
        .replay()
        .await
        .unwrap();
    assert!(replay_counter.deltas().is_empty());
    assert_eq!(model.calls(), 0);
}

/// 14 — a failing harness surfaces its error; the turn ends with ERROR, not END.
pub async fn failed_harness_surfaces_error(t: &dyn Transport) {
    let store = Store::new();
    let journal = store.open();
    let harness = FailingHarness {
        message: "boom".into(),
    };
    let err = controller(&journal, t.attach(Arc::new(harness)).await, random())
        .exec(exec("x", Some(0)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
    let all = records(&journal, SESSION).await;
    assert_eq!(all.last().map(|r| r.event.kind), Some(EventKind::Error));
    assert_verifies(&journal, SESSION).await;
}

/// 16 — a controller-mediated tool runs once live and never on replay.
pub async fn controller_mediated_tool_replay(t: &dyn Transport) {
    let store = Store::new();
    let journal = store.open();
    let tool = Arc::new(IdempotentTool::default());
    controller(
        &journal,
        t.attach(Arc::new(ToolHarness::new("k1"))).await,
        random(),
    )
    .with_tools(tool.clone())
    .exec(exec("go", Some(0)))
    .await
    .unwrap();
    assert_eq!(tool.effects("k1"), 1);
    let all = records(&journal, SESSION).await;
    assert_eq!(count(&all, EventKind::ToolCall), 1);
    assert_eq!(count(&all, EventKind::ToolResult), 1);
    controller(
        &journal,
        t.attach(Arc::new(ToolHarness::new("k1"))).await,
        random(),
    )
    .with_tools(tool.clone())
    .replay()
    .await
    .unwrap();
    assert_eq!(tool.attempts(), 1);
    assert_verifies(&journal, SESSION).await;
}

/// 17 — arguments a float64 cannot hold are refused before any effect or record.
pub async fn tool_arguments_rejected_before_effects(t: &dyn Transport) {
    let store = Store::new();
    let journal = store.open();
    let tool = Arc::new(IdempotentTool::default());
    let mut args = serde_json::Map::new();
    args.insert(
        "secret".into(),
        serde_json::json!(9_007_199_254_740_993_u64),
    );
    let call = ToolCall {
        id: "call-1".into(),
        tool: "read".into(),
        args: Some(args),
        mediation: Mediation::ControllerMediated,
        idempotency_key: "key-1".into(),
    };
    let result = controller(
        &journal,
        t.attach(Arc::new(ToolHarness::with_call(call))).await,
        random(),
    )
    .with_tools(tool.clone())
    .exec(exec("go", Some(0)))
    .await;
    assert!(result.is_err_and(|e| !matches!(e, ControllerError::Parked(_))));
    assert_eq!(tool.attempts(), 0);
    let all = records(&journal, SESSION).await;
    for kind in [EventKind::ToolCall, EventKind::ToolResult, EventKind::End] {
        assert_eq!(count(&all, kind), 0, "{}", kind.as_str());
    }
}

/// Fails every call, leaving a recorded intent without a result.
#[derive(Debug, Default)]
struct InterruptedTool;

#[async_trait::async_trait]
impl ToolExecutor for InterruptedTool {
    async fn execute(
        &self,
        _session: &str,
        _call: &ToolCall,
    ) -> agentsessions_api::Result<agentsessions_api::ToolResult> {
        Err(agentsessions_api::ApiError::status(
            agentsessions_api::StatusCode::Unavailable,
            "interrupted",
        ))
    }
}

fn counted_call(count: i64) -> ToolCall {
    let mut args = serde_json::Map::new();
    args.insert("count".into(), serde_json::json!(count));
    ToolCall {
        id: "call-1".into(),
        tool: "count".into(),
        args: Some(args),
        mediation: Mediation::ControllerMediated,
        idempotency_key: "key-1".into(),
    }
}

/// 22 — a harness that changes a recorded tool request fails replay and recovery; nothing runs.
pub async fn tool_request_changes_fail_replay_and_recovery(t: &dyn Transport) {
    // Replay: recorded {count: 2}, replayed {count: 3}.
    let store = Store::new();
    let journal = store.open();
    let tool = Arc::new(IdempotentTool::default());
    controller(
        &journal,
        t.attach(Arc::new(ToolHarness::with_call(counted_call(2))))
            .await,
        random(),
    )
    .with_tools(tool.clone())
    .exec(exec("go", Some(0)))
    .await
    .unwrap();
    let err = controller(
        &journal,
        t.attach(Arc::new(ToolHarness::with_call(counted_call(3))))
            .await,
        random(),
    )
    .with_tools(tool.clone())
    .replay()
    .await
    .unwrap_err();
    assert!(err.to_string().contains("diverged"), "{err}");
    assert_eq!(tool.attempts(), 1);

    // Recovery: the recorded intent failed live; a changed request is never re-driven.
    let store = Store::new();
    let journal = store.open();
    controller(
        &journal,
        t.attach(Arc::new(ToolHarness::with_call(counted_call(2))))
            .await,
        random(),
    )
    .with_tools(Arc::new(InterruptedTool))
    .exec(exec("go", Some(0)))
    .await
    .unwrap_err();
    let tool = Arc::new(IdempotentTool::default());
    let err = controller(
        &journal,
        t.attach(Arc::new(ToolHarness::with_call(counted_call(3))))
            .await,
        random(),
    )
    .with_tools(tool.clone())
    .resume()
    .await
    .unwrap_err();
    assert!(err.to_string().contains("diverged"), "{err}");
    assert_eq!(tool.attempts(), 0);
}

/// 7 — language-neutral integrity: an independent verifier in another language (Python, standard
/// library only, `tools/verify_chain.py`) matches the published golden vectors and recomputes
/// every hash and link of a journal this implementation wrote; a one-byte edit makes it fail.
/// Skipped (with a note) when `python3` is not installed.
pub async fn integrity_cross_language(t: &dyn Transport) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let verifier = root.join("tools/verify_chain.py");
    let python = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new("python3")
            .arg(&verifier)
            .args(args)
            .output()
    };
    let Ok(probe) = std::process::Command::new("python3")
        .arg("--version")
        .output()
    else {
        eprintln!("skipped: python3 is not installed");
        return;
    };
    assert!(probe.status.success());

    let golden = root.join("testdata/golden/content_hash_vectors.json");
    let out = python(&["golden".as_ref(), golden.as_os_str()]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.starts_with("OK:"), "{text}");

    // A journal with numbers JCS must format the ECMAScript way, non-ASCII text and keys that
    // sort differently by UTF-16 than by bytes.
    let store = Store::new();
    let journal = store.open();
    let mut args = serde_json::Map::new();
    for (key, value) in [
        ("tiny", serde_json::json!(1e-7)),
        ("huge", serde_json::json!(1e21)),
        ("tenth", serde_json::json!(0.1)),
        ("whole", serde_json::json!(42)),
        ("\u{e9}t\u{e9}", serde_json::json!("caf\u{e9} \u{1f600}")),
        ("\u{ff61}", serde_json::json!(-0.000_001)),
        ("\u{1f600}", serde_json::json!([1.5, "x", null, true])),
    ] {
        args.insert(key.into(), value);
    }
    let call = ToolCall {
        id: "t1".into(),
        tool: "charge".into(),
        args: Some(args),
        mediation: Mediation::ControllerMediated,
        idempotency_key: "k1".into(),
    };
    controller(
        &journal,
        t.attach(Arc::new(ToolHarness::with_call(call))).await,
        random(),
    )
    .with_tools(Arc::new(IdempotentTool::default()))
    .exec(exec("go \u{2014} \u{fc}ber", Some(0)))
    .await
    .unwrap();
    let head = journal.head(SESSION).await.unwrap();
    controller(&journal, echo(t).await, random())
        .exec(exec("second \"turn\"", Some(head)))
        .await
        .unwrap();
    let all = records(&journal, SESSION).await;
    let bundle = agentsessions_journal::audit::audit_json(SESSION, &all).unwrap();
    let path = store.path().with_extension("audit.json");
    std::fs::write(&path, &bundle).unwrap();
    let out = python(&["audit".as_ref(), path.as_os_str()]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.starts_with("OK:"), "{text}");
    assert!(text.contains(&format!("{} records", all.len())), "{text}");

    // The verifier is not a rubber stamp: change one character of the input text.
    let tampered = bundle.replacen("second", "sekond", 1);
    assert_ne!(tampered, bundle);
    std::fs::write(&path, tampered).unwrap();
    let out = python(&["audit".as_ref(), path.as_os_str()]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("content hash mismatch"), "{text}");
}

/// 23 — EXECUTION_START is the source of truth for a turn's Start (config bytes, cursor,
/// inputs): a recovering host after a restart hands the interrupted turn exactly its live Start
/// without calling the model again; replay hands every turn its live Start with zero model
/// calls and an unchanged journal; fork children at a turn boundary and at the head replay the
/// inherited Starts; every chain verifies.
pub async fn execution_start_reopen_resume_replay_and_fork(t: &dyn Transport) {
    let store = Store::new();
    let model = random();
    let turn0_config = vec![0x00, 0xff, 0x20, 0x0a, 0x09];
    let turn1_config = b"  {\"config\":2} \r\n".to_vec();
    let live = Arc::new(StartCapture::new(false));
    let breaking = Arc::new(StartCapture::new(true));
    let turn0_head = {
        let journal = store.open();
        controller(&journal, t.attach(live.clone()).await, model.clone())
            .exec(ExecRequest {
                inputs: vec![user("same")],
                expected_last_seq: Some(0),
                config: turn0_config.clone(),
                resume_from_seq: 41,
                ..ExecRequest::default()
            })
            .await
            .unwrap();
        let head = journal.head(SESSION).await.unwrap();
        controller(&journal, t.attach(breaking.clone()).await, model.clone())
            .exec(ExecRequest {
                inputs: vec![user("same")],
                expected_last_seq: Some(head),
                config: turn1_config.clone(),
                resume_from_seq: 42,
                ..ExecRequest::default()
            })
            .await
            .unwrap_err();
        head
    };
    assert_eq!(model.calls(), 2);
    let live_starts = [live.seen(), breaking.seen()].concat();
    assert_eq!(live_starts.len(), 2);
    assert_eq!(live_starts[0].config, turn0_config);
    assert_eq!(live_starts[1].config, turn1_config);
    assert_eq!((live_starts[0].cursor, live_starts[1].cursor), (41, 42));

    // Restart: a new journal connection, a new controller, a fresh model.
    let journal = store.open();
    let recovering = Arc::new(StartCapture::new(false));
    let fresh_model = random();
    let outcome = controller(
        &journal,
        t.attach(recovering.clone()).await,
        fresh_model.clone(),
    )
    .resume()
    .await
    .unwrap();
    assert!(outcome.resumed);
    assert_eq!(recovering.seen(), vec![live_starts[1].clone()]);
    assert_eq!(fresh_model.calls(), 0);
    assert_eq!(model.calls(), 2);

    let before = records(&journal, SESSION).await;
    let replaying = Arc::new(StartCapture::new(false));
    let replay_model = random();
    let report = controller(
        &journal,
        t.attach(replaying.clone()).await,
        replay_model.clone(),
    )
    .replay()
    .await
    .unwrap();
    let recorded = outputs(&before);
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    assert_eq!(recorded[1], "continued");
    assert_eq!(recorded[3], "continued");
    assert_eq!(report.outputs, recorded);
    assert_eq!(replaying.seen(), live_starts);
    assert_eq!(replay_model.calls(), 0);
    assert_eq!(records(&journal, SESSION).await, before);

    // Fork children at the end of turn 0 and at the head replay their inherited Starts.
    let head = journal.head(SESSION).await.unwrap();
    for (child, at, starts) in [
        ("child-turn0", turn0_head, &live_starts[..1]),
        ("child-head", head, &live_starts[..]),
    ] {
        fork(&journal, SESSION, at, child).await;
        let capture = Arc::new(StartCapture::new(false));
        let child_model = random();
        Controller::new(
            Arc::clone(&journal),
            t.attach(capture.clone()).await,
            child_model.clone(),
            child,
        )
        .replay()
        .await
        .unwrap();
        assert_eq!(capture.seen(), starts, "{child}");
        assert_eq!(child_model.calls(), 0, "{child}");
        assert_verifies(&journal, child).await;
    }
    assert_verifies(&journal, SESSION).await;
}

/// 26 — the approval gate end to end: a REQUIRES_APPROVAL call parks the turn with a durable
/// APPROVAL_REQUEST and no effect; a committed decision lets a fresh host resume it; the
/// harness receives a receipt naming the request and decision seqs with the code of the
/// outcome (approved, denied, approved but the executor failed); the effect runs at most once
/// and only when approved; replay serves the receipt and runs nothing.
pub async fn approval_park_decision_receipt_replay(t: &dyn Transport) {
    for (shape, approved, executor_fails) in [
        ("approved", true, false),
        ("denied", false, false),
        ("approved, executor fails", true, true),
    ] {
        let store = Store::new();
        let journal = store.open();
        let tool = Arc::new(IdempotentTool::default());
        let executor: Arc<dyn ToolExecutor> = if executor_fails {
            Arc::new(InterruptedTool)
        } else {
            tool.clone()
        };
        let first = Arc::new(ApprovalHarness::default());
        let err = controller(&journal, t.attach(first.clone()).await, random())
            .with_tools(Arc::clone(&executor))
            .exec(exec("pay", Some(0)))
            .await
            .unwrap_err();
        let ControllerError::Parked(park) = err else {
            panic!("{shape}: expected a park, got {err}")
        };
        let parked = records(&journal, SESSION).await;
        let request = parked
            .iter()
            .find(|r| r.event.kind == EventKind::ApprovalRequest)
            .unwrap();
        assert_eq!(request.seq, park.request_seq, "{shape}");
        assert_eq!(request.event.execution_id, park.execution_id, "{shape}");
        assert_eq!(park.tool_call_id, "call", "{shape}");
        for kind in [
            EventKind::End,
            EventKind::Error,
            EventKind::ToolResult,
            EventKind::Parked,
        ] {
            assert_eq!(count(&parked, kind), 0, "{shape}: {}", kind.as_str());
        }
        assert_eq!(tool.attempts(), 0, "{shape}");
        assert!(first.receipts().is_empty(), "{shape}");

        let decision = agentsessions_api::ApprovalDecision {
            execution_id: park.execution_id.clone(),
            tool_call_id: park.tool_call_id.clone(),
            request_seq: park.request_seq,
            approved,
            reason: "reviewed".into(),
            identity: agentsessions_api::IdentityRef::default(),
        };
        let committed = controller(&journal, echo(t).await, random())
            .approve(&decision, agentsessions_api::Timestamp::now())
            .await
            .unwrap();
        assert_eq!(committed.event.kind, EventKind::ApprovalResult, "{shape}");

        // A fresh host (the decision minted a new fence; the resumer takes the newest).
        let fence = journal.session_info(SESSION).await.unwrap().fence;
        let resumed = Arc::new(ApprovalHarness::default());
        let outcome = controller(&journal, t.attach(resumed.clone()).await, random())
            .with_tools(Arc::clone(&executor))
            .with_fence(fence)
            .resume()
            .await
            .unwrap();
        assert!(outcome.resumed, "{shape}");
        let receipts = resumed.receipts();
        assert_eq!(receipts.len(), 1, "{shape}");
        let receipt = &receipts[0];
        assert_eq!(receipt.id, "call", "{shape}");
        assert_eq!(receipt.approval_request_seq, park.request_seq, "{shape}");
        assert_eq!(receipt.approval_decision_seq, committed.seq, "{shape}");
        let (code, is_error) = match (approved, executor_fails) {
            (false, _) => (agentsessions_api::ToolResultCode::ApprovalDenied, true),
            (true, true) => (agentsessions_api::ToolResultCode::ExecutorError, true),
            (true, false) => (agentsessions_api::ToolResultCode::Unspecified, false),
        };
        assert_eq!(
            (receipt.code, receipt.is_error),
            (code, is_error),
            "{shape}"
        );
        let effects = u64::from(approved && !executor_fails);
        assert_eq!(tool.effects("k"), effects, "{shape}");

        let before = records(&journal, SESSION).await;
        assert_eq!(count(&before, EventKind::ToolResult), 1, "{shape}");
        let replaying = Arc::new(ApprovalHarness::default());
        let report = controller(&journal, t.attach(replaying.clone()).await, random())
            .with_tools(Arc::clone(&executor))
            .replay()
            .await
            .unwrap();
        assert_eq!(report.outputs, ["continued"], "{shape}");
        let replayed = replaying.receipts();
        assert_eq!(replayed.len(), 1, "{shape}");
        assert_eq!(
            (
                replayed[0].approval_request_seq,
                replayed[0].approval_decision_seq,
                replayed[0].code
            ),
            (
                receipt.approval_request_seq,
                receipt.approval_decision_seq,
                receipt.code
            ),
            "{shape}"
        );
        assert_eq!(records(&journal, SESSION).await, before, "{shape}");
        assert_eq!(tool.effects("k"), effects, "{shape}");
        assert_verifies(&journal, SESSION).await;
    }
}

/// Every check, by name, for the suite macro.
#[macro_export]
macro_rules! conformance_suite {
    ($transport:expr) => {
        $crate::conformance_suite!(@cases $transport;
            replay_reconstructs_nondeterministic_output,
            multi_turn_resume_continue,
            crash_mid_turn_redrive_at_most_once,
            crash_after_usage_does_not_duplicate_accounting,
            fork_equivalence,
            single_writer,
            integrity_cross_language,
            crash_mid_tool_call_at_most_once,
            controller_mediated_tool_requires_key,
            unmediated_tool_call_rejected,
            replay_never_reaches_the_provider,
            streaming_does_not_change_the_journal,
            replay_emits_no_deltas,
            failed_harness_surfaces_error,
            controller_mediated_tool_replay,
            tool_arguments_rejected_before_effects,
            tool_request_changes_fail_replay_and_recovery,
            execution_start_reopen_resume_replay_and_fork,
            approval_park_decision_receipt_replay,
        );
    };
    (@cases $transport:expr; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let transport = $transport;
                $crate::checks::$check(&transport).await;
            }
        )*
    };
}
