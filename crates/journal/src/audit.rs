//! The audit bundle: a session's records with every event in its canonical proto3-JSON form, so
//! a verifier written in any language recomputes each hash and link with nothing but SHA-256 and
//! RFC 8785 (JCS) — no protobuf decoder, no knowledge of this code base.
//!
//! ```text
//! {"format":"agentsessions.audit.v1","session":"s","records":[
//!   {"seq":1,"prev_hash":"","hash":"<hex>","event":{...proto3-JSON...}}, ...]}
//! ```
//!
//! A record's hash is `hex(sha256(JCS({"event": event, "prev_hash": prev_hash, "seq": "<seq>"})))`
//! and its `prev_hash` is the previous record's `hash` (`""` for seq 1).
//! `tools/verify_chain.py` is such a verifier.

use std::fmt::Write as _;

use agentsessions_wire::{canonical, pb};

use crate::error::{JournalError, Result};
use crate::record::LogRecord;

/// The bundle's `format` value.
pub const AUDIT_FORMAT: &str = "agentsessions.audit.v1";

/// Writes `records` of `session` as an audit bundle (one record per line for readable diffs).
/// The events are written as the canonical bytes the hashes cover, so the bundle holds exactly
/// what was hashed.
///
/// # Errors
/// [`JournalError::InvalidEvent`] for an event that has no canonical form.
pub fn audit_json(session: &str, records: &[LogRecord]) -> Result<String> {
    let mut out = String::with_capacity(256 * records.len() + 128);
    let _ = write!(
        out,
        "{{\"format\":{},\"session\":{},\"records\":[",
        json_string(AUDIT_FORMAT),
        json_string(session)
    );
    for (i, record) in records.iter().enumerate() {
        let event = canonical::canonical_event(&pb::Event::from(&record.event))
            .map_err(JournalError::InvalidEvent)?;
        let event = String::from_utf8(event).map_err(|e| {
            JournalError::InvalidArgument(format!("canonical event is not UTF-8: {e}"))
        })?;
        let separator = if i == 0 { "" } else { "," };
        let _ = write!(
            out,
            "{separator}\n{{\"seq\":{},\"prev_hash\":{},\"hash\":{},\"event\":{event}}}",
            record.seq,
            json_string(&record.prev_hash),
            json_string(&record.hash),
        );
    }
    out.push_str("\n]}\n");
    Ok(out)
}

fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{Event, EventBody, EventKind, Message};

    use super::*;
    use crate::chain::verify_records;

    fn record(seq: i64, prev: &str, event: Event) -> LogRecord {
        let hash = agentsessions_wire::content_hash(prev, seq, &pb::Event::from(&event))
            .unwrap_or_default();
        LogRecord {
            committed_at: None,
            seq,
            prev_hash: prev.to_owned(),
            hash,
            fence: 1,
            event,
        }
    }

    #[test]
    fn bundle_is_json_with_the_hashed_event_and_links() {
        let first = record(
            1,
            "",
            Event::new(
                EventKind::Input,
                EventBody::Message(Message::text_message("user", "héllo \"quoted\"")),
            ),
        );
        let second = record(
            2,
            &first.hash,
            Event::new(
                EventKind::Output,
                EventBody::Message(Message::text_message("assistant", "ok")),
            ),
        );
        let records = vec![first, second];
        assert_eq!(verify_records(&records).map(|s| s.records).ok(), Some(2));
        let text = audit_json("s\"1", &records).unwrap_or_default();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(parsed["format"], AUDIT_FORMAT);
        assert_eq!(parsed["session"], "s\"1");
        let rows = parsed["records"].as_array().cloned().unwrap_or_default();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1]["prev_hash"], rows[0]["hash"]);
        assert_eq!(rows[0]["event"]["kind"], "EVENT_INPUT");
        assert_eq!(
            rows[0]["event"]["message"]["parts"][0]["text"]["text"],
            "héllo \"quoted\""
        );
    }
}
