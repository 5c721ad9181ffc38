"""The Python verifier against the shared golden vectors (the same files the Rust verifier's
tests read), and its verdict on tampered records."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from agentsessions import pb_common, pb_harness, pb_registry, pb_session
from agentsessions.canonical import (
    CanonicalError,
    canonical_event,
    canonical_message,
    canonical_record,
    content_hash,
    jcs,
    verify_records,
)

GOLDEN = Path(__file__).resolve().parents[2] / "testdata" / "golden"


def load(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / name).read_text())


CONTENT = load("content_hash_vectors.json")
CONTENT_VECTORS = CONTENT["published_vectors"] + CONTENT["derived_vectors"]
BYTES_VECTORS = load("canonical_bytes_vectors.json")["vectors"]


@pytest.mark.parametrize("vector", CONTENT_VECTORS, ids=lambda v: v["id"])
def test_content_hash_vectors(vector: dict[str, Any]) -> None:
    event = json_format.ParseDict(vector["event_proto3_json"], pb_common.Event())
    record = canonical_record(vector["prev_hash"], vector["seq"], event)
    assert record.decode() == vector["canonical_record"]
    assert content_hash(vector["prev_hash"], vector["seq"], event) == vector["expected_content_hash"]


def _parse(canonical: str, message: Any) -> Any:
    return json_format.Parse(canonical, message)


@pytest.mark.parametrize("vector", BYTES_VECTORS, ids=lambda v: v["id"])
def test_canonical_bytes_vectors(vector: dict[str, Any]) -> None:
    """Each published byte string, decoded into the message and canonicalized again, comes
    back byte for byte (and hashes to the derived hash where one is given)."""
    canonical = vector["canonical_bytes"]
    function = vector["function"]
    if function.startswith("canon.Record"):
        envelope = json.loads(canonical)
        event = json_format.ParseDict(envelope["event"], pb_common.Event())
        got = canonical_record(envelope["prev_hash"], int(envelope["seq"]), event)
    elif function.startswith("canon.Event"):
        got = canonical_event(_parse(canonical, pb_common.Event()))
    elif "Session" in function:
        got = canonical_message(_parse(canonical, pb_session.Session()))
    else:
        spec = _parse(canonical, pb_registry.HarnessSpec())
        got = canonical_message(spec)
        assert "sha256:" + hashlib.sha256(got).hexdigest() == vector["expected_digest"]
    assert got.decode() == canonical
    if "derived_sha256_of_bytes" in vector:
        assert hashlib.sha256(got).hexdigest() == vector["derived_sha256_of_bytes"]


def test_jcs_numbers_and_strings_follow_rfc_8785() -> None:
    assert jcs([1e21, 1e-7, 0.1, 123.0, -0.0, 1.5e300, 2.5, 1e20, 0.000001]) == (
        "[1e+21,1e-7,0.1,123,0,1.5e+300,2.5,100000000000000000000,0.000001]"
    )
    assert jcs({"b": 1, "a": "\u2028<>&\x01\n\"\\", "\u00e9": True, "B": None}) == (
        '{"B":null,"a":"\u2028<>&\\u0001\\n\\"\\\\","b":1,"\u00e9":true}'
    )
    with pytest.raises(CanonicalError):
        jcs(float("nan"))


def _chain(texts: list[str]) -> list[pb_common.LogRecord]:
    records, prev = [], ""
    for seq, text in enumerate(texts, start=1):
        event = pb_common.Event(
            execution_id="e1",
            kind=pb_common.EVENT_INPUT,
            message=pb_common.Message(role="user", parts=[pb_common.Part(text=pb_common.TextPart(text=text))]),
        )
        digest = content_hash(prev, seq, event)
        records.append(pb_common.LogRecord(seq=seq, prev_hash=prev, content_hash=digest, event=event))
        prev = digest
    return records


def test_a_tampered_record_fails_and_is_named() -> None:
    records = _chain(["one", "two", "three"])
    assert verify_records(records).ok
    records[1].event.message.parts[0].text.text = "TWO"
    report = verify_records(records)
    assert not report.ok
    assert [(f.seq, f.reason) for f in report.failures] == [(2, "content hash mismatch")]


def test_a_broken_link_fails() -> None:
    records = _chain(["one", "two", "three"])
    records[2].prev_hash = "00" * 32
    report = verify_records(records)
    assert [(f.seq, f.reason) for f in report.failures] == [(3, "prev_hash mismatch"), (3, "content hash mismatch")]


def test_transport_fields_are_not_hashed() -> None:
    """commit_time lives beside the record, never in the hash."""
    records = _chain(["one"])
    records[0].commit_time.FromSeconds(1_700_000_000)
    assert verify_records(records).ok


def test_the_redaction_list_is_stored_beside_the_content_not_hashed() -> None:
    """Event.redacted (docs/extensions.md) names what the host redacted; the hash skips it."""
    records = _chain(["[REDACTED:MODEL_API_KEY]"])
    records[0].event.redacted.append("MODEL_API_KEY")
    assert verify_records(records).ok


def test_descriptor_types_are_the_contracts() -> None:
    assert pb_harness.HarnessDescriptor.DESCRIPTOR.full_name == "agentsessions.v1.HarnessDescriptor"
