/** Every client call against the real daemon, and its errors. */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "../src/client.js";
import { verifyRecords } from "../src/canonical.js";
import { Aborted, AgentSessionsError, Cancelled, DeadlineExceeded, FailedPrecondition, InvalidArgument, NotFound, StatusCode } from "../src/errors.js";
import { EventKind, ToolResult_Code, type LogRecord } from "../src/gen/common_pb.js";
import { ComputeState, DeletionState, ExecState } from "../src/gen/session_pb.js";
import { serve, type HarnessServer } from "../src/harness.js";
import { counted, counterConfig, Daemon, mcpUp, OFFLINE, tempDir } from "./support/daemon.js";
import { Conversational, Gated, Waiting } from "./support/harnesses.js";

export function kinds(records: readonly LogRecord[]): string[] {
  return records.map((r) => (EventKind[r.event?.kind ?? 0] ?? "?").replace(/^EVENT_/, ""));
}

function text(record: LogRecord | undefined): string {
  const body = record?.event?.body;
  if (body?.case !== "message") return "";
  const part = body.value.parts[0]?.part;
  return part?.case === "text" ? part.value.text : "";
}

describe("the client against the real daemon", () => {
  const waiting = new Waiting();
  let servers: HarnessServer[] = [];
  let daemon: Daemon;
  let client: Client;
  let countFile: string;

  before(async () => {
    servers = await Promise.all([serve(new Conversational()), serve(new Gated()), serve(waiting)]);
    const [conversational, gated, wait] = servers.map((s) => s.address);
    const dir = tempDir();
    countFile = join(dir, "count");
    const harnesses = [`--harness=conversational=${conversational}`, `--harness=gated=${gated}`, `--harness=waiting=${wait}`];
    daemon = await Daemon.start(dir, [...OFFLINE, "--config", counterConfig(dir, countFile), ...harnesses], { env: { RUST_LOG: "info" } });
    await mcpUp(daemon);
    client = new Client(daemon.addr, { project: "ts" });
  });

  after(async () => {
    client.close();
    await daemon.kill();
    await Promise.all(servers.map((s) => s.close(0)));
  });

  test("create, get, list (paged) and delete", async () => {
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await client.createSession({ harness: "echo", name: `s${i}`, labels: { n: String(i) } }));
    assert.ok(made.every((s) => s.metadata?.project === "ts"));
    const got = await client.getSession(made[0]!.metadata!.uid);
    assert.equal(got.metadata?.name, "s0");
    assert.equal(got.harness, "echo");
    assert.equal(got.labels.n, "0");
    const pages = [];
    for await (const page of client.listSessions({ pageSize: 2 }).pages()) pages.push(page.length);
    assert.ok(pages.length >= 3 && pages.every((n) => n <= 2), `pages ${pages}`);
    const listed = await client.listSessions({ pageSize: 2 }).toArray();
    for (const s of made) assert.ok(listed.some((l) => l.metadata?.uid === s.metadata?.uid));
    const deleted = await client.deleteSession(made[1]!.metadata!.uid);
    assert.equal(deleted.deletionState, DeletionState.DELETION_PENDING);
    const missing = await client.getSession("sess-nope").catch((e: unknown) => e);
    assert.ok(missing instanceof NotFound);
    assert.equal(missing.code, StatusCode.NOT_FOUND);
    assert.equal(missing.codeName, "NOT_FOUND");
    assert.ok(missing instanceof AgentSessionsError && missing.details.length > 0);
    const bad = await client.createSession({ harness: "no-such-harness" }).catch((e: unknown) => e);
    assert.ok(bad instanceof AgentSessionsError);
    assert.ok([StatusCode.INVALID_ARGUMENT, StatusCode.NOT_FOUND, StatusCode.FAILED_PRECONDITION].includes(bad.code as 3 | 5 | 9), bad.message);
  });

  test("exec streams the session, records and deltas, then the result", async () => {
    const turn = client.exec("hello", { harness: "echo" });
    const seen = [];
    for await (const item of turn) seen.push(item);
    const result = await turn.result();
    assert.equal(seen[0]?.case, "session");
    const records = seen.flatMap((i) => (i.case === "record" ? [i.value] : []));
    assert.deepEqual(kinds(records), ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "END"]);
    assert.ok(seen.some((i) => i.case === "delta"));
    assert.equal(result.output, "echo:hello");
    assert.equal(result.lastSeq, 5n);
    assert.ok(result.executionId !== "");
    const uid = result.session.metadata!.uid;
    const again = await client.run("again", { session: uid });
    assert.equal(again.output, "echo:again");
    assert.equal(again.records[0]?.seq, 6n);
    // The offline echo model answers whole: its one delta closes the part.
    const streamed = client.exec("streamed", { session: uid });
    const chunks = [];
    for await (const chunk of streamed.deltas()) chunks.push(chunk);
    assert.ok("echo:streamed".startsWith(chunks.join("")));
    assert.equal((await streamed.result()).output, "echo:streamed");
    const stale = await client.run("stale", { session: uid, expectedLastSeq: 3 }).catch((e: unknown) => e);
    assert.ok(stale instanceof Aborted, String(stale));
    assert.ok((stale as Aborted & { partial?: unknown }).partial !== undefined);
    await assert.rejects(client.run("x", { session: "sess-missing" }), NotFound);
  });

  test("replay, paged ReadRecords, watch and the TypeScript verifier agree with the server", async () => {
    const uid = (await client.run("one", { harness: "echo" })).session.metadata!.uid;
    for (const t of ["two", "three"]) await client.run(t, { session: uid });
    const streamed = [];
    for await (const r of client.replay(uid)) streamed.push(r);
    const paged = await client.readRecords(uid);
    assert.equal(paged.length, 15);
    assert.deepEqual(streamed, paged);
    const slice = [];
    for await (const page of client.records(uid, { fromSeq: 4, toSeq: 9, pageRecords: 2 }).pages()) slice.push(page.map((r) => Number(r.seq)));
    assert.deepEqual(slice, [[4, 5], [6, 7], [8, 9]]);
    const report = await client.verify(uid);
    assert.equal(report.ok, true);
    assert.equal(report.records, 15);
    assert.equal(report.headHash, paged.at(-1)?.contentHash);
    // The same records, one tampered: the TypeScript verifier names it.
    const body = paged[6]?.event?.body;
    assert.ok(body?.case === "message" && body.value.parts[0]?.part.case === "text");
    body.value.parts[0].part.value.text = "forged";
    assert.deepEqual((await verifyRecords(paged)).failures.map((f) => f.seq), [7n]);
    const unknown = [];
    for await (const r of client.replay("sess-unknown")) unknown.push(r);
    assert.deepEqual(unknown, []);

    // Watch: the log so far, then a record as it commits, until aborted.
    const stop = new AbortController();
    const watched: LogRecord[] = [];
    const watching = (async () => {
      for await (const r of client.watch(uid, { fromSeq: 14, signal: stop.signal })) {
        watched.push(r);
        if (watched.length === 2 + 5) stop.abort();
      }
    })();
    await client.run("four", { session: uid });
    await watching;
    assert.deepEqual(watched.map((r) => Number(r.seq)), [14, 15, 16, 17, 18, 19, 20]);
    assert.equal(text(watched.find((r) => r.event?.kind === EventKind.EVENT_OUTPUT && r.seq > 15n)), "echo:four");
    await assert.rejects(
      (async () => {
        for await (const _ of client.watch("sess-nope")) break;
      })(),
      NotFound,
    );
  });

  test("fork children diverge", async () => {
    const parent = await client.run("base", { harness: "echo" });
    const uid = parent.session.metadata!.uid;
    const children = await client.fork(uid, { count: 2, names: ["left", "right"] });
    assert.deepEqual(children.map((c) => c.metadata?.name), ["left", "right"]);
    assert.ok(children.every((c) => c.parentUid === uid && c.forkSeq === parent.lastSeq));
    const left = await client.run("go left", { session: children[0]!.metadata!.uid });
    const right = await client.run("go right", { session: children[1]!.metadata!.uid });
    assert.deepEqual([left.output, right.output], ["echo:go left", "echo:go right"]);
    const parentRecords = await client.readRecords(uid);
    for (const child of children) {
      const records = await client.readRecords(child.metadata!.uid);
      assert.deepEqual(records.slice(0, Number(parent.lastSeq)), parentRecords);
      assert.equal((await client.verify(child.metadata!.uid)).ok, true);
    }
    await assert.rejects(client.fork(uid, { count: 500 }), InvalidArgument);
  });

  test("suspend and resume", async () => {
    const uid = (await client.run("hi", { harness: "echo" })).session.metadata!.uid;
    assert.equal((await client.suspend(uid)).computeState, ComputeState.COMPUTE_COLD);
    assert.notEqual((await client.resume(uid)).computeState, ComputeState.COMPUTE_COLD);
    assert.equal((await client.run("back", { session: uid })).output, "echo:back");
    await assert.rejects(client.suspend("sess-nope"), NotFound);
  });

  test("a Node harness through the daemon", async () => {
    const first = await client.run("hi", { harness: "conversational" });
    // USAGE: the harness's own count (and the model answer's, where the host records it).
    assert.deepEqual(kinds(first.records).filter((k) => k !== "USAGE"), ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "OUTPUT", "END"]);
    assert.ok(kinds(first.records).includes("USAGE"));
    assert.ok(first.output.endsWith("node saw: hi"), first.output);
    const uid = first.session.metadata!.uid;
    const second = await client.run("more", { session: uid });
    assert.ok(second.output.endsWith("node saw: more"));
    // The session's totals are the sum of its USAGE records.
    const usages = (await client.readRecords(uid)).flatMap((r) => (r.event?.body.case === "usage" ? [r.event.body.value] : []));
    const totals = (await client.getSession(uid)).usage;
    assert.equal(totals?.outputTokens, usages.reduce((sum, u) => sum + u.outputTokens, 0n));
    assert.equal(totals?.inputTokens, usages.reduce((sum, u) => sum + u.inputTokens, 0n));
    assert.ok((totals?.outputTokens ?? 0n) >= 2n);
    assert.equal((await client.verify(uid)).ok, true);
  });

  test("approvals park, list, deny (then resume), and refuse a second decision", async () => {
    const parked = await client.run("charge me", { harness: "gated" });
    const uid = parked.session.metadata!.uid;
    assert.ok(kinds(parked.records).includes("APPROVAL_REQUEST") && !kinds(parked.records).includes("END"));
    assert.equal((await client.getSession(uid)).execState, ExecState.EXEC_AWAITING);
    const project = parked.session.metadata!.project;
    const pending = (await client.pendingApprovals({ project }).toArray()).filter((p) => p.sessionUid === uid);
    assert.deepEqual(pending.map((p) => [p.tool, p.toolCallId]), [["counter__count", "charge-1"]]);
    await assert.rejects(client.run("not now", { session: uid }), FailedPrecondition);
    const decided = await client.deny(uid, { reason: "too much" });
    const decision = decided.decision?.event?.body;
    assert.ok(decision?.case === "approvalResult" && decision.value.approved === false);
    await assert.rejects(
      client.approve(uid, { executionId: pending[0]!.executionId, toolCallId: "charge-1", requestSeq: pending[0]!.requestSeq }),
      AgentSessionsError,
    );
    const records = await client.readRecords(uid);
    const effects = records.filter((r) => r.event?.kind !== EventKind.EVENT_LIFECYCLE);
    assert.deepEqual(kinds(effects).slice(-4), ["APPROVAL_RESULT", "TOOL_RESULT", "OUTPUT", "END"]);
    const receipt = effects.at(-3)?.event?.body;
    assert.ok(receipt?.case === "result" && receipt.value.code === ToolResult_Code.APPROVAL_DENIED);
    assert.equal(text(effects.at(-2)), "charge denied");
    assert.deepEqual((await client.pendingApprovals({ project }).toArray()).filter((p) => p.sessionUid === uid), []);

    assert.equal(counted(countFile), 0, "a denied call never runs");
    // Approved, the turn goes on: the host runs the tool, once.
    const second = await client.run("charge again", { harness: "gated" });
    const uid2 = second.session.metadata!.uid;
    const approved = await client.approve(uid2, { reason: "fine" });
    assert.ok(approved.decision?.event?.body.case === "approvalResult" && approved.decision.event.body.value.approved);
    const after = await client.readRecords(uid2);
    assert.equal(text(after.filter((r) => r.event?.kind === EventKind.EVENT_OUTPUT).at(-1)), "charge ran: ok");
    assert.equal(counted(countFile), 1);
    assert.equal((await client.verify(uid2)).ok, true);
  });

  test("cancel stops a running turn", async () => {
    const uid = (await client.createSession({ harness: "waiting" })).metadata!.uid;
    const draining = client.run("wait", { session: uid }).then(
      (r) => r,
      (e: unknown) => e,
    );
    await waiting.started;
    const execution = (await client.readRecords(uid))[0]!.event!.executionId;
    await client.cancel(uid, execution, "USER");
    await draining;
    assert.ok(!JSON.stringify((await client.readRecords(uid)).map((r) => text(r))).includes("still here"));
    assert.equal((await client.getSession(uid)).execState, ExecState.EXEC_CANCELED);
    await assert.rejects(client.cancel(uid, "not-an-execution", "USER"), AgentSessionsError);
  });

  test("an AbortSignal cancels a call and a deadline expires it", async () => {
    const stop = new AbortController();
    stop.abort();
    await assert.rejects(client.getSession("sess-any", { signal: stop.signal }), Cancelled);
    await assert.rejects(client.listSessions({}, { timeoutMs: 0.001 }).toArray(), (e: unknown) => e instanceof DeadlineExceeded || e instanceof Cancelled);
    const reading = new AbortController();
    const turn = client.exec("hello", { harness: "echo", signal: reading.signal });
    reading.abort();
    await assert.rejects(turn.result(), Cancelled);
  });
});
