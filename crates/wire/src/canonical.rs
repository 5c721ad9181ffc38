//! The canonical form of wire messages and the hashes defined on it.
//!
//! The canonical bytes of a message are its proto3-JSON rendering — proto field names, enum
//! value names, unpopulated fields omitted, `int64` as decimal strings, `int32` as numbers,
//! `bytes` as padded standard base64, `Timestamp` as RFC 3339 UTC, `Struct` as plain JSON —
//! written directly in RFC 8785 (JCS) form. The journal's `content_hash` is the lowercase hex
//! SHA-256 of the JCS envelope
//!
//! ```text
//! {"event":<canonical event>,"prev_hash":"<previous hash or empty>","seq":"<decimal seq>"}
//! ```
//!
//! (spec: hashing-and-conformance (a), semantics §1.3). Because the bytes are defined on the wire
//! message, any language with a protobuf runtime and a JCS library can verify a chain.
//!
//! # How the bytes are produced
//!
//! Nothing goes through a JSON value tree or protobuf reflection: every message implements
//! [`Canonical`] by hand and writes its present fields, already in JCS member order, into a
//! [`JcsWriter`]. Static field names are ASCII, so their JCS order is byte order, and each
//! writer lists them pre-sorted; debug builds assert the order of every object written, and
//! the tests populate every field of every message. Map and `Struct` keys are sorted at run
//! time by UTF-16 code units.
//!
//! # Rules beyond the plain field mapping
//!
//! * A set message field is written even when all its fields are default (`{}`); a set oneof
//!   member is written even when its value is the default (`"uri":""`); a proto3 `optional`
//!   scalar is written whenever set, zero included (`"input_count":"0"`).
//! * An enum number this build has no name for is written as a JSON number, as proto3-JSON
//!   prescribes, so a newer writer's records still hash the same here.
//! * NaN and ±infinity in a `Struct` fail with [`WireError::NonFiniteNumber`], a `Struct` value
//!   with no kind with [`WireError::MissingField`], a `Timestamp` outside years 1–9999 or with
//!   nanos outside `0..1e9` with [`WireError::InvalidTimestamp`]. These mirror the marshal errors
//!   of the reference implementation, where they make the append fail. Errors carry the field
//!   path in proto names (`tool.args.limits[2]`).
//!
//! [`WireError::NonFiniteNumber`]: crate::WireError::NonFiniteNumber
//! [`WireError::MissingField`]: crate::WireError::MissingField
//! [`WireError::InvalidTimestamp`]: crate::WireError::InvalidTimestamp

mod common;
mod fields;
mod jcs;
mod registry;
mod wkt;

use std::cell::Cell;

use sha2::{Digest as _, Sha256};

pub use self::jcs::{JcsWriter, cmp_utf16};
use crate::error::Result;
use crate::pb;

/// A message with a canonical (proto3-JSON in JCS form) rendering.
pub trait Canonical {
    /// Writes this message as one JSON value: its present fields in JCS member order.
    ///
    /// # Errors
    /// A value that proto3-JSON cannot represent: a non-finite `Struct` number, an unset
    /// `Struct` value, an out-of-range `Timestamp`. The writer then holds a partial value and
    /// must be discarded.
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()>;
}

/// Canonical bytes of any message (the reference implementation's `canon.Proto`).
///
/// # Errors
/// See [`Canonical::write_canonical`].
pub fn canonical_message<M: Canonical + ?Sized>(message: &M) -> Result<Vec<u8>> {
    // Render into the reusable buffer and copy out once, so the result is a single allocation
    // of the exact size instead of a chain of doublings.
    with_scratch(|w| {
        message.write_canonical(w)?;
        Ok(w.as_bytes().to_vec())
    })
}

/// Canonical bytes of an event without the record envelope (`canon.Event`).
///
/// # Errors
/// See [`Canonical::write_canonical`].
pub fn canonical_event(event: &pb::Event) -> Result<Vec<u8>> {
    canonical_message(event)
}

/// The canonical record envelope `{"event":…,"prev_hash":…,"seq":"…"}` whose SHA-256 is the
/// record's content hash.
///
/// # Errors
/// See [`Canonical::write_canonical`].
pub fn canonical_record(prev_hash: &str, seq: i64, event: &pb::Event) -> Result<Vec<u8>> {
    with_scratch(|w| {
        write_record(w, prev_hash, seq, event)?;
        Ok(w.as_bytes().to_vec())
    })
}

fn write_record(w: &mut JcsWriter, prev_hash: &str, seq: i64, event: &pb::Event) -> Result<()> {
    w.begin_object();
    w.field("event");
    event.write_canonical(w)?;
    w.field("prev_hash");
    w.string(prev_hash);
    w.field("seq");
    w.int64(seq);
    w.end_object();
    Ok(())
}

/// The content hash of `event` recorded at `seq` after a record whose hash is `prev_hash` (`""`
/// for the first record of a session): 64 lowercase hex digits.
///
/// # Errors
/// See [`Canonical::write_canonical`].
pub fn content_hash(prev_hash: &str, seq: i64, event: &pb::Event) -> Result<String> {
    with_scratch(|w| {
        write_record(w, prev_hash, seq, event)?;
        Ok(jcs::lower_hex(&Sha256::digest(w.as_bytes()).into()))
    })
}

/// The content hash of a record from the already canonical bytes of its event (as returned by
/// [`canonical_event`]). Equal to [`content_hash`] of the same event; lets a journal
/// canonicalize once, off its writer thread, and link and verify later without re-rendering.
///
/// `canonical_event` is trusted to be one canonical JSON value; it is not re-validated.
#[must_use]
pub fn record_hash(prev_hash: &str, seq: i64, canonical_event: &[u8]) -> String {
    with_scratch(|w| {
        w.begin_object();
        w.field("event");
        w.raw_value(canonical_event);
        w.field("prev_hash");
        w.string(prev_hash);
        w.field("seq");
        w.int64(seq);
        w.end_object();
        jcs::lower_hex(&Sha256::digest(w.as_bytes()).into())
    })
}

/// The registry digest of a harness spec: `"sha256:"` + lowercase hex SHA-256 of its canonical
/// bytes.
///
/// # Errors
/// See [`Canonical::write_canonical`].
pub fn spec_digest(spec: &pb::HarnessSpec) -> Result<String> {
    with_scratch(|w| {
        spec.write_canonical(w)?;
        Ok(format!(
            "sha256:{}",
            jcs::lower_hex(&Sha256::digest(w.as_bytes()).into())
        ))
    })
}

/// Buffers above this size are not kept for reuse, so one huge event does not pin its memory.
const SCRATCH_KEEP_LIMIT: usize = 1 << 20;

thread_local! {
    /// This thread's reusable output buffer; empty while lent out.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with a writer over this thread's reusable buffer, so hashing a record allocates
/// only its result. The buffer is moved out for the duration: a nested call finds the slot empty
/// and grows its own, and during thread teardown a fresh buffer is used.
fn with_scratch<R>(f: impl FnOnce(&mut JcsWriter) -> R) -> R {
    let buf = SCRATCH.try_with(Cell::take).unwrap_or_default();
    let mut w = JcsWriter::from_buffer(buf);
    let out = f(&mut w);
    let buf = w.into_bytes();
    if buf.capacity() <= SCRATCH_KEEP_LIMIT {
        // Fails only during thread teardown, when there is nothing left to reuse it for.
        let _ = SCRATCH.try_with(|slot| slot.set(buf));
    }
    out
}
