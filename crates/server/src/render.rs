//! How a session is shown on the wire (semantics §1.7, §5.4, extensions §3): the stored row and
//! the journal's projections, plus what only the log tail can say — a pending approval and a
//! deletion intent. Every response that returns a Session uses [`render`].

use agentsessions_api::{DeletionState, EventBody, EventKind, ExecState, LifecycleKind, Session};
use agentsessions_controller::approval::ApprovalScan;
use agentsessions_journal::{LogRecord, PendingApproval, SessionInfo};
use agentsessions_placement::{Placer, SessionCompute};
use agentsessions_wire::convert::{struct_to_pb, timestamp_to_pb};
use agentsessions_wire::pb;

use crate::error::Result;

/// How many records from the head [`render`] reads to find the last non-lifecycle record.
const TAIL: usize = 8;

/// What the log tail says about a session.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    /// The last record is a LIFECYCLE DELETE (nothing can follow one).
    pub(crate) deleted: bool,
    /// An owned, undecided approval request (semantics §5.4).
    pub(crate) pending: Option<agentsessions_api::ApprovalRef>,
    /// How the last turn stands as its records say, ignoring whether this host runs it:
    /// `None` when no turn was ever recorded.
    pub(crate) turn: Option<ExecState>,
}

/// The state the last non-lifecycle record leaves its turn in. Only an END says a turn
/// finished; any other record (an ERROR without END, a start, an effect, a decided approval)
/// leaves it interrupted, waiting to be resumed. An END whose state this build does not know
/// reads as failed: never as completed.
fn turn_state(last_effect: &LogRecord) -> ExecState {
    match &last_effect.event.body {
        Some(EventBody::End(end)) if last_effect.event.kind == EventKind::End => {
            match end.state.as_str() {
                "COMPLETED" => ExecState::Completed,
                "CANCELED" => ExecState::Canceled,
                _ => ExecState::Failed,
            }
        }
        _ => ExecState::Interrupted,
    }
}

fn is_lifecycle(record: &LogRecord, kind: Option<LifecycleKind>) -> bool {
    match &record.event.body {
        Some(EventBody::Lifecycle(l)) if record.event.kind == EventKind::Lifecycle => {
            kind.is_none_or(|k| l.kind == k)
        }
        _ => record.event.kind == EventKind::Lifecycle,
    }
}

/// Reads the tail of `uid`'s log to find a deletion intent and how the last turn stands, and,
/// only when an approval request may be pending, takes the approval scan from the session's kept
/// state (which reads only what was appended since it was kept, not the whole log). A log whose
/// approval evidence does not scan renders without a ref rather than failing the read (the
/// tolerant rule of semantics §5.4).
pub(crate) async fn tail(placer: &Placer, uid: &str, last_seq: i64) -> Result<Tail> {
    if last_seq <= 0 {
        return Ok(Tail::default());
    }
    let journal = placer.journal();
    let window = i64::try_from(TAIL).unwrap_or(1);
    let records = journal
        .read(uid, (last_seq - window + 1).max(1), last_seq)
        .await?;
    let deleted = records
        .last()
        .is_some_and(|r| is_lifecycle(r, Some(LifecycleKind::Delete)));
    let last_effect = records.iter().rev().find(|r| !is_lifecycle(r, None));
    let may_be_pending = match last_effect {
        Some(record) => record.event.kind == EventKind::ApprovalRequest,
        // Only lifecycle records in the window: look at the whole log.
        None => records.len() == TAIL,
    };
    let mut turn = last_effect.map(turn_state);
    let pending = if may_be_pending {
        let state = placer.states().current(journal.as_ref(), uid).await?;
        let all = seq_range(state.records(), 1, last_seq);
        if turn.is_none() {
            turn = all
                .iter()
                .rev()
                .find(|r| !is_lifecycle(r, None))
                .map(turn_state);
        }
        let pending_ref = |scan: &ApprovalScan| {
            scan.selected()
                .filter(|g| g.is_pending())
                .map(|g| g.park_ref())
        };
        if state.head() == last_seq {
            // The scan kept with the state is of exactly these records.
            state.view().approvals().ok().and_then(pending_ref)
        } else {
            // The session moved on since `last_seq` was read: scan what the caller saw.
            ApprovalScan::scan(all, last_seq)
                .ok()
                .and_then(|scan| pending_ref(&scan))
        }
    } else {
        None
    };
    Ok(Tail {
        deleted,
        pending,
        turn,
    })
}

/// The wire Session for `info`, with its compute as the placer sees it (the journal's state,
/// checked with the runtime). A session an operation holds on this host is reported as
/// `EXEC_RUNNING` (the published server never does); otherwise the log's tail says how the last
/// turn stands (awaiting, completed, failed, canceled or interrupted), never completed for a
/// turn that did not end.
///
/// # Errors
/// Journal read failures.
pub(crate) async fn render(placer: &Placer, info: SessionInfo) -> Result<pb::Session> {
    let running = placer.is_busy(&info.row.uid);
    let tail = tail(placer, &info.row.uid, info.last_seq).await?;
    let compute = placer.session_compute(&info).await;
    Ok(render_placed(placer, info, &tail, running, compute))
}

/// A listing's Session: the journal's compute state, no runtime asked, so a page costs one tail
/// read per session and never waits on a backend (GetSession asks the runtime).
///
/// # Errors
/// Journal read failures.
pub(crate) async fn render_listed(placer: &Placer, info: SessionInfo) -> Result<pb::Session> {
    let tail = tail(placer, &info.row.uid, info.last_seq).await?;
    Ok(render_with(placer, info, &tail))
}

/// [`render`] with the tail already read and the journal's compute state, no runtime asked.
pub(crate) fn render_with(placer: &Placer, info: SessionInfo, tail: &Tail) -> pb::Session {
    let running = placer.is_busy(&info.row.uid);
    let compute = SessionCompute::recorded(&info);
    render_placed(placer, info, tail, running, compute)
}

fn render_placed(
    placer: &Placer,
    info: SessionInfo,
    tail: &Tail,
    running: bool,
    compute: SessionCompute,
) -> pb::Session {
    let exec = if running {
        ExecState::Running
    } else if tail.pending.is_some() {
        ExecState::Awaiting
    } else {
        // A log of lifecycle records only never ran a turn.
        tail.turn.unwrap_or(ExecState::Pending)
    };
    let row = info.row;
    let created = row.created_at;
    // A row written before the host recorded the harness it resolved names none: its turns run
    // on the default route (the pin rule reads it so too).
    let harness = if row.harness.is_empty() {
        placer.registry().default_name()
    } else {
        row.harness
    };
    let session = Session {
        uid: row.uid,
        project: row.project,
        name: row.name,
        harness,
        model: row.model,
        exec,
        compute_state: compute.state,
        last_seq: info.last_seq,
        parent_uid: row.parent_uid,
        fork_seq: row.fork_seq,
        identity: row.identity,
        compute: compute.compute,
        origin: row.origin,
        labels: row.labels,
        annotations: row.annotations,
        owner: row.owner,
        // The stored state; a delete marker at the tail of a log written before that state was
        // stored counts too.
        deletion: if tail.deleted && !info.deletion.is_deleted() {
            DeletionState::Pending
        } else {
            info.deletion
        },
    };
    let mut wire = pb::Session::from(session);
    if let Some(meta) = wire.metadata.as_mut() {
        meta.create_time = created.map(timestamp_to_pb);
        meta.update_time = Some(timestamp_to_pb(info.updated_at));
    }
    wire.pending_approval = tail.pending.clone().map(Into::into);
    wire.usage = (!info.usage.is_empty()).then_some(pb::UsageTotals {
        input_tokens: info.usage.input_tokens,
        output_tokens: info.usage.output_tokens,
        reasoning_tokens: info.usage.reasoning_tokens,
        cached_input_tokens: info.usage.cached_input_tokens,
    });
    wire
}

/// A pending approval on the wire (the ListApprovals extension).
pub(crate) fn approval_to_pb(approval: PendingApproval) -> pb::PendingApproval {
    let owner = approval.owner.valid().then(|| approval.owner.into());
    pb::PendingApproval {
        session_uid: approval.session,
        execution_id: approval.execution_id,
        tool_call_id: approval.tool_call_id,
        request_seq: approval.request_seq,
        tool: approval.tool,
        args: approval.args.map(struct_to_pb),
        reason: approval.reason,
        requested_at: Some(timestamp_to_pb(approval.requested_at)),
        project: approval.project,
        owner,
    }
}

/// A journal record on the wire.
pub(crate) fn record_to_pb(record: &LogRecord) -> pb::LogRecord {
    pb::LogRecord {
        seq: record.seq,
        prev_hash: record.prev_hash.clone(),
        content_hash: record.hash.clone(),
        fence: record.fence,
        event: Some(pb::Event::from(&record.event)),
        commit_time: record.committed_at.map(timestamp_to_pb),
    }
}

/// The records of `records` (in seq order) whose seq is in `from..=last`.
pub(crate) fn seq_range(records: &[LogRecord], from: i64, last: i64) -> &[LogRecord] {
    let start = records.partition_point(|r| r.seq < from);
    let end = records.partition_point(|r| r.seq <= last).max(start);
    records.get(start..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use agentsessions_journal::LogRecord;

    use super::seq_range;

    #[test]
    fn seq_range_picks_by_seq() {
        let records: Vec<LogRecord> = (1..=10)
            .map(|seq| LogRecord {
                seq,
                prev_hash: String::new(),
                hash: String::new(),
                fence: 1,
                event: agentsessions_api::Event::new(
                    agentsessions_api::EventKind::Input,
                    agentsessions_api::EventBody::Message(
                        agentsessions_api::Message::text_message("user", "x"),
                    ),
                ),
                committed_at: None,
            })
            .collect();
        let seqs = |from, last| -> Vec<i64> {
            seq_range(&records, from, last)
                .iter()
                .map(|r| r.seq)
                .collect()
        };
        assert_eq!(seqs(3, 5), [3, 4, 5]);
        assert_eq!(seqs(1, 100), (1..=10).collect::<Vec<_>>());
        assert!(seqs(11, 20).is_empty());
        assert!(seqs(5, 4).is_empty());
    }
}
