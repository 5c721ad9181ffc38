/** A daemon killed with SIGKILL in the middle of a turn of a Node harness, then started again
 * on the same journal and the session resumed: the model call the journal holds is served from
 * it (the provider is not asked again), the turn completes, and the TypeScript verifier
 * accepts the whole chain. */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { Client } from "../src/client.js";
import { AgentSessionsError } from "../src/errors.js";
import { EventKind, type LogRecord } from "../src/gen/common_pb.js";
import { ExecState } from "../src/gen/session_pb.js";
import { textMessage } from "../src/messages.js";
import { descriptor, serve, type Harness, type Sink, type Start } from "../src/harness.js";
import { Daemon, tempDir } from "./support/daemon.js";
import { STUB_KEY_VARIABLE, StubModel } from "./support/stub-model.js";

function kinds(records: readonly LogRecord[]): string[] {
  return records.map((r) => (EventKind[r.event?.kind ?? 0] ?? "?").replace(/^EVENT_/, ""));
}

/** Model, then a slow step of its own (held until the test opens the gate), then the model
 * again with what the step found. */
class TwoCalls implements Harness {
  entered: () => void = () => {};
  gate: Promise<void> = Promise.resolve();
  runs = 0;

  describe() {
    return descriptor("two-calls", { version: "1" });
  }

  async run(start: Start, sink: Sink): Promise<void> {
    this.runs += 1;
    const first = await sink.model(start.conversation());
    this.entered();
    await this.gate;
    const found = { id: "step-1", content: [{ part: { case: "text" as const, value: { text: "found it" } } }] };
    await sink.report(found);
    await sink.model([...start.conversation(), first.message, textMessage("and now?")]);
  }
}

test("SIGKILL mid-turn, restart, resume: no duplicate model call, the chain verifies", async () => {
  const dir = tempDir();
  const journal = join(dir, "journal.db");
  const stub = await StubModel.start();
  const harness = new TwoCalls();
  let open: () => void = () => {};
  harness.gate = new Promise((resolve) => (open = resolve));
  const entered = new Promise<void>((resolve) => (harness.entered = resolve));
  const server = await serve(harness);
  const flags = [...stub.modelFlags(), `--harness=two=${server.address}`];
  const env = { [STUB_KEY_VARIABLE]: "stub-key" };
  let daemon = await Daemon.start(dir, flags, { env, journal });
  let client = new Client(daemon.addr);
  try {
    const uid = (await client.createSession({ harness: "two" })).metadata!.uid;
    const turn = client.run("hello", { session: uid }).catch((e: unknown) => e);
    await entered;
    assert.equal(stub.calls, 1);
    await daemon.kill();
    const failed = await turn;
    assert.ok(failed instanceof AgentSessionsError, `the cut turn failed: ${String(failed)}`);
    client.close();

    open();
    daemon = await Daemon.start(dir, flags, { env, journal });
    client = new Client(daemon.addr);
    // The answer's usage may commit with it (a host that records the model's count itself).
    const cut = await client.readRecords(uid);
    assert.deepEqual(kinds(cut).filter((k) => k !== "USAGE"), ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT"]);
    assert.equal((await client.getSession(uid)).execState, ExecState.EXEC_INTERRUPTED);

    await client.resume(uid);
    const records = await client.readRecords(uid);
    const effects = kinds(records).filter((k) => k !== "LIFECYCLE" && k !== "USAGE");
    assert.deepEqual(effects, ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "TOOL_RESULT", "MODEL_CALL", "OUTPUT", "END"]);
    assert.equal(stub.calls, 2, "the recorded model call was served from the journal, not asked again");
    assert.equal(harness.runs, 2);
    const report = await client.verify(uid);
    assert.equal(report.ok, true, JSON.stringify(report.failures));
    assert.equal(report.records, records.length);
    assert.equal((await client.getSession(uid)).execState, ExecState.EXEC_COMPLETED);
  } finally {
    client.close();
    await daemon.kill();
    await server.close(0);
    await stub.stop();
  }
});
