//! Request parameters, the per-call model settings: `ModelRequest.params` is a string map, but
//! providers want numbers, booleans and objects. The settings every dialect types alike
//! ([`SHARED`]: sampling, the output bound, metadata) are listed once; each dialect adds the keys
//! only it knows. Every other key is passed through as a JSON string, and keys the provider fills
//! in itself are refused.

use std::collections::BTreeMap;

use serde_json::{Map, Number, Value};

use crate::error::{ModelError, Result};

/// The JSON type a known parameter is sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A finite number (`temperature`).
    Float,
    /// A whole number (`max_tokens`, `seed`).
    Integer,
    /// `true` or `false`.
    Bool,
    /// Any JSON value, given as JSON text (`response_format`, `stop_sequences`).
    Json,
}

/// The settings every dialect sends with the same JSON type.
pub(crate) const SHARED: &[(&str, Kind)] = &[
    ("temperature", Kind::Float),
    ("top_p", Kind::Float),
    ("max_tokens", Kind::Integer),
    ("metadata", Kind::Json),
];

/// The keys every provider fills in itself.
pub(crate) const RESERVED: &[&str] = &["model", "messages", "tools", "tool_choice", "stream"];

/// What one provider knows about parameters.
#[derive(Debug)]
pub(crate) struct Rules {
    /// Keys sent with a JSON type other than string, beyond [`SHARED`].
    pub(crate) typed: &'static [(&'static str, Kind)],
    /// Keys the provider sets itself beyond [`RESERVED`]; giving them is an error, not a silent
    /// override.
    pub(crate) reserved: &'static [&'static str],
}

/// Writes `params` into the request `body` following `rules`.
pub(crate) fn apply(
    params: Option<&BTreeMap<String, String>>,
    rules: &Rules,
    body: &mut Map<String, Value>,
) -> Result<()> {
    for (name, raw) in params.into_iter().flatten() {
        if RESERVED.contains(&name.as_str()) || rules.reserved.contains(&name.as_str()) {
            return Err(ModelError::ReservedParam { name: name.clone() });
        }
        let kind = SHARED
            .iter()
            .chain(rules.typed)
            .find(|(known, _)| known == name)
            .map(|&(_, kind)| kind);
        let value = match kind {
            None => Value::String(raw.clone()),
            Some(kind) => typed_value(name, raw, kind)?,
        };
        body.insert(name.clone(), value);
    }
    Ok(())
}

fn typed_value(name: &str, raw: &str, kind: Kind) -> Result<Value> {
    let invalid = |expected| ModelError::InvalidParam {
        name: name.to_owned(),
        value: raw.to_owned(),
        expected,
    };
    let text = raw.trim();
    Ok(match kind {
        Kind::Float => {
            let number: f64 = text.parse().map_err(|_| invalid("a number"))?;
            Value::Number(Number::from_f64(number).ok_or_else(|| invalid("a finite number"))?)
        }
        Kind::Integer => {
            let number: i64 = text.parse().map_err(|_| invalid("an integer"))?;
            Value::Number(number.into())
        }
        Kind::Bool => Value::Bool(text.parse().map_err(|_| invalid("true or false"))?),
        Kind::Json => serde_json::from_str(text).map_err(|_| invalid("json"))?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const RULES: Rules = Rules {
        typed: &[
            ("seed", Kind::Integer),
            ("logprobs", Kind::Bool),
            ("stop_sequences", Kind::Json),
        ],
        reserved: &["model"],
    };

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    // brief: well-known params become numbers; unknown ones pass through as strings.
    #[test]
    fn typed_params_become_json_types() {
        let mut body = Map::new();
        let given = params(&[
            ("temperature", "0.5"),
            ("seed", "42"),
            ("logprobs", "true"),
            ("stop_sequences", r#"["END"]"#),
            ("reasoning_effort", "low"),
        ]);
        apply(Some(&given), &RULES, &mut body).unwrap();
        assert_eq!(
            Value::Object(body),
            json!({"temperature": 0.5, "seed": 42, "logprobs": true,
                   "stop_sequences": ["END"], "reasoning_effort": "low"})
        );
    }

    #[test]
    fn bad_values_and_reserved_keys_are_refused() {
        let mut body = Map::new();
        assert!(matches!(
            apply(Some(&params(&[("seed", "1.5")])), &RULES, &mut body),
            Err(ModelError::InvalidParam { .. })
        ));
        assert!(matches!(
            apply(Some(&params(&[("temperature", "NaN")])), &RULES, &mut body),
            Err(ModelError::InvalidParam { .. })
        ));
        assert_eq!(
            apply(Some(&params(&[("model", "x")])), &RULES, &mut body),
            Err(ModelError::ReservedParam {
                name: "model".into()
            })
        );
        apply(None, &RULES, &mut body).unwrap();
    }

    // brief: the shared settings are typed for every dialect without being listed again.
    #[test]
    fn shared_settings_are_typed_for_every_dialect() {
        const BARE: Rules = Rules {
            typed: &[],
            reserved: &[],
        };
        let mut body = Map::new();
        let given = params(&[
            ("temperature", "0.25"),
            ("top_p", "1"),
            ("max_tokens", "64"),
            ("metadata", r#"{"user_id":"u"}"#),
        ]);
        apply(Some(&given), &BARE, &mut body).unwrap();
        assert_eq!(
            Value::Object(body),
            json!({"temperature": 0.25, "top_p": 1.0, "max_tokens": 64,
                   "metadata": {"user_id": "u"}})
        );
    }
}
