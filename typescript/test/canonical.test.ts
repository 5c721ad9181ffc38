/** The TypeScript verifier against the shared golden vectors (the files the Rust and Python
 * verifiers' tests read), and its verdict on tampered records. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { create, fromJson, fromJsonString, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { canonicalEvent, canonicalMessage, canonicalRecord, contentHash, jcs, CanonicalError, sha256Hex, verifyRecords } from "../src/canonical.js";
import { EventKind, EventSchema, LogRecordSchema, type LogRecord } from "../src/gen/common_pb.js";
import { HarnessSpecSchema } from "../src/gen/harness_registry_pb.js";
import { SessionSchema } from "../src/gen/session_pb.js";
import { textMessage } from "../src/messages.js";
import { repoPath } from "./support/paths.js";

interface ContentVector {
  id: string;
  prev_hash: string;
  seq: number;
  event_proto3_json: JsonValue;
  canonical_record: string;
  expected_content_hash: string;
}

interface BytesVector {
  id: string;
  function: string;
  canonical_bytes: string;
  derived_sha256_of_bytes?: string;
  expected_digest?: string;
}

function golden<T>(name: string): T {
  return JSON.parse(readFileSync(repoPath("testdata", "golden", name), "utf8")) as T;
}

const content = golden<{ published_vectors: ContentVector[]; derived_vectors: ContentVector[] }>("content_hash_vectors.json");
const bytes = golden<{ vectors: BytesVector[] }>("canonical_bytes_vectors.json");

test("content hash vectors", async (t) => {
  const vectors = [...content.published_vectors, ...content.derived_vectors];
  assert.ok(vectors.length >= 7);
  for (const vector of vectors) {
    await t.test(vector.id, () => {
      const event = fromJson(EventSchema, vector.event_proto3_json);
      assert.equal(canonicalRecord(vector.prev_hash, vector.seq, event), vector.canonical_record);
      assert.equal(contentHash(vector.prev_hash, vector.seq, event), vector.expected_content_hash);
    });
  }
});

test("canonical bytes vectors", async (t) => {
  assert.ok(bytes.vectors.length >= 8);
  for (const vector of bytes.vectors) {
    await t.test(vector.id, () => {
      const canonical = vector.canonical_bytes;
      let got: string;
      if (vector.function.startsWith("canon.Record")) {
        const envelope = JSON.parse(canonical) as { event: JsonValue; prev_hash: string; seq: string };
        got = canonicalRecord(envelope.prev_hash, BigInt(envelope.seq), fromJson(EventSchema, envelope.event));
      } else if (vector.function.startsWith("canon.Event")) {
        got = canonicalEvent(fromJsonString(EventSchema, canonical));
      } else if (vector.function.includes("Session")) {
        got = canonicalMessage(SessionSchema, fromJsonString(SessionSchema, canonical));
      } else {
        got = canonicalMessage(HarnessSpecSchema, fromJsonString(HarnessSpecSchema, canonical));
        assert.equal(`sha256:${sha256Hex(got)}`, vector.expected_digest);
      }
      assert.equal(got, canonical);
      if (vector.derived_sha256_of_bytes !== undefined) {
        assert.equal(sha256Hex(got), vector.derived_sha256_of_bytes);
      }
    });
  }
});

test("JCS numbers and strings follow RFC 8785", () => {
  assert.equal(jcs([1e21, 1e-7, 0.1, 123.0, -0, 1.5e300, 2.5, 1e20, 0.000001]), "[1e+21,1e-7,0.1,123,0,1.5e+300,2.5,100000000000000000000,0.000001]");
  assert.equal(jcs({ b: 1, a: "\u2028<>&\x01\n\"\\", "\u00e9": true, B: null }), '{"B":null,"a":"\u2028<>&\\u0001\\n\\"\\\\","b":1,"\u00e9":true}');
  assert.throws(() => jcs(Number.NaN), CanonicalError);
  assert.throws(() => jcs(Number.POSITIVE_INFINITY), CanonicalError);
});

function chain(texts: string[]): LogRecord[] {
  const records: LogRecord[] = [];
  let prev = "";
  texts.forEach((text, index) => {
    const seq = BigInt(index + 1);
    const event = create(EventSchema, { executionId: "e1", kind: EventKind.EVENT_INPUT, body: { case: "message", value: textMessage(text) } });
    const digest = contentHash(prev, seq, event);
    records.push(create(LogRecordSchema, { seq, prevHash: prev, contentHash: digest, event }));
    prev = digest;
  });
  return records;
}

test("a tampered record fails and is named", async () => {
  const records = chain(["one", "two", "three"]);
  assert.equal((await verifyRecords(records)).ok, true);
  const body = records[1]?.event?.body;
  assert.ok(body?.case === "message");
  const part = body.value.parts[0]?.part;
  assert.ok(part?.case === "text");
  part.value.text = "TWO";
  const report = await verifyRecords(records);
  assert.equal(report.ok, false);
  assert.deepEqual(report.failures, [{ seq: 2n, reason: "content hash mismatch" }]);
});

test("a broken link fails", async () => {
  const records = chain(["one", "two", "three"]);
  const third = records[2];
  assert.ok(third);
  third.prevHash = "00".repeat(32);
  const report = await verifyRecords(records);
  assert.deepEqual(report.failures, [
    { seq: 3n, reason: "prev_hash mismatch" },
    { seq: 3n, reason: "content hash mismatch" },
  ]);
});

test("transport fields and the redaction list are not hashed", async () => {
  const records = chain(["one"]);
  const first = records[0];
  assert.ok(first?.event);
  first.commitTime = timestampFromMs(1_700_000_000_000);
  first.event.redacted = ["API_KEY"];
  assert.equal((await verifyRecords(records)).ok, true);
});
