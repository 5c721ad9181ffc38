//! Reading what the server returns: message text, session uids, and chain verification.

use agentsessions_journal::{ChainSummary, LogRecord, verify_records};
use agentsessions_wire::pb;

use crate::error::{ClientError, Result};

/// The concatenated text parts of a message.
pub fn text_of(message: &pb::Message) -> String {
    message
        .parts
        .iter()
        .filter_map(|part| match &part.part {
            Some(pb::part::Part::Text(text)) => Some(text.text.as_str()),
            _ => None,
        })
        .collect()
}

/// A session's uid.
pub fn uid_of(session: &pb::Session) -> &str {
    session.metadata.as_ref().map_or("", |m| m.uid.as_str())
}

/// Recomputes every content hash and link of `records` (as returned by [`Client::replay`]).
///
/// # Errors
/// [`ClientError::BadRecord`] naming the first record that does not decode or verify.
pub fn verify(records: &[pb::LogRecord]) -> Result<ChainSummary> {
    let decoded = decode(records)?;
    verify_records(&decoded).map_err(|fault| ClientError::BadRecord {
        seq: fault.seq(),
        reason: fault.to_string(),
    })
}

/// `records` (as returned by [`Client::replay`]) as the journal's records, for the tools that
/// take those (the audit bundle, chain verification). The commit time is left out: it is not
/// hashed.
///
/// # Errors
/// [`ClientError::BadRecord`] naming the first record whose event does not decode.
pub fn decode(records: &[pb::LogRecord]) -> Result<Vec<LogRecord>> {
    let mut decoded = Vec::with_capacity(records.len());
    for record in records {
        let event = record.event.clone().ok_or_else(|| ClientError::BadRecord {
            seq: record.seq,
            reason: "no event".into(),
        })?;
        let event =
            agentsessions_api::Event::try_from(event).map_err(|e| ClientError::BadRecord {
                seq: record.seq,
                reason: e.to_string(),
            })?;
        decoded.push(LogRecord {
            seq: record.seq,
            prev_hash: record.prev_hash.clone(),
            hash: record.content_hash.clone(),
            fence: record.fence,
            event,
            committed_at: None,
        });
    }
    Ok(decoded)
}
