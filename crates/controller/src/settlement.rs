//! Unfinished executions and their settlement (extensions §9): which
//! execution new input would leave behind, the refusal that names the way forward, and the tool
//! results that answer the calls it left open when a host closes it without running it on (a
//! Cancel of a turn that is not running, or an Exec with `abandon_unfinished`).
//!
//! Pure over the log, like [`crate::approval`]: the controller appends what this module says.
//! The refusal is the host's rule ([`check_new_input`], applied by the placer before a turn is
//! placed); the controller itself keeps semantics §3.4, where a new execution supersedes an
//! unfinished one, unless the request abandons it.
//!
//! | open call                                   | settled with                                   |
//! |---------------------------------------------|------------------------------------------------|
//! | ordinary (mediated or in-harness)           | [`ToolResult::outcome_unknown`]                |
//! | gated, approved, no receipt                 | the same, as the gate's receipt (request and decision seqs) |
//! | gated, denied, no receipt                   | the denial receipt                             |
//! | gated, undecided (or never requested)       | [`ToolResult::not_run`], naming the request    |
//!
//! A call recorded without an id cannot be answered and is left as it is.

use std::collections::HashSet;

use agentsessions_api::{EventBody, Mediation, ToolResult};
use agentsessions_journal::LogRecord;

use crate::approval::{ApprovalGate, ApprovalScan, denial_receipt};
use crate::error::{ControllerError, Result};
use crate::log::{Execution, ExecutionLog};
use crate::view::LogView;

/// The session's last execution when it has not ended and is its own (not inherited through a
/// fork, which the child cannot run on and a new turn supersedes).
#[derive(Debug, Clone, Copy)]
pub struct Unfinished<'a> {
    /// The execution.
    pub execution: &'a Execution,
    /// Its approval gate without a receipt, when it stopped at one.
    pub gate: Option<&'a ApprovalGate>,
    scan: &'a ApprovalScan,
}

/// The unfinished execution of a log read as `log` with approval scan `scan`, if any.
pub fn unfinished<'a>(
    log: &'a ExecutionLog,
    scan: &'a ApprovalScan,
    records: &[LogRecord],
) -> Option<Unfinished<'a>> {
    let execution = log.last()?;
    if execution.completed() {
        return None;
    }
    let inherited = records
        .get(execution.first)
        .is_some_and(|first| first.seq < log.last_fork_seq);
    if inherited {
        return None;
    }
    let gate = scan
        .selected()
        .filter(|gate| gate.execution_id == execution.id && gate.blocks_new_input());
    Some(Unfinished {
        execution,
        gate,
        scan,
    })
}

/// [`unfinished`] of a kept view.
///
/// # Errors
/// [`ControllerError::InvalidExecutionLog`] for a log that does not read as executions.
pub fn unfinished_in(view: &LogView) -> Result<Option<Unfinished<'_>>> {
    Ok(unfinished(view.log()?, view.approvals()?, view.records()))
}

/// Whether new input may start a turn on `view`: not while the last execution is unfinished,
/// unless the caller abandons it (`abandon_unfinished`, which closes it first).
///
/// # Errors
/// [`ControllerError::ApprovalBlocked`] for a turn stopped at an approval,
/// [`ControllerError::UnfinishedTurn`] for any other unfinished turn; each names the way forward.
/// [`ControllerError::InvalidExecutionLog`] for a log that does not read as executions.
pub fn check_new_input(view: &LogView, abandon_unfinished: bool) -> Result<()> {
    match unfinished_in(view)? {
        Some(left) if !abandon_unfinished => Err(left.refusal()),
        _ => Ok(()),
    }
}

impl Unfinished<'_> {
    /// The refusal of new input that does not abandon this execution, naming the way forward.
    pub fn refusal(&self) -> ControllerError {
        match self.gate {
            Some(gate) => ControllerError::ApprovalBlocked {
                execution_id: gate.execution_id.clone(),
                tool_call_id: gate.call.id.clone(),
            },
            None => ControllerError::UnfinishedTurn {
                execution_id: self.execution.id.clone(),
            },
        }
    }

    /// The results that answer every call this execution left open, in the order of the calls
    /// (see the module table). `records` is the log this was read from.
    pub fn settlements(&self, records: &[LogRecord]) -> Vec<ToolResult> {
        let effects = || {
            self.execution
                .effects
                .iter()
                .filter_map(|&i| records.get(i))
                .filter_map(|record| record.event.body.as_ref())
        };
        let answered: HashSet<&str> = effects()
            .filter_map(|body| match body {
                EventBody::Result(result) => Some(result.id.as_str()),
                _ => None,
            })
            .collect();
        effects()
            .filter_map(|body| match body {
                EventBody::ToolCall(call)
                    if !call.id.is_empty() && !answered.contains(call.id.as_str()) =>
                {
                    Some(call)
                }
                _ => None,
            })
            .map(|call| {
                let gate = (call.mediation == Mediation::RequiresApproval)
                    .then(|| {
                        self.scan.gates.iter().find(|gate| {
                            gate.execution_id == self.execution.id && gate.call.id == call.id
                        })
                    })
                    .flatten();
                match gate {
                    Some(gate) => settle_gate(gate),
                    None => ToolResult::outcome_unknown(call.id.clone()),
                }
            })
            .collect()
    }
}

/// The result that settles `gate`, which has no receipt.
fn settle_gate(gate: &ApprovalGate) -> ToolResult {
    let id = gate.call.id.clone();
    match (&gate.decision, gate.result()) {
        (Some(decision), Some(result)) if result.approved => ToolResult {
            approval_request_seq: gate.request_seq,
            approval_decision_seq: decision.seq,
            ..ToolResult::outcome_unknown(id)
        },
        (Some(decision), Some(_)) => denial_receipt(&id, gate.request_seq, decision.seq),
        _ => ToolResult {
            approval_request_seq: gate.request_seq,
            ..ToolResult::not_run(id)
        },
    }
}

/// Whether `record` is a result a host wrote when it closed the record's turn (see
/// [`ToolResult::settles_closed_turn`]).
pub fn is_settlement(record: &LogRecord) -> bool {
    matches!(&record.event.body, Some(EventBody::Result(result)) if result.settles_closed_turn())
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{
        ApprovalRequest, ApprovalResult, Event, EventKind, ExecutionStart, HarnessEnd, Lifecycle,
        LifecycleKind, Message, ToolCall, ToolResultCode,
    };

    use super::*;

    fn rec(seq: i64, id: &str, kind: EventKind, body: EventBody) -> LogRecord {
        LogRecord {
            committed_at: None,
            seq,
            prev_hash: String::new(),
            hash: String::new(),
            fence: 0,
            event: Event::new(kind, body).with_execution(id.to_owned()),
        }
    }

    fn start(seq: i64, id: &str) -> Vec<LogRecord> {
        vec![
            rec(
                seq,
                id,
                EventKind::ExecutionStart,
                EventBody::ExecutionStart(ExecutionStart {
                    input_count: Some(1),
                    ..ExecutionStart::default()
                }),
            ),
            rec(
                seq + 1,
                id,
                EventKind::Input,
                EventBody::Message(Message::text_message("user", "go")),
            ),
        ]
    }

    fn call(seq: i64, id: &str, mediation: Mediation) -> LogRecord {
        rec(
            seq,
            "e",
            EventKind::ToolCall,
            EventBody::ToolCall(ToolCall {
                id: id.into(),
                tool: "charge".into(),
                mediation,
                idempotency_key: format!("k-{id}"),
                ..ToolCall::default()
            }),
        )
    }

    fn result(seq: i64, id: &str) -> LogRecord {
        rec(
            seq,
            "e",
            EventKind::ToolResult,
            EventBody::Result(ToolResult {
                id: id.into(),
                ..ToolResult::default()
            }),
        )
    }

    fn view(records: Vec<LogRecord>) -> LogView {
        LogView::new(records)
    }

    // extensions §9: a turn cut mid-call is unfinished; new input is
    // refused naming the way forward unless it abandons the turn; the open call (and only it)
    // is settled as outcome unknown.
    #[test]
    fn an_interrupted_turn_refuses_new_input_and_settles_its_open_call() {
        let mut records = start(1, "e");
        records.push(call(3, "c1", Mediation::ControllerMediated));
        records.push(result(4, "c1"));
        records.push(call(5, "c2", Mediation::ControllerMediated));
        let view = view(records);
        let err = check_new_input(&view, false).unwrap_err();
        assert!(
            matches!(&err, ControllerError::UnfinishedTurn { execution_id } if execution_id == "e")
        );
        assert!(err.to_string().contains("agentctl resume"), "{err}");
        assert!(err.to_string().contains("--abandon"), "{err}");
        check_new_input(&view, true).unwrap();
        let left = unfinished_in(&view).unwrap().unwrap();
        let settled = left.settlements(view.records());
        assert_eq!(settled, vec![ToolResult::outcome_unknown("c2")]);
        assert_eq!(settled[0].code, ToolResultCode::ExecutorError);
    }

    // An ended turn, or one inherited through a fork, is no obstacle.
    #[test]
    fn ended_and_inherited_turns_are_not_unfinished() {
        let mut ended = start(1, "e");
        ended.push(rec(
            3,
            "e",
            EventKind::End,
            EventBody::End(HarnessEnd {
                state: "COMPLETED".into(),
                error: None,
            }),
        ));
        assert!(unfinished_in(&view(ended)).unwrap().is_none());
        let mut inherited = start(1, "e");
        inherited.push(call(3, "c1", Mediation::ControllerMediated));
        inherited.push(rec(
            4,
            "",
            EventKind::Lifecycle,
            EventBody::Lifecycle(Lifecycle {
                kind: LifecycleKind::Fork,
                ..Lifecycle::default()
            }),
        ));
        check_new_input(&view(inherited), false).unwrap();
    }

    // extensions §9: each state of a gate is settled its own way; a
    // parked turn's refusal is the approval's.
    #[test]
    fn gates_are_settled_by_their_state() {
        let gated = |decided: Option<bool>| {
            let mut records = start(1, "e");
            records.push(call(3, "g", Mediation::RequiresApproval));
            records.push(rec(
                4,
                "e",
                EventKind::ApprovalRequest,
                EventBody::Approval(ApprovalRequest {
                    tool_call_id: "g".into(),
                    reason: String::new(),
                }),
            ));
            if let Some(approved) = decided {
                records.push(rec(
                    5,
                    "e",
                    EventKind::ApprovalResult,
                    EventBody::ApprovalResult(ApprovalResult {
                        tool_call_id: "g".into(),
                        approved,
                        reason: String::new(),
                        request_seq: 4,
                    }),
                ));
            }
            view(records)
        };
        let parked = gated(None);
        assert!(matches!(
            check_new_input(&parked, false),
            Err(ControllerError::ApprovalBlocked { .. })
        ));
        let settle = |view: &LogView| {
            let left = unfinished_in(view).unwrap().unwrap();
            left.settlements(view.records())
        };
        assert_eq!(
            settle(&parked),
            vec![ToolResult {
                approval_request_seq: 4,
                ..ToolResult::not_run("g")
            }]
        );
        assert_eq!(
            settle(&gated(Some(true))),
            vec![ToolResult {
                approval_request_seq: 4,
                approval_decision_seq: 5,
                ..ToolResult::outcome_unknown("g")
            }]
        );
        assert_eq!(settle(&gated(Some(false))), vec![denial_receipt("g", 4, 5)]);
        // Each settlement keeps the log valid: appended with an END, the scan accepts it.
        for view in [parked, gated(Some(true)), gated(Some(false))] {
            let mut records = view.records().to_vec();
            let mut seq = view.head();
            for settled in settle(&view) {
                seq += 1;
                records.push(rec(
                    seq,
                    "e",
                    EventKind::ToolResult,
                    EventBody::Result(settled),
                ));
            }
            records.push(rec(
                seq + 1,
                "e",
                EventKind::End,
                EventBody::End(HarnessEnd {
                    state: "CANCELED".into(),
                    error: None,
                }),
            ));
            let closed = LogView::new(records);
            closed.approvals().unwrap();
            assert!(unfinished_in(&closed).unwrap().is_none());
        }
    }
}
