//! Throughput of the canonical form and the content hash (the journal verifies at ≥ 500,000
//! records/s, i.e. ≤ 2 µs per record including decoding and storage).

#![allow(missing_docs)]

use std::hint::black_box;

use agentsessions_wire::canonical::{canonical_event, content_hash, record_hash};
use agentsessions_wire::pb::{self, event::Body};
use criterion::{Criterion, criterion_group, criterion_main};
use prost_types::value::Kind;
use prost_types::{Struct, Value};

/// A typical OUTPUT record: an assistant message of about 200 bytes of text.
fn output_event() -> pb::Event {
    pb::Event {
        execution_id: "9f86d081884c7d65".into(),
        kind: pb::EventKind::EventOutput as i32,
        body: Some(Body::Message(pb::Message {
            role: "assistant".into(),
            parts: vec![pb::Part {
                part: Some(pb::part::Part::Text(pb::TextPart {
                    text: "The deployment finished successfully. All 12 services report healthy, \
                           the canary stayed within its error budget for 30 minutes, and traffic \
                           has been shifted to the new version.\nNext: clean up old replicas."
                        .into(),
                })),
            }],
        })),
        ..Default::default()
    }
}

/// A TOOL_CALL whose arguments are a Struct of 10 keys of mixed kinds.
fn tool_call_event() -> pb::Event {
    let value = |kind| Value { kind: Some(kind) };
    let fields = [
        (
            "path",
            value(Kind::StringValue("/srv/app/config.yaml".into())),
        ),
        ("mode", value(Kind::StringValue("overwrite".into()))),
        ("retries", value(Kind::NumberValue(3.0))),
        ("timeout_s", value(Kind::NumberValue(12.5))),
        ("dry_run", value(Kind::BoolValue(false))),
        ("owner", value(Kind::StringValue("deploy-bot".into()))),
        (
            "checksum",
            value(Kind::StringValue(
                "sha256:5e884898da28047151d0e56f8dc62927".into(),
            )),
        ),
        ("replicas", value(Kind::NumberValue(4.0))),
        ("labels", value(Kind::StructValue(Struct::default()))),
        ("note", value(Kind::NullValue(0))),
    ];
    pb::Event {
        execution_id: "9f86d081884c7d65".into(),
        kind: pb::EventKind::EventToolCall as i32,
        body: Some(Body::Tool(pb::ToolCall {
            id: "call_7".into(),
            tool: "write_file".into(),
            args: Some(Struct {
                fields: fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            }),
            mediation: pb::Mediation::ControllerMediated as i32,
            idempotency_key: "9f86d081884c7d65/call_7".into(),
        })),
        ..Default::default()
    }
}

const PREV: &str = "551bd146050c8d630b0c3b999a4445f3792a470db9bca443d8d4a67706283fcc";

fn bench(c: &mut Criterion) {
    for (name, ev) in [("output", output_event()), ("tool_call", tool_call_event())] {
        let bytes = canonical_event(&ev).expect("bench events are valid");
        eprintln!("{name}: {} canonical bytes", bytes.len());
        c.bench_function(&format!("content_hash/{name}"), |b| {
            b.iter(|| content_hash(black_box(PREV), black_box(42), black_box(&ev)))
        });
        c.bench_function(&format!("canonical_event/{name}"), |b| {
            b.iter(|| canonical_event(black_box(&ev)))
        });
        c.bench_function(&format!("sha256_only/{name}"), |b| {
            use sha2::Digest as _;
            b.iter(|| sha2::Sha256::digest(black_box(&bytes)))
        });
        c.bench_function(&format!("record_hash/{name}"), |b| {
            b.iter(|| record_hash(black_box(PREV), black_box(42), black_box(&bytes)))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
