//! Reading a journal as executions (semantics §3.2 and §3.6): the legacy prefix, grouping by
//! execution id, the effect stream of each execution and its input completeness; and the rules
//! over that reading that replay and resume apply — inherited intents after a FORK (semantics
//! §3.7), the harness identity checks (semantics §3.5), and the history a harness is given (I4;
//! semantics §9.6).
//!
//! Everything here is pure: it takes the records and returns a view of them, so replay, resume,
//! exec and the approval scan agree on one reading of the log.

use std::collections::HashMap;

use agentsessions_api::{
    Descriptor, EventBody, EventKind, ExecutionStart, History, LifecycleKind, Mediation, Message,
    Resumability,
};
use agentsessions_journal::LogRecord;

use crate::error::{ControllerError, Result};

/// One execution as the journal records it.
#[derive(Debug, Clone, Default)]
pub struct Execution {
    /// Journaled execution id; empty for the legacy execution.
    pub id: String,
    /// True for the v0.1.2 execution (records without execution ids).
    pub legacy: bool,
    /// Index (into the records) of the execution's first event; its History is everything before.
    pub first: usize,
    /// The EXECUTION_START body, when the writer recorded one.
    pub start: Option<ExecutionStart>,
    /// Recorded inputs in order.
    pub inputs: Vec<Message>,
    /// INPUT records, including any without a message.
    pub input_records: i64,
    /// True when some INPUT record carries no message.
    pub input_without_message: bool,
    /// Indices of the effect records (MODEL_CALL, OUTPUT, TOOL_CALL, TOOL_RESULT, USAGE and the
    /// approval records), in journal order.
    pub effects: Vec<usize>,
    /// Index of the END record, when the execution completed.
    pub end: Option<usize>,
    /// Index of the record whose canonical form names a legacy execution (semantics §3.6).
    pub anchor: usize,
}

impl Execution {
    /// Whether an END closed the execution.
    pub fn completed(&self) -> bool {
        self.end.is_some()
    }

    /// The input completeness rule of semantics §3.2 step 4. Executions without an
    /// EXECUTION_START are exempt.
    ///
    /// # Errors
    /// [`ControllerError::InvalidExecutionLog`] for a missing or negative count, an INPUT without a
    /// message or a count mismatch on a completed execution;
    /// [`ControllerError::IncompleteInvocation`] when an unfinished execution lost inputs.
    pub fn check_inputs(&self) -> Result<()> {
        let Some(start) = &self.start else {
            return Ok(());
        };
        let Some(expected) = start.input_count else {
            return Err(invalid(format!(
                "execution {} has no input_count in its EXECUTION_START",
                self.id
            )));
        };
        if expected < 0 {
            return Err(invalid(format!(
                "execution {} records a negative input_count",
                self.id
            )));
        }
        if self.input_without_message {
            return Err(invalid(format!(
                "execution {} has an INPUT without a message",
                self.id
            )));
        }
        if self.input_records == expected {
            return Ok(());
        }
        if !self.completed() && self.input_records < expected {
            return Err(ControllerError::IncompleteInvocation {
                execution_id: self.id.clone(),
                recorded: self.input_records,
                expected,
            });
        }
        Err(invalid(format!(
            "execution {} records {} inputs but its EXECUTION_START expects {expected}",
            self.id, self.input_records
        )))
    }

    /// The recorded harness name and version (empty when not recorded).
    pub fn harness_identity(&self) -> (&str, &str) {
        self.start.as_ref().map_or(("", ""), |s| {
            (s.harness.as_str(), s.harness_version.as_str())
        })
    }

    /// The execution's effect records, copied out of `records` in journal order.
    pub fn effect_records(&self, records: &[LogRecord]) -> Vec<LogRecord> {
        self.effects
            .iter()
            .filter_map(|&i| records.get(i).cloned())
            .collect()
    }

    /// Whether the execution ended other than COMPLETED (FAILED or CANCELED): a replay of it may
    /// fail the same way again.
    pub fn ended_unsuccessfully(&self, records: &[LogRecord]) -> bool {
        self.completed() && !self.ended_completed(records)
    }

    /// Whether the execution's END says COMPLETED (a legacy END, and an END without a body,
    /// always does); false without an END.
    pub fn ended_completed(&self, records: &[LogRecord]) -> bool {
        self.end
            .and_then(|i| records.get(i))
            .is_some_and(|r| match &r.event.body {
                Some(EventBody::End(end)) => end.state == "COMPLETED" || end.state.is_empty(),
                _ => true,
            })
    }

    /// Unresolved tool intents recorded before the latest FORK (`last_fork_seq`, 0 for none)
    /// cannot be re-driven by the child (semantics §3.4 step 4, §3.7).
    ///
    /// # Errors
    /// [`ControllerError::InheritedToolIntent`] naming the first such call.
    pub fn check_inherited_intents(&self, records: &[LogRecord], last_fork_seq: i64) -> Result<()> {
        if last_fork_seq == 0 {
            return Ok(());
        }
        for &i in &self.effects {
            let Some(record) = records.get(i) else {
                continue;
            };
            let Some(EventBody::ToolCall(call)) = &record.event.body else {
                continue;
            };
            if record.seq >= last_fork_seq {
                continue;
            }
            let resolved = self.effects.iter().any(|&j| {
                records.get(j).is_some_and(|r| {
                    matches!(&r.event.body, Some(EventBody::Result(result)) if result.id == call.id)
                })
            });
            if !resolved {
                return Err(ControllerError::InheritedToolIntent {
                    tool_call_id: call.id.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Whether re-running `executions` needs the serving harness's identity checked (semantics
/// §3.5): some execution recorded a harness name or version, or went through an approval.
pub fn needs_identity_check(executions: &[&Execution], records: &[LogRecord]) -> bool {
    executions.iter().any(|e| {
        let (name, version) = e.harness_identity();
        !name.is_empty() || !version.is_empty() || bears_approval(e, records)
    })
}

/// The identity checks of semantics §3.5: the harness served as `served_name` (the registry
/// name, else the descriptor id) with `descriptor` must be the one each execution recorded, and
/// an execution that went through an approval needs a stateless-replay harness.
///
/// # Errors
/// [`ControllerError::HarnessMismatch`], [`ControllerError::HarnessVersionMismatch`],
/// [`ControllerError::ApprovalUnavailable`].
pub fn check_identity(
    executions: &[&Execution],
    records: &[LogRecord],
    served_name: &str,
    descriptor: &Descriptor,
) -> Result<()> {
    for execution in executions {
        let (recorded_name, recorded_version) = execution.harness_identity();
        if !recorded_name.is_empty() && recorded_name != served_name {
            return Err(ControllerError::HarnessMismatch {
                recorded: recorded_name.to_owned(),
                served: served_name.to_owned(),
            });
        }
        if !recorded_version.is_empty() && recorded_version != descriptor.version {
            return Err(ControllerError::HarnessVersionMismatch {
                recorded: recorded_version.to_owned(),
                served: descriptor.version.clone(),
            });
        }
        if bears_approval(execution, records)
            && descriptor.capabilities.resumability != Resumability::StatelessReplay
        {
            return Err(ControllerError::ApprovalUnavailable);
        }
    }
    Ok(())
}

/// I4: a harness that keeps its state in memory never rebuilds it from the journal, so it is
/// given no history; every other harness gets the first `len` events of `log`.
pub fn history_for(descriptor: &Descriptor, log: &History, len: usize) -> History {
    if descriptor.capabilities.resumability == Resumability::RequiresMemorySnapshot {
        return History::default();
    }
    log.prefix(len)
}

/// A new turn's history: the whole log's events, moved out of `records` rather than copied (a
/// long session's log is the turn's biggest cost); none for a harness that keeps its state in
/// memory.
pub fn history_of_log(descriptor: &Descriptor, records: Vec<LogRecord>) -> History {
    if descriptor.capabilities.resumability == Resumability::RequiresMemorySnapshot {
        return History::default();
    }
    records.into_iter().map(|r| r.event).collect()
}

/// One shared copy of the log's events; every execution's history is a prefix of it.
pub fn shared_history(records: &[LogRecord]) -> History {
    records.iter().map(|r| r.event.clone()).collect()
}

/// The journal read as executions.
///
/// It is built incrementally: [`ExecutionLog::extend`] reads only the records appended since
/// the last call, so a host that keeps it between turns pays for the new records only (a log
/// that is still all legacy re-derives its legacy execution, the one part that depends on the
/// whole prefix).
#[derive(Debug, Clone, Default)]
pub struct ExecutionLog {
    /// End (exclusive index) of the legacy prefix; 0 when the log has no legacy events.
    pub legacy_end: usize,
    /// True when the log has legacy (id-less) execution events.
    pub has_legacy: bool,
    /// The replayable legacy execution (the prefix up to its last END, or the whole log when it
    /// is entirely legacy).
    pub legacy: Option<Execution>,
    /// Modern executions in first-seen order.
    pub executions: Vec<Execution>,
    /// Seq of the latest LIFECYCLE FORK marker, 0 when none.
    pub last_fork_seq: i64,
    /// Records read so far.
    read: usize,
    /// Whether the first id-bearing event (the end of the legacy prefix) was seen.
    prefix_closed: bool,
    /// The last id-less execution kind of the legacy prefix.
    last_legacy_kind: Option<EventKind>,
    /// Index into `executions` by execution id.
    by_id: HashMap<String, usize>,
}

fn invalid(reason: String) -> ControllerError {
    ControllerError::InvalidExecutionLog(reason)
}

/// Kinds a v0.1.2 writer journaled without an execution id.
fn is_legacy_kind(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::Input
            | EventKind::ModelCall
            | EventKind::Output
            | EventKind::ToolCall
            | EventKind::ToolResult
            | EventKind::Usage
            | EventKind::End
            | EventKind::Error
    )
}

/// Kinds that form an execution's effect stream.
fn is_effect_kind(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::ModelCall
            | EventKind::Output
            | EventKind::ToolCall
            | EventKind::ToolResult
            | EventKind::Usage
            | EventKind::ApprovalRequest
            | EventKind::ApprovalResult
    )
}

impl ExecutionLog {
    /// Groups `records` (seq order, from seq 1) into executions.
    ///
    /// # Errors
    /// [`ControllerError::InvalidExecutionLog`] when the log breaks the grouping rules.
    pub fn read(records: &[LogRecord]) -> Result<Self> {
        let mut log = Self::default();
        log.extend(records)?;
        Ok(log)
    }

    /// How many records this reading covers.
    pub fn records_read(&self) -> usize {
        self.read
    }

    /// Reads the records of `records` past the ones already read; `records` is the whole log
    /// again, its first [`ExecutionLog::records_read`] records unchanged. After an error the
    /// reading is unusable (the log stays invalid whatever is appended).
    ///
    /// # Errors
    /// [`ControllerError::InvalidExecutionLog`] when the new records break the grouping rules.
    pub fn extend(&mut self, records: &[LogRecord]) -> Result<()> {
        let from = self.read.min(records.len());
        for (offset, record) in records[from..].iter().enumerate() {
            self.read_one(records, from + offset, record)?;
        }
        self.read = records.len();
        if !self.prefix_closed {
            // Still no modern event: the legacy execution covers the whole log so far.
            self.has_legacy = self.last_legacy_kind.is_some();
            if self.has_legacy {
                self.legacy_end = records.len();
                self.legacy = legacy_execution(records, records.len());
            }
        }
        Ok(())
    }

    /// The legacy-prefix rules (semantics §3.6) for a record before the first modern event.
    fn read_prefix(&mut self, records: &[LogRecord], i: usize, record: &LogRecord) -> Result<()> {
        let event = &record.event;
        if event.kind == EventKind::Lifecycle {
            return Ok(());
        }
        if event.kind == EventKind::ExecutionStart && event.execution_id.is_empty() {
            return Err(invalid(format!(
                "seq {}: EXECUTION_START without an execution id",
                record.seq
            )));
        }
        if !event.execution_id.is_empty() {
            self.prefix_closed = true;
            self.has_legacy = self.last_legacy_kind.is_some();
            if self.has_legacy {
                self.legacy_end = i;
                if event.kind != EventKind::ExecutionStart
                    && self.last_legacy_kind != Some(EventKind::End)
                {
                    return Err(invalid(format!(
                        "seq {}: a modern event follows an unfinished legacy turn; resume the \
                         legacy turn first",
                        record.seq
                    )));
                }
                self.legacy = legacy_execution(records, i);
            }
            return Ok(());
        }
        if !is_legacy_kind(event.kind) {
            return Err(invalid(format!(
                "seq {}: {} without an execution id",
                record.seq,
                event.kind.as_str()
            )));
        }
        self.last_legacy_kind = Some(event.kind);
        Ok(())
    }

    fn read_one(&mut self, records: &[LogRecord], i: usize, record: &LogRecord) -> Result<()> {
        if !self.prefix_closed {
            self.read_prefix(records, i, record)?;
        }
        let event = &record.event;
        if event.kind == EventKind::Lifecycle {
            if event
                .lifecycle()
                .is_some_and(|l| l.kind == LifecycleKind::Fork)
            {
                self.last_fork_seq = record.seq;
            }
            return Ok(());
        }
        if !self.prefix_closed {
            // An id-less event of the legacy prefix: part of no modern execution.
            return Ok(());
        }
        if event.execution_id.is_empty() {
            return Err(invalid(format!(
                "seq {}: {} without an execution id after modern events",
                record.seq,
                event.kind.as_str()
            )));
        }
        let index = match self.by_id.get(event.execution_id.as_str()) {
            Some(&index) => index,
            None => {
                self.executions.push(Execution {
                    id: event.execution_id.clone(),
                    first: i,
                    anchor: i,
                    ..Execution::default()
                });
                self.by_id
                    .insert(event.execution_id.clone(), self.executions.len() - 1);
                self.executions.len() - 1
            }
        };
        let execution = &mut self.executions[index];
        match event.kind {
            EventKind::ExecutionStart => {
                if execution.first != i {
                    return Err(invalid(format!(
                        "seq {}: EXECUTION_START is not the first event of execution {}",
                        record.seq, execution.id
                    )));
                }
                let Some(start) = event.execution_start() else {
                    return Err(invalid(format!(
                        "seq {}: EXECUTION_START without a body",
                        record.seq
                    )));
                };
                execution.start = Some(start.clone());
            }
            EventKind::Input => add_input(execution, event.message()),
            EventKind::End => execution.end = Some(i),
            EventKind::Error => {}
            EventKind::Parked => {
                return Err(invalid(format!(
                    "seq {}: PARKED is transport-only and must never be journaled",
                    record.seq
                )));
            }
            kind if is_effect_kind(kind) => execution.effects.push(i),
            other => {
                return Err(invalid(format!(
                    "seq {}: unexpected {} record",
                    record.seq,
                    other.as_str()
                )));
            }
        }
        Ok(())
    }

    /// The execution a resume would pick: the last one, modern or (for a pure legacy log) the
    /// legacy tail. `None` for an empty log.
    pub fn last(&self) -> Option<&Execution> {
        self.executions.last()
    }

    /// Whether every event of the log is legacy or lifecycle.
    pub fn is_pure_legacy(&self, len: usize) -> bool {
        self.has_legacy && self.legacy_end == len
    }
}

fn add_input(execution: &mut Execution, message: Option<&Message>) {
    execution.input_records += 1;
    match message {
        Some(m) => execution.inputs.push(m.clone()),
        None => execution.input_without_message = true,
    }
}

/// The legacy execution replay re-runs (semantics §3.2 step 1): the whole log when it is all
/// legacy, else the prefix up to its last END, else none.
fn legacy_execution(records: &[LogRecord], legacy_end: usize) -> Option<Execution> {
    let covered = if legacy_end == records.len() {
        legacy_end
    } else {
        let last_end = records[..legacy_end]
            .iter()
            .rposition(|r| r.event.kind == EventKind::End)?;
        last_end + 1
    };
    let mut execution = Execution {
        legacy: true,
        ..Execution::default()
    };
    let mut anchor = None;
    let mut first_legacy = None;
    for (i, record) in records[..covered].iter().enumerate() {
        let event = &record.event;
        match event.kind {
            EventKind::Lifecycle => continue,
            EventKind::Input => {
                add_input(&mut execution, event.message());
                anchor.get_or_insert(i);
            }
            EventKind::End => execution.end = Some(i),
            EventKind::ModelCall
            | EventKind::Output
            | EventKind::ToolCall
            | EventKind::ToolResult => execution.effects.push(i),
            _ => {}
        }
        first_legacy.get_or_insert(i);
    }
    execution.anchor = anchor.or(first_legacy).unwrap_or(0);
    Some(execution)
}

/// The legacy turn a resume re-drives (semantics §3.6): the last INPUT of the prefix, its
/// effects after it, completed when an END or ERROR follows it. `None` when the prefix has no
/// INPUT.
pub fn legacy_tail(records: &[LogRecord], legacy_end: usize) -> Option<Execution> {
    let prefix = &records[..legacy_end];
    let input_at = prefix
        .iter()
        .rposition(|r| r.event.kind == EventKind::Input)?;
    let mut execution = Execution {
        legacy: true,
        first: input_at,
        anchor: input_at,
        ..Execution::default()
    };
    add_input(&mut execution, prefix[input_at].event.message());
    for (offset, record) in prefix[input_at + 1..].iter().enumerate() {
        let i = input_at + 1 + offset;
        match record.event.kind {
            EventKind::End | EventKind::Error => execution.end = Some(i),
            EventKind::ModelCall
            | EventKind::Output
            | EventKind::ToolCall
            | EventKind::ToolResult => execution.effects.push(i),
            _ => {}
        }
    }
    Some(execution)
}

/// Whether `execution` went through an approval: a gated call, approval records or a receipt.
pub fn bears_approval(execution: &Execution, records: &[LogRecord]) -> bool {
    execution.effects.iter().any(|&i| {
        records.get(i).is_some_and(|r| match &r.event.body {
            Some(EventBody::Approval(_) | EventBody::ApprovalResult(_)) => true,
            Some(EventBody::ToolCall(call)) => call.mediation == Mediation::RequiresApproval,
            Some(EventBody::Result(result)) => result.carries_approval_seqs(),
            _ => false,
        })
    })
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{
        Capabilities, Event, EventBody, HarnessEnd, Lifecycle, Mediation, ToolCall, ToolResult,
    };

    use super::*;

    fn rec(seq: i64, id: &str, kind: EventKind, body: Option<EventBody>) -> LogRecord {
        LogRecord {
            committed_at: None,
            seq,
            prev_hash: String::new(),
            hash: String::new(),
            fence: 0,
            event: Event {
                execution_id: id.into(),
                kind,
                body,
                ..Event::default()
            },
        }
    }

    fn input(seq: i64, id: &str, text: &str) -> LogRecord {
        rec(
            seq,
            id,
            EventKind::Input,
            Some(EventBody::Message(Message::text_message("user", text))),
        )
    }

    fn start(seq: i64, id: &str, count: Option<i64>) -> LogRecord {
        rec(
            seq,
            id,
            EventKind::ExecutionStart,
            Some(EventBody::ExecutionStart(ExecutionStart {
                input_count: count,
                ..ExecutionStart::default()
            })),
        )
    }

    fn end(seq: i64, id: &str) -> LogRecord {
        rec(
            seq,
            id,
            EventKind::End,
            Some(EventBody::End(HarnessEnd {
                state: "COMPLETED".into(),
                error: None,
            })),
        )
    }

    // semantics §3.2: executions group by id in first-seen order; lifecycle belongs to none.
    #[test]
    fn groups_modern_executions() {
        let records = vec![
            start(1, "a", Some(1)),
            input(2, "a", "one"),
            rec(3, "a", EventKind::Output, None),
            end(4, "a"),
            rec(
                5,
                "",
                EventKind::Lifecycle,
                Some(EventBody::Lifecycle(Lifecycle {
                    kind: LifecycleKind::Fork,
                    ..Lifecycle::default()
                })),
            ),
            start(6, "b", Some(1)),
            input(7, "b", "two"),
        ];
        let log = ExecutionLog::read(&records).unwrap();
        assert_eq!(log.executions.len(), 2);
        assert!(log.executions[0].completed());
        assert!(!log.executions[1].completed());
        assert_eq!(log.executions[0].effects, vec![2]);
        assert_eq!(log.last_fork_seq, 5);
        assert!(log.legacy.is_none());
        log.executions[0].check_inputs().unwrap();
    }

    // semantics §3.2 step 2: an id-less event after modern ones is invalid.
    #[test]
    fn idless_after_modern_is_invalid() {
        let records = vec![start(1, "a", Some(0)), input(2, "", "x")];
        assert!(matches!(
            ExecutionLog::read(&records),
            Err(ControllerError::InvalidExecutionLog(_))
        ));
    }

    // semantics §3.2 step 3: EXECUTION_START must come first in its execution.
    #[test]
    fn late_start_is_invalid() {
        let records = vec![input(1, "a", "x"), start(2, "a", Some(1))];
        ExecutionLog::read(&records).unwrap_err();
    }

    // semantics §3.2 step 4: count mismatch on a completed execution is invalid; fewer inputs on
    // an unfinished one is an incomplete invocation; a missing count fails closed.
    #[test]
    fn input_completeness() {
        let completed = vec![start(1, "a", Some(2)), input(2, "a", "x"), end(3, "a")];
        let log = ExecutionLog::read(&completed).unwrap();
        assert!(matches!(
            log.executions[0].check_inputs(),
            Err(ControllerError::InvalidExecutionLog(_))
        ));
        let unfinished = vec![start(1, "a", Some(2)), input(2, "a", "x")];
        let log = ExecutionLog::read(&unfinished).unwrap();
        assert!(matches!(
            log.executions[0].check_inputs(),
            Err(ControllerError::IncompleteInvocation {
                recorded: 1,
                expected: 2,
                ..
            })
        ));
        let countless = vec![start(1, "a", None), end(2, "a")];
        let log = ExecutionLog::read(&countless).unwrap();
        assert!(log.executions[0].check_inputs().is_err());
    }

    // semantics §3.6: a modern start after an unfinished legacy tail is an acceptable boundary;
    // an id-bearing non-start event is not.
    #[test]
    fn legacy_boundaries() {
        let superseded = vec![input(1, "", "old"), start(2, "m", Some(0))];
        let log = ExecutionLog::read(&superseded).unwrap();
        assert!(log.has_legacy);
        assert_eq!(log.legacy_end, 1);
        assert!(
            log.legacy.is_none(),
            "an unfinished legacy tail is not replayed"
        );
        let bad = vec![input(1, "", "old"), input(2, "m", "new")];
        ExecutionLog::read(&bad).unwrap_err();
        let ended = vec![input(1, "", "old"), end(2, ""), input(3, "m", "new")];
        let log = ExecutionLog::read(&ended).unwrap();
        let legacy = log.legacy.unwrap();
        assert_eq!(legacy.inputs.len(), 1);
        assert!(legacy.completed());
    }

    // semantics §3.6: resume of a legacy tail selects the last INPUT.
    #[test]
    fn legacy_tail_selects_last_input() {
        let records = vec![
            input(1, "", "first"),
            rec(2, "", EventKind::Output, None),
            end(3, ""),
            input(4, "", "second"),
            rec(5, "", EventKind::ModelCall, None),
        ];
        let tail = legacy_tail(&records, records.len()).unwrap();
        assert_eq!(tail.first, 3);
        assert_eq!(tail.inputs[0].text(), "second");
        assert_eq!(tail.effects, vec![4]);
        assert!(!tail.completed());
    }

    fn ended(seq: i64, id: &str, state: &str) -> LogRecord {
        let mut record = end(seq, id);
        record.event.body = Some(EventBody::End(HarnessEnd {
            state: state.into(),
            error: None,
        }));
        record
    }

    fn tool_call(seq: i64, id: &str, call_id: &str, mediation: Mediation) -> LogRecord {
        rec(
            seq,
            id,
            EventKind::ToolCall,
            Some(EventBody::ToolCall(ToolCall {
                id: call_id.into(),
                tool: "charge".into(),
                mediation,
                idempotency_key: "k".into(),
                ..ToolCall::default()
            })),
        )
    }

    fn tool_result(seq: i64, id: &str, call_id: &str) -> LogRecord {
        rec(
            seq,
            id,
            EventKind::ToolResult,
            Some(EventBody::Result(ToolResult {
                id: call_id.into(),
                ..ToolResult::default()
            })),
        )
    }

    fn fork(seq: i64) -> LogRecord {
        rec(
            seq,
            "",
            EventKind::Lifecycle,
            Some(EventBody::Lifecycle(Lifecycle {
                kind: LifecycleKind::Fork,
                ..Lifecycle::default()
            })),
        )
    }

    fn descriptor(id: &str, version: &str, resumability: Resumability) -> Descriptor {
        Descriptor {
            id: id.into(),
            version: version.into(),
            capabilities: Capabilities {
                resumability,
                ..Capabilities::default()
            },
            ..Descriptor::default()
        }
    }

    // semantics §3.3: an execution's effects are served in journal order.
    #[test]
    fn effect_records_are_copied_in_order() {
        let records = vec![
            start(1, "a", Some(0)),
            rec(2, "a", EventKind::ModelCall, None),
            rec(3, "a", EventKind::Output, None),
        ];
        let log = ExecutionLog::read(&records).unwrap();
        let effects = log.executions[0].effect_records(&records);
        let seqs: Vec<i64> = effects.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![2, 3]);
    }

    // semantics §3.3: only a turn that ended FAILED or CANCELED may fail again on replay; an
    // END without a state (legacy) counts as COMPLETED.
    #[test]
    fn ended_unsuccessfully_reads_the_end_state() {
        for (state, unsuccessful) in [("COMPLETED", false), ("", false), ("FAILED", true)] {
            let records = vec![start(1, "a", Some(0)), ended(2, "a", state)];
            let log = ExecutionLog::read(&records).unwrap();
            assert_eq!(
                log.executions[0].ended_unsuccessfully(&records),
                unsuccessful,
                "{state:?}"
            );
        }
        let open = vec![start(1, "a", Some(0))];
        let log = ExecutionLog::read(&open).unwrap();
        assert!(!log.executions[0].ended_unsuccessfully(&open));
    }

    // semantics §3.4 step 4, §3.7: an intent recorded before the FORK with no result cannot be
    // re-driven; one resolved before the fork, or recorded after it, can.
    #[test]
    fn inherited_unresolved_intent_is_refused() {
        let records = vec![
            start(1, "a", Some(0)),
            tool_call(2, "a", "c1", Mediation::ControllerMediated),
            tool_result(3, "a", "c1"),
            tool_call(4, "a", "c2", Mediation::ControllerMediated),
            fork(5),
            tool_call(6, "a", "c3", Mediation::ControllerMediated),
        ];
        let log = ExecutionLog::read(&records).unwrap();
        let execution = &log.executions[0];
        assert!(matches!(
            execution.check_inherited_intents(&records, log.last_fork_seq),
            Err(ControllerError::InheritedToolIntent { tool_call_id }) if tool_call_id == "c2"
        ));
        execution.check_inherited_intents(&records, 0).unwrap();
    }

    // semantics §3.5: the serving harness must match the recorded name and version, and an
    // execution that went through an approval needs a stateless-replay harness.
    #[test]
    fn identity_checks() {
        let mut marker = start(1, "a", Some(0));
        if let Some(EventBody::ExecutionStart(start)) = &mut marker.event.body {
            start.harness = "chat".into();
            start.harness_version = "1".into();
        }
        let records = vec![marker, end(2, "a")];
        let log = ExecutionLog::read(&records).unwrap();
        let executions: Vec<&Execution> = log.executions.iter().collect();
        assert!(needs_identity_check(&executions, &records));
        let stateless = Resumability::StatelessReplay;
        check_identity(
            &executions,
            &records,
            "chat",
            &descriptor("x", "1", stateless),
        )
        .unwrap();
        assert!(matches!(
            check_identity(
                &executions,
                &records,
                "echo",
                &descriptor("x", "1", stateless)
            ),
            Err(ControllerError::HarnessMismatch { .. })
        ));
        assert!(matches!(
            check_identity(
                &executions,
                &records,
                "chat",
                &descriptor("x", "2", stateless)
            ),
            Err(ControllerError::HarnessVersionMismatch { .. })
        ));

        let gated = vec![
            start(1, "b", Some(0)),
            tool_call(2, "b", "c", Mediation::RequiresApproval),
        ];
        let log = ExecutionLog::read(&gated).unwrap();
        let executions: Vec<&Execution> = log.executions.iter().collect();
        assert!(needs_identity_check(&executions, &gated));
        assert!(matches!(
            check_identity(
                &executions,
                &gated,
                "x",
                &descriptor("x", "", Resumability::RequiresMemorySnapshot)
            ),
            Err(ControllerError::ApprovalUnavailable)
        ));

        let anonymous = vec![start(1, "c", Some(0)), end(2, "c")];
        let log = ExecutionLog::read(&anonymous).unwrap();
        let executions: Vec<&Execution> = log.executions.iter().collect();
        assert!(!needs_identity_check(&executions, &anonymous));
    }

    // I4: a memory-snapshot harness is given no history; any other gets the log's prefix.
    #[test]
    fn history_depends_on_resumability() {
        let records = vec![start(1, "a", Some(1)), input(2, "a", "x"), end(3, "a")];
        let stateless = descriptor("h", "", Resumability::StatelessReplay);
        let snapshot = descriptor("h", "", Resumability::RequiresMemorySnapshot);
        let shared = shared_history(&records);
        assert_eq!(history_for(&stateless, &shared, 2).len(), 2);
        assert!(history_for(&snapshot, &shared, 2).is_empty());
        assert_eq!(history_of_log(&stateless, records.clone()).len(), 3);
        assert!(history_of_log(&snapshot, records).is_empty());
    }
}
