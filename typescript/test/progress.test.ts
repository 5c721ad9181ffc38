/** A running host tool's progress reaches a TypeScript client: as `progress` frames of the
 * turn's Exec stream and between the records of `watchUpdates`; it is never journaled. */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { Client, type ExecItem, type WatchItem } from "../src/client.js";
import { Mediation } from "../src/gen/common_pb.js";
import { descriptor, serve, type Sink, type Start } from "../src/harness.js";
import { counterConfig, Daemon, mcpUp, OFFLINE, tempDir } from "./support/daemon.js";

/** Runs the host's `counter__slow` (three steps, a progress report after each). */
class Slow {
  describe() {
    return descriptor("slow", { version: "1" });
  }

  async run(start: Start, sink: Sink): Promise<void> {
    const result = await sink.toolCall({
      id: "slow-1",
      tool: "counter__slow",
      args: { steps: 3, step_ms: 150 },
      mediation: Mediation.CONTROLLER_MEDIATED,
      idempotencyKey: `${start.executionId}:slow-1`,
    });
    await sink.output(result.content.map((p) => (p.part.case === "text" ? p.part.value.text : "")).join(""));
  }
}

test("tool progress in the Exec stream and in watchUpdates", async () => {
  const dir = tempDir();
  const server = await serve(new Slow());
  const daemon = await Daemon.start(dir, [...OFFLINE, "--config", counterConfig(dir, join(dir, "count")), `--harness=slow=${server.address}`], { env: { RUST_LOG: "info" } });
  const client = new Client(daemon.addr);
  try {
    await mcpUp(daemon);
    const uid = (await client.createSession({ harness: "slow" })).metadata!.uid;
    const stop = new AbortController();
    const watched: WatchItem[] = [];
    const watching = (async () => {
      for await (const item of client.watchUpdates(uid, { signal: stop.signal })) {
        watched.push(item);
        if (item.case === "record" && item.value.event?.body.case === "end") stop.abort();
      }
    })();
    const items: ExecItem[] = [];
    const turn = client.exec("go slow", { session: uid });
    for await (const item of turn) items.push(item);
    const result = await turn.result();
    await watching;
    assert.equal(result.output, "3 steps");
    const progress = items.flatMap((i) => (i.case === "progress" ? [i.value] : []));
    assert.ok(progress.length >= 1, `progress frames: ${progress.length}`);
    assert.ok(progress.every((p) => p.toolCallId === "slow-1" && p.tool === "counter__slow" && p.total === 3));
    assert.ok(progress.some((p) => p.message.startsWith("step ")));
    const watchedProgress = watched.filter((i) => i.case === "progress");
    assert.ok(watchedProgress.length >= 1, `watched progress frames: ${watchedProgress.length}`);
    const records = await client.readRecords(uid);
    assert.ok(!JSON.stringify(records.map((r) => r.event?.body.case)).includes("progress"), "progress is never journaled");
    assert.equal((await client.verify(uid)).ok, true);
  } finally {
    client.close();
    await daemon.kill();
    await server.close(0);
  }
});
