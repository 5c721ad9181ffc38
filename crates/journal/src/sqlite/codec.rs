//! Column encodings of the `sessions` and `harnesses` rows: maps as a JSON object of strings,
//! origin and identity as the proto3-JSON of their message, `""` when empty.

use std::collections::BTreeMap;

use agentsessions_api::{ComputeState, IdentityRef, Origin, Timestamp};
use agentsessions_wire::{canonical, pb};
use rusqlite::Row;
use serde_json::Value;

use crate::error::{JournalError, Result};
use crate::journal::{HarnessRow, HarnessState, SessionInfo, SessionRow};

pub(crate) fn encode_map(map: &BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return String::new();
    }
    serde_json::to_string(map).unwrap_or_default()
}

fn decode_map(column: &str, text: &str) -> Result<BTreeMap<String, String>> {
    if text.is_empty() {
        return Ok(BTreeMap::new());
    }
    serde_json::from_str(text).map_err(|e| corrupt(column, &e.to_string()))
}

pub(crate) fn encode_origin(origin: Option<&Origin>) -> Result<String> {
    match origin {
        Some(o) if !o.is_empty() => canonical_text(&pb::Origin::from(o.clone())),
        _ => Ok(String::new()),
    }
}

pub(crate) fn encode_identity(identity: &IdentityRef) -> Result<String> {
    if identity.is_empty() {
        return Ok(String::new());
    }
    canonical_text(&pb::IdentityRef::from(identity.clone()))
}

fn canonical_text<M: canonical::Canonical>(message: &M) -> Result<String> {
    let bytes = canonical::canonical_message(message).map_err(JournalError::InvalidEvent)?;
    String::from_utf8(bytes).map_err(|e| corrupt("metadata", &e.to_string()))
}

fn json_object(column: &str, text: &str) -> Result<serde_json::Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(corrupt(column, "not a JSON object")),
        Err(e) => Err(corrupt(column, &e.to_string())),
    }
}

fn string_field(map: &serde_json::Map<String, Value>, key: &str) -> String {
    map.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn decode_origin(text: &str) -> Result<Option<Origin>> {
    if text.is_empty() {
        return Ok(None);
    }
    let map = json_object("origin", text)?;
    let attributes = match map.get("attributes") {
        Some(v) => {
            serde_json::from_value(v.clone()).map_err(|e| corrupt("origin", &e.to_string()))?
        }
        None => BTreeMap::new(),
    };
    Ok(Some(Origin {
        source: string_field(&map, "source"),
        subject: string_field(&map, "subject"),
        uri: string_field(&map, "uri"),
        attributes,
    }))
}

fn decode_identity(text: &str) -> Result<IdentityRef> {
    if text.is_empty() {
        return Ok(IdentityRef::default());
    }
    let map = json_object("identity", text)?;
    Ok(IdentityRef {
        principal: string_field(&map, "principal"),
        issuer: string_field(&map, "issuer"),
        subject: string_field(&map, "subject"),
    })
}

fn corrupt(column: &str, why: &str) -> JournalError {
    JournalError::InvalidArgument(format!("stored session column {column} is corrupt: {why}"))
}

/// The column list [`session_info_from_row`] reads, in order.
pub(crate) const SESSION_COLUMNS: &str = "s.session, s.project, s.name, s.harness, s.model, \
     s.parent_uid, s.fork_seq, s.labels, s.annotations, s.origin, s.identity, s.created_at, \
     s.updated_at, s.compute_state, s.fence, \
     COALESCE((SELECT MAX(e.seq) FROM events e WHERE e.session = s.session), \
              (SELECT p.fork_seq FROM session_prefix p WHERE p.session = s.session), 0)";

pub(crate) fn session_info_from_row(row: &Row<'_>) -> Result<SessionInfo> {
    let labels: String = row.get(7)?;
    let annotations: String = row.get(8)?;
    let origin: String = row.get(9)?;
    let identity: String = row.get(10)?;
    let compute: String = row.get(13)?;
    Ok(SessionInfo {
        row: SessionRow {
            uid: row.get(0)?,
            project: row.get(1)?,
            name: row.get(2)?,
            harness: row.get(3)?,
            model: row.get(4)?,
            parent_uid: row.get(5)?,
            fork_seq: row.get(6)?,
            labels: decode_map("labels", &labels)?,
            annotations: decode_map("annotations", &annotations)?,
            origin: decode_origin(&origin)?,
            identity: decode_identity(&identity)?,
            created_at: Some(Timestamp::from_unix_nanos(row.get(11)?)),
        },
        updated_at: Timestamp::from_unix_nanos(row.get(12)?),
        // An unknown stored state reads as NONE rather than failing the whole read.
        compute_state: ComputeState::parse(&compute).unwrap_or(ComputeState::None),
        fence: row.get(14)?,
        last_seq: row.get(15)?,
    })
}

/// The column list [`harness_from_row`] reads, in order.
pub(crate) const HARNESS_COLUMNS: &str =
    "name, uid, spec, spec_digest, state, retire_reason, retired_at, created_at, updated_at";

pub(crate) fn harness_state_str(state: HarnessState) -> &'static str {
    match state {
        HarnessState::Active => "active",
        HarnessState::Retired => "retired",
    }
}

pub(crate) fn harness_from_row(row: &Row<'_>) -> rusqlite::Result<HarnessRow> {
    let state: String = row.get(4)?;
    let retired_at: i64 = row.get(6)?;
    Ok(HarnessRow {
        name: row.get(0)?,
        uid: row.get(1)?,
        spec: row.get(2)?,
        spec_digest: row.get(3)?,
        // Fail closed: a state this build does not know is not selectable.
        state: if state == "active" {
            HarnessState::Active
        } else {
            HarnessState::Retired
        },
        retire_reason: row.get(5)?,
        retired_at: (retired_at != 0).then(|| Timestamp::from_unix_nanos(retired_at)),
        created_at: Timestamp::from_unix_nanos(row.get(7)?),
        updated_at: Timestamp::from_unix_nanos(row.get(8)?),
    })
}
