//! Request parameters: `ModelRequest.params` is a string map, but providers want numbers,
//! booleans and objects. Each provider lists the keys it knows with their JSON type; every other
//! key is passed through as a JSON string, and keys the provider fills in itself are refused.

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

/// What one provider knows about parameters.
#[derive(Debug)]
pub(crate) struct Rules {
    /// Keys sent with a JSON type other than string.
    pub(crate) typed: &'static [(&'static str, Kind)],
    /// Keys the provider sets itself; giving them is an error, not a silent override.
    pub(crate) reserved: &'static [&'static str],
}

/// Writes `params` into the request `body` following `rules`.
pub(crate) fn apply(
    params: Option<&BTreeMap<String, String>>,
    rules: &Rules,
    body: &mut Map<String, Value>,
) -> Result<()> {
    for (name, raw) in params.into_iter().flatten() {
        if rules.reserved.contains(&name.as_str()) {
            return Err(ModelError::ReservedParam { name: name.clone() });
        }
        let kind = rules
            .typed
            .iter()
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
            ("temperature", Kind::Float),
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
}
