//! Approval state derived from the journal alone (semantics §5.3), the receipt rules of semantics
//! §5.5, and the pure decisions the controller takes from that state: what a resume does at an
//! open approval gate, and whether a decision may be recorded.

use std::collections::{HashMap, HashSet};

use agentsessions_api::{
    ApprovalDecision, ApprovalRef, ApprovalResult, EventBody, EventKind, LifecycleKind, Mediation,
    Part, TextPart, ToolCall, ToolResult, ToolResultCode,
};
use agentsessions_journal::LogRecord;

use crate::error::{ControllerError, Result};

/// The sentence a denial receipt carries.
pub const DENIAL_MESSAGE: &str = "Tool execution denied by approval decision.";

/// An approval gate: one REQUIRES_APPROVAL tool call and what the journal says about it (its
/// APPROVAL_REQUEST, APPROVAL_RESULT and receipt TOOL_RESULT). Not to be confused with an
/// authorization check: this gate is opened by the harness and closed by a human decision.
#[derive(Debug, Clone, Default)]
pub struct ApprovalGate {
    /// The execution the call belongs to.
    pub execution_id: String,
    /// The gated call as recorded.
    pub call: ToolCall,
    /// Seq of its TOOL_CALL.
    pub call_seq: i64,
    /// Seq of its APPROVAL_REQUEST, 0 when not yet written.
    pub request_seq: i64,
    /// The APPROVAL_RESULT record, when decided.
    pub decision: Option<LogRecord>,
    /// The receipt TOOL_RESULT record, when written.
    pub receipt: Option<LogRecord>,
    /// True when the call was recorded before the latest FORK marker.
    pub inherited: bool,
    /// True when the call's execution has an END.
    pub completed: bool,
}

impl ApprovalGate {
    /// The decision body, when decided.
    pub fn result(&self) -> Option<&ApprovalResult> {
        match self.decision.as_ref().and_then(|r| r.event.body.as_ref()) {
            Some(EventBody::ApprovalResult(result)) => Some(result),
            _ => None,
        }
    }

    /// The park reference of this gate.
    pub fn park_ref(&self) -> ApprovalRef {
        ApprovalRef {
            execution_id: self.execution_id.clone(),
            tool_call_id: self.call.id.clone(),
            request_seq: self.request_seq,
        }
    }

    /// An owned gate without a receipt blocks new input (semantics §5.3).
    pub fn blocks_new_input(&self) -> bool {
        !self.inherited && self.receipt.is_none() && !self.completed
    }

    /// Whether the Session projection shows this gate as awaiting a decision (semantics §5.4).
    pub fn is_pending(&self) -> bool {
        !self.inherited && !self.completed && self.request_seq > 0 && self.decision.is_none()
    }
}

/// The approval view of a journal.
#[derive(Debug, Clone, Default)]
pub struct ApprovalScan {
    /// Every approval gate, in journal order.
    pub gates: Vec<ApprovalGate>,
    /// Index of the last gated call of the last execution, when that execution is gated.
    pub selected: Option<usize>,
    /// Head of the scanned range.
    pub head: i64,
}

impl ApprovalScan {
    /// The selected gate.
    pub fn selected(&self) -> Option<&ApprovalGate> {
        self.selected.and_then(|i| self.gates.get(i))
    }

    /// Scans `records` up to `through_seq` (0 = all).
    ///
    /// # Errors
    /// [`ControllerError::InvalidExecutionLog`] when a gated execution breaks the rules of
    /// semantics §5.3.
    pub fn scan(records: &[LogRecord], through_seq: i64) -> Result<Self> {
        let records: Vec<&LogRecord> = records
            .iter()
            .filter(|r| through_seq <= 0 || r.seq <= through_seq)
            .collect();
        let mut order: Vec<&str> = Vec::new();
        let mut by_id: HashMap<&str, Vec<&LogRecord>> = HashMap::new();
        let mut last_fork = 0;
        for record in &records {
            let event = &record.event;
            if event.kind == EventKind::Lifecycle {
                if event
                    .lifecycle()
                    .is_some_and(|l| l.kind == LifecycleKind::Fork)
                {
                    last_fork = record.seq;
                }
                continue;
            }
            if event.execution_id.is_empty() {
                continue;
            }
            by_id
                .entry(&event.execution_id)
                .or_insert_with(|| {
                    order.push(&event.execution_id);
                    Vec::new()
                })
                .push(record);
        }
        let mut scan = Self {
            head: records.last().map_or(0, |r| r.seq),
            ..Self::default()
        };
        let last = order.last().copied();
        for id in &order {
            let events = &by_id[id];
            if !is_gated(events) {
                continue;
            }
            let before = scan.gates.len();
            scan_execution(id, events, last_fork, &mut scan.gates)?;
            if Some(*id) == last && scan.gates.len() > before {
                scan.selected = Some(scan.gates.len() - 1);
            }
        }
        Ok(scan)
    }

    /// What a resume of execution `execution_id` does about its open gate before running
    /// anything (semantics §3.4 step 3): a gate of another execution, or one with a receipt, is
    /// no concern; a decided gate lets the run serve the decision.
    ///
    /// # Errors
    /// [`ControllerError::InheritedToolIntent`] for a gate recorded before the latest FORK;
    /// [`ControllerError::Parked`] for a requested gate still waiting for its decision.
    pub fn resume_step(&self, execution_id: &str) -> Result<ResumeStep<'_>> {
        let Some(gate) = self.selected() else {
            return Ok(ResumeStep::Run);
        };
        if gate.execution_id != execution_id || gate.receipt.is_some() {
            return Ok(ResumeStep::Run);
        }
        if gate.inherited {
            return Err(ControllerError::InheritedToolIntent {
                tool_call_id: gate.call.id.clone(),
            });
        }
        if gate.request_seq == 0 {
            return Ok(ResumeStep::Request(gate));
        }
        if gate.decision.is_none() {
            return Err(ControllerError::Parked(gate.park_ref()));
        }
        Ok(ResumeStep::Run)
    }

    /// Whether `decision` may be recorded (semantics §5.5): it must answer an open, owned,
    /// still-selected request; the same decision again is answered with the record already
    /// written, a different one never overwrites it.
    ///
    /// # Errors
    /// [`ControllerError::InvalidApprovalDecision`] when no open request matches, it was decided
    /// differently, or it was superseded.
    pub fn admit_decision(&self, decision: &ApprovalDecision) -> Result<DecisionAdmission<'_>> {
        let found = self.gates.iter().position(|g| {
            g.execution_id == decision.execution_id
                && g.call.id == decision.tool_call_id
                && g.request_seq == decision.request_seq
                && g.request_seq > 0
        });
        let Some(index) = found.filter(|&i| !self.gates[i].inherited) else {
            return Err(ControllerError::InvalidApprovalDecision(format!(
                "no open approval request for execution {} tool call {:?} at seq {}",
                decision.execution_id, decision.tool_call_id, decision.request_seq
            )));
        };
        let gate = &self.gates[index];
        if let (Some(existing), Some(result)) = (&gate.decision, gate.result()) {
            if result.approved == decision.approved
                && result.reason == decision.reason
                && existing.event.actor == decision.identity
            {
                return Ok(DecisionAdmission::AlreadyRecorded(existing));
            }
            return Err(ControllerError::InvalidApprovalDecision(
                "the request was already decided differently; decisions are never overwritten"
                    .into(),
            ));
        }
        if self.selected != Some(index) || gate.completed || gate.receipt.is_some() {
            return Err(ControllerError::InvalidApprovalDecision(
                "the request was superseded".into(),
            ));
        }
        Ok(DecisionAdmission::Record)
    }
}

/// What a resume does about the execution's approval gate before running (see
/// [`ApprovalScan::resume_step`]).
#[derive(Debug)]
pub enum ResumeStep<'a> {
    /// Nothing stands in the way: run the execution.
    Run,
    /// The gated call has no APPROVAL_REQUEST yet: write it, then park.
    Request(&'a ApprovalGate),
}

/// Whether a decision is written (see [`ApprovalScan::admit_decision`]).
#[derive(Debug)]
pub enum DecisionAdmission<'a> {
    /// The same decision is already journaled: this record answers the call again.
    AlreadyRecorded(&'a LogRecord),
    /// Write the decision.
    Record,
}

fn tool_result(record: &LogRecord) -> Option<&ToolResult> {
    match &record.event.body {
        Some(EventBody::Result(result)) => Some(result),
        _ => None,
    }
}

fn tool_call(record: &LogRecord) -> Option<&ToolCall> {
    match &record.event.body {
        Some(EventBody::ToolCall(call)) => Some(call),
        _ => None,
    }
}

fn is_gated(events: &[&LogRecord]) -> bool {
    events.iter().any(|r| match r.event.kind {
        EventKind::ApprovalRequest | EventKind::ApprovalResult => true,
        EventKind::ToolCall => {
            tool_call(r).is_some_and(|c| c.mediation == Mediation::RequiresApproval)
        }
        EventKind::ToolResult => tool_result(r).is_some_and(ToolResult::carries_approval_seqs),
        _ => false,
    })
}

fn invalid(id: &str, seq: i64, what: &str) -> ControllerError {
    ControllerError::InvalidExecutionLog(format!("execution {id} seq {seq}: {what}"))
}

/// The receipt validity rule of semantics §5.5: denied ⇒ error + APPROVAL_DENIED; approved ⇒
/// (no error + UNSPECIFIED) or (error + EXECUTOR_ERROR).
pub fn receipt_consistent(approved: bool, receipt: &ToolResult) -> bool {
    if approved {
        (!receipt.is_error && receipt.code == ToolResultCode::Unspecified)
            || (receipt.is_error && receipt.code == ToolResultCode::ExecutorError)
    } else {
        receipt.is_error && receipt.code == ToolResultCode::ApprovalDenied
    }
}

/// Whether `result` closes `gate`, still undecided, without a decision: the result a host
/// records when it closes the turn before anyone decided (extensions §9): an error that names
/// the request (0 when none was written) and no decision, and says the call did not run.
fn withdraws(gate: &ApprovalGate, result: &ToolResult) -> bool {
    result.id == gate.call.id
        && result.approval_request_seq == gate.request_seq
        && result.approval_decision_seq == 0
        && result.code == ToolResultCode::Unspecified
        && result.is_error
        && result.error == agentsessions_api::NOT_RUN
}

/// The receipt a denial writes.
pub fn denial_receipt(call_id: &str, request_seq: i64, decision_seq: i64) -> ToolResult {
    ToolResult {
        id: call_id.to_owned(),
        is_error: true,
        error: DENIAL_MESSAGE.to_owned(),
        content: vec![Part::Text(TextPart {
            text: DENIAL_MESSAGE.to_owned(),
        })],
        code: ToolResultCode::ApprovalDenied,
        approval_request_seq: request_seq,
        approval_decision_seq: decision_seq,
        ..ToolResult::default()
    }
}

fn scan_execution(
    id: &str,
    events: &[&LogRecord],
    last_fork: i64,
    gates: &mut Vec<ApprovalGate>,
) -> Result<()> {
    let completed = events.iter().any(|r| r.event.kind == EventKind::End);
    let mut open: Option<usize> = None;
    let mut ids: HashSet<String> = HashSet::new();
    for (position, record) in events.iter().enumerate() {
        let seq = record.seq;
        match record.event.kind {
            EventKind::ExecutionStart if position != 0 => {
                return Err(invalid(id, seq, "EXECUTION_START is not first"));
            }
            EventKind::ExecutionStart | EventKind::Error => {}
            EventKind::ToolCall => {
                if open.is_some() {
                    return Err(invalid(id, seq, "continued past an unresolved approval"));
                }
                let Some(call) = tool_call(record) else {
                    return Err(invalid(id, seq, "TOOL_CALL without a body"));
                };
                if !ids.insert(call.id.clone()) && !call.id.is_empty() {
                    return Err(invalid(id, seq, "tool call id reused"));
                }
                if call.mediation == Mediation::RequiresApproval {
                    if call.id.is_empty() || call.idempotency_key.is_empty() {
                        return Err(invalid(id, seq, "gated call without id or idempotency key"));
                    }
                    gates.push(ApprovalGate {
                        execution_id: id.to_owned(),
                        call: call.clone(),
                        call_seq: seq,
                        inherited: seq < last_fork,
                        completed,
                        ..ApprovalGate::default()
                    });
                    open = Some(gates.len() - 1);
                }
            }
            EventKind::ApprovalRequest => {
                let gate = open.and_then(|i| gates.get_mut(i));
                let matches = match (&record.event.body, gate.as_ref()) {
                    (Some(EventBody::Approval(req)), Some(gate)) => {
                        gate.request_seq == 0 && req.tool_call_id == gate.call.id
                    }
                    _ => false,
                };
                match (matches, gate) {
                    (true, Some(gate)) => gate.request_seq = seq,
                    _ => return Err(invalid(id, seq, "APPROVAL_REQUEST outside its gate")),
                }
            }
            EventKind::ApprovalResult => {
                let gate = open.and_then(|i| gates.get_mut(i));
                let matches = match (&record.event.body, gate.as_ref()) {
                    (Some(EventBody::ApprovalResult(res)), Some(gate)) => {
                        gate.request_seq > 0
                            && gate.decision.is_none()
                            && res.tool_call_id == gate.call.id
                            && res.request_seq == gate.request_seq
                    }
                    _ => false,
                };
                match (matches, gate) {
                    (true, Some(gate)) => gate.decision = Some((*record).clone()),
                    _ => return Err(invalid(id, seq, "APPROVAL_RESULT outside its gate")),
                }
            }
            EventKind::ToolResult => {
                let Some(result) = tool_result(record) else {
                    return Err(invalid(id, seq, "TOOL_RESULT without a body"));
                };
                match open.and_then(|i| gates.get_mut(i)) {
                    Some(gate) => {
                        let decided = gate.decision.as_ref().and_then(|d| match &d.event.body {
                            Some(EventBody::ApprovalResult(r)) => Some((d.seq, r.approved)),
                            _ => None,
                        });
                        let valid = decided.is_some_and(|(decision_seq, approved)| {
                            result.id == gate.call.id
                                && result.approval_request_seq == gate.request_seq
                                && result.approval_decision_seq == decision_seq
                                && receipt_consistent(approved, result)
                        });
                        let withdrawn = decided.is_none() && withdraws(gate, result);
                        if !(valid || withdrawn) {
                            return Err(invalid(id, seq, "continued past an unresolved approval"));
                        }
                        gate.receipt = Some((*record).clone());
                        open = None;
                    }
                    None if result.carries_approval_seqs() => {
                        return Err(invalid(id, seq, "receipt fields outside an open gate"));
                    }
                    None => {}
                }
            }
            _ if open.is_some() => {
                return Err(invalid(id, seq, "continued past an unresolved approval"));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{ApprovalRequest, Event, HarnessEnd, Lifecycle};

    use super::*;
    use crate::log::{Execution, bears_approval};

    fn rec(seq: i64, id: &str, kind: EventKind, body: EventBody) -> LogRecord {
        LogRecord {
            committed_at: None,
            seq,
            prev_hash: String::new(),
            hash: String::new(),
            fence: 0,
            event: Event {
                execution_id: id.into(),
                kind,
                body: Some(body),
                ..Event::default()
            },
        }
    }

    fn gated_call(seq: i64) -> LogRecord {
        rec(
            seq,
            "e",
            EventKind::ToolCall,
            EventBody::ToolCall(ToolCall {
                id: "c".into(),
                tool: "charge".into(),
                mediation: Mediation::RequiresApproval,
                idempotency_key: "k".into(),
                ..ToolCall::default()
            }),
        )
    }

    fn request(seq: i64) -> LogRecord {
        rec(
            seq,
            "e",
            EventKind::ApprovalRequest,
            EventBody::Approval(ApprovalRequest {
                tool_call_id: "c".into(),
                reason: String::new(),
            }),
        )
    }

    fn decision(seq: i64, request_seq: i64, approved: bool) -> LogRecord {
        rec(
            seq,
            "e",
            EventKind::ApprovalResult,
            EventBody::ApprovalResult(ApprovalResult {
                tool_call_id: "c".into(),
                approved,
                reason: String::new(),
                request_seq,
            }),
        )
    }

    // semantics §5.3/§5.4: an undecided owned request is pending and blocks new input.
    #[test]
    fn undecided_request_is_pending() {
        let records = vec![gated_call(1), request(2)];
        let scan = ApprovalScan::scan(&records, 0).unwrap();
        let gate = scan.selected().unwrap();
        assert!(gate.is_pending());
        assert!(gate.blocks_new_input());
        assert_eq!(gate.park_ref().request_seq, 2);
    }

    // semantics §5.4: after a decision the ref disappears but input stays blocked until receipt.
    #[test]
    fn decided_without_receipt_still_blocks() {
        let records = vec![gated_call(1), request(2), decision(3, 2, false)];
        let scan = ApprovalScan::scan(&records, 0).unwrap();
        let gate = scan.selected().unwrap();
        assert!(!gate.is_pending());
        assert!(gate.blocks_new_input());
        let receipt = rec(
            4,
            "e",
            EventKind::ToolResult,
            EventBody::Result(denial_receipt("c", 2, 3)),
        );
        let mut records = records;
        records.push(receipt);
        let scan = ApprovalScan::scan(&records, 0).unwrap();
        assert!(!scan.selected().unwrap().blocks_new_input());
    }

    // extensions §9: a host that closes a turn before anyone decided
    // withdraws the gate with a NOT_RUN result naming the request; then the turn may END, and a
    // late decision is refused as superseded. Any other result in the undecided gate is invalid.
    #[test]
    fn an_undecided_gate_is_withdrawn_by_a_not_run_result() {
        let withdrawal = ToolResult {
            approval_request_seq: 2,
            ..ToolResult::not_run("c")
        };
        let end = rec(
            4,
            "e",
            EventKind::End,
            EventBody::End(HarnessEnd {
                state: "CANCELED".into(),
                error: None,
            }),
        );
        let records = vec![
            gated_call(1),
            request(2),
            rec(
                3,
                "e",
                EventKind::ToolResult,
                EventBody::Result(withdrawal.clone()),
            ),
            end,
        ];
        let scan = ApprovalScan::scan(&records, 0).unwrap();
        let gate = scan.selected().unwrap();
        assert!(!gate.is_pending() && !gate.blocks_new_input());
        let late = decide(true, 2);
        assert!(matches!(
            scan.admit_decision(&late),
            Err(ControllerError::InvalidApprovalDecision(_))
        ));
        // Never requested: the withdrawal names no request.
        let unrequested = vec![
            gated_call(1),
            rec(
                2,
                "e",
                EventKind::ToolResult,
                EventBody::Result(ToolResult::not_run("c")),
            ),
        ];
        ApprovalScan::scan(&unrequested, 0).unwrap();
        // Another error, or one that names a decision, is no withdrawal.
        for forged in [
            ToolResult {
                error: "gave up".into(),
                ..withdrawal.clone()
            },
            ToolResult {
                approval_decision_seq: 3,
                ..withdrawal
            },
        ] {
            let records = vec![
                gated_call(1),
                request(2),
                rec(3, "e", EventKind::ToolResult, EventBody::Result(forged)),
            ];
            ApprovalScan::scan(&records, 0).unwrap_err();
        }
    }

    // semantics §5.3: anything but the gate's own records while it is open is invalid.
    #[test]
    fn continuing_past_open_gate_is_invalid() {
        let records = vec![
            gated_call(1),
            request(2),
            rec(
                3,
                "e",
                EventKind::End,
                EventBody::End(HarnessEnd {
                    state: "COMPLETED".into(),
                    error: None,
                }),
            ),
        ];
        ApprovalScan::scan(&records, 0).unwrap_err();
        let wrong_seq = vec![gated_call(1), request(2), decision(3, 9, true)];
        ApprovalScan::scan(&wrong_seq, 0).unwrap_err();
    }

    // semantics §5.5: a receipt inconsistent with its decision is invalid.
    #[test]
    fn inconsistent_receipt_is_invalid() {
        let mut receipt = denial_receipt("c", 2, 3);
        receipt.code = ToolResultCode::Unspecified;
        let records = vec![
            gated_call(1),
            request(2),
            decision(3, 2, false),
            rec(4, "e", EventKind::ToolResult, EventBody::Result(receipt)),
        ];
        ApprovalScan::scan(&records, 0).unwrap_err();
    }

    // semantics §3.7: a gate recorded before the latest FORK is inherited.
    #[test]
    fn gate_before_fork_is_inherited() {
        let records = vec![
            gated_call(1),
            request(2),
            rec(
                3,
                "",
                EventKind::Lifecycle,
                EventBody::Lifecycle(Lifecycle {
                    kind: LifecycleKind::Fork,
                    ..Lifecycle::default()
                }),
            ),
        ];
        let scan = ApprovalScan::scan(&records, 0).unwrap();
        let gate = scan.selected().unwrap();
        assert!(gate.inherited);
        assert!(!gate.blocks_new_input());
        let through = ApprovalScan::scan(&records, 1).unwrap();
        assert_eq!(through.head, 1);
        assert_eq!(through.selected().unwrap().request_seq, 0);
    }

    fn decide(approved: bool, request_seq: i64) -> ApprovalDecision {
        ApprovalDecision {
            execution_id: "e".into(),
            tool_call_id: "c".into(),
            request_seq,
            approved,
            ..ApprovalDecision::default()
        }
    }

    // semantics §3.4 step 3: a gate without a request asks for one; an undecided request parks
    // again; a decided gate, or another execution's, lets the run go on.
    #[test]
    fn resume_step_at_an_open_gate() {
        let unrequested = ApprovalScan::scan(&[gated_call(1)], 0).unwrap();
        assert!(matches!(
            unrequested.resume_step("e").unwrap(),
            ResumeStep::Request(gate) if gate.call_seq == 1
        ));
        assert!(matches!(
            unrequested.resume_step("other").unwrap(),
            ResumeStep::Run
        ));
        let requested = ApprovalScan::scan(&[gated_call(1), request(2)], 0).unwrap();
        assert!(matches!(
            requested.resume_step("e"),
            Err(ControllerError::Parked(park)) if park.request_seq == 2
        ));
        let decided =
            ApprovalScan::scan(&[gated_call(1), request(2), decision(3, 2, true)], 0).unwrap();
        assert!(matches!(decided.resume_step("e").unwrap(), ResumeStep::Run));
    }

    // semantics §3.7: a child cannot re-drive a gate it inherited from its parent.
    #[test]
    fn resume_step_refuses_an_inherited_gate() {
        let fork = rec(
            2,
            "",
            EventKind::Lifecycle,
            EventBody::Lifecycle(Lifecycle {
                kind: LifecycleKind::Fork,
                ..Lifecycle::default()
            }),
        );
        let scan = ApprovalScan::scan(&[gated_call(1), fork], 0).unwrap();
        assert!(matches!(
            scan.resume_step("e"),
            Err(ControllerError::InheritedToolIntent { tool_call_id }) if tool_call_id == "c"
        ));
    }

    // semantics §5.5: a decision answers an open request; the same decision again returns the
    // record already written; a different one, or one for no request, is refused.
    #[test]
    fn admit_decision_is_idempotent_and_never_overwrites() {
        let open = ApprovalScan::scan(&[gated_call(1), request(2)], 0).unwrap();
        assert!(matches!(
            open.admit_decision(&decide(true, 2)).unwrap(),
            DecisionAdmission::Record
        ));
        assert!(matches!(
            open.admit_decision(&decide(true, 7)),
            Err(ControllerError::InvalidApprovalDecision(_))
        ));
        let decided =
            ApprovalScan::scan(&[gated_call(1), request(2), decision(3, 2, true)], 0).unwrap();
        assert!(matches!(
            decided.admit_decision(&decide(true, 2)).unwrap(),
            DecisionAdmission::AlreadyRecorded(record) if record.seq == 3
        ));
        assert!(matches!(
            decided.admit_decision(&decide(false, 2)),
            Err(ControllerError::InvalidApprovalDecision(_))
        ));
    }

    // semantics §5.5: a request a later execution's gate superseded takes no decision.
    #[test]
    fn admit_decision_refuses_a_superseded_request() {
        let mut later = gated_call(3);
        later.event.execution_id = "f".into();
        let scan = ApprovalScan::scan(&[gated_call(1), request(2), later], 0).unwrap();
        assert!(matches!(
            scan.admit_decision(&decide(true, 2)),
            Err(ControllerError::InvalidApprovalDecision(reason)) if reason.contains("superseded")
        ));
    }

    // semantics §3.5: an execution bears an approval through any of its approval records.
    #[test]
    fn bears_approval_sees_gated_calls_and_receipts() {
        let records = vec![gated_call(1), request(2)];
        let gated = Execution {
            id: "e".into(),
            effects: vec![0, 1],
            ..Execution::default()
        };
        assert!(bears_approval(&gated, &records));
        let plain = vec![rec(
            1,
            "e",
            EventKind::ToolResult,
            EventBody::Result(ToolResult {
                id: "c".into(),
                ..ToolResult::default()
            }),
        )];
        let ungated = Execution {
            id: "e".into(),
            effects: vec![0],
            ..Execution::default()
        };
        assert!(!bears_approval(&ungated, &plain));
        let receipt = vec![rec(
            1,
            "e",
            EventKind::ToolResult,
            EventBody::Result(denial_receipt("c", 2, 3)),
        )];
        assert!(bears_approval(&ungated, &receipt));
    }
}
