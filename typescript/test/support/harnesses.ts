/** Harnesses the tests serve from Node. */
import { Mediation, ToolResult_Code } from "../../src/gen/common_pb.js";
import { descriptor, type Harness, type Sink, type Start } from "../../src/harness.js";

/** Asks the host's model with the whole conversation, records the usage and its own line. */
export class Conversational implements Harness {
  describe() {
    return descriptor("conversational", { version: "1" });
  }

  async run(start: Start, sink: Sink): Promise<void> {
    await sink.model(start.conversation());
    await sink.usage({ model: "directive", inputTokens: BigInt(start.conversation().length), outputTokens: 1n });
    await sink.output(`node saw: ${start.inputText}`);
  }
}

/** Calls the host's tool `counter__count` behind an approval and says how it went. */
export class Gated implements Harness {
  describe() {
    return descriptor("gated", { version: "1" });
  }

  async run(start: Start, sink: Sink): Promise<void> {
    const result = await sink.toolCall({
      id: "charge-1",
      tool: "counter__count",
      args: {},
      mediation: Mediation.REQUIRES_APPROVAL,
      idempotencyKey: `${start.executionId}-charge`,
    });
    await sink.output(result.code === ToolResult_Code.APPROVAL_DENIED ? "charge denied" : `charge ran: ${result.error || "ok"}`);
  }
}

/** Waits until the host cancels it; `started` resolves once it runs. */
export class Waiting implements Harness {
  private began: () => void = () => {};
  readonly started = new Promise<void>((resolve) => {
    this.began = resolve;
  });

  describe() {
    return descriptor("waiting", { version: "1" });
  }

  async run(_start: Start, sink: Sink): Promise<void> {
    this.began();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 30_000);
      sink.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve();
      });
    });
    await sink.output("still here"); // throws Cancelled once the host cancelled
  }
}
