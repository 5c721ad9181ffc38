/** An OpenAI Agents JS agent and a LangGraph.js graph as harnesses of the real daemon, with a
 * local OpenAI-compatible stub model and a real MCP server behind the host's mediated tool:
 * a turn with a harness-local tool, a turn with a host-mediated tool (its effect ran once), a
 * replay of a recorded turn that asks the provider nothing and runs no host tool again, the
 * usage of every model call recorded, and a turn that ends on a tool. */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "../src/client.js";
import { EventKind, type LogRecord } from "../src/gen/common_pb.js";
import { serve, type Harness, type HarnessServer } from "../src/harness.js";
import { COUNT, langGraphHarness, langGraphStopHarness, lookups, openAiAgentsHarness } from "./support/agents.js";
import { counted, counterConfig, Daemon, mcpUp, tempDir } from "./support/daemon.js";
import { STUB_KEY_VARIABLE, StubModel } from "./support/stub-model.js";

function kinds(records: readonly LogRecord[]): string[] {
  return records.map((r) => (EventKind[r.event?.kind ?? 0] ?? "?").replace(/^EVENT_/, ""));
}

function outputs(records: readonly LogRecord[]): string[] {
  return records.flatMap((r) => {
    const body = r.event?.body;
    return r.event?.kind === EventKind.EVENT_OUTPUT && body?.case === "message"
      ? [body.value.parts.map((p) => (p.part.case === "text" ? p.part.value.text : "")).join("")]
      : [];
  });
}

const AGENTS: Array<[string, () => Harness]> = [
  ["OpenAI Agents JS", () => openAiAgentsHarness()],
  ["OpenAI Agents JS, streamed", () => openAiAgentsHarness({ stream: true })],
  ["LangGraph.js", () => langGraphHarness()],
];

for (const [label, make] of AGENTS) {
  describe(`${label} as a harness`, () => {
    let stub: StubModel;
    let server: HarnessServer;
    let daemon: Daemon;
    let client: Client;
    let countFile: string;

    before(async () => {
      const dir = tempDir();
      countFile = join(dir, "count");
      stub = await StubModel.start();
      server = await serve(make());
      const config = counterConfig(dir, countFile);
      daemon = await Daemon.start(dir, [...stub.modelFlags(), "--config", config, `--harness=agent=${server.address}`], {
        env: { [STUB_KEY_VARIABLE]: "stub-key", RUST_LOG: "info" },
      });
      await mcpUp(daemon);
      client = new Client(daemon.addr);
    });

    after(async () => {
      client.close();
      await daemon.kill();
      await server.close(0);
      await stub.stop();
    });

    test("tools run in the harness and on the host, usage is recorded, replay asks nothing", async () => {
      // 1. A harness-local tool: model → tool (run by the agent, reported) → model.
      const first = await client.run('/tool lookup {"key":"k1"}', { harness: "agent" });
      const uid = first.session.metadata!.uid;
      assert.deepEqual(kinds(first.records), ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "USAGE", "TOOL_RESULT", "MODEL_CALL", "OUTPUT", "USAGE", "END"]);
      assert.equal(first.output, "the tool said: value-of-k1");
      assert.equal(stub.calls, 2);
      const usage = (await client.getSession(uid)).usage;
      assert.equal(usage?.inputTokens, 10n);
      assert.equal(usage?.outputTokens, 6n);

      // 2. A host-mediated tool: the host journals the call, runs it once, journals the result.
      const second = await client.run(`/tool ${COUNT.name} {}`, { session: uid });
      assert.deepEqual(kinds(second.records), ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "USAGE", "TOOL_CALL", "TOOL_RESULT", "MODEL_CALL", "OUTPUT", "USAGE", "END"]);
      assert.ok(second.output.startsWith("the tool said: "), second.output);
      assert.equal(counted(countFile), 1);
      assert.equal(stub.calls, 4);

      // 3. Replay: a fork inside the finished first turn re-drives it from the journal; every
      // model call is served from the record and the host tool does not run again.
      const endSeq = first.records.find((r) => r.event?.kind === EventKind.EVENT_END)!.seq;
      const [replayed] = await client.fork(uid, { atSeq: endSeq - 1n });
      await client.resume(replayed!.metadata!.uid);
      const child = await client.readRecords(replayed!.metadata!.uid);
      assert.ok(kinds(child.slice(Number(endSeq) - 1)).includes("END"));
      assert.equal(stub.calls, 4, "replay asks the provider nothing");
      assert.equal(counted(countFile), 1, "the host tool ran once");
      for (const session of [uid, replayed!.metadata!.uid]) assert.equal((await client.verify(session)).ok, true);

      // 4. Children of a fork diverge.
      const [left, right] = await client.fork(uid, { count: 2 });
      assert.equal((await client.run('/tool lookup {"key":"left"}', { session: left!.metadata!.uid })).output, "the tool said: value-of-left");
      assert.equal((await client.run("just talk", { session: right!.metadata!.uid })).output, "stub:just talk");
      assert.ok(lookups.includes("left"));
    });
  });
}

describe("a turn that ends on a tool", () => {
  const STOPPERS: Array<[string, () => Harness]> = [
    ["OpenAI Agents JS (stop_on_first_tool)", () => openAiAgentsHarness({ stopOnTool: true })],
    ["LangGraph.js (a graph ending on its tool node)", () => langGraphStopHarness()],
  ];
  for (const [label, make] of STOPPERS) {
    test(`${label} reports the tool's output and says it`, async () => {
      const stub = await StubModel.start();
      const server = await serve(make());
      const daemon = await Daemon.start(tempDir(), [...stub.modelFlags(), `--harness=agent=${server.address}`], { env: { [STUB_KEY_VARIABLE]: "stub-key" } });
      const client = new Client(daemon.addr);
      try {
        const turn = await client.run('/tool lookup {"key":"last"}', { harness: "agent" });
        assert.deepEqual(kinds(turn.records), ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "USAGE", "TOOL_RESULT", "OUTPUT", "END"]);
        assert.deepEqual(outputs(turn.records).at(-1), "value-of-last");
        assert.equal(stub.calls, 1);
        assert.equal((await client.verify(turn.session.metadata!.uid)).ok, true);
      } finally {
        client.close();
        await daemon.kill();
        await server.close(0);
        await stub.stop();
      }
    });
  }
});
