//! The scalar writers (strings, numbers, bytes, times, free-form JSON values) and the indenter.

use std::fmt::Write as _;

use agentsessions_api::Timestamp;
use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::Value as Json;

use crate::error::{Result, WireError};

/// Go's `base64.StdEncoding`: standard alphabet, padded. Decoding insists on canonical padding
/// but, like Go without `Strict()`, accepts non-zero bits after the last full byte.
pub(super) const GO_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string escaped the way Go's `json.Marshal` escapes it (HTML-safe).
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let short = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{0}'..='\u{1f}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if short.is_empty() {
            let code = u32::from(c);
            out.push_str("\\u");
            for shift in [12u32, 8, 4, 0] {
                // Each nibble indexes the 16-entry table.
                let nibble = (code >> shift) & 0xf;
                out.push(char::from(HEX[nibble as usize]));
            }
        } else {
            out.push_str(short);
        }
        start = i + c.len_utf8();
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Appends a finite `float64` the way Go's `json.Marshal` writes it.
///
/// Go prints the shortest decimal that reads back as the same double, in plain notation when
/// `1e-6 <= |v| < 1e21` and otherwise in exponent notation with no zero padding in the exponent
/// (`1e-7`, `1e+21`). That is exactly ECMAScript's `Number.prototype.toString`, which `ryu-js`
/// implements, except for negative zero: Go keeps its sign (`-0`). A non-finite value cannot occur
/// in a `serde_json` number; if one is passed anyway it is written as `null`, which keeps the output
/// valid JSON.
pub fn write_float64(out: &mut String, v: f64) {
    if !v.is_finite() {
        out.push_str("null");
    } else if v == 0.0 && v.is_sign_negative() {
        out.push_str("-0");
    } else {
        out.push_str(ryu_js::Buffer::new().format_finite(v));
    }
}

/// Appends an integer.
pub(super) fn write_int(out: &mut String, v: impl Into<i64>) {
    // Writing into a String cannot fail.
    let _ = write!(out, "{}", v.into());
}

/// Appends a bool.
pub(super) fn write_bool(out: &mut String, v: bool) {
    out.push_str(if v { "true" } else { "false" });
}

/// Appends a Go `[]byte`: `null` when empty (the domain's empty bytes are Go's nil), otherwise
/// padded standard base64 in a string.
pub(super) fn write_bytes(out: &mut String, bytes: &[u8]) {
    if bytes.is_empty() {
        out.push_str("null");
    } else {
        out.push('"');
        GO_BASE64.encode_string(bytes, out);
        out.push('"');
    }
}

/// Appends a free-form JSON value as Go writes a `map[string]any` member: object keys sorted
/// bytewise, integers as integers, doubles in Go's float format.
pub(super) fn write_json(out: &mut String, value: &Json) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => write_bool(out, *b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                write_int(out, i);
            } else if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else {
                write_float64(out, n.as_f64().unwrap_or(f64::NAN));
            }
        }
        Json::String(s) => write_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Json::Object(map) => write_json_object(out, map),
    }
}

/// Appends a JSON object with its keys sorted bytewise (Go sorts map keys; `serde_json::Map` is
/// only sorted when its `preserve_order` feature is off, so the order is not taken for granted).
pub(super) fn write_json_object(out: &mut String, map: &serde_json::Map<String, Json>) {
    let mut entries: Vec<(&String, &Json)> = map.iter().collect();
    if !entries.is_sorted_by(|a, b| a.0 <= b.0) {
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    }
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, key);
        out.push(':');
        write_json(out, value);
    }
    out.push('}');
}

/// Seconds from 1970-01-01T00:00:00Z to Go's zero time, 0001-01-01T00:00:00Z.
pub(super) const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// Appends a Go `time.Time` in UTC: the zero time for `None`, else RFC 3339 with the fraction
/// trimmed (Go's `RFC3339Nano`).
///
/// # Errors
///
/// [`WireError::InvalidTimestamp`] when the nanoseconds are outside `0..1e9` or the year outside
/// 0..=9999 (Go's `MarshalJSON` refuses those years).
pub(super) fn write_time(out: &mut String, ts: Option<Timestamp>) -> Result<()> {
    let Some(ts) = ts else {
        out.push_str("\"0001-01-01T00:00:00Z\"");
        return Ok(());
    };
    let invalid = || WireError::InvalidTimestamp {
        seconds: ts.seconds,
        nanos: ts.nanos,
    };
    if !(0..1_000_000_000).contains(&ts.nanos) {
        return Err(invalid());
    }
    let days = ts.seconds.div_euclid(86_400);
    let secs = ts.seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return Err(invalid());
    }
    let _ = write!(
        out,
        "\"{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if ts.nanos != 0 {
        let mut frac = format!("{:09}", ts.nanos);
        while frac.ends_with('0') {
            frac.pop();
        }
        out.push('.');
        out.push_str(&frac);
    }
    out.push_str("Z\"");
    Ok(())
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (H. Hinnant's algorithm).
pub(super) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The day count from 1970-01-01 of a proleptic Gregorian date (inverse of [`civil_from_days`]).
pub(super) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Re-indents JSON the way Go's `json.Indent(dst, src, "", "  ")` does, which is what
/// `json.MarshalIndent(v, "", "  ")` returns for `json.Marshal(v)`.
///
/// Every element of a non-empty object or array goes on its own line, indented two spaces per
/// level; an empty object or array stays `{}` / `[]`; a colon is followed by one space. Whitespace
/// outside strings is dropped and strings are copied unchanged. No trailing newline is added.
///
/// The input is expected to be valid JSON, as this module's writers produce; on other input the
/// result is unspecified (but the function does not panic).
pub fn indent(json: &str) -> String {
    let mut out = String::with_capacity(json.len() * 2);
    let mut depth = 0usize;
    // An opening bracket was written and its first element (if any) is not yet placed.
    let mut pending_open = false;
    let mut in_string = false;
    let mut escaped = false;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            continue;
        }
        if pending_open && c != '}' && c != ']' {
            pending_open = false;
            depth += 1;
            newline(&mut out, depth);
        }
        match c {
            '{' | '[' => {
                pending_open = true;
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            '}' | ']' => {
                if pending_open {
                    pending_open = false;
                } else {
                    depth = depth.saturating_sub(1);
                    newline(&mut out, depth);
                }
                out.push(c);
            }
            '"' => {
                in_string = true;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(s: &str) -> String {
        let mut out = String::new();
        write_string(&mut out, s);
        out
    }

    fn float(v: f64) -> String {
        let mut out = String::new();
        write_float64(&mut out, v);
        out
    }

    #[test]
    fn strings_escape_like_go() {
        assert_eq!(string("plain ünï 🙂 /"), "\"plain ünï 🙂 /\"");
        assert_eq!(string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(string("\u{8}\u{c}\n\r\t"), r#""\b\f\n\r\t""#);
        assert_eq!(
            string("\u{0}\u{1}\u{1f}\u{7f}"),
            "\"\\u0000\\u0001\\u001f\u{7f}\""
        );
        assert_eq!(string("<a & b>"), r#""\u003ca \u0026 b\u003e""#);
        assert_eq!(string("x\u{2028}y\u{2029}"), r#""x\u2028y\u2029""#);
    }

    #[test]
    fn floats_format_like_go() {
        for (v, want) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (2.0, "2"),
            (100.0, "100"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (0.1, "0.1"),
            (0.000_001, "0.000001"),
            (0.000_000_1, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (1e-10, "1e-10"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.2345e22, "1.2345e+22"),
            (-1e21, "-1e+21"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (9_007_199_254_740_993.0, "9007199254740992"),
            (123_456_789.125, "123456789.125"),
        ] {
            assert_eq!(float(v), want, "{v:e}");
        }
    }

    #[test]
    fn times_use_rfc3339_nano_in_utc() {
        let render = |ts| {
            let mut out = String::new();
            write_time(&mut out, ts).map(|()| out)
        };
        assert_eq!(render(None).unwrap(), "\"0001-01-01T00:00:00Z\"");
        let t = |seconds, nanos| Some(Timestamp { seconds, nanos });
        assert_eq!(
            render(t(1_700_000_000, 0)).unwrap(),
            "\"2023-11-14T22:13:20Z\""
        );
        assert_eq!(
            render(t(1_700_000_000, 500_000_000)).unwrap(),
            "\"2023-11-14T22:13:20.5Z\""
        );
        assert_eq!(
            render(t(0, 1)).unwrap(),
            "\"1970-01-01T00:00:00.000000001Z\""
        );
        assert_eq!(render(t(-1, 0)).unwrap(), "\"1969-12-31T23:59:59Z\"");
        assert_eq!(
            render(t(GO_ZERO_TIME_UNIX, 0)).unwrap(),
            "\"0001-01-01T00:00:00Z\""
        );
        assert_eq!(
            render(t(253_402_300_799, 999_999_999)).unwrap(),
            "\"9999-12-31T23:59:59.999999999Z\""
        );
        assert!(matches!(
            render(t(253_402_300_800, 0)),
            Err(WireError::InvalidTimestamp { .. })
        ));
        assert!(matches!(
            render(t(0, 1_000_000_000)),
            Err(WireError::InvalidTimestamp { .. })
        ));
        assert!(matches!(
            render(t(0, -1)),
            Err(WireError::InvalidTimestamp { .. })
        ));
    }

    #[test]
    fn civil_days_round_trip() {
        for days in [-719_468 - 366, -1, 0, 1, 59, 60, 11_016, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn indent_matches_go_marshal_indent() {
        assert_eq!(indent("[]"), "[]");
        assert_eq!(indent("{}"), "{}");
        assert_eq!(indent("null"), "null");
        assert_eq!(
            indent(r#"{"a":[],"b":{},"c":[1,{"d":"x,:{}[]\"y"}],"e":null}"#),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    {\n      \"d\": \"x,:{}[]\\\"y\"\n    }\n  ],\n  \"e\": null\n}"
        );
        // Whitespace outside strings is dropped, inside kept.
        assert_eq!(indent(" [ 1 , \" a \" ] "), "[\n  1,\n  \" a \"\n]");
    }
}
