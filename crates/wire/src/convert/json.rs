//! JSON objects (`serde_json`) and `google.protobuf.Struct`.
//!
//! A Struct number is an IEEE-754 double, so every JSON number crosses the wire as `f64` and comes
//! back as a [`serde_json::Number`] built from that `f64` (an integer `3` returns as `3.0`; both
//! hash the same, because the canonical form prints doubles). A JSON number can never be NaN or
//! infinite, so the domain-to-wire direction cannot fail; a Struct can hold either, and the
//! wire-to-domain direction rejects them with [`WireError::NonFiniteNumber`] and the path of the
//! number.

use agentsessions_api::JsonObject;
use prost_types::value::Kind;
use prost_types::{ListValue, NullValue, Struct, Value};
use serde_json::{Number, Value as JsonValue};

use crate::error::{Result, WireError};

/// Converts a JSON object into a `google.protobuf.Struct`; every number becomes an `f64`.
pub fn struct_to_pb(object: JsonObject) -> Struct {
    Struct {
        fields: object
            .into_iter()
            .map(|(key, value)| (key, value_to_pb(value)))
            .collect(),
    }
}

/// Largest integer a float64 holds exactly (2^53 - 1).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Checks that `object` survives [`struct_to_pb`] unchanged: every number must be a finite
/// float64 or an integer within ±(2^53 - 1). Tool arguments are checked with this before any
/// effect, on both sides of `Harness.Connect`, so a rounded argument can never run a tool.
///
/// # Errors
///
/// The path of the first number that would change (`args.a[2]`) and why, for a person to read.
pub fn check_struct_exact(object: &JsonObject, root: &str) -> std::result::Result<(), String> {
    fn walk(value: &JsonValue, path: &str) -> std::result::Result<(), String> {
        match value {
            JsonValue::Number(n) => {
                let exact = n.as_u64().is_none_or(|u| u <= MAX_SAFE_INTEGER)
                    && n.as_i64()
                        .is_none_or(|i| i.unsigned_abs() <= MAX_SAFE_INTEGER)
                    && n.as_f64().is_some_and(f64::is_finite);
                if exact {
                    Ok(())
                } else {
                    Err(format!(
                        "{path}: {n} is not exactly representable as a float64"
                    ))
                }
            }
            JsonValue::Array(items) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, v)| walk(v, &format!("{path}[{i}]"))),
            JsonValue::Object(map) => map
                .iter()
                .try_for_each(|(k, v)| walk(v, &format!("{path}.{k}"))),
            _ => Ok(()),
        }
    }
    object
        .iter()
        .try_for_each(|(k, v)| walk(v, &format!("{root}.{k}")))
}

/// Converts a `google.protobuf.Struct` into a JSON object.
///
/// A `Value` with no kind set reads as JSON `null`, as Go's `structpb` does.
///
/// # Errors
///
/// [`WireError::NonFiniteNumber`] when a number is NaN or infinite. The path is relative to the
/// Struct (`x[2]`, `a.b`); the message conversions prefix it with the field names above it.
pub fn struct_from_pb(value: Struct) -> Result<JsonObject> {
    value
        .fields
        .into_iter()
        .map(|(key, value)| match value_from_pb(value) {
            Ok(json) => Ok((key, json)),
            Err(e) => Err(e.within(&key)),
        })
        .collect()
}

/// Converts an optional Struct field, prefixing any error path with `field`.
pub(super) fn opt_struct_from_pb(value: Option<Struct>, field: &str) -> Result<Option<JsonObject>> {
    value
        .map(|s| struct_from_pb(s).map_err(|e| e.within(field)))
        .transpose()
}

fn value_to_pb(value: JsonValue) -> Value {
    let kind = match value {
        JsonValue::Null => Kind::NullValue(i32::from(NullValue::NullValue)),
        JsonValue::Bool(b) => Kind::BoolValue(b),
        // Without serde_json's `arbitrary_precision` feature every number has an f64 form; NaN
        // keeps a number that somehow lacks one from passing as a value (the hash then fails).
        JsonValue::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        JsonValue::String(s) => Kind::StringValue(s),
        JsonValue::Array(items) => Kind::ListValue(ListValue {
            values: items.into_iter().map(value_to_pb).collect(),
        }),
        JsonValue::Object(object) => Kind::StructValue(struct_to_pb(object)),
    };
    Value { kind: Some(kind) }
}

fn value_from_pb(value: Value) -> Result<JsonValue> {
    Ok(match value.kind {
        None | Some(Kind::NullValue(_)) => JsonValue::Null,
        Some(Kind::BoolValue(b)) => JsonValue::Bool(b),
        Some(Kind::NumberValue(n)) => {
            JsonValue::Number(
                Number::from_f64(n).ok_or_else(|| WireError::NonFiniteNumber {
                    path: String::new(),
                })?,
            )
        }
        Some(Kind::StringValue(s)) => JsonValue::String(s),
        Some(Kind::ListValue(list)) => JsonValue::Array(
            list.values
                .into_iter()
                .enumerate()
                .map(|(i, item)| value_from_pb(item).map_err(|e| e.within(&format!("[{i}]"))))
                .collect::<Result<_>>()?,
        ),
        Some(Kind::StructValue(object)) => JsonValue::Object(struct_from_pb(object)?),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: JsonValue) -> JsonObject {
        match value {
            JsonValue::Object(o) => o,
            other => panic!("not an object: {other}"),
        }
    }

    fn number(n: f64) -> Value {
        Value {
            kind: Some(Kind::NumberValue(n)),
        }
    }

    #[test]
    fn nested_values_round_trip() {
        // hashing (a): Struct values are JSON-shaped, numbers are doubles
        let original = object(json!({
            "null": null,
            "yes": true,
            "no": false,
            "n": 1.5,
            "neg": -2.0,
            "big": 9_007_199_254_740_992.0,
            "s": "héllo \u{0} \"q\"",
            "list": [1.0, "two", [false, null], {"deep": {"deeper": [0.25]}}],
            "empty_list": [],
            "empty_obj": {},
            "": "empty key"
        }));
        let back = struct_from_pb(struct_to_pb(original.clone())).unwrap();
        assert_eq!(back, original);
    }

    #[test]
    fn integers_come_back_as_doubles() {
        let back = struct_from_pb(struct_to_pb(object(json!({"i": 3, "u": u64::MAX})))).unwrap();
        assert_eq!(back["i"], json!(3.0));
        assert_eq!(back["u"].as_f64(), Some(18_446_744_073_709_551_615.0));
    }

    #[test]
    fn non_finite_numbers_are_rejected_with_their_path() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let s = Struct {
                fields: [(
                    "x".to_owned(),
                    Value {
                        kind: Some(Kind::ListValue(ListValue {
                            values: vec![number(1.0), number(2.0), number(bad)],
                        })),
                    },
                )]
                .into(),
            };
            assert_eq!(
                opt_struct_from_pb(Some(s), "args").unwrap_err(),
                WireError::NonFiniteNumber {
                    path: "args.x[2]".into()
                }
            );
        }
        let nested = Struct {
            fields: [(
                "a".to_owned(),
                Value {
                    kind: Some(Kind::StructValue(Struct {
                        fields: [("b".to_owned(), number(f64::NAN))].into(),
                    })),
                },
            )]
            .into(),
        };
        assert_eq!(
            struct_from_pb(nested).unwrap_err(),
            WireError::NonFiniteNumber { path: "a.b".into() }
        );
    }

    #[test]
    fn kindless_value_reads_as_null() {
        let s = Struct {
            fields: [("k".to_owned(), Value { kind: None })].into(),
        };
        assert_eq!(struct_from_pb(s).unwrap(), object(json!({"k": null})));
    }
}
