"""The journal's canonical form and hash chain, recomputed in Python.

``content_hash = hex(SHA-256(JCS({"event": proto3-JSON(event), "prev_hash": prev, "seq": "N"})))``
with proto field names, enum names, unpopulated fields omitted, int64 as strings and bytes as
base64; JCS is RFC 8785. Records chain from ``prev_hash = ""``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from ._pb import common_pb2


class CanonicalError(ValueError):
    """A value that has no canonical form (NaN, infinities, non-JSON types)."""


# The stdlib's string encoder escapes exactly what RFC 8785 escapes (`"`, `\\`, U+0000–U+001F,
# with \b \t \n \f \r and lowercase \u00xx) and writes everything else literally.
_string: Callable[[str], str] = json.encoder.encode_basestring


def _number(value: float) -> str:
    """ECMAScript ``Number.prototype.toString`` of a double, as RFC 8785 requires."""
    if math.isnan(value) or math.isinf(value):
        raise CanonicalError(f"{value} has no JSON form")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr is the shortest string that round-trips, i.e. the digits ECMAScript picks too.
    digits_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()[1:]
    digits = "".join(str(d) for d in digits_tuple)
    assert isinstance(exponent, int)
    k = len(digits)
    n = exponent + k  # value = 0.digits × 10^n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + body


def jcs(value: Any) -> str:
    """RFC 8785 serialization of a JSON value (dict, list, str, int, float, bool, None)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value) if abs(value) < 10**21 else _number(float(value))
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return "{" + ",".join(_string(k) + ":" + jcs(value[k]) for k in keys) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    raise CanonicalError(f"{type(value).__name__} is not a JSON value")


def message_json(message: Message) -> dict[str, Any]:
    """The proto3-JSON object of a message with proto field names (what the hash covers)."""
    try:
        return json_format.MessageToDict(message, preserving_proto_field_name=True)
    except (ValueError, TypeError) as err:
        raise CanonicalError(str(err)) from err


def canonical_message(message: Message) -> bytes:
    """JCS over the proto3-JSON of any message (the registry's spec digest uses it)."""
    return jcs(message_json(message)).encode()


# Event fields stored with an event but outside its hash (docs/extensions.md §1.2).
_UNHASHED_EVENT_FIELDS = ("redacted",)


def event_json(event: common_pb2.Event) -> dict[str, Any]:
    """The proto3-JSON of an event as the hash covers it: without the unhashed extensions."""
    hashed = message_json(event)
    for name in _UNHASHED_EVENT_FIELDS:
        hashed.pop(name, None)
    return hashed


def canonical_event(event: common_pb2.Event) -> bytes:
    """The canonical bytes of an event alone (no envelope)."""
    return jcs(event_json(event)).encode()


def canonical_record(prev_hash: str, seq: int, event: common_pb2.Event) -> bytes:
    """The canonical bytes the content hash is taken over."""
    envelope = {"event": event_json(event), "prev_hash": prev_hash, "seq": str(seq)}
    return jcs(envelope).encode()


def content_hash(prev_hash: str, seq: int, event: common_pb2.Event) -> str:
    """The lowercase hex content hash of ``event`` at ``seq`` after ``prev_hash``."""
    return hashlib.sha256(canonical_record(prev_hash, seq, event)).hexdigest()


@dataclass(frozen=True)
class Failure:
    """One record that does not verify."""

    seq: int
    reason: str


@dataclass
class VerifyReport:
    """What :func:`verify_records` found: the records checked and every failure."""

    records: int = 0
    head_hash: str = ""
    failures: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every link and hash matched."""
        return not self.failures


def verify_records(records: Iterable[common_pb2.LogRecord], prev_hash: str = "") -> VerifyReport:
    """Walks ``records`` in order: each record's ``prev_hash`` must equal the previous record's
    hash and its ``content_hash`` must equal the recomputed one. Checking goes on after a
    failure, from the stored hash, so every bad record is reported."""
    report = VerifyReport()
    prev = prev_hash
    for record in records:
        report.records += 1
        if record.prev_hash != prev:
            report.failures.append(Failure(record.seq, "prev_hash mismatch"))
        try:
            computed = content_hash(record.prev_hash, record.seq, record.event)
        except CanonicalError as err:
            report.failures.append(Failure(record.seq, f"no canonical form: {err}"))
        else:
            if computed != record.content_hash:
                report.failures.append(Failure(record.seq, "content hash mismatch"))
        prev = record.content_hash
    report.head_hash = prev
    return report
