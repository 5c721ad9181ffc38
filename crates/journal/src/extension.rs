//! The one append rule every backend runs (semantics §1.4): given the session's log as the
//! append finds it, decide — without I/O — whether the append may go ahead, which fence it
//! writes with, the records it adds (seq, link and hash each) and what they change in the
//! session's projections (compute state, usage totals, deletion mark, pending approvals).
//! A backend reads the head, calls [`extend`], and then only stores what it returns.
//!
//! ```text
//!  head (seq, hash, fence, compute)  ──┐
//!  cursor, fence use, events         ──┼──▶ extend ──▶ Extension { fence, records, head',
//!                                      │                usage, deletes, approvals }
//!                                      └──▶ Conflict | Fenced   (nothing changes)
//! ```

use std::borrow::Borrow;

use agentsessions_api::ComputeState;

use crate::approvals::{PendingChange, pending_change};
use crate::chain::PreparedEvent;
use crate::error::Result;
use crate::projection::{marks_deletion, project_compute_state};
use crate::record::LogRecord;
use crate::rules;
use crate::usage::UsageTotals;

/// A session's log as an append finds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogHead {
    /// The highest committed seq (a shared-prefix child's fork point before its own records).
    pub seq: i64,
    /// That record's hash; `""` before the first record.
    pub hash: String,
    /// The session's stored fence.
    pub fence: i64,
    /// The compute projection.
    pub compute: ComputeState,
}

/// How an append uses the session's fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceUse {
    /// Append with the writer's fence; refused when it is below the session's.
    Hold(i64),
    /// Mint the next fence and append with it, once the cursor check passed (an incarnation's
    /// opening): a stale cursor changes nothing, not even the fence.
    Mint,
}

impl FenceUse {
    /// `Some(fence)` holds it, `None` mints.
    pub fn from_option(fence: Option<i64>) -> Self {
        fence.map_or(Self::Mint, Self::Hold)
    }

    /// The held fence, or `None` for a minting append.
    pub fn held(self) -> Option<i64> {
        match self {
            Self::Hold(fence) => Some(fence),
            Self::Mint => None,
        }
    }
}

/// A record an append adds, before it is stored; `E` is the prepared event, owned or borrowed
/// from the command that carries it.
#[derive(Debug, Clone)]
pub struct Extended<E = PreparedEvent> {
    /// Its seq.
    pub seq: i64,
    /// The hash it links to.
    pub prev_hash: String,
    /// Its content hash.
    pub hash: String,
    /// The event, with its stored and canonical bytes.
    pub event: E,
}

/// What an append changes, for a backend to store.
#[derive(Debug, Clone)]
pub struct Extension<E = PreparedEvent> {
    /// The fence every record carries.
    pub fence: i64,
    /// Whether the append minted it (the session's stored fence becomes [`Extension::fence`]).
    pub minted: bool,
    /// The records, in seq order; empty for an append of nothing (which still checked).
    pub records: Vec<Extended<E>>,
    /// The log after the append.
    pub head: LogHead,
    /// What the records add to the session's usage totals.
    pub usage: UsageTotals,
    /// Whether a record marks the session for deletion (its deletion state moves from active to
    /// pending, and nothing else changes it).
    pub deletes: bool,
    /// How the records move the session's pending approvals, by the seq that moves them, in
    /// order.
    pub approvals: Vec<(i64, PendingChange)>,
}

impl Extension {
    /// The committed records, stamped `committed_at`.
    pub fn into_records(
        self,
        committed_at: Option<agentsessions_api::Timestamp>,
    ) -> Vec<LogRecord> {
        let fence = self.fence;
        self.records
            .into_iter()
            .map(|r| LogRecord {
                seq: r.seq,
                prev_hash: r.prev_hash,
                hash: r.hash,
                fence,
                event: r.event.event,
                committed_at,
            })
            .collect()
    }
}

/// Decides an append of `events` to `session` at `expected_last_seq` with `fence`, over `head`.
///
/// # Errors
/// [`Conflict`](crate::JournalError::Conflict) when `expected_last_seq` is not the head,
/// [`Fenced`](crate::JournalError::Fenced) when a held fence is below the session's (the cursor
/// is checked first, and a minting append checks only the cursor).
pub fn extend<E: Borrow<PreparedEvent>>(
    session: &str,
    head: &LogHead,
    expected_last_seq: i64,
    fence: FenceUse,
    events: impl ExactSizeIterator<Item = E>,
) -> Result<Extension<E>> {
    let held = fence.held();
    rules::check_append_or_mint(session, expected_last_seq, head.seq, held, head.fence)?;
    let minted = held.is_none() && events.len() > 0;
    let fence = match held {
        Some(fence) => fence,
        None if minted => head.fence + 1,
        None => head.fence,
    };
    let mut after = LogHead {
        fence: if minted { fence } else { head.fence },
        ..head.clone()
    };
    let mut usage = UsageTotals::default();
    let mut deletes = false;
    let mut approvals = Vec::new();
    let mut records = Vec::with_capacity(events.len());
    for event in events {
        let seq = after.seq + 1;
        let prepared = event.borrow();
        let hash = prepared.hash_at(&after.hash, seq);
        after.compute = project_compute_state(after.compute, &prepared.event);
        if let Some(added) = UsageTotals::added_by(&prepared.event) {
            usage = usage.plus(added);
        }
        deletes |= marks_deletion(&prepared.event);
        if let Some(change) = pending_change(&prepared.event) {
            approvals.push((seq, change));
        }
        records.push(Extended {
            seq,
            prev_hash: std::mem::replace(&mut after.hash, hash.clone()),
            hash,
            event,
        });
        after.seq = seq;
    }
    Ok(Extension {
        fence,
        minted,
        records,
        head: after,
        usage,
        deletes,
        approvals,
    })
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{
        ApprovalRequest, ApprovalResult, Event, EventBody, EventKind, HarnessEnd, Lifecycle,
        LifecycleKind, Message, Usage,
    };
    use agentsessions_wire::{content_hash, pb};
    use proptest::prelude::*;

    use super::*;
    use crate::JournalError;

    /// One of the events that move a projection, or a plain one.
    fn event(kind: u8, n: i64) -> Event {
        let exec = format!("e{}", n % 3);
        let event = match kind % 7 {
            0 => Event::new(
                EventKind::Usage,
                EventBody::Usage(Usage {
                    model: "m".into(),
                    input_tokens: n,
                    output_tokens: 2 * n,
                    reasoning_tokens: 1,
                    cached_input_tokens: n / 2,
                }),
            ),
            1 => Event::new(
                EventKind::ApprovalRequest,
                EventBody::Approval(ApprovalRequest {
                    tool_call_id: format!("c{n}"),
                    reason: String::new(),
                }),
            ),
            2 => Event::new(
                EventKind::ApprovalResult,
                EventBody::ApprovalResult(ApprovalResult {
                    tool_call_id: format!("c{n}"),
                    approved: n % 2 == 0,
                    reason: String::new(),
                    request_seq: n,
                }),
            ),
            3 => Event::new(EventKind::End, EventBody::End(HarnessEnd::default())),
            4 => Event::new(
                EventKind::Lifecycle,
                EventBody::Lifecycle(Lifecycle {
                    kind: if n % 2 == 0 {
                        LifecycleKind::Suspend
                    } else {
                        LifecycleKind::Delete
                    },
                    ..Lifecycle::default()
                }),
            ),
            _ => Event::new(
                EventKind::Output,
                EventBody::Message(Message::text_message("assistant", format!("out {n}"))),
            ),
        };
        event.with_execution(exec)
    }

    fn prepared(events: &[Event]) -> Vec<PreparedEvent> {
        events
            .iter()
            .cloned()
            .map(|e| PreparedEvent::new(e).unwrap_or_else(|err| panic!("{err}")))
            .collect()
    }

    fn head(seq: i64, fence: i64) -> LogHead {
        LogHead {
            seq,
            hash: if seq == 0 {
                String::new()
            } else {
                "ab".repeat(32)
            },
            fence,
            compute: ComputeState::None,
        }
    }

    proptest! {
        // The chain: consecutive seqs from head + 1, each linked to the one before and hashed
        // as any verifier recomputes it (hashing (a)); the head moves to the last.
        #[test]
        fn records_chain_from_the_head(
            start in 0_i64..1_000,
            kinds in proptest::collection::vec((0_u8..7, 1_i64..50), 0..12),
        ) {
            let events: Vec<Event> = kinds.iter().map(|(k, n)| event(*k, *n)).collect();
            let before = head(start, 3);
            let ext = extend("s", &before, start, FenceUse::Hold(3), prepared(&events).into_iter())
                .unwrap_or_else(|e| panic!("{e}"));
            prop_assert_eq!(ext.records.len(), events.len());
            let mut prev = before.hash;
            for (i, (record, event)) in ext.records.iter().zip(&events).enumerate() {
                let seq = start + 1 + i64::try_from(i).unwrap_or_default();
                prop_assert_eq!(record.seq, seq);
                prop_assert_eq!(&record.prev_hash, &prev);
                let recomputed = content_hash(&prev, seq, &pb::Event::from(event))
                    .unwrap_or_default();
                prop_assert_eq!(&record.hash, &recomputed);
                prev = record.hash.clone();
            }
            prop_assert_eq!(ext.head.seq, start + i64::try_from(events.len()).unwrap_or_default());
            prop_assert_eq!(&ext.head.hash, &prev);
        }

        // The projections are the fold of each event's own change, in order.
        #[test]
        fn projections_fold_the_events(
            kinds in proptest::collection::vec((0_u8..7, 1_i64..50), 0..12),
        ) {
            let events: Vec<Event> = kinds.iter().map(|(k, n)| event(*k, *n)).collect();
            let ext = extend("s", &head(0, 0), 0, FenceUse::Mint, prepared(&events).into_iter())
                .unwrap_or_else(|e| panic!("{e}"));
            let usage = events
                .iter()
                .filter_map(UsageTotals::added_by)
                .fold(UsageTotals::default(), UsageTotals::plus);
            prop_assert_eq!(ext.usage, usage);
            let compute = events.iter().fold(ComputeState::None, project_compute_state);
            prop_assert_eq!(ext.head.compute, compute);
            prop_assert_eq!(ext.deletes, events.iter().any(marks_deletion));
            let changes: Vec<(i64, PendingChange)> = events
                .iter()
                .zip(1..)
                .filter_map(|(e, seq)| pending_change(e).map(|c| (seq, c)))
                .collect();
            prop_assert_eq!(ext.approvals, changes);
        }

        // Semantics §1.4: a stale cursor is a conflict, a stale fence is fenced, the cursor is
        // judged first; a refused append decides nothing.
        #[test]
        fn cursor_then_fence(at in 0_i64..20, expected in 0_i64..20, held in 0_i64..6, stored in 0_i64..6) {
            let events = prepared(&[event(6, 1)]);
            let got = extend("s", &head(at, stored), expected, FenceUse::Hold(held), events.into_iter());
            match got {
                Err(JournalError::Conflict { expected: e, actual, .. }) => {
                    prop_assert!(expected != at);
                    prop_assert_eq!((e, actual), (expected, at));
                }
                Err(JournalError::Fenced { fence, current, .. }) => {
                    prop_assert!(expected == at && held < stored);
                    prop_assert_eq!((fence, current), (held, stored));
                }
                Ok(ext) => {
                    prop_assert!(expected == at && held >= stored);
                    prop_assert_eq!((ext.fence, ext.minted, ext.head.fence), (held, false, stored));
                }
                Err(other) => prop_assert!(false, "unexpected refusal {other}"),
            }
        }

        // A minting append takes the next fence, whatever the writer held before, and checks
        // only the cursor; an empty one mints nothing.
        #[test]
        fn minting_takes_the_next_fence(stored in 0_i64..100, n in 0_usize..4) {
            let events: Vec<Event> = (0..n).map(|i| event(6, i64::try_from(i).unwrap_or(0))).collect();
            let ext = extend("s", &head(5, stored), 5, FenceUse::Mint, prepared(&events).into_iter())
                .unwrap_or_else(|e| panic!("{e}"));
            if n == 0 {
                prop_assert_eq!((ext.fence, ext.minted, ext.head.fence), (stored, false, stored));
            } else {
                prop_assert_eq!((ext.fence, ext.minted, ext.head.fence), (stored + 1, true, stored + 1));
            }
            let stale = extend("s", &head(5, stored), 4, FenceUse::Mint, prepared(&events).into_iter());
            prop_assert!(matches!(stale, Err(JournalError::Conflict { .. })), "stale cursor accepted");
        }
    }

    #[test]
    fn records_carry_the_fence_and_the_commit_time() {
        let ext = extend(
            "s",
            &head(0, 1),
            0,
            FenceUse::Hold(4),
            prepared(&[event(6, 1)]).into_iter(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let at = agentsessions_api::Timestamp::from_unix_nanos(7);
        let records = ext.into_records(Some(at));
        assert_eq!(records.len(), 1);
        assert_eq!((records[0].seq, records[0].fence), (1, 4));
        assert_eq!(records[0].committed_at, Some(at));
    }
}
