#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]
//! Unfinished turns through the placer (extensions §9), on both
//! journals: new input is refused until the turn is resumed, decided, cancelled or abandoned; a
//! decision this host cannot carry out is refused before anything is journaled; Cancel closes a
//! parked or interrupted turn that runs nowhere.

mod support;

use std::sync::Arc;

use agentsessions_api::{
    ApprovalDecision, ApprovalRequest, Event, EventBody, EventKind, ExecutionStart, Mediation,
    Message, ToolCall, ToolResult,
};
use agentsessions_controller::{ControllerError, ExecRequest, ToolExecutor};
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _};
use agentsessions_journal::{Journal, LogRecord};
use agentsessions_placement::{ExecCall, PlacementError};
use async_trait::async_trait;
use support::{InMemoryTestRuntime, journals, placer, session};

/// An executor that runs the tools of one source, `fixture__…`, and nothing else.
#[derive(Debug)]
struct FixtureTools;

#[async_trait]
impl ToolExecutor for FixtureTools {
    async fn execute(
        &self,
        _session: &str,
        call: &ToolCall,
    ) -> agentsessions_api::Result<ToolResult> {
        Ok(ToolResult {
            id: call.id.clone(),
            ..ToolResult::default()
        })
    }

    fn runs(&self, tool: &str) -> bool {
        tool.starts_with("fixture__")
    }
}

fn turn(uid: &str, abandon: bool) -> ExecCall {
    ExecCall {
        session: uid.to_owned(),
        request: ExecRequest {
            inputs: vec![Message::text_message("user", "next")],
            abandon_unfinished: abandon,
            ..ExecRequest::default()
        },
        ..ExecCall::default()
    }
}

fn call(tool: &str, mediation: Mediation) -> Event {
    Event::new(
        EventKind::ToolCall,
        EventBody::ToolCall(ToolCall {
            id: "c1".into(),
            tool: tool.into(),
            mediation,
            idempotency_key: "k1".into(),
            ..ToolCall::default()
        }),
    )
    .with_execution("e1".to_owned())
}

/// Writes a turn of session `uid` on harness `harness` that stopped after `effects` (no END),
/// as a host that went away leaves it.
async fn stopped_turn(journal: &Arc<dyn Journal>, uid: &str, harness: &str, effects: Vec<Event>) {
    let mut events = vec![
        Event::new(
            EventKind::ExecutionStart,
            EventBody::ExecutionStart(ExecutionStart {
                input_count: Some(1),
                harness: harness.to_owned(),
                ..ExecutionStart::default()
            }),
        )
        .with_execution("e1".to_owned()),
        Event::new(
            EventKind::Input,
            EventBody::Message(Message::text_message("user", "go")),
        )
        .with_execution("e1".to_owned()),
    ];
    events.extend(effects);
    let fence = journal.new_fence(uid).await.unwrap();
    journal
        .append_records(AppendRequest::new(uid, 0, FenceUse::Hold(fence), events))
        .await
        .unwrap();
}

/// A turn parked at the approval of a call to `tool` (the request at seq 4).
async fn parked_turn(journal: &Arc<dyn Journal>, uid: &str, harness: &str, tool: &str) {
    let request = Event::new(
        EventKind::ApprovalRequest,
        EventBody::Approval(ApprovalRequest {
            tool_call_id: "c1".into(),
            reason: String::new(),
        }),
    )
    .with_execution("e1".to_owned());
    stopped_turn(
        journal,
        uid,
        harness,
        vec![call(tool, Mediation::RequiresApproval), request],
    )
    .await;
}

fn decision(approved: bool) -> ApprovalDecision {
    ApprovalDecision {
        execution_id: "e1".into(),
        tool_call_id: "c1".into(),
        request_seq: 4,
        approved,
        ..ApprovalDecision::default()
    }
}

fn kinds(records: &[LogRecord]) -> Vec<&'static str> {
    records.iter().map(|r| r.event.kind.as_str()).collect()
}

fn ended(records: &[LogRecord]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match &r.event.body {
            Some(EventBody::End(end)) => Some(end.state.clone()),
            _ => None,
        })
        .collect()
}

// extensions §9: an interrupted turn refuses new input (nothing placed,
// nothing journaled) and names resume and abandon; the input that abandons it closes it and runs;
// a resume then has nothing to do.
#[tokio::test]
async fn new_input_on_an_interrupted_turn_is_refused_until_abandoned() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        stopped_turn(
            &journal,
            "s",
            "probe",
            vec![call("fixture__count", Mediation::ControllerMediated)],
        )
        .await;
        let err = placer.exec(turn("s", false)).await.unwrap_err();
        assert!(
            matches!(
                &err,
                PlacementError::Controller(ControllerError::UnfinishedTurn { execution_id })
                    if execution_id == "e1"
            ),
            "{err}"
        );
        assert!(err.to_string().contains("agentctl resume"), "{err}");
        assert_eq!(journal.head("s").await.unwrap(), 3, "nothing journaled");
        assert_eq!(runtime.counts().0, 0, "nothing placed");

        placer.exec(turn("s", true)).await.unwrap();
        let records = journal.read("s", 1, 0).await.unwrap();
        assert_eq!(
            kinds(&records[3..6]),
            ["TOOL_RESULT", "LIFECYCLE", "END"],
            "closed first"
        );
        assert_eq!(ended(&records), ["CANCELED", "COMPLETED"]);
        let outcome = placer
            .resume(agentsessions_placement::ResumeCall {
                session: "s".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(!outcome.resumed);
    }
}

// extensions §9: approving on a host without a tool executor, or whose
// executor does not run the tool, or that does not serve the turn's harness, is refused naming
// what is missing, and nothing is journaled. A denial needs the harness only.
#[tokio::test]
async fn a_decision_this_host_cannot_carry_out_is_refused_up_front() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let bare = placer(Arc::clone(&journal), &runtime);
        let tooled = placer(Arc::clone(&journal), &runtime).with_tools(Arc::new(FixtureTools));
        session(&journal, "s").await;
        parked_turn(&journal, "s", "probe", "fixture__count").await;
        let not_carried = |result: Result<LogRecord, PlacementError>, missing: &str| {
            let err = result.unwrap_err();
            assert!(
                matches!(&err, PlacementError::DecisionNotCarried { missing: m, .. } if m.contains(missing)),
                "{err}"
            );
        };
        not_carried(bare.approve("s", &decision(true)).await, "no tool executor");
        assert_eq!(journal.head("s").await.unwrap(), 4, "nothing journaled");
        // A tool no source here offers.
        session(&journal, "t").await;
        parked_turn(&journal, "t", "probe", "elsewhere__charge").await;
        not_carried(
            tooled.approve("t", &decision(true)).await,
            "elsewhere__charge",
        );
        // A harness not served here: neither approve nor deny.
        session(&journal, "u").await;
        parked_turn(&journal, "u", "gone", "fixture__count").await;
        not_carried(tooled.approve("u", &decision(true)).await, "\"gone\"");
        not_carried(tooled.approve("u", &decision(false)).await, "\"gone\"");
        assert_eq!(journal.head("u").await.unwrap(), 4);
        // Where it can be carried out, it is recorded; a denial needs no tool executor.
        let approved = tooled.approve("s", &decision(true)).await.unwrap();
        assert_eq!(approved.event.kind, EventKind::ApprovalResult);
        let denied = bare.approve("t", &decision(false)).await.unwrap();
        assert_eq!(denied.event.kind, EventKind::ApprovalResult);
    }
}

// extensions §9: Cancel ends a parked turn and an interrupted one that
// run nowhere: open calls settled, CANCEL, END CANCELED; then nothing is left to cancel, and new
// input runs.
#[tokio::test]
async fn cancel_closes_parked_and_interrupted_turns() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "parked").await;
        parked_turn(&journal, "parked", "probe", "fixture__count").await;
        session(&journal, "cut").await;
        stopped_turn(
            &journal,
            "cut",
            "probe",
            vec![call("fixture__count", Mediation::ControllerMediated)],
        )
        .await;
        for uid in ["parked", "cut"] {
            // Another execution id is not this turn.
            assert!(matches!(
                placer.cancel(uid, "e9", "").await,
                Err(PlacementError::NothingToCancel { .. })
            ));
            assert_eq!(placer.cancel(uid, "", "stop").await.unwrap(), "e1");
            let records = journal.read(uid, 1, 0).await.unwrap();
            let tail = &records[records.len() - 3..];
            assert_eq!(kinds(tail), ["TOOL_RESULT", "LIFECYCLE", "END"], "{uid}");
            let Some(EventBody::Result(settled)) = &tail[0].event.body else {
                panic!("no settlement")
            };
            assert!(settled.settles_closed_turn(), "{uid}: {settled:?}");
            assert_eq!(ended(&records), ["CANCELED"]);
            assert!(matches!(
                placer.cancel(uid, "", "again").await,
                Err(PlacementError::NothingToCancel { .. })
            ));
            placer.exec(turn(uid, false)).await.unwrap();
        }
    }
}
