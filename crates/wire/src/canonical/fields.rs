//! Field writers shared by the message impls: each writes one member under proto3-JSON presence
//! rules (implicit-presence scalars only when non-default, messages and `optional` scalars when
//! set, repeated fields and maps when non-empty).

use std::collections::BTreeMap;

use super::Canonical;
use super::jcs::{JcsWriter, within, within_index, write_string_map};
use crate::error::Result;

#[inline]
pub(super) fn string(w: &mut JcsWriter, name: &'static str, v: &str) {
    if !v.is_empty() {
        w.field(name);
        w.string(v);
    }
}

#[inline]
pub(super) fn boolean(w: &mut JcsWriter, name: &'static str, v: bool) {
    if v {
        w.field(name);
        w.bool(true);
    }
}

#[inline]
pub(super) fn int32(w: &mut JcsWriter, name: &'static str, v: i32) {
    if v != 0 {
        w.field(name);
        w.int32(v);
    }
}

#[inline]
pub(super) fn int64(w: &mut JcsWriter, name: &'static str, v: i64) {
    if v != 0 {
        w.field(name);
        w.int64(v);
    }
}

/// A proto3 `optional int64`: written whenever present, zero included.
#[inline]
pub(super) fn optional_int64(w: &mut JcsWriter, name: &'static str, v: Option<i64>) {
    if let Some(v) = v {
        w.field(name);
        w.int64(v);
    }
}

#[inline]
pub(super) fn bytes(w: &mut JcsWriter, name: &'static str, v: &[u8]) {
    if !v.is_empty() {
        w.field(name);
        w.base64(v);
    }
}

/// An enum field: its value name, or the bare number when `name_of` does not know it.
#[inline]
pub(super) fn enumeration(
    w: &mut JcsWriter,
    name: &'static str,
    v: i32,
    name_of: impl FnOnce(i32) -> Option<&'static str>,
) {
    if v != 0 {
        w.field(name);
        match name_of(v) {
            Some(value_name) => w.string(value_name),
            None => w.int32(v),
        }
    }
}

/// A singular message field: written when set, even if every field inside is default.
#[inline]
pub(super) fn message<M: Canonical>(
    w: &mut JcsWriter,
    name: &'static str,
    v: Option<&M>,
) -> Result<()> {
    match v {
        Some(m) => member(w, name, m),
        None => Ok(()),
    }
}

/// A member whose presence the caller has decided (a set oneof member or a set message).
#[inline]
pub(super) fn member<M: Canonical>(w: &mut JcsWriter, name: &'static str, m: &M) -> Result<()> {
    w.field(name);
    within(name, m.write_canonical(w))
}

/// A repeated message field: written when non-empty.
#[inline]
pub(super) fn repeated<M: Canonical>(w: &mut JcsWriter, name: &'static str, v: &[M]) -> Result<()> {
    if v.is_empty() {
        return Ok(());
    }
    w.field(name);
    w.begin_array();
    for (i, m) in v.iter().enumerate() {
        within(name, within_index(i, m.write_canonical(w)))?;
    }
    w.end_array();
    Ok(())
}

/// A `map<string, string>` field: written when non-empty.
#[inline]
pub(super) fn string_map(w: &mut JcsWriter, name: &'static str, v: &BTreeMap<String, String>) {
    if !v.is_empty() {
        w.field(name);
        write_string_map(w, v);
    }
}
