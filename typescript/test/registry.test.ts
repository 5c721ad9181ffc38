/** A Node harness registered at run time through the HarnessRegistry, used, then retired. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, RegistryClient } from "../src/client.js";
import { AgentSessionsError, NotFound } from "../src/errors.js";
import { HarnessState, RegisterOutcome } from "../src/gen/harness_registry_pb.js";
import { serve } from "../src/harness.js";
import { Daemon, OFFLINE, tempDir } from "./support/daemon.js";
import { Conversational } from "./support/harnesses.js";

test("a registered Node harness", async () => {
  const server = await serve(new Conversational());
  const daemon = await Daemon.start(tempDir(), OFFLINE, { registry: true });
  const registry = new RegistryClient(daemon.registry);
  const client = new Client(daemon.addr);
  try {
    const outcome = await registry.register("ts-conv", server.address, { descriptorId: "conversational" });
    assert.equal(outcome.outcome, RegisterOutcome.CREATED);
    assert.equal((await registry.get("ts-conv", { observe: true })).observed?.id, "conversational");
    assert.deepEqual((await registry.list().toArray()).filter((r) => r.metadata?.name === "ts-conv").length, 1);
    const result = await client.run("registered", { harness: "ts-conv" });
    assert.ok(result.output.endsWith("node saw: registered"), result.output);
    const start = result.records[0]?.event?.body;
    assert.ok(start?.case === "executionStart" && start.value.harness === "ts-conv");
    assert.equal((await registry.retire("ts-conv", "done")).state, HarnessState.RETIRED);
    await assert.rejects(client.createSession({ harness: "ts-conv" }), AgentSessionsError);
    await assert.rejects(registry.get("nope"), NotFound);
  } finally {
    client.close();
    registry.close();
    await daemon.kill();
    await server.close(0);
  }
});
