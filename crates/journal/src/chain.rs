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
    verify_window(records.iter().map(|r| {
        let canonical =
            canonical::canonical_event(&pb::Event::from(&r.event)).map_err(|e| e.to_string());
        (r.seq, r.prev_hash.as_str(), r.hash.as_str(), canonical)
    }))
}

/// Verifies raw stored rows: decodes each blob straight to the wire form and recomputes its hash,
/// never touching the domain types. Hashing is spread over the machine's cores; the link checks
/// stay in order, so the reported fault is always the first one.
///
/// # Errors
/// The first [`ChainFault`] found, in seq order.
pub fn verify_raw(rows: &[RawRecord]) -> Result<ChainSummary, ChainFault> {
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let chunk = rows.len().div_ceil(workers).max(1024);
    let canonicals: Vec<Result<Vec<u8>, String>> = if rows.len() <= chunk {
        rows.iter().map(canonical_of_raw).collect()
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = rows
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || part.iter().map(canonical_of_raw).collect::<Vec<_>>())
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| {
                    h.join()
                        .unwrap_or_else(|_| vec![Err("verifier thread panicked".to_owned())])
                })
                .collect()
        })
    };
    verify_window(
        rows.iter()
            .zip(canonicals)
            .map(|(r, c)| (r.seq, r.prev_hash.as_str(), r.hash.as_str(), c)),
    )
}

fn canonical_of_raw(row: &RawRecord) -> Result<Vec<u8>, String> {
    let wire = pb::Event::decode(row.blob.as_slice()).map_err(|e| e.to_string())?;
    canonical::canonical_event(&wire).map_err(|e| e.to_string())
}

fn verify_window<'a>(
    rows: impl Iterator<Item = (i64, &'a str, &'a str, Result<Vec<u8>, String>)>,
) -> Result<ChainSummary, ChainFault> {
    let mut prev = String::new();
    let mut count = 0;
    for (expected_seq, (seq, stored_prev, stored_hash, canonical)) in (1..).zip(rows) {
        if seq != expected_seq {
            return Err(ChainFault::Tampered {
                seq,
                reason: TamperReason::SeqGap {
                    expected: expected_seq,
                },
            });
        }
        let canonical = canonical.map_err(|reason| ChainFault::Undecodable { seq, reason })?;
        if stored_prev != prev {
            return Err(ChainFault::Tampered {
                seq,
                reason: TamperReason::PrevHashMismatch,
            });
        }
        if canonical::record_hash(stored_prev, seq, &canonical) != stored_hash {
            return Err(ChainFault::Tampered {
                seq,
                reason: TamperReason::ContentHashMismatch,
            });
        }
        stored_hash.clone_into(&mut prev);
        count += 1;
    }
    Ok(ChainSummary {
        records: count,
        head_hash: prev,
    })
}
