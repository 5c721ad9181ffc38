//! The well-known types that appear in our messages, in their special proto3-JSON forms:
//! `Timestamp` as an RFC 3339 string, `Struct` / `Value` / `ListValue` as plain JSON.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Timestamp, Value};

use super::Canonical;
use super::jcs::{JcsWriter, within, within_index, write_map};
use crate::error::{Result, WireError};

/// 0001-01-01T00:00:00Z, the first instant proto3-JSON can write.
const MIN_SECONDS: i64 = -62_135_596_800;
/// 9999-12-31T23:59:59Z, the last whole second proto3-JSON can write.
const MAX_SECONDS: i64 = 253_402_300_799;

/// `Timestamp` → `"YYYY-MM-DDTHH:MM:SS[.fff|.ffffff|.fffffffff]Z"`: UTC, with the shortest of 0,
/// 3, 6 or 9 fraction digits that is exact (the protojson rule).
///
/// Fails with [`WireError::InvalidTimestamp`] when `seconds` lies outside years 1–9999 or
/// `nanos` outside `0..1_000_000_000`, the range the proto3-JSON mapping defines.
impl Canonical for Timestamp {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        let (text, len) = rfc3339(self.seconds, self.nanos).ok_or(WireError::InvalidTimestamp {
            seconds: self.seconds,
            nanos: self.nanos,
        })?;
        w.raw_value(&text[..len]);
        Ok(())
    }
}

/// The quoted RFC 3339 text of a timestamp in a stack buffer, or `None` when out of range.
fn rfc3339(seconds: i64, nanos: i32) -> Option<([u8; 32], usize)> {
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
        return None;
    }
    let nanos = u32::try_from(nanos).ok().filter(|n| *n < 1_000_000_000)?;
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let second_of_day = seconds.rem_euclid(86_400);

    let mut text = [0u8; 32];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        text[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    put(b"\"");
    put(&digits::<4>(year));
    put(b"-");
    put(&digits::<2>(month));
    put(b"-");
    put(&digits::<2>(day));
    put(b"T");
    put(&digits::<2>(second_of_day / 3600));
    put(b":");
    put(&digits::<2>(second_of_day / 60 % 60));
    put(b":");
    put(&digits::<2>(second_of_day % 60));
    if nanos != 0 {
        put(b".");
        let fraction = digits::<9>(i64::from(nanos));
        let keep = if nanos % 1_000_000 == 0 {
            3
        } else if nanos % 1_000 == 0 {
            6
        } else {
            9
        };
        put(&fraction[..keep]);
    }
    put(b"Z\"");
    Some((text, at))
}

/// The last `N` decimal digits of a non-negative `v`, zero-padded.
fn digits<const N: usize>(mut v: i64) -> [u8; N] {
    let mut out = [b'0'; N];
    for slot in out.iter_mut().rev() {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "rem_euclid(10) is in 0..10"
        )]
        let digit = v.rem_euclid(10) as u8;
        *slot = b'0' + digit;
        v /= 10;
    }
    out
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01 (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `Struct` → a JSON object of its fields.
impl Canonical for Struct {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        write_map(w, &self.fields, |w, key, value| {
            within(key, value.write_canonical(w))
        })
    }
}

/// `Value` → the JSON value it holds; any `null_value` number is `null`. A NaN or infinite
/// `number_value` fails with [`WireError::NonFiniteNumber`], a `Value` with no kind set with
/// [`WireError::MissingField`] naming the value — both are marshal errors in the reference
/// implementation.
impl Canonical for Value {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        match &self.kind {
            None => {
                return Err(WireError::MissingField {
                    field: String::new(),
                });
            }
            Some(Kind::NullValue(_)) => w.null(),
            Some(Kind::NumberValue(n)) => w.number(*n)?,
            Some(Kind::StringValue(s)) => w.string(s),
            Some(Kind::BoolValue(b)) => w.bool(*b),
            Some(Kind::StructValue(s)) => s.write_canonical(w)?,
            Some(Kind::ListValue(l)) => l.write_canonical(w)?,
        }
        Ok(())
    }
}

/// `ListValue` → a JSON array.
impl Canonical for ListValue {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_array();
        for (i, v) in self.values.iter().enumerate() {
            within_index(i, v.write_canonical(w))?;
        }
        w.end_array();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn text(seconds: i64, nanos: i32) -> String {
        let mut w = JcsWriter::new();
        Timestamp { seconds, nanos }
            .write_canonical(&mut w)
            .unwrap();
        String::from_utf8(w.into_bytes()).unwrap()
    }

    #[test]
    fn timestamps_use_rfc3339_utc_with_0_3_6_or_9_fraction_digits() {
        assert_eq!(text(1_700_000_000, 0), "\"2023-11-14T22:13:20Z\"");
        assert_eq!(
            text(1_700_000_000, 500_000_000),
            "\"2023-11-14T22:13:20.500Z\""
        );
        assert_eq!(
            text(1_700_000_000, 1_000),
            "\"2023-11-14T22:13:20.000001Z\""
        );
        assert_eq!(
            text(1_700_000_000, 120_000),
            "\"2023-11-14T22:13:20.000120Z\""
        );
        assert_eq!(text(1_700_000_000, 1), "\"2023-11-14T22:13:20.000000001Z\"");
        assert_eq!(
            text(1_700_000_000, 999_999_999),
            "\"2023-11-14T22:13:20.999999999Z\""
        );
        assert_eq!(text(0, 0), "\"1970-01-01T00:00:00Z\"");
        assert_eq!(text(-1, 0), "\"1969-12-31T23:59:59Z\"");
        assert_eq!(text(-1, 500_000_000), "\"1969-12-31T23:59:59.500Z\"");
        assert_eq!(text(951_782_400, 0), "\"2000-02-29T00:00:00Z\"");
        assert_eq!(text(MIN_SECONDS, 0), "\"0001-01-01T00:00:00Z\"");
        assert_eq!(
            text(MAX_SECONDS, 999_999_999),
            "\"9999-12-31T23:59:59.999999999Z\""
        );
    }

    #[test]
    fn timestamps_out_of_range_are_rejected() {
        for (seconds, nanos) in [
            (MIN_SECONDS - 1, 0),
            (MAX_SECONDS + 1, 0),
            (0, -1),
            (0, 1_000_000_000),
            (i64::MIN, 0),
            (i64::MAX, i32::MAX),
        ] {
            let mut w = JcsWriter::new();
            let err = Timestamp { seconds, nanos }
                .write_canonical(&mut w)
                .unwrap_err();
            assert!(
                matches!(err, WireError::InvalidTimestamp { seconds: s, nanos: n } if s == seconds && n == nanos),
                "{err:?}"
            );
        }
    }

    // Cross-check the calendar arithmetic against a day-by-day walk over 1969..2401 and the
    // range ends.
    #[test]
    fn civil_from_days_walks_the_calendar() {
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let (mut y, mut m, mut d) = (1969, 1, 1);
        for days in -365..157_000 {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            let month_len = match m {
                2 if leap(y) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > month_len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
        assert_eq!(civil_from_days(MIN_SECONDS / 86_400), (1, 1, 1));
        assert_eq!(civil_from_days(MAX_SECONDS / 86_400), (9999, 12, 31));
    }

    fn value(kind: Kind) -> Value {
        Value { kind: Some(kind) }
    }

    fn object(entries: &[(&str, Value)]) -> Struct {
        Struct {
            fields: entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        }
    }

    #[test]
    fn struct_is_plain_json() {
        let s = object(&[
            ("z", value(Kind::NullValue(0))),
            ("b", value(Kind::BoolValue(false))),
            ("n", value(Kind::NumberValue(2.0))),
            ("s", value(Kind::StringValue("x\n".into()))),
            ("o", value(Kind::StructValue(Struct::default()))),
            (
                "l",
                value(Kind::ListValue(ListValue {
                    values: vec![value(Kind::NumberValue(1.5)), value(Kind::NullValue(7))],
                })),
            ),
            ("\u{1F600}", value(Kind::NumberValue(-0.0))),
            ("\u{FB01}", value(Kind::NumberValue(1e21))),
        ]);
        let mut w = JcsWriter::new();
        s.write_canonical(&mut w).unwrap();
        assert_eq!(
            std::str::from_utf8(w.as_bytes()).unwrap(),
            "{\"b\":false,\"l\":[1.5,null],\"n\":2,\"o\":{},\"s\":\"x\\n\",\"z\":null,\
             \"\u{1F600}\":0,\"\u{FB01}\":1e+21}"
        );
    }

    #[test]
    fn non_finite_struct_numbers_fail_with_their_path() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let inner = object(&[(
                "list",
                value(Kind::ListValue(ListValue {
                    values: vec![value(Kind::NumberValue(1.0)), value(Kind::NumberValue(bad))],
                })),
            )]);
            let s = object(&[
                ("a", value(Kind::BoolValue(true))),
                ("outer", value(Kind::StructValue(inner))),
            ]);
            let err = s.write_canonical(&mut JcsWriter::new()).unwrap_err();
            match err {
                WireError::NonFiniteNumber { path } => assert_eq!(path, "outer.list[1]"),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn unset_value_fails() {
        let s = Struct {
            fields: BTreeMap::from([("k".to_owned(), Value { kind: None })]),
        };
        let err = s.write_canonical(&mut JcsWriter::new()).unwrap_err();
        assert!(matches!(err, WireError::MissingField { field } if field == "k"));
    }
}
