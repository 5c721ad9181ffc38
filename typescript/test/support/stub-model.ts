/** A local OpenAI chat-completions endpoint that counts its calls. A request whose last
 * message is a tool result is answered in text quoting it; `/tool NAME {json}` asks for a tool
 * call; anything else is echoed as `stub:TEXT`. Streams when asked to. */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export const STUB_KEY_VARIABLE = "AGENTSESSIONS_TS_STUB_KEY";

interface ChatMessage {
  role?: string;
  content?: unknown;
}

export class StubModel {
  calls = 0;
  baseUrl = "";
  private readonly server: Server;

  private constructor() {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        this.calls += 1;
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as { messages?: ChatMessage[]; stream?: boolean };
        const whole = StubModel.answer(body.messages ?? []);
        const text = body.stream === true ? StubModel.asStream(whole) : JSON.stringify(whole);
        response.writeHead(200, { "content-type": body.stream === true ? "text/event-stream" : "application/json" });
        response.end(text);
      });
    });
  }

  static async start(): Promise<StubModel> {
    const stub = new StubModel();
    await new Promise<void>((resolve) => stub.server.listen(0, "127.0.0.1", resolve));
    stub.baseUrl = `http://127.0.0.1:${(stub.server.address() as AddressInfo).port}/v1`;
    return stub;
  }

  static answer(messages: ChatMessage[]): Record<string, unknown> {
    const last = messages.at(-1) ?? {};
    const usage = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 };
    const reply = (message: Record<string, unknown>, finish: string) => ({
      id: "chatcmpl-stub",
      object: "chat.completion",
      created: 0,
      model: "stub-model",
      choices: [{ index: 0, message, finish_reason: finish }],
      usage,
    });
    if (last.role === "tool") {
      const said = typeof last.content === "string" ? last.content : JSON.stringify(last.content);
      return reply({ role: "assistant", content: `the tool said: ${said}` }, "stop");
    }
    const text = typeof last.content === "string" ? last.content : "";
    if (text.startsWith("/tool ")) {
      const rest = text.slice("/tool ".length);
      const space = rest.indexOf(" ");
      const name = space < 0 ? rest : rest.slice(0, space);
      const args = space < 0 ? "{}" : rest.slice(space + 1);
      const call = { id: `call_${messages.length}`, type: "function", function: { name, arguments: args } };
      return reply({ role: "assistant", content: null, tool_calls: [call] }, "tool_calls");
    }
    return reply({ role: "assistant", content: `stub:${text}` }, "stop");
  }

  static asStream(whole: Record<string, unknown>): string {
    const choice = (whole.choices as Array<{ message: Record<string, unknown>; finish_reason: string }>)[0]!;
    const delta: Record<string, unknown> = { role: "assistant" };
    if (typeof choice.message.content === "string") delta.content = choice.message.content;
    if (Array.isArray(choice.message.tool_calls)) delta.tool_calls = choice.message.tool_calls.map((call: object, index: number) => ({ ...call, index }));
    const chunk = { choices: [{ index: 0, delta, finish_reason: choice.finish_reason }] };
    const usage = { choices: [], usage: whole.usage };
    return `data: ${JSON.stringify(chunk)}\n\ndata: ${JSON.stringify(usage)}\n\ndata: [DONE]\n\n`;
  }

  /** The daemon flags that make this stub its model. */
  modelFlags(): string[] {
    return ["--model", "stub-model", "--model-provider", "openai", "--model-base-url", this.baseUrl, "--model-api-key-env", STUB_KEY_VARIABLE];
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
