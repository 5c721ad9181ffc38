//! What the crash soak has verified of each session, so that a round reads only what is new
//! instead of replaying every session from seq 1 (a round would otherwise grow with the history).
//!
//! Per session the ledger keeps the verified prefix of the chain (its length and head hash),
//! every acknowledged record (seq → hash, as the client received it on its Exec stream) and
//! which of those were not yet compared with storage. A round reads the session from the lowest
//! of the prefix's last record and the lowest unchecked acknowledgement, up to the head:
//!
//! ```text
//!  seq  1 ─────────────── anchor ─────────── head
//!       └ verified prefix ┘└ re-read ┘└ new ┘
//! ```
//!
//! The records read are verified as a chain (content hashes, links, no gap), the anchor's hash
//! must be the one kept (a record's hash covers its link, so the whole prefix before it is the
//! same chain, and a lost or rewritten tail shows), the new records must continue from it, and
//! every unchecked acknowledgement must be stored with the hash the client was given. A full
//! check ([`Ledger::full`]) forgets the prefix and compares every acknowledgement again: the
//! soak runs one every so many rounds and one at the end.

use std::collections::{BTreeMap, BTreeSet};

use agentsessions_client::decode;
use agentsessions_journal::{ChainSummary, ChainVerifier};
use agentsessions_wire::pb;

/// An invariant the journal broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Finding {
    /// A record the ledger relies on (acknowledged, or the verified prefix's last) is not stored.
    Lost { session: String, seq: i64 },
    /// A record is stored with another hash than the one acknowledged or verified before.
    Changed {
        session: String,
        seq: i64,
        was: String,
        now: String,
    },
    /// A client was told two different records at one seq.
    AcknowledgedTwice { session: String, seq: i64 },
    /// The records read do not verify as a chain (or do not decode).
    Chain { session: String, fault: String },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Lost { session, seq } => write!(f, "session {session}: record {seq} was lost"),
            Self::Changed {
                session,
                seq,
                was,
                now,
            } => write!(
                f,
                "session {session}: record {seq} changed (hash {was} is now {now})"
            ),
            Self::AcknowledgedTwice { session, seq } => write!(
                f,
                "session {session}: two different records were acknowledged at seq {seq}"
            ),
            Self::Chain { session, fault } => {
                write!(f, "session {session}: the chain does not verify: {fault}")
            }
        }
    }
}

/// A tool call the journal holds: (execution, call id).
type Call = (String, String);

#[derive(Debug)]
struct Kept {
    verified: ChainSummary,
    acknowledged: BTreeMap<i64, String>,
    unchecked: BTreeSet<i64>,
    calls: BTreeSet<Call>,
    /// Found when acknowledging (outside a check), reported by the next check.
    found: Option<Finding>,
}

impl Default for Kept {
    fn default() -> Self {
        Self {
            verified: ChainSummary {
                records: 0,
                head_hash: String::new(),
            },
            acknowledged: BTreeMap::new(),
            unchecked: BTreeSet::new(),
            calls: BTreeSet::new(),
            found: None,
        }
    }
}

impl Kept {
    fn anchor(&self) -> i64 {
        i64::try_from(self.verified.records).unwrap_or(i64::MAX)
    }
}

/// What one check read and compared.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checked {
    /// Records read and verified as part of a chain.
    pub(crate) records: u64,
    /// Acknowledged records compared with what is stored.
    pub(crate) acknowledged: u64,
}

/// The soak's memory of every session; see the module doc.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    sessions: BTreeMap<String, Kept>,
}

impl Ledger {
    /// A client received `hash` at `seq` of `session`.
    pub(crate) fn acknowledge(&mut self, session: &str, seq: i64, hash: &str) {
        let kept = self.sessions.entry(session.to_owned()).or_default();
        match kept.acknowledged.get(&seq) {
            Some(known) if known == hash => {}
            Some(_) => {
                kept.found
                    .get_or_insert_with(|| Finding::AcknowledgedTwice {
                        session: session.to_owned(),
                        seq,
                    });
            }
            None => {
                kept.acknowledged.insert(seq, hash.to_owned());
                kept.unchecked.insert(seq);
            }
        }
    }

    /// The first seq of `session` the next check must read (to the head).
    pub(crate) fn read_from(&self, session: &str) -> i64 {
        let Some(kept) = self.sessions.get(session) else {
            return 1;
        };
        let lowest_unchecked = kept.unchecked.first().copied().unwrap_or(i64::MAX);
        kept.anchor().min(lowest_unchecked).max(1)
    }

    /// Checks `records`, read from `from` (what [`Self::read_from`] said) to the head, and moves
    /// the verified prefix to the head. An acknowledgement that arrived after `from` was taken
    /// and lies below it stays unchecked for the next round.
    ///
    /// # Errors
    /// The first [`Finding`]; the ledger is left as it was but for the acknowledgements, which
    /// stay unchecked.
    pub(crate) fn check(
        &mut self,
        session: &str,
        from: i64,
        records: &[pb::LogRecord],
    ) -> Result<Checked, Finding> {
        let kept = self.sessions.entry(session.to_owned()).or_default();
        if let Some(found) = kept.found.take() {
            return Err(found);
        }
        let lost = |seq| Finding::Lost {
            session: session.to_owned(),
            seq,
        };
        let chain = |fault: String| Finding::Chain {
            session: session.to_owned(),
            fault,
        };
        let decoded = decode(records).map_err(|e| chain(e.to_string()))?;
        // Past seq 1 the first record read is trusted for its link only: the anchor's hash,
        // compared with the one kept, ties the records read to the verified prefix.
        let mut verifier = if from == 1 {
            ChainVerifier::new()
        } else {
            match decoded.first() {
                Some(first) if first.seq == from => ChainVerifier::after(ChainSummary {
                    records: usize::try_from(from - 1).unwrap_or(usize::MAX),
                    head_hash: first.prev_hash.clone(),
                }),
                _ => return Err(lost(from)),
            }
        };
        verifier
            .push_records(&decoded)
            .map_err(|fault| chain(fault.to_string()))?;
        let stored: BTreeMap<i64, &str> = records
            .iter()
            .map(|r| (r.seq, r.content_hash.as_str()))
            .collect();
        let compare = |seq: i64, was: &str| match stored.get(&seq) {
            None => Err(lost(seq)),
            Some(now) if *now != was => Err(Finding::Changed {
                session: session.to_owned(),
                seq,
                was: was.to_owned(),
                now: (*now).to_owned(),
            }),
            Some(_) => Ok(()),
        };
        if kept.anchor() > 0 {
            compare(kept.anchor(), &kept.verified.head_hash)?;
        }
        let mut compared = 0;
        for seq in kept.unchecked.range(from..) {
            compare(*seq, &kept.acknowledged[seq])?;
            compared += 1;
        }
        let checked = Checked {
            records: records.len() as u64,
            acknowledged: compared,
        };
        kept.unchecked.retain(|seq| *seq < from);
        kept.calls.extend(tool_calls(records));
        kept.verified = verifier.finish();
        Ok(checked)
    }

    /// Forgets what was verified of `session`, so that the next check reads it from seq 1 and
    /// compares every acknowledgement again.
    pub(crate) fn forget_verified(&mut self, session: &str) {
        let kept = self.sessions.entry(session.to_owned()).or_default();
        kept.verified = Kept::default().verified;
        kept.calls.clear();
        kept.unchecked = kept.acknowledged.keys().copied().collect();
    }

    /// Tool calls the journal holds, over every session checked.
    pub(crate) fn tool_calls(&self) -> u64 {
        self.sessions.values().map(|k| k.calls.len() as u64).sum()
    }

    /// Records ever acknowledged to clients.
    pub(crate) fn acknowledged(&self) -> u64 {
        self.sessions
            .values()
            .map(|k| k.acknowledged.len() as u64)
            .sum()
    }
}

fn tool_calls(records: &[pb::LogRecord]) -> impl Iterator<Item = Call> + '_ {
    records.iter().filter_map(|r| {
        let event = r.event.as_ref()?;
        match event.body.as_ref() {
            Some(pb::event::Body::Tool(call)) if event.kind() == pb::EventKind::EventToolCall => {
                Some((event.execution_id.clone(), call.id.clone()))
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{Event, EventBody, EventKind, Message};
    use agentsessions_journal::chain::PreparedEvent;

    use super::*;

    const S: &str = "s";

    /// A valid chain of `n` records, as the daemon returns it.
    fn chain(n: i64) -> Vec<pb::LogRecord> {
        let mut prev = String::new();
        (1..=n).map(|seq| record(seq, &mut prev, "m")).collect()
    }

    fn record(seq: i64, prev: &mut String, text: &str) -> pb::LogRecord {
        let event = Event::new(
            EventKind::Input,
            EventBody::Message(Message::text_message("user", format!("{text}{seq}"))),
        );
        let prepared = PreparedEvent::new(event).unwrap();
        let hash = prepared.hash_at(prev, seq);
        pb::LogRecord {
            seq,
            prev_hash: std::mem::replace(prev, hash.clone()),
            content_hash: hash,
            event: Some(pb::Event::from(&prepared.event)),
            ..pb::LogRecord::default()
        }
    }

    /// One round: what the ledger asks to read, checked.
    fn round(ledger: &mut Ledger, records: &[pb::LogRecord]) -> Result<Checked, Finding> {
        let from = ledger.read_from(S);
        ledger.check(S, from, records)
    }

    fn from(records: &[pb::LogRecord], seq: i64) -> Vec<pb::LogRecord> {
        records.iter().filter(|r| r.seq >= seq).cloned().collect()
    }

    /// The ledger after acknowledging all of `records` and one check of them.
    fn checked(records: &[pb::LogRecord]) -> Ledger {
        let mut ledger = Ledger::default();
        for r in records {
            ledger.acknowledge(S, r.seq, &r.content_hash);
        }
        assert_eq!(ledger.read_from(S), 1);
        let seen = round(&mut ledger, records).unwrap();
        assert_eq!(seen.records, records.len() as u64);
        assert_eq!(seen.acknowledged, records.len() as u64);
        ledger
    }

    #[test]
    fn a_round_reads_from_the_last_verified_record() {
        let records = chain(8);
        let mut ledger = checked(&records[..5]);
        assert_eq!(ledger.read_from(S), 5);
        let seen = round(&mut ledger, &from(&records, 5)).unwrap();
        assert_eq!(
            seen,
            Checked {
                records: 4,
                acknowledged: 0
            }
        );
        assert_eq!(ledger.read_from(S), 8);
    }

    #[test]
    fn an_acknowledgement_of_an_older_record_is_read_again() {
        let records = chain(6);
        let mut ledger = Ledger::default();
        round(&mut ledger, &records).unwrap();
        ledger.acknowledge(S, 2, &records[1].content_hash);
        assert_eq!(ledger.read_from(S), 2);
        let seen = round(&mut ledger, &from(&records, 2)).unwrap();
        assert_eq!(seen.acknowledged, 1);
    }

    #[test]
    fn an_acknowledgement_below_the_range_read_waits_for_the_next_round() {
        let records = chain(6);
        let mut ledger = Ledger::default();
        round(&mut ledger, &records[..4]).unwrap();
        let start = ledger.read_from(S);
        // A late client acknowledges seq 2 after the range to read was chosen.
        ledger.acknowledge(S, 2, "not what is stored at 2");
        let seen = ledger.check(S, start, &from(&records, start)).unwrap();
        assert_eq!(seen.acknowledged, 0);
        assert_eq!(ledger.read_from(S), 2);
        let found = round(&mut ledger, &from(&records, 2));
        assert!(
            matches!(found, Err(Finding::Changed { seq: 2, .. })),
            "{found:?}"
        );
    }

    #[test]
    fn a_lost_tail_is_found() {
        let records = chain(6);
        let mut ledger = checked(&records);
        // The head went back to 4: the anchor (6) is gone.
        assert_eq!(
            round(&mut ledger, &[]),
            Err(Finding::Lost {
                session: S.into(),
                seq: 6
            })
        );
    }

    #[test]
    fn a_rewritten_tail_is_found_even_when_it_chains() {
        let records = chain(6);
        let mut ledger = checked(&records);
        // Records 5.. lost and written again with other content: a valid chain of its own.
        let mut prev = records[3].content_hash.clone();
        let rewritten: Vec<_> = (5..=7).map(|seq| record(seq, &mut prev, "x")).collect();
        let found = round(&mut ledger, &from(&rewritten, 6));
        assert!(
            matches!(found, Err(Finding::Changed { seq: 6, .. })),
            "{found:?}"
        );
    }

    #[test]
    fn new_records_must_continue_from_the_kept_hash() {
        let records = chain(6);
        let mut ledger = checked(&records[..4]);
        let mut prev = "not the kept hash".to_owned();
        let mut forged = vec![records[3].clone()];
        forged.extend((5..=6).map(|seq| record(seq, &mut prev, "m")));
        let found = round(&mut ledger, &forged);
        assert!(matches!(found, Err(Finding::Chain { .. })), "{found:?}");
    }

    #[test]
    fn a_tampered_record_is_found() {
        let mut records = chain(6);
        let mut ledger = checked(&records[..3]);
        // Content changed, hash kept: the content check fails.
        records[4].event = records[0].event.clone();
        let found = round(&mut ledger, &from(&records, 3));
        assert!(matches!(found, Err(Finding::Chain { .. })), "{found:?}");
    }

    #[test]
    fn an_acknowledged_record_not_stored_is_found() {
        let records = chain(4);
        let mut ledger = checked(&records[..2]);
        // Acknowledged but never stored (the head stayed at 4).
        ledger.acknowledge(S, 5, "hash of a record that was lost");
        assert_eq!(
            round(&mut ledger, &from(&records, 2)),
            Err(Finding::Lost {
                session: S.into(),
                seq: 5
            })
        );
    }

    #[test]
    fn an_acknowledged_record_stored_changed_is_found() {
        let records = chain(4);
        let mut ledger = Ledger::default();
        ledger.acknowledge(S, 3, "what the client was told");
        let found = round(&mut ledger, &records);
        assert!(
            matches!(found, Err(Finding::Changed { seq: 3, .. })),
            "{found:?}"
        );
    }

    #[test]
    fn two_records_acknowledged_at_one_seq_are_found() {
        let records = chain(2);
        let mut ledger = checked(&records);
        ledger.acknowledge(S, 2, "another record at 2");
        assert_eq!(
            round(&mut ledger, &from(&records, 2)),
            Err(Finding::AcknowledgedTwice {
                session: S.into(),
                seq: 2
            })
        );
    }

    #[test]
    fn a_full_check_finds_a_change_inside_the_verified_prefix() {
        let mut records = chain(6);
        let mut ledger = checked(&records);
        // Record 2 rewritten with its hash recomputed: the incremental round (which re-reads
        // only the anchor) cannot see it, the full check must.
        let mut prev = records[0].content_hash.clone();
        records[1] = record(2, &mut prev, "x");
        round(&mut ledger, &from(&records, 6)).unwrap();
        ledger.forget_verified(S);
        assert_eq!(ledger.read_from(S), 1);
        let found = round(&mut ledger, &records);
        assert!(matches!(found, Err(Finding::Chain { .. })), "{found:?}");
    }
}
