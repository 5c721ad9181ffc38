//! How many durable waits a turn costs, and that nothing is shown before it is durable
//! (durable waits only where the contract needs them; semantics §3.7): on the SQLite journal an
//! echo turn waits for two WAL syncs (MODEL_CALL before the provider call, END before the answer),
//! not one per record, and the observer — the Exec stream — sees each record only once a sync
//! covers it.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentsessions_api::Delta;
use agentsessions_controller::{ExecRequest, Observer};
use agentsessions_journal::{Journal, LogRecord, MemoryJournal};
use agentsessions_sqlite::{Durability, SqliteJournal, SqliteOptions};
use agentsessions_testkit::Instrumented;
use support::*;

/// A journal whose deferred records wait (nearly) forever for a durable append to share a sync,
/// so every sync the test counts is one the turn asked for.
fn sqlite(dir: &tempfile::TempDir) -> Arc<SqliteJournal> {
    let options = SqliteOptions {
        durability: Durability::Pipelined,
        deferred_sync_delay: Duration::from_secs(60),
        ..SqliteOptions::default()
    };
    Arc::new(SqliteJournal::open_with(dir.path().join("j.db"), options).unwrap())
}

/// Notes, for each record shown, how many WAL syncs the journal had made by then.
#[derive(Debug)]
struct SyncsWhenShown {
    journal: Arc<SqliteJournal>,
    shown: Mutex<Vec<(&'static str, u64)>>,
}

impl Observer for SyncsWhenShown {
    fn record(&self, record: &LogRecord) {
        let kind = record.event.kind.as_str();
        self.shown
            .lock()
            .unwrap()
            .push((kind, self.journal.wal_syncs()));
    }

    fn delta(&self, _delta: &Delta) {}
}

fn exec(text: &str) -> ExecRequest {
    ExecRequest {
        inputs: vec![user(text)],
        ..ExecRequest::default()
    }
}

#[tokio::test]
async fn an_echo_turn_waits_for_two_syncs_and_shows_only_durable_records() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = sqlite(&dir);
    let journal: Arc<dyn Journal> = sqlite.clone();
    let observer = Arc::new(SyncsWhenShown {
        journal: Arc::clone(&sqlite),
        shown: Mutex::new(Vec::new()),
    });
    let c = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    )
    .with_observer(observer.clone());
    let before = sqlite.wal_syncs();
    let handoffs = sqlite.wal_sync_handoffs();
    c.exec(exec("hi")).await.unwrap();
    assert_eq!(sqlite.wal_syncs() - before, 2, "MODEL_CALL and END only");
    // Nothing else was writing, so the writer held the deferred batches and synced them with
    // MODEL_CALL and END where those committed, without waking its sync thread.
    assert_eq!(sqlite.wal_sync_handoffs(), handoffs, "synced on the writer");
    let shown = observer.shown.lock().unwrap().clone();
    let shown: Vec<(&str, u64)> = shown.iter().map(|&(k, n)| (k, n - before)).collect();
    assert_eq!(
        shown,
        [
            // Shown with the MODEL_CALL whose sync made them durable...
            ("EXECUTION_START", 1),
            ("INPUT", 1),
            ("MODEL_CALL", 1),
            // ...and the OUTPUT with the END.
            ("OUTPUT", 2),
            ("END", 2),
        ]
    );
    // The next turn's first read sees all of it.
    assert_eq!(journal.read("s", 1, 0).await.unwrap().len(), 5);
}

// A controller-mediated tool: its TOOL_CALL is durable before the executor runs, its
// TOOL_RESULT rides the next durable append.
#[tokio::test]
async fn a_mediated_tool_call_is_durable_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = sqlite(&dir);
    let journal: Arc<dyn Journal> = sqlite.clone();
    let tool = Arc::new(IdempotentTool::default());
    let harness = ScriptHarness::new(vec![
        Step::Tool(mediated_call("t1", "k1")),
        Step::Output("done".into()),
    ]);
    let observer = Arc::new(SyncsWhenShown {
        journal: Arc::clone(&sqlite),
        shown: Mutex::new(Vec::new()),
    });
    let c = controller(&journal, Arc::new(harness), Arc::new(CountModel::default()))
        .with_tools(tool.clone())
        .with_observer(observer.clone());
    let before = sqlite.wal_syncs();
    c.exec(exec("go")).await.unwrap();
    let shown = observer.shown.lock().unwrap().clone();
    let shown: Vec<(&str, u64)> = shown.iter().map(|&(k, n)| (k, n - before)).collect();
    assert_eq!(
        shown,
        [
            ("EXECUTION_START", 1),
            ("INPUT", 1),
            ("TOOL_CALL", 1),
            ("TOOL_RESULT", 2),
            ("OUTPUT", 2),
            ("END", 2),
        ]
    );
    assert_eq!(tool.effects("k1"), 1);
}

// A deferred append is queued, not waited for (flat cost per turn): the journal here commits each
// queued OUTPUT at once but answers only when the next durable append arrives, so a turn that
// waited for the OUTPUT's commit before appending its END would never end.
#[tokio::test]
async fn a_turn_appends_its_end_without_waiting_for_its_outputs_commit() {
    let held = Arc::new(Instrumented::new(Arc::new(MemoryJournal::new())).holding_queued_answers());
    let journal: Arc<dyn Journal> = held.clone();
    let c = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    );
    let outcome = tokio::time::timeout(Duration::from_secs(10), c.exec(exec("hi")))
        .await
        .expect("the END waited for the OUTPUT's commit")
        .unwrap();
    assert_eq!(held.queued_appends(), 1, "the OUTPUT is queued");
    let expected = ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "END"];
    assert_eq!(kinds(&outcome.records), expected);
    assert_eq!(kinds(&read(&journal).await), expected);
    assert_eq!(outcome.outputs, ["resp#1:hi"]);
}

// The same inside a run: an OUTPUT queued before a model call does not hold up the MODEL_CALL's
// durable append, which the journal here must receive before it answers the OUTPUT.
#[tokio::test]
async fn a_model_call_is_appended_without_waiting_for_the_output_before_it() {
    let held = Arc::new(Instrumented::new(Arc::new(MemoryJournal::new())).holding_queued_answers());
    let journal: Arc<dyn Journal> = held.clone();
    let harness = ScriptHarness::new(vec![
        Step::Output("first".into()),
        Step::Model("then".into()),
    ]);
    let c = controller(&journal, Arc::new(harness), Arc::new(CountModel::default()));
    let outcome = tokio::time::timeout(Duration::from_secs(10), c.exec(exec("go")))
        .await
        .expect("the MODEL_CALL waited for the OUTPUT's commit")
        .unwrap();
    assert_eq!(held.queued_appends(), 2, "both OUTPUTs are queued");
    let expected = [
        "EXECUTION_START",
        "INPUT",
        "OUTPUT",
        "MODEL_CALL",
        "OUTPUT",
        "END",
    ];
    assert_eq!(kinds(&outcome.records), expected);
    assert_eq!(kinds(&read(&journal).await), expected);
}

// A queued append the journal refuses fails the turn with that refusal, not with the conflict
// the END behind it then meets; nothing past the MODEL_CALL is written or shown.
#[tokio::test]
async fn a_refused_queued_append_fails_the_turn_with_its_own_error() {
    let refusing =
        Arc::new(Instrumented::new(Arc::new(MemoryJournal::new())).refusing_queued_appends());
    let journal: Arc<dyn Journal> = refusing.clone();
    let observer = Arc::new(Shown::default());
    let c = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(CountModel::default()),
    )
    .with_observer(observer.clone());
    let err = tokio::time::timeout(Duration::from_secs(10), c.exec(exec("hi")))
        .await
        .expect("the END waited for the OUTPUT's refusal")
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("queued append refused by the test"),
        "{err}"
    );
    assert_eq!(
        kinds(&read(&journal).await),
        ["EXECUTION_START", "INPUT", "MODEL_CALL"]
    );
    assert_eq!(
        observer.kinds.lock().unwrap().clone(),
        ["EXECUTION_START", "INPUT", "MODEL_CALL"]
    );
}

/// The kinds of the records shown, in order.
#[derive(Debug, Default)]
struct Shown {
    kinds: Mutex<Vec<&'static str>>,
}

impl Observer for Shown {
    fn record(&self, record: &LogRecord) {
        self.kinds.lock().unwrap().push(record.event.kind.as_str());
    }

    fn delta(&self, _delta: &Delta) {}
}
