//! Lossless conversion between the `agentsessions-api` domain types and the generated
//! [`crate::pb`] messages.
//!
//! Direction and fallibility follow the data:
//! - **domain → wire** is `From` (infallible): every domain value has a wire form.
//! - **wire → domain** is `TryFrom<pb::…, Error = WireError>` wherever a peer can send something
//!   the domain cannot hold: an enum number this build does not define
//!   ([`WireError::UnknownEnumValue`]), a NaN or infinite number in a `Struct`
//!   ([`WireError::NonFiniteNumber`]), an out-of-range timestamp ([`WireError::InvalidTimestamp`]).
//!   Error paths use proto field names from the message being converted, e.g.
//!   `message.parts[0].tool_call.args.x[2]` for a `pb::Event`.
//! - Messages that only carry plain fields convert with `From` both ways.
//!
//! The domain → wire direction is exactly the reference `EventToProto`, because the content hash
//! is computed over its output (hashing-and-conformance (a)):
//! - `Event.kind` maps name for name; `ts` is set only when the domain timestamp is `Some`;
//!   `actor` is omitted when principal, issuer and subject are all empty; the body is the single
//!   [`EventBody`](agentsessions_api::EventBody) member.
//! - A [`Part::Empty`](agentsessions_api::Part::Empty) is a `Part` with no member.
//! - `FilePart.source` is `bytes` when the bytes are non-empty, else `uri` when non-empty, else
//!   unset; `ReasoningPart.opaque` follows the same rule.
//! - JSON objects become `Struct`s with every number an `f64` ([`struct_to_pb`]).
//! - The lifecycle snapshot is flattened into `snapshot_local`, `snapshot_external_uri`,
//!   `snapshot_memory`, `snapshot_sealed`.
//! - `ToolResult.code` is numeric; the transient `ToolResult.approval` is never sent.
//!
//! Where the two sides cannot hold the same information, the conversion follows the reference
//! converter, so a frame received here is journaled (and hashed) as a Go host would journal it:
//! - a domain part with both bytes and a URI keeps only the bytes on the wire;
//! - a `DataPart` whose `data` is unset reads as [`Part::Empty`](agentsessions_api::Part::Empty)
//!   (the domain data part always holds an object);
//! - the event conversion drops the wire-only `ModelCall.messages`, `tools` and `tool_choice`;
//!   [`model_call_from_request`] and [`model_request_from_call`] carry them;
//! - `Start.execution_id` rides on the `ControllerFrame` ([`start_frame`]) and a token minter
//!   cannot cross the wire: the receiver passes its own to [`start_from_pb`];
//! - the Session choices are described under [Sessions](#sessions) below.
//!
//! Module map (one per message family, each with its round-trip tests): `content` (messages,
//! parts, tool calls and results, identity, approvals, deltas), `model` (model calls and results,
//! tool definitions and choice, usage), `event` (events, lifecycle, end, error, execution start,
//! timestamps), `session` (sessions and their state, compute, origin, owner), `harness`
//! (descriptors, capabilities, tool specs, `Start`), `json` (`Struct`).
//!
//! # Sessions
//!
//! `Session.metadata` carries the domain `project`, `name` and `uid`; `version`, `create_time`,
//! `update_time` and the output-only `pending_approval` are not part of the domain type, so the
//! wire → domain direction ignores them and the domain → wire direction leaves them unset for the
//! server to fill. `owner` is omitted when issuer and subject are both empty, `identity` when all
//! three of its strings are.
//!
//! `deletion_state` fails closed (extensions §3) except for the one value that means "this server
//! predates deletion": `DELETION_STATE_UNSPECIFIED` is what every published server sends (the field
//! does not exist there, and those servers cannot delete), so it reads as
//! [`DeletionState::Active`](agentsessions_api::DeletionState::Active). A number this build does
//! not know reads as [`DeletionState::Unrecognized`](agentsessions_api::DeletionState::Unrecognized)
//! named `DELETION_STATE_<n>` (treated as deleted) and is sent back as the same number. Any other
//! unrecognized domain state goes out as `DELETION_PENDING`, the known state closest to it, and
//! never as `UNSPECIFIED`, which a peer would read as active.

mod content;
mod event;
mod harness;
mod json;
mod model;
mod session;

pub use content::{approve_request_from_decision, identity_to_pb};
pub use event::{timestamp_from_pb, timestamp_to_pb};
pub use harness::{identity_context_from_pb, start_frame, start_from_pb};
pub use json::{check_struct_exact, struct_from_pb, struct_to_pb};
pub use model::{model_call_from_request, model_request_from_call, model_result_from_response};

use crate::error::{Result, WireError};

/// Reads an enum field, failing with the field's name when the number is not defined.
fn enum_from_pb<E>(value: i32, field: &str, enum_name: &'static str) -> Result<E>
where
    E: TryFrom<i32, Error = prost::UnknownEnumValue>,
{
    E::try_from(value).map_err(|_| WireError::UnknownEnumValue {
        field: field.to_owned(),
        enum_name,
        value,
    })
}

/// Converts a repeated field element by element, naming the failing element in the error path.
fn vec_from_pb<P, D>(items: Vec<P>, field: &str) -> Result<Vec<D>>
where
    D: TryFrom<P, Error = WireError>,
{
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| D::try_from(item).map_err(|e| e.within(&format!("{field}[{i}]"))))
        .collect()
}

/// Converts a singular message field, naming it in the error path.
fn opt_from_pb<P, D>(item: Option<P>, field: &str) -> Result<Option<D>>
where
    D: TryFrom<P, Error = WireError>,
{
    item.map(|item| D::try_from(item).map_err(|e| e.within(field)))
        .transpose()
}
