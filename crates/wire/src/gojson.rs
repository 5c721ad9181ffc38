//! The Go `encoding/json` shape of the domain types, written and read directly.
//!
//! Two things in the reference implementation are defined over what Go's `json.Marshal` makes of
//! its domain structs rather than over the wire protobuf: the model-input hash (I0, see
//! [`crate::model_input`]) and the JSON journal files (`json.MarshalIndent` of a slice of
//! `eventlog.Record`). This module reproduces that output byte for byte for [`Event`] and
//! [`ModelRequest`] and everything inside them, and reads it back the way Go's `json.Unmarshal`
//! would.
//!
//! # Writing
//!
//! - Keys are the Go field names in Go declaration order; every field is written unless its Go
//!   tag says `omitempty` and the value is empty (`Part.ToolCall`, `Part.ToolResult`,
//!   `ToolResult.Content`/`Code`/`ApprovalRequestSeq`/`ApprovalDecisionSeq`,
//!   `ApprovalResult.RequestSeq`, `ExecutionStart.Model`, `Event.Parked`,
//!   `ModelRequest.Tools`/`ToolChoice`). `ToolResult.Approval` is never written (`json:"-"`).
//! - Go's nil is `null`: an unset pointer (`Option::None`, an event body member that is not the
//!   body), an unset `map` and an unset slice. The domain has no separate "empty but not nil" for
//!   most collections, so an empty `Vec`, byte string or map is written as Go's nil (`null`); the
//!   exception is [`ModelRequest::params`], whose `Some(empty)` is Go's `{}`.
//! - `[]byte` is standard base64 with padding; integers are plain decimal; `float64` follows Go
//!   (shortest round-trip digits, plain notation for magnitudes in `[1e-6, 1e21)`, exponent
//!   notation such as `1e-7` or `1e+21` outside it, `-0` kept); map keys are sorted bytewise.
//! - Strings are escaped as Go does by default: `"` `\` and the short escapes `\b \f \n \r \t`,
//!   other control characters as `\u00xx`, and the HTML-sensitive `<` `>` `&` plus U+2028 and
//!   U+2029 as `\u` escapes. Everything else is literal UTF-8.
//! - `Event.Timestamp` is a Go `time.Time`: `None` is Go's zero time `0001-01-01T00:00:00Z`, any
//!   other instant is RFC 3339 in UTC with the fraction trimmed of trailing zeros
//!   (`time.RFC3339Nano`). Go refuses years outside 0..=9999, and so does this writer
//!   ([`WireError::InvalidTimestamp`]).
//! - Enumerations are their Go string constants ([`EventKind::as_str`] and friends, empty for the
//!   unspecified value), except `ToolResult.Code`, which is an `int32` in Go and so a number.
//!
//! [`event_to_json`] and [`model_request_to_json`] write what `json.Marshal` writes (compact);
//! [`indent`] turns that into what `json.MarshalIndent(v, "", "  ")` writes.
//!
//! # Shapes
//!
//! The Go structs grew over time, and the journal files an older binary wrote lack the keys added
//! since. [`GoShape`] names the three layouts met in the reference journals. Writing an event in an
//! older shape leaves out the keys that shape does not have, and fails with
//! [`WireError::GoShape`] if one of them holds something, instead of dropping it.
//!
//! # Reading
//!
//! [`GoValue::parse`] reads JSON text into a tree that keeps object members in document order and
//! numbers as written; [`decode_event`] and [`decode_model_request`] then build domain values from
//! it with Go's rules:
//! - a missing key leaves the zero value, an unknown key is ignored, and `null` is nil for pointers,
//!   slices and maps and changes nothing for other types;
//! - keys match field names exactly or, failing that, case-insensitively, and when several keys
//!   match one field the last one wins;
//! - types are checked: a string where Go has an integer, a fraction or an out-of-range number for
//!   an integer, invalid base64 for `[]byte`, or an enum name this build does not know is a
//!   [`WireError::GoJson`] naming the path in Go field names (`Message.Parts[0].File.Bytes`);
//! - numbers inside `map[string]any` values (`Data`, tool `Args` and `Output`, `InputSchema`) become
//!   `float64`, as Go decodes them;
//! - when an event or part has several members set, the first in Go field order is kept, as the
//!   reference converter does.
//!
//! Syntax errors carry the line and column. Nesting deeper than [`MAX_DEPTH`] is refused.

mod decode;
mod encode;
mod value;
mod write;

use std::fmt;

pub use decode::{
    check_struct, decode_array, decode_event, decode_int64, decode_model_request, decode_string,
};
pub use encode::{event_to_json, model_request_to_json, write_event, write_model_request};
pub use value::{GoValue, MAX_DEPTH};
pub use write::{indent, write_float64, write_string};

#[cfg(doc)]
use crate::WireError;
#[cfg(doc)]
use agentsessions_api::{Event, EventKind, ModelRequest};

/// A layout of the Go structs, as one version of the reference implementation marshals them.
///
/// Ordered from oldest to newest; a newer shape has every key of an older one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GoShape {
    /// The tagged v0.1.2 release: no `Event.ExecutionStart`, no `Event.Parked`; `Part` has only
    /// `Text`, `File`, `Data`, `Reasoning`; `ToolResult` stops at `Error`; `ApprovalResult` has no
    /// `RequestSeq`; `Lifecycle` has `Kind`, `Detail`, `Snapshot`.
    V012,
    /// v0.1.2 plus `Event.ExecutionStart` as `{Config, ResumeFromSeq, InputCount}`: the binary
    /// that wrote the upgraded reference journals (`upgraded-resume`, `mixed-*`).
    V012ExecutionStart,
    /// The v0.3.0 structs: `ExecutionStart` adds `Model` (omitempty), `Harness`,
    /// `HarnessVersion` and `ComputeInstance`; `Lifecycle` adds `ComputeInstance`; `Event.Parked`,
    /// `Part.ToolCall`/`ToolResult`, the receipt fields of `ToolResult` and
    /// `ApprovalResult.RequestSeq` exist (all omitempty).
    #[default]
    V030,
}

impl GoShape {
    /// Every shape, oldest first.
    pub const ALL: [Self; 3] = [Self::V012, Self::V012ExecutionStart, Self::V030];

    /// A short name for messages: `v0.1.2`, `v0.1.2+execution-start` or `v0.3.0`.
    pub fn name(self) -> &'static str {
        match self {
            Self::V012 => "v0.1.2",
            Self::V012ExecutionStart => "v0.1.2+execution-start",
            Self::V030 => "v0.3.0",
        }
    }

    /// Whether this shape has `Event.ExecutionStart`.
    fn has_execution_start(self) -> bool {
        self >= Self::V012ExecutionStart
    }

    /// Whether this shape has the fields v0.3.0 added.
    fn is_v030(self) -> bool {
        self >= Self::V030
    }

    /// Raises `self` to at least `other` (the decoders record the newest shape whose keys they
    /// have seen).
    fn raise(&mut self, other: Self) {
        if other > *self {
            *self = other;
        }
    }
}

impl fmt::Display for GoShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
