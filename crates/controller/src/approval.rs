//! Approval state derived from the journal alone (semantics §5.3) and the receipt rules of §5.5.

use std::collections::{HashMap, HashSet};

use agentsessions_api::{
    ApprovalRef, ApprovalResult, EventBody, EventKind, LifecycleKind, Mediation, Part, TextPart,
    ToolCall, ToolResult, ToolResultCode,
};
use agentsessions_journal::LogRecord;

use crate::error::{ControllerError, Result};

/// The sentence a denial receipt carries.
pub const DENIAL_MESSAGE: &str = "Tool execution denied by approval decision.";

/// One REQUIRES_APPROVAL call and what the journal says about it.
#[derive(Debug, Clone, Default)]
pub struct Gate {
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

impl Gate {
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
    /// Every gated call, in journal order.
    pub gates: Vec<Gate>,
    /// Index of the last gated call of the last execution, when that execution is gated.
    pub selected: Option<usize>,
    /// Head of the scanned range.
    pub head: i64,
}

impl ApprovalScan {
    /// The selected gate.
    pub fn selected(&self) -> Option<&Gate> {
        self.selected.and_then(|i| self.gates.get(i))
    }

    /// Scans `records` up to `through_seq` (0 = all).
    ///
    /// # Errors
    /// [`ControllerError::InvalidExecutionLog`] when a gated execution breaks the rules of §5.3.
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

fn carries_approval_seqs(result: &ToolResult) -> bool {
    result.approval_request_seq != 0 || result.approval_decision_seq != 0
}

fn is_gated(events: &[&LogRecord]) -> bool {
    events.iter().any(|r| match r.event.kind {
        EventKind::ApprovalRequest | EventKind::ApprovalResult => true,
        EventKind::ToolCall => {
            tool_call(r).is_some_and(|c| c.mediation == Mediation::RequiresApproval)
        }
        EventKind::ToolResult => tool_result(r).is_some_and(carries_approval_seqs),
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
    gates: &mut Vec<Gate>,
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
                    gates.push(Gate {
                        execution_id: id.to_owned(),
                        call: call.clone(),
                        call_seq: seq,
                        inherited: seq < last_fork,
                        completed,
                        ..Gate::default()
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
                        if !valid {
                            return Err(invalid(id, seq, "continued past an unresolved approval"));
                        }
                        gate.receipt = Some((*record).clone());
                        open = None;
                    }
                    None if carries_approval_seqs(result) => {
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

    fn rec(seq: i64, id: &str, kind: EventKind, body: EventBody) -> LogRecord {
        LogRecord {
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
}
