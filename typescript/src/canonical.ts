/**
 * The journal's canonical form and hash chain, recomputed in TypeScript
 * (docs/hashing-and-conformance.md):
 *
 * `content_hash = hex(SHA-256(JCS({"event": proto3-JSON(event), "prev_hash": prev, "seq": "N"})))`
 *
 * with proto field names, enum names, unpopulated fields omitted, int64 as strings and bytes as
 * base64; JCS is RFC 8785. Records chain from `prev_hash = ""`.
 */
import { createHash } from "node:crypto";
import { create, toJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { EventSchema, type Event, type LogRecord } from "./gen/common_pb.js";

/** A value that has no canonical form (NaN, infinities, non-JSON values). */
export class CanonicalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CanonicalError";
  }
}

/** RFC 8785 serialization of a JSON value. Strings are escaped as `JSON.stringify` escapes
 * them (exactly RFC 8785's set), numbers are ECMAScript's `Number.prototype.toString`, object
 * keys sort by UTF-16 code units (the default string order of `Array.prototype.sort`). */
export function jcs(value: JsonValue): string {
  if (value === null) {
    return "null";
  }
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) {
        throw new CanonicalError(`${value} has no JSON form`);
      }
      // JSON.stringify writes -0 as "0" and everything else as Number#toString.
      return JSON.stringify(value);
    case "object":
      if (Array.isArray(value)) {
        return `[${value.map(jcs).join(",")}]`;
      }
      return `{${Object.keys(value)
        .sort()
        .map((key) => `${JSON.stringify(key)}:${jcs((value as Record<string, JsonValue>)[key] as JsonValue)}`)
        .join(",")}}`;
    default:
      throw new CanonicalError(`${typeof value} is not a JSON value`);
  }
}

/** The proto3-JSON of a message with proto field names (what the hash covers). */
export function messageJson<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): JsonValue {
  try {
    return toJson(schema, message, { useProtoFieldName: true });
  } catch (err) {
    throw new CanonicalError(err instanceof Error ? err.message : String(err));
  }
}

/** JCS over the proto3-JSON of any message (the registry's spec digest uses it). */
export function canonicalMessage<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): string {
  return jcs(messageJson(schema, message));
}

/** Event fields stored with an event but outside its hash (extensions §1.2). */
const UNHASHED_EVENT_FIELDS = ["redacted"];

/** The proto3-JSON of an event as the hash covers it: without the unhashed extensions. */
export function eventJson(event: Event): JsonValue {
  const hashed = messageJson(EventSchema, event) as Record<string, JsonValue>;
  for (const name of UNHASHED_EVENT_FIELDS) {
    delete hashed[name];
  }
  return hashed;
}

/** The canonical text of an event alone (no envelope). */
export function canonicalEvent(event: Event): string {
  return jcs(eventJson(event));
}

/** The canonical text the content hash is taken over. */
export function canonicalRecord(prevHash: string, seq: bigint | number, event: Event): string {
  return jcs({ event: eventJson(event), prev_hash: prevHash, seq: BigInt(seq).toString() });
}

/** The lowercase hex SHA-256 of a text's UTF-8 bytes. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** The lowercase hex content hash of `event` at `seq` after `prevHash`. */
export function contentHash(prevHash: string, seq: bigint | number, event: Event): string {
  return sha256Hex(canonicalRecord(prevHash, seq, event));
}

/** One record that does not verify. */
export interface VerifyFailure {
  seq: bigint;
  reason: string;
}

/** What {@link verifyRecords} found: the records checked, the last hash and every failure. */
export interface VerifyReport {
  ok: boolean;
  records: number;
  headHash: string;
  failures: VerifyFailure[];
}

/** Walks `records` in order: each record's `prev_hash` must equal the previous record's hash
 * and its `content_hash` must equal the recomputed one. Checking goes on after a failure, from
 * the stored hash, so every bad record is reported. */
export async function verifyRecords(records: Iterable<LogRecord> | AsyncIterable<LogRecord>, prevHash = ""): Promise<VerifyReport> {
  const report: VerifyReport = { ok: true, records: 0, headHash: "", failures: [] };
  let prev = prevHash;
  for await (const record of records) {
    report.records += 1;
    if (record.prevHash !== prev) {
      report.failures.push({ seq: record.seq, reason: "prev_hash mismatch" });
    }
    try {
      // A record always carries an event; a missing one hashes as the empty event.
      if (contentHash(record.prevHash, record.seq, record.event ?? create(EventSchema)) !== record.contentHash) {
        report.failures.push({ seq: record.seq, reason: "content hash mismatch" });
      }
    } catch (err) {
      report.failures.push({ seq: record.seq, reason: `no canonical form: ${err instanceof Error ? err.message : String(err)}` });
    }
    prev = record.contentHash;
  }
  report.headHash = prev;
  report.ok = report.failures.length === 0;
  return report;
}
