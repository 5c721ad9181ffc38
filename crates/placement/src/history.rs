//! What placement reads from a session's records: deletion, turns started on a harness, the
//! checkpoint and compute instance the journal last recorded, and the harness of a pending
//! execution. Pure functions over records, so they are tested without I/O.

use agentsessions_api::{EventBody, LifecycleKind, SnapshotRef};
use agentsessions_controller::log::ExecutionLog;
use agentsessions_journal::LogRecord;

/// Whether the session recorded its deletion intent (extensions §3).
pub fn deleted(records: &[LogRecord]) -> bool {
    records.iter().any(|r| {
        matches!(&r.event.body, Some(EventBody::Lifecycle(l)) if l.kind == LifecycleKind::Delete)
    })
}

/// Turns started on `harness`, counting the ones no harness name was recorded for.
pub fn started_turns(records: &[LogRecord], harness: &str) -> usize {
    records
        .iter()
        .filter(|r| match &r.event.body {
            Some(EventBody::ExecutionStart(s)) => s.harness.is_empty() || s.harness == harness,
            _ => false,
        })
        .count()
}

/// The latest SUSPEND checkpoint that belongs to `session` itself (a parent's checkpoint in a
/// fork child's prefix is skipped); empty when there is none.
pub fn recorded_checkpoint(records: &[LogRecord], session: &str) -> SnapshotRef {
    records
        .iter()
        .rev()
        .find_map(|r| match &r.event.body {
            Some(EventBody::Lifecycle(l)) if l.kind == LifecycleKind::Suspend => {
                l.snapshot.as_ref().filter(|s| s.local == session).cloned()
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// The compute instance the journal last recorded for `harness`: from the latest turn started
/// on it or the latest FORK marker, whichever is later; empty when none.
pub fn recorded_instance(records: &[LogRecord], harness: &str) -> String {
    records
        .iter()
        .rev()
        .find_map(|r| match &r.event.body {
            Some(EventBody::ExecutionStart(s)) if s.harness.is_empty() || s.harness == harness => {
                Some(s.compute_instance.clone())
            }
            Some(EventBody::Lifecycle(l)) if l.kind == LifecycleKind::Fork => {
                Some(l.compute_instance.clone())
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// The registry name recorded by the last execution when it has not ended.
pub fn pending_harness(records: &[LogRecord]) -> Option<String> {
    let log = ExecutionLog::read(records).ok()?;
    let last = log.last()?;
    if last.completed() {
        return None;
    }
    last.start
        .as_ref()
        .map(|s| s.harness.clone())
        .filter(|h| !h.is_empty())
}
