//! The nine v0.1.2 reference journals load, replay and resume as semantics §3.6 says.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use agentsessions_api::EventKind;
use agentsessions_controller::{Controller, ControllerError, ExecRequest};
use agentsessions_journal::{Journal, LogRecord, MemoryJournal, export, verify_records};
use support::*;

const SESSION: &str = "v012-session";

async fn load(name: &str) -> (Arc<dyn Journal>, Vec<LogRecord>) {
    let path = format!(
        "{}/../../testdata/reference-v0.1.2/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let imported = export::import_reference_json(&text).unwrap();
    let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
    export::load_records(journal.as_ref(), SESSION, &imported.records)
        .await
        .unwrap();
    (journal, imported.records)
}

fn echo(
    journal: &Arc<dyn Journal>,
    harness: &Arc<EchoHarness>,
    model: &Arc<EchoModel>,
) -> Controller {
    let fence = 100;
    Controller::new(Arc::clone(journal), harness.clone(), model.clone(), SESSION).with_fence(fence)
}

async fn all(journal: &Arc<dyn Journal>) -> Vec<LogRecord> {
    journal.read(SESSION, 1, 0).await.unwrap()
}

fn fresh() -> (Arc<EchoHarness>, Arc<EchoModel>) {
    (
        Arc::new(EchoHarness::default()),
        Arc::new(EchoModel::default()),
    )
}

// (e) completed: resume is a no-op; replay runs once with a legacy id and the whole log as history.
#[tokio::test]
async fn completed() {
    let (journal, original) = load("completed").await;
    let (harness, model) = fresh();
    let c = echo(&journal, &harness, &model);
    assert!(!c.resume().await.unwrap().resumed);
    let report = c.replay().await.unwrap();
    assert_eq!(report.outputs, ["echo:hello"]);
    assert_eq!(model.calls(), 0);
    let starts = harness.starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 1);
    let start = &starts[0];
    assert!(start.execution_id.starts_with("legacy-") && start.execution_id.len() == 71);
    assert!(start.config.is_empty());
    assert_eq!(start.resume_from_seq, 0);
    assert_eq!(start.history.len(), 4);
    assert_eq!(start.inputs.len(), 1);
    assert_eq!(start.inputs[0].text(), "hello");
    assert_eq!(all(&journal).await, original, "journal unchanged");
}

async fn recovers(name: &str, model_calls: u64) {
    let (journal, original) = load(name).await;
    let (harness, model) = fresh();
    let c = echo(&journal, &harness, &model);
    let outcome = c.resume().await.unwrap();
    assert!(outcome.resumed, "{name}");
    assert_eq!(model.calls(), model_calls, "{name}");
    let start = harness.starts.lock().unwrap()[0].clone();
    assert!(start.execution_id.starts_with("legacy-"));
    assert!(start.history.is_empty());
    let records = all(&journal).await;
    assert_eq!(
        records[..original.len()],
        original[..],
        "old prefix untouched"
    );
    assert!(
        records[original.len()..]
            .iter()
            .all(|r| r.event.execution_id.is_empty()),
        "recovered records carry no execution id"
    );
    assert_eq!(records.last().unwrap().event.kind, EventKind::End);
    verify_records(&records).unwrap();
    assert!(
        !c.resume().await.unwrap().resumed,
        "second resume is a no-op"
    );
    assert_eq!(c.replay().await.unwrap().outputs, ["echo:hello"]);
    // A modern turn after recovery gets a 16-hex id; the mixed log replays without a model.
    c.exec(ExecRequest {
        inputs: vec![user("new")],
        ..ExecRequest::default()
    })
    .await
    .unwrap();
    let modern = harness.starts.lock().unwrap().last().cloned().unwrap();
    assert_eq!(modern.execution_id.len(), 16);
    assert_eq!(modern.history.len(), records.len());
    let calls = model.calls();
    let report = c.replay().await.unwrap();
    assert_eq!(report.outputs, ["echo:hello", "echo:new"]);
    assert_eq!(model.calls(), calls);
    verify_records(&all(&journal).await).unwrap();
}

// (e) crashed-input: the turn runs live once.
#[tokio::test]
async fn crashed_input() {
    recovers("crashed-input", 1).await;
}

// (e) crashed-output: everything is recorded but END; no model call.
#[tokio::test]
async fn crashed_output() {
    recovers("crashed-output", 0).await;
}

// (e) crashed-model: the completion was never recorded; a legacy journal never re-calls.
#[tokio::test]
async fn crashed_model() {
    let (journal, original) = load("crashed-model").await;
    let (harness, model) = fresh();
    let c = echo(&journal, &harness, &model);
    let err = c.replay().await.unwrap_err();
    assert!(
        err.to_string().contains("expected a recorded completion"),
        "{err}"
    );
    let err = c.resume().await.unwrap_err();
    assert!(
        err.to_string().contains("recorded completion missing"),
        "{err}"
    );
    assert_eq!(model.calls(), 0);
    let records = all(&journal).await;
    assert_eq!(records[..original.len()], original[..]);
    let tail = &records[original.len()..];
    assert_eq!(tail.len(), 1);
    assert_eq!(tail[0].event.kind, EventKind::Error);
    assert!(
        tail[0].event.execution_id.is_empty(),
        "legacy ERROR is id-less"
    );
}

// (e) multi-turn: the historical limitation — whole-log replay diverges on the first hash.
#[tokio::test]
async fn multi_turn() {
    let (journal, _) = load("multi-turn").await;
    let (harness, model) = fresh();
    let c = echo(&journal, &harness, &model);
    let err = c.replay().await.unwrap_err();
    assert!(
        matches!(err, ControllerError::ReplayDiverged(ref m) if m.contains("model input hash mismatch")),
        "{err}"
    );
    assert!(!c.resume().await.unwrap().resumed);
    assert_eq!(model.calls(), 0);
}

// (e) multi-turn-crashed-output: resume uses only the last INPUT, history is the first turn.
#[tokio::test]
async fn multi_turn_crashed_output() {
    let (journal, _) = load("multi-turn-crashed-output").await;
    let (harness, model) = fresh();
    let c = echo(&journal, &harness, &model);
    assert!(c.resume().await.unwrap().resumed);
    assert_eq!(model.calls(), 0);
    let start = harness.starts.lock().unwrap()[0].clone();
    assert_eq!(start.inputs.len(), 1);
    assert_eq!(start.inputs[0].text(), "second");
    assert_eq!(start.history.len(), 4);
    verify_records(&all(&journal).await).unwrap();
}

async fn upgraded(name: &str, resumes: bool, outputs: &[&str]) {
    let (journal, original) = load(name).await;
    let (crashed, _) = load("crashed-output").await;
    assert_eq!(original[..3], all(&crashed).await[..]);
    let (harness, model) = fresh();
    let c = echo(&journal, &harness, &model);
    let outcome = c.resume().await.unwrap();
    assert_eq!(outcome.resumed, resumes, "{name}");
    if resumes {
        let start = harness.starts.lock().unwrap()[0].clone();
        assert_eq!(start.execution_id.len(), 16);
        assert_eq!(start.history.len(), 4);
    }
    let report = c.replay().await.unwrap();
    assert_eq!(report.outputs, outputs, "{name}");
    assert_eq!(model.calls(), 0);
    verify_records(&all(&journal).await).unwrap();
}

// (e) upgraded-resume: the legacy tail was finished by a newer binary.
#[tokio::test]
async fn upgraded_resume() {
    upgraded("upgraded-resume", false, &["echo:hello"]).await;
}

// (e) mixed-completed: a legacy prefix and a finished modern turn.
#[tokio::test]
async fn mixed_completed() {
    upgraded("mixed-completed", false, &["echo:hello", "echo:new"]).await;
}

// (e) mixed-interrupted: the modern turn is re-driven from its record.
#[tokio::test]
async fn mixed_interrupted() {
    upgraded("mixed-interrupted", true, &["echo:hello", "echo:new"]).await;
}

// semantics §3.6: a legacy resume without a session uid fails and touches nothing.
#[tokio::test]
async fn legacy_resume_needs_a_session_uid() {
    let (journal, original) = load("crashed-output").await;
    let (harness, model) = fresh();
    // The journal key is the session; a controller for another (empty) key sees an empty log.
    let c = Controller::new(Arc::clone(&journal), harness, model, "");
    assert!(matches!(
        c.replay().await.unwrap_err(),
        ControllerError::MissingSessionUid
    ));
    assert_eq!(all(&journal).await, original);
}

// semantics §2.4 step 2 (newest rule): a new turn may supersede an unfinished legacy tail; the
// tail is kept as written.
#[tokio::test]
async fn new_turn_supersedes_an_unfinished_legacy_tail() {
    let (journal, original) = load("crashed-output").await;
    let (harness, model) = fresh();
    let c = echo(&journal, &harness, &model);
    c.exec(ExecRequest {
        inputs: vec![user("new")],
        ..ExecRequest::default()
    })
    .await
    .unwrap();
    let records = all(&journal).await;
    assert_eq!(records[..3], original[..]);
    assert_eq!(c.replay().await.unwrap().outputs, ["echo:new"]);
    assert!(!c.resume().await.unwrap().resumed);
}
