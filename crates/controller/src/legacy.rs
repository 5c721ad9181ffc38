//! The compatibility execution id of a v0.1.2 turn (semantics §3.6): derived from the session
//! and the anchor record, handed to the harness, never journaled.

use std::fmt::Write as _;

use agentsessions_journal::LogRecord;
use agentsessions_wire::canonical::canonical_event;
use agentsessions_wire::pb;
use sha2::{Digest, Sha256};

use crate::error::{ControllerError, Result};

/// `"legacy-" + hex(SHA-256(B))`, where B is the Go `encoding/json` rendering of
/// `{"session_uid": uid, "seq": "<seq>", "event": <canonical bytes of the anchor event>}`.
///
/// # Errors
/// [`ControllerError::MissingSessionUid`] without a session; [`ControllerError::InvalidExecutionLog`]
/// when the anchor cannot be canonicalized.
pub fn legacy_execution_id(session_uid: &str, anchor: &LogRecord) -> Result<String> {
    if session_uid.is_empty() {
        return Err(ControllerError::MissingSessionUid);
    }
    let canonical = canonical_event(&pb::Event::from(&anchor.event))
        .map_err(|e| ControllerError::InvalidExecutionLog(format!("seq {}: {e}", anchor.seq)))?;
    let canonical = String::from_utf8_lossy(&canonical);
    let mut preimage = String::from("{\"session_uid\":");
    go_string(&mut preimage, session_uid);
    let _ = write!(preimage, ",\"seq\":\"{}\",\"event\":", anchor.seq);
    go_escape_html(&mut preimage, &canonical);
    preimage.push('}');
    Ok(format!(
        "legacy-{}",
        hex::encode(Sha256::digest(preimage.as_bytes()))
    ))
}

/// A JSON string as Go's encoder writes it (HTML-safe).
fn go_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            _ => push_html_safe(out, c),
        }
    }
    out.push('"');
}

/// Embedded raw JSON: Go compacts it (already compact) and escapes the HTML-sensitive runes.
fn go_escape_html(out: &mut String, json: &str) {
    for c in json.chars() {
        push_html_safe(out, c);
    }
}

fn push_html_safe(out: &mut String, c: char) {
    match c {
        '<' => out.push_str("\\u003c"),
        '>' => out.push_str("\\u003e"),
        '&' => out.push_str("\\u0026"),
        '\u{2028}' => out.push_str("\\u2028"),
        '\u{2029}' => out.push_str("\\u2029"),
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{Event, EventBody, EventKind, Message};

    use super::*;

    fn input(seq: i64, text: &str) -> LogRecord {
        LogRecord {
            committed_at: None,
            seq,
            prev_hash: String::new(),
            hash: String::new(),
            fence: 0,
            event: Event::new(
                EventKind::Input,
                EventBody::Message(Message::text_message("user", text)),
            ),
        }
    }

    // semantics §3.6: stable, per session, per anchor seq and content; shaped legacy-<64 hex>.
    #[test]
    fn legacy_id_depends_on_session_seq_and_content() {
        let a = legacy_execution_id("v012-session", &input(1, "hello")).unwrap();
        assert_eq!(
            a,
            legacy_execution_id("v012-session", &input(1, "hello")).unwrap()
        );
        assert!(a.starts_with("legacy-") && a.len() == 7 + 64);
        assert_ne!(a, legacy_execution_id("other", &input(1, "hello")).unwrap());
        assert_ne!(
            a,
            legacy_execution_id("v012-session", &input(2, "hello")).unwrap()
        );
        assert_ne!(
            a,
            legacy_execution_id("v012-session", &input(1, "bye")).unwrap()
        );
        assert!(matches!(
            legacy_execution_id("", &input(1, "hello")),
            Err(ControllerError::MissingSessionUid)
        ));
    }

    // Go's encoder escapes <, > and & even inside embedded canonical JSON.
    #[test]
    fn html_runes_are_escaped() {
        let mut out = String::new();
        go_escape_html(&mut out, "{\"t\":\"a<b>&\u{2028}\"}");
        assert_eq!(out, "{\"t\":\"a\\u003cb\\u003e\\u0026\\u2028\"}");
    }
}
