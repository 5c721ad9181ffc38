//! The canonical JSON form (RFC 8785) against an independent implementation, `serde_jcs`, as the
//! oracle: any `Struct` value writes exactly what the oracle writes for the same JSON, and every
//! event decoded from any bytes writes either an error or bytes the oracle leaves unchanged (they
//! are canonical already: member order, escaping and number spelling all agree).

use std::collections::BTreeMap;
use std::sync::Mutex;

use agentsessions_fuzz::oracle::JcsOracle;
use agentsessions_fuzz::{Corpus, bytes_or_mutation, config, run};
use agentsessions_journal::export::import_reference_json;
use agentsessions_wire::canonical::{canonical_event, canonical_message};
use agentsessions_wire::pb;
use proptest::prelude::*;
use prost::Message as _;
use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};

/// Every event of the reference journals in the corpus, encoded: seeds reaching each body kind.
fn event_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for bytes in Corpus::load("reference_json").unwrap().bytes() {
        let text = String::from_utf8(bytes).unwrap();
        let imported = import_reference_json(&text).unwrap();
        for record in &imported.records {
            seeds.push(pb::Event::from(&record.event).encode_to_vec());
        }
    }
    seeds
}

static ORACLE: Mutex<Option<JcsOracle>> = Mutex::new(None);

/// The oracle's canonical form of `json` (the oracle is started once per test binary).
fn oracle(json: &str) -> String {
    let mut slot = ORACLE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let running = slot.get_or_insert_with(|| JcsOracle::start().unwrap());
    running.canonical(json).unwrap()
}

/// Numbers where spellings differ: integers near 2^53, exponent boundaries (1e21, 1e-7),
/// subnormals, negative zero, and anything finite.
fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("JSON numbers are finite", |v| v.is_finite()),
        any::<i32>().prop_map(f64::from),
        (-60i32..60, any::<u16>()).prop_map(|(exp, m)| f64::from(m) * 10f64.powi(exp)),
        Just(-0.0),
        Just(9_007_199_254_740_993.0),
        Just(1e21),
        Just(1e-7),
        Just(5e-324),
        Just(f64::MAX),
    ]
}

/// Strings that stress escaping and UTF-16 key order: control characters, quotes, backslashes,
/// characters above U+FFFF (which sort by their surrogates) and private-use ones below it.
fn text() -> impl Strategy<Value = String> {
    let special = prop_oneof![
        Just('\u{0}'),
        Just('\u{1f}'),
        Just('\u{7f}'),
        Just('"'),
        Just('\\'),
        Just('/'),
        Just('\u{2028}'),
        Just('\u{e000}'),
        Just('\u{ffff}'),
        Just('\u{10000}'),
        Just('\u{1f600}'),
        any::<char>(),
        proptest::char::range('a', 'e'),
    ];
    proptest::collection::vec(special, 0..6).prop_map(|chars| chars.into_iter().collect())
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Kind::NullValue(0)),
        any::<bool>().prop_map(Kind::BoolValue),
        number().prop_map(Kind::NumberValue),
        text().prop_map(Kind::StringValue),
    ]
    .prop_map(|kind| Value { kind: Some(kind) });
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6)
                .prop_map(|values| Kind::ListValue(ListValue { values })),
            proptest::collection::btree_map(text(), inner, 0..6)
                .prop_map(|fields| Kind::StructValue(Struct { fields })),
        ]
        .prop_map(|kind| Value { kind: Some(kind) })
    })
}

/// `value` as serde_json sees it (numbers as doubles, as JSON text carries them).
fn to_json(value: &Value) -> serde_json::Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::ListValue(l)) => {
            serde_json::Value::Array(l.values.iter().map(to_json).collect())
        }
        Some(Kind::StructValue(s)) => serde_json::Value::Object(
            s.fields
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
    }
}

#[test]
fn struct_values_write_what_the_oracle_writes() {
    let fields = proptest::collection::btree_map(text(), value(), 0..8);
    run(
        "canonical_json/struct_vs_serde_jcs",
        config(),
        &fields,
        |fields| {
            let message = Struct {
                fields: fields.clone(),
            };
            let ours = String::from_utf8(canonical_message(&message).unwrap()).unwrap();
            let json = to_json(&Value {
                kind: Some(Kind::StructValue(Struct { fields })),
            });
            prop_assert_eq!(ours, oracle(&json.to_string()));
            Ok(())
        },
    );
}

#[test]
fn events_from_any_bytes_are_canonical_or_refused() {
    let inputs = bytes_or_mutation(event_seeds());
    run(
        "canonical_json/event_bytes_vs_serde_jcs",
        config(),
        &inputs,
        |bytes| {
            let Ok(event) = pb::Event::decode(bytes.as_slice()) else {
                return Ok(());
            };
            // Round trip: what decoded encodes to bytes that decode to the same message.
            let again = pb::Event::decode(event.encode_to_vec().as_slice()).unwrap();
            prop_assert_eq!(&again, &event);
            if let Ok(canonical) = canonical_event(&event) {
                let ours = String::from_utf8(canonical).unwrap();
                prop_assert_eq!(oracle(&ours), ours);
            }
            Ok(())
        },
    );
}

#[test]
fn the_oracle_disagrees_with_a_non_canonical_form() {
    // Guards the oracle itself: it reorders members and respells numbers.
    assert_eq!(oracle(r#"{"b":1.0,"a":1e2}"#), r#"{"a":100,"b":1}"#);
    let mut fields = BTreeMap::new();
    fields.insert(
        "\u{10000}".to_owned(),
        Value {
            kind: Some(Kind::NumberValue(-0.0)),
        },
    );
    fields.insert(
        "\u{e000}".to_owned(),
        Value {
            kind: Some(Kind::StringValue("\u{1f}".into())),
        },
    );
    let ours = String::from_utf8(canonical_message(&Struct { fields }).unwrap()).unwrap();
    // U+10000 is D800 DC00 in UTF-16, so it sorts before U+E000.
    assert_eq!(ours, "{\"\u{10000}\":0,\"\u{e000}\":\"\\u001f\"}");
}
