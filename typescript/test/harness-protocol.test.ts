/** The harness SDK frame by frame, with this test as the host: a turn, a wrong answer, a bad
 * first frame, a cancel, an approval park, Describe. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { createClient, type Client as RpcClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AgentSessionsError, translate } from "../src/errors.js";
import { EventKind, Mediation, type Event } from "../src/gen/common_pb.js";
import { ControllerFrameSchema, Harness as HarnessService } from "../src/gen/harness_pb.js";
import { descriptor, serve, type HarnessServer, type Sink, type Start } from "../src/harness.js";
import { textMessage } from "../src/messages.js";
import { BoundedQueue } from "../src/queue.js";

type Frame = MessageInitShape<typeof ControllerFrameSchema>;

class Asks {
  describe() {
    return descriptor("asks", { version: "7", tools: [{ name: "charge", mediation: Mediation.REQUIRES_APPROVAL }] });
  }

  async run(start: Start, sink: Sink): Promise<void> {
    if (start.inputText === "charge") {
      await sink.toolCall({ id: "c1", tool: "charge", mediation: Mediation.REQUIRES_APPROVAL, idempotencyKey: "k1" });
      return;
    }
    const { message } = await sink.model(start.conversation());
    await sink.usage({ inputTokens: 2n, outputTokens: 1n });
    await sink.output(`heard ${message.parts.length} part(s)`);
  }
}

/** One Connect stream driven by the test. */
class Host {
  readonly frames = new BoundedQueue<Frame>(8);
  readonly events: AsyncIterator<Event>;

  constructor(rpc: RpcClient<typeof HarnessService>) {
    this.events = rpc.connect(this.frames)[Symbol.asyncIterator]();
  }

  async send(frame: Frame): Promise<void> {
    await this.frames.put({ session: "sess-1", executionId: "exec-1", ...frame });
  }

  async next(): Promise<Event> {
    const next = await this.events.next();
    assert.ok(next.done !== true, "the stream ended early");
    return next.value;
  }

  /** Every event left, then the stream's error (if any). */
  async rest(): Promise<{ events: Event[]; error?: AgentSessionsError }> {
    const events: Event[] = [];
    try {
      for (;;) {
        const next = await this.events.next();
        if (next.done === true) return { events };
        events.push(next.value);
      }
    } catch (err) {
      return { events, error: translate(err) };
    }
  }
}

const start = (text: string): Frame => ({ frame: { case: "start", value: { inputs: [textMessage(text)], sessionUid: "sess-1" } } });

describe("the harness SDK on the wire", () => {
  let server: HarnessServer;
  let rpc: RpcClient<typeof HarnessService>;

  before(async () => {
    server = await serve(new Asks());
    rpc = createClient(HarnessService, createGrpcTransport({ baseUrl: `http://${server.address}` }));
  });

  after(async () => {
    await server.close(0);
  });

  test("a turn frame by frame", async () => {
    const host = new Host(rpc);
    await host.send(start("hi"));
    const call = await host.next();
    assert.equal(call.kind, EventKind.EVENT_MODEL_CALL);
    assert.equal(call.executionId, "exec-1");
    assert.ok(call.body.case === "model");
    assert.equal(call.body.value.messages.length, 1);
    await host.send({ frame: { case: "model", value: { modelCallId: call.body.value.id, message: textMessage("ok", "assistant") } } });
    const { events, error } = await host.rest();
    host.frames.close();
    assert.equal(error, undefined);
    assert.deepEqual(events.map((e) => e.kind), [EventKind.EVENT_USAGE, EventKind.EVENT_OUTPUT, EventKind.EVENT_END]);
    const end = events.at(-1)?.body;
    assert.ok(end?.case === "end" && end.value.state === "COMPLETED");
  });

  test("a wrong answer fails the turn", async () => {
    const host = new Host(rpc);
    await host.send(start("hi"));
    await host.next();
    await host.send({ frame: { case: "tool", value: { id: "nope" } } });
    const { events, error } = await host.rest();
    host.frames.close();
    const end = events.at(-1)?.body;
    assert.ok(end?.case === "end" && end.value.state === "FAILED", JSON.stringify(end));
    assert.match(end.value.error?.description ?? "", /expected the completion of model call/);
    assert.equal(error?.codeName, "INTERNAL");
  });

  test("the first frame must be start", async () => {
    const host = new Host(rpc);
    await host.send({ frame: { case: "cancel", value: { reason: "USER" } } });
    const { error } = await host.rest();
    host.frames.close();
    assert.equal(error?.codeName, "INVALID_ARGUMENT");
  });

  test("a cancel ends the stream CANCELED", async () => {
    const host = new Host(rpc);
    await host.send(start("hi"));
    await host.next();
    await host.send({ frame: { case: "cancel", value: { reason: "USER" } } });
    const { events } = await host.rest();
    host.frames.close();
    const end = events.at(-1)?.body;
    assert.ok(end?.case === "end" && end.value.state === "CANCELED", JSON.stringify(events));
  });

  test("a park is acknowledged without an END", async () => {
    const host = new Host(rpc);
    await host.send(start("charge"));
    const call = await host.next();
    assert.ok(call.body.case === "tool" && call.body.value.id === "c1");
    await host.send({ frame: { case: "park", value: { executionId: "exec-1", toolCallId: "c1", requestSeq: 4n } } });
    const { events, error } = await host.rest();
    host.frames.close();
    assert.equal(error, undefined);
    assert.deepEqual(events.map((e) => e.kind), [EventKind.EVENT_PARKED]);
    assert.ok(events[0]?.body.case === "parked" && events[0].body.value.requestSeq === 4n);
  });

  test("describe", async () => {
    const described = await rpc.describe({});
    assert.equal(described.id, "asks");
    assert.equal(described.version, "7");
    assert.equal(described.tools[0]?.mediation, Mediation.REQUIRES_APPROVAL);
  });
});

