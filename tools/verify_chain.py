#!/usr/bin/env python3
"""Independent verifier for agentsessions hash chains (standard library only).

It shares no code with the Rust implementation: canonical JSON (RFC 8785) and the record hash
are rebuilt here from their definitions, so agreement between the two is evidence that the
hashes are language neutral.

    content_hash = hex(sha256(JCS({"event": <proto3-JSON event>, "prev_hash": prev, "seq": "<n>"})))

Usage:
    verify_chain.py golden <content_hash_vectors.json>   check the published golden vectors
    verify_chain.py audit <bundle.json>                  check every hash and link of a session

Prints "OK: ..." and exits 0 when everything matches; prints "FAIL: ..." and exits 1 otherwise
(2 for unusable input).
"""

import hashlib
import json
import math
import sys


def es_number(value):
    """Formats a number the way ECMAScript's Number.prototype.toString does (RFC 8785 3.2.2.3)."""
    if isinstance(value, bool):
        raise ValueError("booleans are not numbers")
    if isinstance(value, int):
        value = float(value) if abs(value) > 2**53 else value
        if isinstance(value, int):
            return str(value)
    if not math.isfinite(value):
        raise ValueError("JSON cannot hold NaN or infinity")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest round-tripping digits; split them into digits and exponent.
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    # Position of the decimal point relative to the first significant digit.
    point = len(whole.lstrip("0")) if whole.strip("0") else -(len(frac) - len(frac.lstrip("0")))
    point += int(exp) if exp else 0
    digits = digits.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp_text = ("+" if e >= 0 else "-") + str(abs(e))
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + exp_text
    return sign + text


def jcs(value):
    """RFC 8785 canonical JSON text of a parsed JSON value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return es_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(jcs(item) for item in value) + "]"
    if isinstance(value, dict):
        # Keys sort by their UTF-16 code units, not by code points.
        keys = sorted(value, key=lambda key: key.encode("utf-16-be"))
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + jcs(value[k]) for k in keys) + "}"
    raise ValueError(f"not a JSON value: {type(value).__name__}")


def record_hash(prev_hash, seq, event):
    canonical = jcs({"event": event, "prev_hash": prev_hash, "seq": str(seq)})
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def check_golden(path):
    with open(path, encoding="utf-8") as handle:
        doc = json.load(handle)
    vectors = doc.get("published_vectors", []) + doc.get("derived_vectors", [])
    failures = []
    for vector in vectors:
        got = record_hash(vector["prev_hash"], vector["seq"], vector["event_proto3_json"])
        if got != vector["expected_content_hash"]:
            failures.append(f"{vector['id']}: got {got}, want {vector['expected_content_hash']}")
        expected_bytes = vector.get("canonical_record")
        if expected_bytes is not None:
            mine = jcs({"event": vector["event_proto3_json"], "prev_hash": vector["prev_hash"],
                        "seq": str(vector["seq"])})
            if mine != expected_bytes:
                failures.append(f"{vector['id']}: canonical bytes differ")
    if not vectors:
        return ["no vectors in the file"]
    return failures or f"{len(vectors)} golden vectors match"


def check_audit(path):
    with open(path, encoding="utf-8") as handle:
        doc = json.load(handle)
    if doc.get("format") != "agentsessions.audit.v1":
        raise ValueError(f"unknown bundle format {doc.get('format')!r}")
    records = doc["records"]
    failures = []
    prev = ""
    for expected_seq, record in enumerate(records, start=1):
        seq = record["seq"]
        if seq != expected_seq:
            failures.append(f"seq {seq}: expected seq {expected_seq} (gap or reorder)")
            break
        if record["prev_hash"] != prev:
            failures.append(f"seq {seq}: prev_hash does not link to seq {seq - 1}")
        got = record_hash(record["prev_hash"], seq, record["event"])
        if got != record["hash"]:
            failures.append(f"seq {seq}: content hash mismatch (recomputed {got})")
        prev = record["hash"]
    return failures or f"session {doc.get('session')!r}: {len(records)} records, every hash and link verified"


def main(argv):
    if len(argv) != 3 or argv[1] not in ("golden", "audit"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        outcome = check_golden(argv[2]) if argv[1] == "golden" else check_audit(argv[2])
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"FAIL: cannot read {argv[2]}: {error}")
        return 2
    if isinstance(outcome, str):
        print(f"OK: {outcome}")
        return 0
    for failure in outcome:
        print(f"FAIL: {failure}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
