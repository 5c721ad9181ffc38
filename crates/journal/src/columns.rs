//! Metadata column encodings shared by every durable backend (semantics §1.6): labels and
//! annotations as a JSON object of strings, origin and identity as the canonical proto3-JSON of
//! their message, each `""` when empty. One definition, so SQLite and Postgres rows read alike.

use std::collections::BTreeMap;

use agentsessions_api::{IdentityRef, Origin};
use agentsessions_wire::{canonical, pb};
use serde_json::Value;

use crate::error::{JournalError, Result};

/// A string map as its column text (`""` when empty).
pub fn encode_map(map: &BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return String::new();
    }
    serde_json::to_string(map).unwrap_or_default()
}

/// A string map from its column text.
///
/// # Errors
/// [`JournalError`] naming `column` for text that is not a JSON object of strings.
pub fn decode_map(column: &str, text: &str) -> Result<BTreeMap<String, String>> {
    if text.is_empty() {
        return Ok(BTreeMap::new());
    }
    serde_json::from_str(text).map_err(|e| corrupt(column, &e.to_string()))
}

/// An origin as its column text (`""` when absent or empty).
///
/// # Errors
/// A value without a canonical form.
pub fn encode_origin(origin: Option<&Origin>) -> Result<String> {
    match origin {
        Some(o) if !o.is_empty() => canonical_text(&pb::Origin::from(o.clone())),
        _ => Ok(String::new()),
    }
}

/// An identity as its column text (`""` when empty).
///
/// # Errors
/// A value without a canonical form.
pub fn encode_identity(identity: &IdentityRef) -> Result<String> {
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

/// An origin from its column text.
///
/// # Errors
/// [`JournalError`] for text that is not a stored origin.
pub fn decode_origin(text: &str) -> Result<Option<Origin>> {
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

/// An identity from its column text.
///
/// # Errors
/// [`JournalError`] for text that is not a stored identity.
pub fn decode_identity(text: &str) -> Result<IdentityRef> {
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
