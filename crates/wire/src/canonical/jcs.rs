//! The RFC 8785 (JCS) output layer: a writer that produces canonical JSON directly, without an
//! intermediate value tree.
//!
//! JCS leaves exactly one choice to the producer: the order of object members. The writer makes
//! the caller responsible for it (message writers emit their static field names pre-sorted, maps
//! are sorted at run time with [`cmp_utf16`]), and checks it in debug builds. Everything else —
//! string escaping, number and integer spelling, separators — is fixed here.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::error::{Result, WireError};

/// Streams RFC 8785 canonical JSON into a byte buffer.
///
/// The writer keeps no separator state: before a key or a value it writes `,` unless the buffer
/// is empty or ends in `{`, `[` or `:`. Any complete JSON value ends in some other byte, so this
/// is exact as long as values are written through this type.
///
/// Object members must be written in JCS order: keys ascending by UTF-16 code units. Debug builds
/// assert this for every object, which is how the hand-written message writers are checked.
#[derive(Debug, Default)]
pub struct JcsWriter {
    buf: Vec<u8>,
    /// The last key written in each open object (debug builds only).
    #[cfg(debug_assertions)]
    keys: Vec<Option<String>>,
}

impl JcsWriter {
    /// An empty writer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer that reuses `buf`'s allocation; the buffer is cleared first.
    #[must_use]
    pub fn from_buffer(mut buf: Vec<u8>) -> Self {
        buf.clear();
        Self {
            buf,
            #[cfg(debug_assertions)]
            keys: Vec::new(),
        }
    }

    /// The bytes written so far.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Consumes the writer and returns its buffer.
    #[must_use]
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    #[inline]
    fn separate(&mut self) {
        if !matches!(self.buf.last(), None | Some(b'{' | b'[' | b':')) {
            self.buf.push(b',');
        }
    }

    /// Opens an object (`{`).
    #[inline]
    pub fn begin_object(&mut self) {
        self.separate();
        self.buf.push(b'{');
        #[cfg(debug_assertions)]
        self.keys.push(None);
    }

    /// Closes the innermost object (`}`).
    #[inline]
    pub fn end_object(&mut self) {
        self.buf.push(b'}');
        #[cfg(debug_assertions)]
        self.keys.pop();
    }

    /// Opens an array (`[`).
    #[inline]
    pub fn begin_array(&mut self) {
        self.separate();
        self.buf.push(b'[');
    }

    /// Closes the innermost array (`]`).
    #[inline]
    pub fn end_array(&mut self) {
        self.buf.push(b']');
    }

    /// Writes an object member name followed by `:`; the member's value must follow.
    ///
    /// Keys must arrive in ascending UTF-16 order within each object (asserted in debug builds).
    #[inline]
    pub fn key(&mut self, key: &str) {
        self.check_order(key);
        self.separate();
        push_string(&mut self.buf, key);
        self.buf.push(b':');
    }

    /// Writes a field name known at compile time. Field names are ASCII identifiers, so they are
    /// copied without the escaping scan.
    #[inline]
    pub(crate) fn field(&mut self, name: &'static str) {
        debug_assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "field name {name:?} is not a plain identifier"
        );
        self.check_order(name);
        self.separate();
        self.buf.push(b'"');
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    #[cfg(debug_assertions)]
    fn check_order(&mut self, key: &str) {
        if let Some(last) = self.keys.last_mut() {
            if let Some(prev) = last.as_deref() {
                assert!(
                    cmp_utf16(prev, key) == Ordering::Less,
                    "JCS member order violated: {prev:?} written before {key:?}"
                );
            }
            *last = Some(key.to_owned());
        }
    }

    #[cfg(not(debug_assertions))]
    #[inline(always)]
    fn check_order(&mut self, _key: &str) {}

    /// Writes a JSON string with RFC 8785 escaping.
    #[inline]
    pub fn string(&mut self, s: &str) {
        self.separate();
        push_string(&mut self.buf, s);
    }

    /// Writes `true` or `false`.
    #[inline]
    pub fn bool(&mut self, v: bool) {
        self.separate();
        self.buf
            .extend_from_slice(if v { b"true" } else { b"false" });
    }

    /// Writes `null`.
    #[inline]
    pub fn null(&mut self) {
        self.separate();
        self.buf.extend_from_slice(b"null");
    }

    /// Writes a 32-bit integer as a JSON number (the proto3-JSON form of `int32`). Every `i32`
    /// is exact as a double, so its JCS spelling is its plain decimal form.
    #[inline]
    pub fn int32(&mut self, v: i32) {
        self.separate();
        push_i64(&mut self.buf, i64::from(v));
    }

    /// Writes a 64-bit integer as a JSON string of decimal digits (the proto3-JSON form of
    /// `int64`, which keeps values above 2^53 exact for any reader).
    #[inline]
    pub fn int64(&mut self, v: i64) {
        self.separate();
        self.buf.push(b'"');
        push_i64(&mut self.buf, v);
        self.buf.push(b'"');
    }

    /// Writes a double in ECMAScript `Number.prototype.toString` form, as RFC 8785 requires
    /// (`-0` is written as `0`).
    ///
    /// # Errors
    /// [`WireError::NonFiniteNumber`] with an empty path for NaN and ±infinity, which JSON cannot
    /// represent; the caller adds the path.
    #[inline]
    pub fn number(&mut self, v: f64) -> Result<()> {
        if !v.is_finite() {
            return Err(WireError::NonFiniteNumber {
                path: String::new(),
            });
        }
        self.separate();
        // Integral values below 2^53 print as their exact integer in ECMAScript form; this skips
        // the shortest-digits search for the common case of whole numbers in tool arguments.
        if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "v is integral and |v| < 2^53, so the conversion is exact"
            )]
            let integer = v as i64;
            push_i64(&mut self.buf, integer);
        } else {
            let mut fmt = ryu_js::Buffer::new();
            self.buf.extend_from_slice(fmt.format_finite(v).as_bytes());
        }
        Ok(())
    }

    /// Writes bytes as a JSON string in standard padded base64 (RFC 4648 §4), the proto3-JSON
    /// form of `bytes`. The alphabet needs no JSON escaping.
    #[inline]
    pub fn base64(&mut self, data: &[u8]) {
        self.separate();
        self.buf.push(b'"');
        push_base64(&mut self.buf, data);
        self.buf.push(b'"');
    }

    /// Drops the members written to the innermost object since `members_start` (the buffer
    /// length right after its `{`), so they can be written again in another order.
    fn rewind_object(&mut self, members_start: usize) {
        self.buf.truncate(members_start);
        #[cfg(debug_assertions)]
        if let Some(last) = self.keys.last_mut() {
            *last = None;
        }
    }

    /// Appends bytes that are already one complete canonical JSON value.
    #[inline]
    pub(crate) fn raw_value(&mut self, json: &[u8]) {
        self.separate();
        self.buf.extend_from_slice(json);
    }
}

/// Escape action per byte: 0 = copy, `u` = `\u00xx`, anything else = backslash + that byte.
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = b'u';
        i += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string. RFC 8785 §3.2.2.2: only `"`, `\` and the C0 controls are
/// escaped, the five with short forms use them, the rest use lowercase `\u00xx`; all other
/// characters (including `/`, DEL, U+2028, non-ASCII) are written as their UTF-8 bytes.
pub(crate) fn push_string(buf: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    buf.reserve(bytes.len() + 2);
    buf.push(b'"');
    let mut start = 0;
    while let Some(offset) = first_escape(&bytes[start..]) {
        let at = start + offset;
        buf.extend_from_slice(&bytes[start..at]);
        let b = bytes[at];
        let action = ESCAPE[usize::from(b)];
        if action == b'u' {
            buf.extend_from_slice(b"\\u00");
            buf.push(HEX[usize::from(b >> 4)]);
            buf.push(HEX[usize::from(b & 0x0f)]);
        } else {
            buf.push(b'\\');
            buf.push(action);
        }
        start = at + 1;
    }
    buf.extend_from_slice(&bytes[start..]);
    buf.push(b'"');
}

/// The index of the first byte that needs escaping.
///
/// Blocks of 16 bytes are tested without an early exit, a form the compiler turns into a few SIMD
/// compares, and skipped while clean (most text has nothing to escape). A short tail is padded
/// to a block so short strings take the same path. Only a dirty block is searched byte by byte.
#[inline]
fn first_escape(bytes: &[u8]) -> Option<usize> {
    const BLOCK: usize = 16;
    let dirty = |block: &[u8]| {
        block.iter().fold(false, |acc, &b| {
            acc | (b < 0x20) | (b == b'"') | (b == b'\\')
        })
    };
    let mut blocks = bytes.chunks_exact(BLOCK);
    let mut clean = 0;
    for block in &mut blocks {
        if dirty(block) {
            break;
        }
        clean += BLOCK;
    }
    let tail = blocks.remainder();
    if clean + tail.len() == bytes.len() {
        let mut padded = [b' '; BLOCK];
        padded[..tail.len()].copy_from_slice(tail);
        if !dirty(&padded) {
            return None;
        }
    }
    bytes[clean..]
        .iter()
        .position(|&b| ESCAPE[usize::from(b)] != 0)
        .map(|i| clean + i)
}

/// Appends the decimal digits of `v` (with a leading `-` when negative).
pub(crate) fn push_i64(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(decimal(v, &mut [0; 20]));
}

/// The decimal form of `v` (with a leading `-` when negative), written into the end of `out`;
/// 20 bytes hold every `i64`.
fn decimal(v: i64, out: &mut [u8; 20]) -> &[u8] {
    let mut magnitude = v.unsigned_abs();
    let mut at = out.len();
    loop {
        at -= 1;
        // `% 10` leaves a value below 10, so the narrowing is exact.
        let digit = (magnitude % 10) as u8;
        out[at] = b'0' + digit;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if v < 0 {
        at -= 1;
        out[at] = b'-';
    }
    &out[at..]
}

/// Lowercase hexadecimal of a SHA-256 digest.
pub(crate) fn lower_hex(digest: &[u8; 32]) -> String {
    let mut out = [0u8; 64];
    for (pair, &b) in out.chunks_exact_mut(2).zip(digest) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0x0f)];
    }
    // Only ASCII hex digits were written, so the conversion always succeeds; the fallback just
    // avoids a panic path.
    String::from_utf8(out.to_vec())
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn push_base64(buf: &mut Vec<u8>, data: &[u8]) {
    buf.reserve(data.len().div_ceil(3) * 4);
    let sextet = |v: u32, shift: u32| BASE64[(v >> shift & 0x3f) as usize];
    let mut chunks = data.chunks_exact(3);
    for c in &mut chunks {
        let v = u32::from(c[0]) << 16 | u32::from(c[1]) << 8 | u32::from(c[2]);
        buf.extend_from_slice(&[sextet(v, 18), sextet(v, 12), sextet(v, 6), sextet(v, 0)]);
    }
    match *chunks.remainder() {
        [a] => {
            let v = u32::from(a) << 16;
            buf.extend_from_slice(&[sextet(v, 18), sextet(v, 12), b'=', b'=']);
        }
        [a, b] => {
            let v = u32::from(a) << 16 | u32::from(b) << 8;
            buf.extend_from_slice(&[sextet(v, 18), sextet(v, 12), sextet(v, 6), b'=']);
        }
        _ => {}
    }
}

/// Compares two strings as sequences of UTF-16 code units (RFC 8785 §3.2.3 member order).
///
/// UTF-8 byte order equals code point order, and code point order equals UTF-16 order except
/// when a supplementary character (U+10000 and up, a surrogate pair starting 0xD800–0xDBFF in
/// UTF-16) meets a character in U+E000–U+FFFF: there UTF-16 puts the supplementary one first.
/// So compare bytes and flip only that case, which is visible at the first differing byte: lead
/// bytes 0xEE–0xEF against 0xF0–0xF4. (A difference inside a character's continuation bytes
/// means both characters share a lead byte and therefore a class.)
#[must_use]
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    match x.iter().zip(y).position(|(p, q)| p != q) {
        None => x.len().cmp(&y.len()),
        Some(i) => {
            let (p, q) = (x[i], y[i]);
            if p >= 0xEE && q >= 0xEE && (p >= 0xF0) != (q >= 0xF0) {
                q.cmp(&p)
            } else {
                p.cmp(&q)
            }
        }
    }
}

/// Whether `s` contains a supplementary-plane character (a 4-byte UTF-8 sequence).
#[inline]
fn has_supplementary(s: &str) -> bool {
    !s.is_ascii() && s.bytes().any(|b| b >= 0xF0)
}

/// Writes the entries of a string-keyed map as object members in JCS order, calling `value` for
/// each value after its key has been written.
///
/// A `BTreeMap<String, _>` iterates in code point order, which is JCS order unless some key holds
/// a supplementary-plane character. So the entries are written in map order, and only when such
/// a key turns up is the object rewound and rewritten from a UTF-16-sorted copy of the entries.
pub(crate) fn write_map<V>(
    w: &mut JcsWriter,
    map: &BTreeMap<String, V>,
    mut value: impl FnMut(&mut JcsWriter, &str, &V) -> Result<()>,
) -> Result<()> {
    w.begin_object();
    let members_start = w.buf.len();
    for (k, v) in map {
        if has_supplementary(k) {
            w.rewind_object(members_start);
            let mut entries: Vec<(&String, &V)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| cmp_utf16(a.0, b.0));
            for (k, v) in entries {
                w.key(k);
                value(w, k, v)?;
            }
            break;
        }
        w.key(k);
        value(w, k, v)?;
    }
    w.end_object();
    Ok(())
}

/// Writes a `map<string, string>` field as a JSON object.
pub(crate) fn write_string_map(w: &mut JcsWriter, map: &BTreeMap<String, String>) {
    // The closure never fails, so neither does write_map here.
    let _infallible = write_map(w, map, |w, _, v| {
        w.string(v);
        Ok(())
    });
}

/// Adds a path segment in front of the location an error carries (see [`WireError::within`]),
/// so a failure deep in a message names where it sits: `tool.args.limits[2]`.
#[inline]
pub(crate) fn within<T>(segment: &str, result: Result<T>) -> Result<T> {
    result.map_err(|e| e.within(segment))
}

/// [`within`] for a list element.
#[inline]
pub(crate) fn within_index<T>(index: usize, result: Result<T>) -> Result<T> {
    result.map_err(|e| e.within(&format!("[{index}]")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(s: &str) -> String {
        let mut w = JcsWriter::new();
        w.string(s);
        String::from_utf8(w.into_bytes()).unwrap()
    }

    fn number(v: f64) -> String {
        let mut w = JcsWriter::new();
        w.number(v).unwrap();
        String::from_utf8(w.into_bytes()).unwrap()
    }

    // RFC 8785 §3.2.2.2: the short escapes, then lowercase \u00xx for the other C0 controls.
    #[test]
    fn every_control_character_is_escaped() {
        for c in 0u8..0x20 {
            let s = char::from(c).to_string();
            let want = match c {
                0x08 => "\"\\b\"".to_owned(),
                0x09 => "\"\\t\"".to_owned(),
                0x0a => "\"\\n\"".to_owned(),
                0x0c => "\"\\f\"".to_owned(),
                0x0d => "\"\\r\"".to_owned(),
                _ => format!("\"\\u{c:04x}\""),
            };
            assert_eq!(string(&s), want, "control {c:#04x}");
        }
        assert_eq!(string("\u{1f}"), "\"\\u001f\"");
        assert_eq!(string("a\u{0}b\u{1b}c"), "\"a\\u0000b\\u001bc\"");
    }

    // RFC 8785 §3.2.2.2: only `"` and `\` besides controls; everything else is literal UTF-8.
    #[test]
    fn only_quote_and_backslash_are_escaped_among_printables() {
        assert_eq!(string("\"\\"), r#""\"\\""#);
        assert_eq!(string("/<>&'\u{7f}"), "\"/<>&'\u{7f}\"");
        assert_eq!(string("\u{2028}\u{2029}"), "\"\u{2028}\u{2029}\"");
        assert_eq!(string("héllo wörld €𝄞😀"), "\"héllo wörld €𝄞😀\"");
        assert_eq!(string(""), "\"\"");
    }

    // The word-at-a-time scan must find an escapable byte at any offset, next to any neighbour.
    #[test]
    fn long_strings_escape_at_every_offset() {
        let naive = |s: &str| {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\u{8}' => out.push_str("\\b"),
                    '\t' => out.push_str("\\t"),
                    '\n' => out.push_str("\\n"),
                    '\u{c}' => out.push_str("\\f"),
                    '\r' => out.push_str("\\r"),
                    c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        };
        let specials = [
            '"', '\\', '\u{0}', '\u{1f}', '\n', ' ', '!', '#', '[', ']', '\u{7f}', 'é',
        ];
        for fill in ['a', '\u{ff}', '€'] {
            for len in [7, 8, 9, 16, 23, 40] {
                for pos in 0..len {
                    for special in specials {
                        let s: String = (0..len)
                            .map(|i| if i == pos { special } else { fill })
                            .collect();
                        assert_eq!(string(&s), naive(&s), "{s:?}");
                    }
                }
            }
        }
    }

    // The integer shortcut agrees with the general ECMAScript formatter around 2^53.
    #[test]
    fn integral_numbers_match_the_general_formatter() {
        let limit = 9_007_199_254_740_992.0_f64;
        let mut samples = vec![
            0.0,
            1.0,
            -1.0,
            10.0,
            1e15,
            1e16,
            limit - 1.0,
            limit,
            limit + 2.0,
            -limit + 1.0,
            1e20,
            1e21,
        ];
        let mut x = 1.0_f64;
        while x < 1e22 {
            samples.extend([x, -x, x + 1.0, x * 7.0]);
            x *= 3.0;
        }
        for v in samples {
            assert_eq!(number(v), ryu_js::Buffer::new().format_finite(v), "{v}");
        }
    }

    // RFC 8785 §3.2.2.3 / ECMAScript Number::toString.
    #[test]
    fn numbers_use_ecmascript_form() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(-0.0), "0");
        assert_eq!(number(1.0), "1");
        assert_eq!(number(2.0), "2");
        assert_eq!(number(-2.0), "-2");
        assert_eq!(number(1.5), "1.5");
        assert_eq!(number(1e21), "1e+21");
        assert_eq!(number(1e20), "100000000000000000000");
        assert_eq!(number(1e-7), "1e-7");
        assert_eq!(number(0.000_001), "0.000001");
        assert_eq!(
            number(123_456_789_012_345_680_000.0),
            "123456789012345680000"
        );
        assert_eq!(number(5e-324), "5e-324");
        assert_eq!(number(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(number(9_007_199_254_740_993.0), "9007199254740992");
        assert_eq!(number(f64::MAX), "1.7976931348623157e+308");
    }

    #[test]
    fn non_finite_numbers_are_rejected() {
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut w = JcsWriter::new();
            assert!(matches!(
                w.number(v),
                Err(WireError::NonFiniteNumber { .. })
            ));
            assert!(w.as_bytes().is_empty());
        }
    }

    #[test]
    fn integers() {
        let mut w = JcsWriter::new();
        w.begin_array();
        for v in [0, 1, -1, 9_007_199_254_740_993, i64::MAX, i64::MIN] {
            w.int64(v);
        }
        for v in [0, -7, i32::MAX, i32::MIN] {
            w.int32(v);
        }
        w.end_array();
        assert_eq!(
            std::str::from_utf8(w.as_bytes()).unwrap(),
            r#"["0","1","-1","9007199254740993","9223372036854775807","-9223372036854775808",0,-7,2147483647,-2147483648]"#
        );
    }

    #[test]
    fn lower_hex_matches_the_hex_crate() {
        let all: Vec<u8> = (0..=255).collect();
        for digest in all.chunks_exact(32) {
            let digest: [u8; 32] = digest.try_into().unwrap();
            assert_eq!(lower_hex(&digest), hex::encode(digest));
        }
    }

    #[test]
    fn base64_matches_rfc4648_standard_padded() {
        use base64::Engine as _;
        let data: Vec<u8> = (0..=255u8).rev().chain(0..=255).collect();
        for n in 0..40 {
            let mut buf = Vec::new();
            push_base64(&mut buf, &data[..n]);
            assert_eq!(
                buf,
                base64::engine::general_purpose::STANDARD
                    .encode(&data[..n])
                    .into_bytes()
            );
        }
        let mut w = JcsWriter::new();
        w.base64(&[0x00, 0xff, 0x20, 0x0a, 0x09]);
        assert_eq!(w.as_bytes(), b"\"AP8gCgk=\"");
    }

    // RFC 8785 §3.2.3: keys compare as UTF-16 code unit arrays.
    #[test]
    fn utf16_order_differs_from_utf8_for_supplementary_characters() {
        let emoji = "\u{1F600}"; // UTF-16 D83D DE00, UTF-8 F0 ..
        let ligature = "\u{FB01}"; // UTF-16 FB01, UTF-8 EF ..
        assert_eq!(emoji.cmp(ligature), Ordering::Greater);
        assert_eq!(cmp_utf16(emoji, ligature), Ordering::Less);
        assert_eq!(cmp_utf16(ligature, emoji), Ordering::Greater);
        let cases = [
            "",
            "a",
            "ab",
            "b",
            "\u{7f}",
            "\u{80}",
            "é",
            "\u{D7FF}",
            "\u{E000}",
            "\u{FFFF}",
            "\u{10000}",
            "\u{1F600}",
            "\u{10FFFF}",
            "a\u{FB01}",
            "a\u{1F600}",
            "\u{1F600}a",
            "\u{1F601}",
            "\u{1F600}\u{FB01}",
            "\u{1F600}\u{1F600}",
        ];
        for a in cases {
            for b in cases {
                assert_eq!(
                    cmp_utf16(a, b),
                    a.encode_utf16().cmp(b.encode_utf16()),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    #[test]
    fn maps_are_written_in_utf16_order() {
        let map: BTreeMap<String, String> =
            ["\u{1F600}", "\u{FB01}", "a", "\u{E000}", "\u{10FFFF}"]
                .into_iter()
                .map(|k| (k.to_owned(), String::new()))
                .collect();
        let mut w = JcsWriter::new();
        write_string_map(&mut w, &map);
        assert_eq!(
            std::str::from_utf8(w.as_bytes()).unwrap(),
            "{\"a\":\"\",\"\u{1F600}\":\"\",\"\u{10FFFF}\":\"\",\"\u{E000}\":\"\",\"\u{FB01}\":\"\"}"
        );
        let ascii: BTreeMap<String, String> = [("b", "2"), ("a", "1"), ("A", "0")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let mut w = JcsWriter::new();
        write_string_map(&mut w, &ascii);
        assert_eq!(w.as_bytes(), br#"{"A":"0","a":"1","b":"2"}"#);
    }

    #[test]
    fn separators_are_implicit() {
        let mut w = JcsWriter::new();
        w.begin_object();
        w.field("a");
        w.begin_array();
        w.begin_object();
        w.end_object();
        w.begin_array();
        w.end_array();
        w.null();
        w.bool(true);
        w.bool(false);
        w.string("x");
        w.end_array();
        w.key("b");
        w.begin_object();
        w.end_object();
        w.end_object();
        assert_eq!(w.as_bytes(), br#"{"a":[{},[],null,true,false,"x"],"b":{}}"#);
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "JCS member order violated")]
    fn out_of_order_keys_are_caught_in_debug_builds() {
        let mut w = JcsWriter::new();
        w.begin_object();
        w.field("b");
        w.null();
        w.field("a");
    }

    #[test]
    fn error_paths_compose() {
        let err: Result<()> = Err(WireError::NonFiniteNumber {
            path: String::new(),
        });
        let err = within("tool", within("args", within("list", within_index(2, err))));
        match err {
            Err(WireError::NonFiniteNumber { path }) => assert_eq!(path, "tool.args.list[2]"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
