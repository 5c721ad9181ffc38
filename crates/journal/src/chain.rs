//! The hash chain: preparing an event for the journal, hashing a record, and verifying a chain
//! so that a tampered record is told apart from an undecodable one.

use agentsessions_api::{Event, EventKind};
use agentsessions_wire::{canonical, pb};
use prost::Message as _;

use crate::error::{JournalError, Result};
use crate::record::LogRecord;

/// An event converted once for the journal: its wire form (stored as the `event` blob) and its
/// canonical bytes (hashed into the record envelope). Preparing happens on the caller's thread,
/// so the single writer thread only hashes the small envelope and stores.
#[derive(Debug, Clone)]
pub struct PreparedEvent {
    /// The domain event, returned in the committed record.
    pub event: Event,
    /// Protobuf binary of the wire `Event`.
    pub blob: Vec<u8>,
    /// JCS bytes of the event's proto3-JSON (no envelope).
    pub canonical: Vec<u8>,
}

impl PreparedEvent {
    /// Converts and canonicalizes `event`.
    ///
    /// # Errors
    /// [`JournalError::NotJournalable`] for PARKED events; [`JournalError::InvalidEvent`] when the
    /// event cannot be canonicalized (a non-finite number in a Struct, a timestamp out of range).
    pub fn new(event: Event) -> Result<Self> {
        if event.kind == EventKind::Parked
            || matches!(event.body, Some(agentsessions_api::EventBody::Parked(_)))
        {
            return Err(JournalError::NotJournalable("PARKED"));
        }
        let wire = pb::Event::from(&event);
        let canonical = canonical::canonical_event(&wire).map_err(JournalError::InvalidEvent)?;
        Ok(Self {
            blob: wire.encode_to_vec(),
            canonical,
            event,
        })
    }

    /// The content hash of this event at (`prev_hash`, `seq`).
    pub fn hash_at(&self, prev_hash: &str, seq: i64) -> String {
        canonical::record_hash(prev_hash, seq, &self.canonical)
    }
}

/// Decodes a stored event blob.
///
/// # Errors
/// [`JournalError::Undecodable`] when the blob is not a valid wire `Event` or does not convert.
pub fn decode_event(session: &str, seq: i64, blob: &[u8]) -> Result<Event> {
    let undecodable = |reason: String| JournalError::Undecodable {
        session: session.to_owned(),
        seq,
        reason,
    };
    let wire = pb::Event::decode(blob).map_err(|e| undecodable(e.to_string()))?;
    Event::try_from(wire).map_err(|e| undecodable(e.to_string()))
}

/// Why a chain failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainFault {
    /// The record was altered: its link or its content no longer matches its hash.
    #[error("record {seq} is tampered: {reason}")]
    Tampered {
        /// First bad seq.
        seq: i64,
        /// What did not match.
        reason: TamperReason,
    },
    /// The record's stored event cannot be decoded or canonicalized, so its hash cannot be
    /// checked: an operational fault, not evidence of tampering.
    #[error("record {seq} is undecodable: {reason}")]
    Undecodable {
        /// First bad seq.
        seq: i64,
        /// What failed.
        reason: String,
    },
}

impl ChainFault {
    /// The first bad seq.
    pub fn seq(&self) -> i64 {
        match self {
            Self::Tampered { seq, .. } | Self::Undecodable { seq, .. } => *seq,
        }
    }
}

/// What part of a record failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TamperReason {
    /// The seq is not the next one.
    #[error("expected seq {expected}")]
    SeqGap {
        /// The seq that should have been there.
        expected: i64,
    },
    /// The stored prev_hash is not the previous record's hash.
    #[error("prev_hash mismatch")]
    PrevHashMismatch,
    /// The recomputed content hash differs from the stored one.
    #[error("content hash mismatch")]
    ContentHashMismatch,
}

/// A verified chain's summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSummary {
    /// Records checked.
    pub records: usize,
    /// Hash of the last record (`""` for an empty chain).
    pub head_hash: String,
}

/// One stored record as raw columns, before decoding.
#[derive(Debug, Clone)]
pub struct RawRecord {
    /// Seq column.
    pub seq: i64,
    /// prev_hash column.
    pub prev_hash: String,
    /// hash column.
    pub hash: String,
    /// event blob.
    pub blob: Vec<u8>,
}

/// Verifies decoded records of one session, in seq order from seq 1 with the genesis link `""`.
///
/// # Errors
/// The first [`ChainFault`] found, in seq order.
pub fn verify_records(records: &[LogRecord]) -> Result<ChainSummary, ChainFault> {
    let mut verifier = ChainVerifier::new();
    verifier.push_records(records)?;
    Ok(verifier.finish())
}

/// Verifies raw stored rows: decodes each blob straight to the wire form and recomputes its hash,
/// never touching the domain types. See [`ChainVerifier`] for rows that arrive in parts.
///
/// # Errors
/// The first [`ChainFault`] found, in seq order.
pub fn verify_raw(rows: &[RawRecord]) -> Result<ChainSummary, ChainFault> {
    let mut verifier = ChainVerifier::new();
    verifier.push(rows)?;
    Ok(verifier.finish())
}

/// Verifies one session's raw rows fed in consecutive parts, in seq order from seq 1 with the
/// genesis link `""`, so a long chain can be checked while it is still being read.
///
/// Each row's content hash depends only on its own columns, so the rows of a part are decoded
/// and hashed on all the machine's cores; the link checks then run in order, so the reported
/// fault is always the first one.
#[derive(Debug, Clone)]
pub struct ChainVerifier {
    next_seq: i64,
    prev_hash: String,
    records: usize,
}

impl Default for ChainVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl ChainVerifier {
    /// A verifier expecting seq 1.
    pub fn new() -> Self {
        Self {
            next_seq: 1,
            prev_hash: String::new(),
            records: 0,
        }
    }

    /// A verifier continuing a chain whose records 1 to `prefix.records` were verified before
    /// and end with `prefix.head_hash`: it expects seq `prefix.records + 1` linked to that hash,
    /// so a chain that only grows is checked by reading what was appended since.
    /// [`Self::finish`] then counts the prefix too.
    pub fn after(prefix: ChainSummary) -> Self {
        let next_seq = i64::try_from(prefix.records).map_or(i64::MAX, |n| n.saturating_add(1));
        Self {
            next_seq,
            prev_hash: prefix.head_hash,
            records: prefix.records,
        }
    }

    /// Verifies the next decoded records of the chain (as [`verify_records`] does).
    ///
    /// # Errors
    /// The first [`ChainFault`] in `records`; the verifier should not be fed further after one.
    pub fn push_records(&mut self, records: &[LogRecord]) -> Result<(), ChainFault> {
        self.check_links(records.iter().map(|r| {
            let content = canonical::canonical_event(&pb::Event::from(&r.event))
                .map(|c| canonical::record_hash(&r.prev_hash, r.seq, &c) == r.hash)
                .map_err(|e| e.to_string());
            (r.seq, r.prev_hash.as_str(), r.hash.as_str(), content)
        }))
    }

    /// Verifies the next rows of the chain.
    ///
    /// # Errors
    /// The first [`ChainFault`] in `rows`; the verifier should not be fed further after one.
    pub fn push(&mut self, rows: &[RawRecord]) -> Result<(), ChainFault> {
        let contents = content_checks(rows);
        self.check_links(
            rows.iter()
                .zip(contents)
                .map(|(r, c)| (r.seq, r.prev_hash.as_str(), r.hash.as_str(), c)),
        )
    }

    /// The summary of everything pushed so far.
    pub fn finish(self) -> ChainSummary {
        ChainSummary {
            records: self.records,
            head_hash: self.prev_hash,
        }
    }

    fn check_links<'a>(
        &mut self,
        rows: impl Iterator<Item = (i64, &'a str, &'a str, ContentCheck)>,
    ) -> Result<(), ChainFault> {
        let Self {
            next_seq,
            prev_hash,
            records,
        } = self;
        let mut prev: &str = prev_hash;
        let mut outcome = Ok(());
        for (seq, stored_prev, stored_hash, content) in rows {
            if seq != *next_seq {
                outcome = Err(ChainFault::Tampered {
                    seq,
                    reason: TamperReason::SeqGap {
                        expected: *next_seq,
                    },
                });
                break;
            }
            let fault = match content {
                Err(reason) => Some(ChainFault::Undecodable { seq, reason }),
                Ok(_) if stored_prev != prev => Some(ChainFault::Tampered {
                    seq,
                    reason: TamperReason::PrevHashMismatch,
                }),
                Ok(false) => Some(ChainFault::Tampered {
                    seq,
                    reason: TamperReason::ContentHashMismatch,
                }),
                Ok(true) => None,
            };
            if let Some(fault) = fault {
                outcome = Err(fault);
                break;
            }
            prev = stored_hash;
            *next_seq += 1;
            *records += 1;
        }
        let prev = prev.to_owned();
        *prev_hash = prev;
        outcome
    }
}

/// Whether a row's stored hash is the content hash of its event at its stored seq and
/// prev_hash, or why its event could not be canonicalized.
type ContentCheck = Result<bool, String>;

/// The content checks of `rows`, in order, computed on all cores.
fn content_checks(rows: &[RawRecord]) -> Vec<ContentCheck> {
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let chunk = rows.len().div_ceil(workers).max(1024);
    if rows.len() <= chunk {
        return rows.iter().map(content_of_raw).collect();
    }
    std::thread::scope(|scope| {
        let mut parts = rows.chunks(chunk);
        // This thread takes the first part itself.
        let first = parts.next().unwrap_or_default();
        let handles: Vec<_> = parts
            .map(|part| {
                let handle = scope.spawn(move || part.iter().map(content_of_raw).collect());
                (handle, part.len())
            })
            .collect();
        let mut contents: Vec<ContentCheck> = first.iter().map(content_of_raw).collect();
        for (handle, len) in handles {
            match handle.join() {
                Ok(checked) => contents.extend::<Vec<_>>(checked),
                Err(_) => contents.extend(
                    std::iter::repeat_with(|| Err("verifier thread panicked".to_owned())).take(len),
                ),
            }
        }
        contents
    })
}

fn content_of_raw(row: &RawRecord) -> ContentCheck {
    let wire = pb::Event::decode(row.blob.as_slice()).map_err(|e| e.to_string())?;
    let canonical = canonical::canonical_event(&wire).map_err(|e| e.to_string())?;
    Ok(canonical::record_hash(&row.prev_hash, row.seq, &canonical) == row.hash)
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{EventBody, EventKind, Message};

    use super::*;

    fn input(text: &str) -> Event {
        Event::new(
            EventKind::Input,
            EventBody::Message(Message::text_message("user", text)),
        )
        .with_execution("exec-1")
    }

    fn chain(n: i64) -> Vec<LogRecord> {
        let mut prev = String::new();
        (1..=n)
            .map(|seq| {
                let prepared = PreparedEvent::new(input(&format!("m{seq}"))).unwrap();
                let hash = prepared.hash_at(&prev, seq);
                LogRecord {
                    seq,
                    prev_hash: std::mem::replace(&mut prev, hash.clone()),
                    hash,
                    fence: 0,
                    event: prepared.event,
                    committed_at: None,
                }
            })
            .collect()
    }

    // semantics §1.3: a chain verified in two parts verifies as a whole
    #[test]
    fn a_verifier_after_a_prefix_continues_the_chain() {
        let records = chain(6);
        let prefix = verify_records(&records[..4]).unwrap();
        let mut verifier = ChainVerifier::after(prefix);
        verifier.push_records(&records[4..]).unwrap();
        assert_eq!(verifier.finish(), verify_records(&records).unwrap());
    }

    // semantics §1.3: what follows a prefix must link to its head and take the next seq
    #[test]
    fn a_verifier_after_a_prefix_refuses_a_gap_or_a_foreign_link() {
        let records = chain(6);
        let prefix = verify_records(&records[..4]).unwrap();
        let gap = ChainVerifier::after(prefix).push_records(&records[5..]);
        assert_eq!(
            gap,
            Err(ChainFault::Tampered {
                seq: 6,
                reason: TamperReason::SeqGap { expected: 5 }
            })
        );
        let other = verify_records(&records[..3]).unwrap();
        let foreign = ChainVerifier::after(ChainSummary {
            records: 4,
            head_hash: other.head_hash,
        })
        .push_records(&records[4..]);
        assert_eq!(
            foreign,
            Err(ChainFault::Tampered {
                seq: 5,
                reason: TamperReason::PrevHashMismatch
            })
        );
    }
}
