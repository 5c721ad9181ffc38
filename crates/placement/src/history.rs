//! What placement reads from a session's records: deletion, turns started on a harness, the
//! checkpoint and compute instance the journal last recorded, and the harness of a pending
//! execution. Pure functions over records, so they are tested without I/O.

use std::collections::HashMap;

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

/// The readings above kept up to date record by record, so a host that keeps a session's log
/// between operations answers them without a scan: each record is applied once, in seq order.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    deleted: bool,
    /// Turns started per recorded harness name ("" for turns that recorded none).
    turns: HashMap<String, usize>,
    /// The latest turn started per recorded harness name: its record index and instance.
    instances: HashMap<String, (usize, String)>,
    /// The latest FORK marker: its record index and instance.
    fork_instance: Option<(usize, String)>,
    /// The latest SUSPEND checkpoint that belongs to the session itself.
    checkpoint: SnapshotRef,
}

impl Facts {
    /// Applies record `index` (0-based, seq order) of `session`'s log.
    pub fn apply(&mut self, session: &str, index: usize, record: &LogRecord) {
        match &record.event.body {
            Some(EventBody::ExecutionStart(s)) => {
                *self.turns.entry(s.harness.clone()).or_default() += 1;
                self.instances
                    .insert(s.harness.clone(), (index, s.compute_instance.clone()));
            }
            Some(EventBody::Lifecycle(l)) => match l.kind {
                LifecycleKind::Delete => self.deleted = true,
                LifecycleKind::Fork => {
                    self.fork_instance = Some((index, l.compute_instance.clone()));
                }
                LifecycleKind::Suspend => {
                    if let Some(snapshot) = l.snapshot.as_ref().filter(|s| s.local == session) {
                        self.checkpoint = snapshot.clone();
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// As [`deleted`].
    pub fn deleted(&self) -> bool {
        self.deleted
    }

    /// As [`started_turns`].
    pub fn started_turns(&self, harness: &str) -> usize {
        let unnamed = self.turns.get("").copied().unwrap_or(0);
        if harness.is_empty() {
            return unnamed;
        }
        unnamed + self.turns.get(harness).copied().unwrap_or(0)
    }

    /// As [`recorded_checkpoint`] for the session the facts were applied for.
    pub fn recorded_checkpoint(&self) -> SnapshotRef {
        self.checkpoint.clone()
    }

    /// As [`recorded_instance`].
    pub fn recorded_instance(&self, harness: &str) -> String {
        [
            self.instances.get(""),
            self.instances.get(harness),
            self.fork_instance.as_ref(),
        ]
        .into_iter()
        .flatten()
        .max_by_key(|(index, _)| *index)
        .map(|(_, instance)| instance.clone())
        .unwrap_or_default()
    }
}
