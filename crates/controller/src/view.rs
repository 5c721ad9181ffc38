//! [`LogView`]: one session's log decoded once and kept, with what the controller derives from
//! it (the execution grouping and the approval scan), extended by the records appended since
//! instead of re-read. A host keeps one per session between operations and validates it against
//! the journal head first (placement's session states); the controller takes it instead of a
//! fresh read, so a turn costs the new records, not the whole log.

use std::collections::HashSet;
use std::sync::Arc;

use agentsessions_api::{
    Event, EventBody, EventKind, History, HistorySource, LifecycleKind, Mediation,
};
use agentsessions_journal::LogRecord;

use crate::approval::ApprovalScan;
use crate::error::{ControllerError, Result};
use crate::log::ExecutionLog;

/// A session's records from seq 1 with the controller's readings of them.
///
/// The records sit behind one [`Arc`]: a turn's [`History`] shares them, and
/// [`LogView::extend`] appends in place once that history is gone (it copies them only when a
/// history of an older head is still alive). An invalid log stays invalid whatever is appended,
/// so a failed reading is kept as its message and answered again.
#[derive(Debug, Clone)]
pub struct LogView {
    records: Arc<Vec<LogRecord>>,
    log: std::result::Result<ExecutionLog, String>,
    approvals: std::result::Result<ApprovalScan, String>,
    /// Executions with approval evidence: a new record of one of them changes the scan.
    gated: HashSet<String>,
    bytes: usize,
}

impl Default for LogView {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl LogView {
    /// The view of a whole log as read from the journal (seq 1 to the head).
    pub fn new(records: Vec<LogRecord>) -> Self {
        let mut view = Self {
            records: Arc::new(Vec::new()),
            log: Ok(ExecutionLog::default()),
            approvals: Ok(ApprovalScan::default()),
            gated: HashSet::new(),
            bytes: 0,
        };
        view.extend(records);
        view
    }

    /// Appends `tail`, the records that follow the current head in seq order, and brings the
    /// readings up to date reading only them (the approval scan is redone only when one of them
    /// carries approval evidence, forks, or belongs to an execution that does).
    pub fn extend(&mut self, tail: Vec<LogRecord>) {
        if tail.is_empty() {
            return;
        }
        let rescan = self.approvals.is_err()
            || tail.iter().any(|r| self.changes_approvals(r))
            || self.selects_a_gate_of_an_earlier_execution(&tail);
        for record in &tail {
            if bears_approval_evidence(&record.event) {
                self.gated.insert(record.event.execution_id.clone());
            }
            self.bytes += approx_record_bytes(record);
        }
        let records = Arc::make_mut(&mut self.records);
        records.extend(tail);
        if let Ok(log) = &mut self.log
            && let Err(e) = log.extend(records)
        {
            self.log = Err(reason(e));
        }
        let head = records.last().map_or(0, |r| r.seq);
        if rescan {
            self.approvals = ApprovalScan::scan(records, 0).map_err(reason);
        } else if let Ok(scan) = &mut self.approvals {
            scan.head = head;
        }
    }

    fn changes_approvals(&self, record: &LogRecord) -> bool {
        let event = &record.event;
        bears_approval_evidence(event)
            || (!event.execution_id.is_empty() && self.gated.contains(&event.execution_id))
            || event
                .lifecycle()
                .is_some_and(|l| l.kind == LifecycleKind::Fork)
    }

    /// A scan selects the last gate of the last execution: once a new execution starts after a
    /// gated one, the selection must be redone.
    fn selects_a_gate_of_an_earlier_execution(&self, tail: &[LogRecord]) -> bool {
        let Ok(scan) = &self.approvals else {
            return true;
        };
        let Some(gate) = scan.selected() else {
            return false;
        };
        tail.iter()
            .any(|r| !r.event.execution_id.is_empty() && r.event.execution_id != gate.execution_id)
    }

    /// The records, seq 1 to the head.
    pub fn records(&self) -> &[LogRecord] {
        &self.records
    }

    /// The head seq, 0 for an empty log.
    pub fn head(&self) -> i64 {
        self.records.last().map_or(0, |r| r.seq)
    }

    /// The head record's hash, empty for an empty log.
    pub fn head_hash(&self) -> &str {
        self.records.last().map_or("", |r| r.hash.as_str())
    }

    /// The execution grouping (semantics §3.2).
    ///
    /// # Errors
    /// [`ControllerError::InvalidExecutionLog`] for a log that breaks the grouping rules.
    pub fn log(&self) -> Result<&ExecutionLog> {
        self.log
            .as_ref()
            .map_err(|e| ControllerError::InvalidExecutionLog(e.clone()))
    }

    /// The approval scan of the whole log (semantics §5.3).
    ///
    /// # Errors
    /// [`ControllerError::InvalidExecutionLog`] when a gated execution breaks the rules.
    pub fn approvals(&self) -> Result<&ApprovalScan> {
        self.approvals
            .as_ref()
            .map_err(|e| ControllerError::InvalidExecutionLog(e.clone()))
    }

    /// The whole log's events as a [`History`], sharing the records (no copy).
    pub fn history(&self) -> History {
        History::new(Arc::new(LogEvents(Arc::clone(&self.records))))
    }

    /// An estimate of the memory the view holds, in bytes (records with their events, and the
    /// readings' share).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// What a failed reading keeps: the readings only fail with an invalid log, whose reason is
/// answered again as the same error.
fn reason(error: ControllerError) -> String {
    match error {
        ControllerError::InvalidExecutionLog(reason) => reason,
        other => other.to_string(),
    }
}

/// The events of a shared record vector, for [`History`].
struct LogEvents(Arc<Vec<LogRecord>>);

impl HistorySource for LogEvents {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn event(&self, index: usize) -> Option<&Event> {
        self.0.get(index).map(|r| &r.event)
    }
}

/// Whether `event` is evidence of an approval gate (what makes an execution gated for the scan).
fn bears_approval_evidence(event: &Event) -> bool {
    match &event.body {
        Some(EventBody::Approval(_) | EventBody::ApprovalResult(_)) => true,
        Some(EventBody::ToolCall(call)) => call.mediation == Mediation::RequiresApproval,
        Some(EventBody::Result(result)) => {
            result.approval_request_seq != 0 || result.approval_decision_seq != 0
        }
        _ => matches!(
            event.kind,
            EventKind::ApprovalRequest | EventKind::ApprovalResult
        ),
    }
}

/// What one decoded record costs in memory, roughly: the record itself, its two hashes, its
/// execution id, and its body's text (a message's parts) or a flat allowance for other bodies.
/// Per record, a view's readings add an index or two (counted in the allowance).
pub fn approx_record_bytes(record: &LogRecord) -> usize {
    const OTHER_BODY: usize = 160;
    const PER_PART: usize = 64;
    let body = match &record.event.body {
        Some(EventBody::Message(message)) => {
            message.role.len()
                + message
                    .parts
                    .iter()
                    .map(|p| PER_PART + part_text_len(p))
                    .sum::<usize>()
        }
        Some(_) => OTHER_BODY,
        None => 0,
    };
    std::mem::size_of::<LogRecord>()
        + record.prev_hash.capacity()
        + record.hash.capacity()
        + record.event.execution_id.capacity()
        + body
        + 2 * std::mem::size_of::<usize>()
}

fn part_text_len(part: &agentsessions_api::Part) -> usize {
    match part {
        agentsessions_api::Part::Text(text) => text.text.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{
        ApprovalRequest, ApprovalResult, EventKind, ExecutionStart, HarnessEnd, Lifecycle, Message,
        ToolCall, ToolResult,
    };

    use super::*;

    fn rec(seq: i64, id: &str, kind: EventKind, body: EventBody) -> LogRecord {
        LogRecord {
            committed_at: None,
            seq,
            prev_hash: String::new(),
            hash: format!("h{seq}"),
            fence: 1,
            event: Event {
                execution_id: id.into(),
                kind,
                body: Some(body),
                ..Event::default()
            },
        }
    }

    /// Turns of every shape the readings care about: a plain turn, a gated call requested,
    /// decided and receipted, a FORK marker, a turn after a gated one, a legacy-free log.
    fn sample() -> Vec<LogRecord> {
        let start = |seq, id: &str| {
            rec(
                seq,
                id,
                EventKind::ExecutionStart,
                EventBody::ExecutionStart(ExecutionStart {
                    input_count: Some(1),
                    harness: "h".into(),
                    ..ExecutionStart::default()
                }),
            )
        };
        let input = |seq, id: &str| {
            rec(
                seq,
                id,
                EventKind::Input,
                EventBody::Message(Message::text_message("user", "hi")),
            )
        };
        let end = |seq, id: &str| {
            rec(
                seq,
                id,
                EventKind::End,
                EventBody::End(HarnessEnd {
                    state: "COMPLETED".into(),
                    error: None,
                }),
            )
        };
        let call = ToolCall {
            id: "c".into(),
            tool: "charge".into(),
            mediation: Mediation::RequiresApproval,
            idempotency_key: "k".into(),
            ..ToolCall::default()
        };
        vec![
            start(1, "a"),
            input(2, "a"),
            rec(
                3,
                "a",
                EventKind::Output,
                EventBody::Message(Message::text_message("assistant", "x")),
            ),
            end(4, "a"),
            start(5, "b"),
            input(6, "b"),
            rec(7, "b", EventKind::ToolCall, EventBody::ToolCall(call)),
            rec(
                8,
                "b",
                EventKind::ApprovalRequest,
                EventBody::Approval(ApprovalRequest {
                    tool_call_id: "c".into(),
                    reason: String::new(),
                }),
            ),
            rec(
                9,
                "b",
                EventKind::ApprovalResult,
                EventBody::ApprovalResult(ApprovalResult {
                    tool_call_id: "c".into(),
                    approved: true,
                    reason: String::new(),
                    request_seq: 8,
                }),
            ),
            rec(
                10,
                "b",
                EventKind::ToolResult,
                EventBody::Result(ToolResult {
                    id: "c".into(),
                    approval_request_seq: 8,
                    approval_decision_seq: 9,
                    ..ToolResult::default()
                }),
            ),
            end(11, "b"),
            rec(
                12,
                "",
                EventKind::Lifecycle,
                EventBody::Lifecycle(Lifecycle {
                    kind: LifecycleKind::Fork,
                    ..Lifecycle::default()
                }),
            ),
            start(13, "c"),
            input(14, "c"),
        ]
    }

    fn readings(view: &LogView) -> (String, String) {
        let log = view.log().map(|l| {
            format!(
                "{:?} {} {} {:?} {}",
                l.executions, l.legacy_end, l.has_legacy, l.legacy, l.last_fork_seq
            )
        });
        let scan = view
            .approvals()
            .map(|s| format!("{:?} {:?} {}", s.gates, s.selected, s.head));
        (format!("{log:?}"), format!("{scan:?}"))
    }

    // Extending a view record by record (or in uneven chunks) reads exactly as reading the
    // whole log at once, at every head: the readings never depend on how the log arrived.
    #[test]
    fn extending_reads_as_reading_the_whole_log() {
        let all = sample();
        for chunk in [1, 2, 3, 5] {
            let mut view = LogView::default();
            let mut at = 0;
            while at < all.len() {
                let next = (at + chunk).min(all.len());
                view.extend(all[at..next].to_vec());
                at = next;
                let whole = LogView::new(all[..at].to_vec());
                assert_eq!(
                    readings(&view),
                    readings(&whole),
                    "chunk {chunk}, head {at}"
                );
                let fresh = ApprovalScan::scan(&all[..at], 0).unwrap();
                assert_eq!(
                    format!("{:?} {:?}", view.approvals().unwrap().gates, fresh.gates),
                    format!("{:?} {:?}", fresh.gates, fresh.gates)
                );
                assert_eq!(
                    view.approvals().unwrap().selected,
                    fresh.selected,
                    "head {at}"
                );
                assert_eq!(view.history().len(), at);
            }
        }
    }

    // A history handed out shares the records; extending the view afterwards leaves the
    // history as it was (copy on write) and the view grows.
    #[test]
    fn a_history_outlives_the_views_extension_unchanged() {
        let all = sample();
        let mut view = LogView::new(all[..4].to_vec());
        let history = view.history();
        view.extend(all[4..].to_vec());
        assert_eq!(history.len(), 4);
        assert_eq!(view.history().len(), all.len());
        assert_eq!(history.get(3), Some(&all[3].event));
        assert!(view.bytes() > 0);
    }

    // An invalid log stays invalid after more records, with the same error.
    #[test]
    fn an_invalid_log_stays_invalid() {
        let mut records = sample();
        records[1].event.execution_id.clear();
        let mut view = LogView::new(records[..2].to_vec());
        let first = view.log().unwrap_err().to_string();
        view.extend(records[2..].to_vec());
        assert_eq!(view.log().unwrap_err().to_string(), first);
        let _invalid = ExecutionLog::read(&records).unwrap_err();
    }
}
