/**
 * OpenAI Agents JS (`@openai/agents`) on agentsessions.
 *
 * {@link HostModel} implements the SDK's `Model`, so every model call of an `Agent` goes
 * through the host's mediated model (`sink.model`): journaled, served from the journal on
 * replay and resume, never sent to a provider by the harness. Each call's usage is recorded.
 *
 * Function tools are either harness-local (ordinary SDK tools: the agent runs them and they are
 * reported as TOOL_RESULT records, once, before the model sees their outputs or when the turn
 * ends on a tool) or host-mediated ({@link hostTool}: the host runs them, at most once, with an
 * idempotency key; `approval: true` puts them behind a durable approval).
 *
 * {@link AgentsHarness} serves an agent built around that model as a harness.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import {
  Usage as AgentsUsage,
  run,
  setTracingDisabled,
  tool,
  type Agent,
  type AgentInputItem,
  type AgentOutputItem,
  type FunctionTool,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type RunContext,
  type StreamEvent,
} from "@openai/agents";
import { Mediation, MessageSchema, PartSchema, ToolChoice_Mode, type Message, type Part, type ToolCall } from "../gen/common_pb.js";
import { descriptor, type Harness, type ModelOptions, type Sink, type Start } from "../harness.js";
import { messageText, toolResultText } from "../messages.js";

/** Item ids the SDK would otherwise take from the Responses API; never journaled (the wire
 * message has no place for them), so a constant keeps every rebuilt request identical. */
const FAKE_ID = "__fake_id__";

/** What a host-mediated tool needs at run time: the run context {@link AgentsHarness} passes. */
export interface HostContext {
  sink: Sink;
  start: Start;
  model: HostModel;
}

function textPart(text: string): Part {
  return create(PartSchema, { part: { case: "text", value: { text } } });
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) {
    if (content !== null && typeof content === "object" && "text" in content) return String((content as { text: unknown }).text);
    return "";
  }
  return content
    .map((block: unknown) => {
      if (block === null || typeof block !== "object") return "";
      const { type, text } = block as { type?: string; text?: unknown };
      return type === "input_text" || type === "output_text" || type === "text" ? String(text ?? "") : "";
    })
    .join("");
}

function parseArguments(text: string | undefined): JsonObject {
  if (text === undefined || text === "") return {};
  const parsed: unknown = JSON.parse(text);
  return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as JsonObject) : { value: parsed as JsonObject[string] };
}

/** Wire messages for the SDK's instructions and input items. */
export function toMessages(system: string | undefined, input: string | AgentInputItem[]): Message[] {
  const messages: Message[] = [];
  if (system) messages.push(create(MessageSchema, { role: "system", parts: [textPart(system)] }));
  if (typeof input === "string") {
    messages.push(create(MessageSchema, { role: "user", parts: [textPart(input)] }));
    return messages;
  }
  for (const item of input) {
    const kind = "type" in item && item.type !== undefined ? item.type : "message";
    if (kind === "function_call" && item.type === "function_call") {
      const last = messages.at(-1);
      const assistant = last?.role === "assistant" ? last : create(MessageSchema, { role: "assistant" });
      if (assistant !== last) messages.push(assistant);
      assistant.parts.push(create(PartSchema, { part: { case: "toolCall", value: { id: item.callId, tool: item.name, args: parseArguments(item.arguments) } } }));
    } else if (kind === "function_call_result" && item.type === "function_call_result") {
      const result = { id: item.callId, content: [textPart(contentText(item.output))] };
      messages.push(create(MessageSchema, { role: "tool", parts: [{ part: { case: "toolResult", value: result } }] }));
    } else if (kind === "message" && "role" in item) {
      const role = item.role === "assistant" ? "assistant" : item.role === "system" ? "system" : "user";
      const text = contentText(item.content);
      messages.push(create(MessageSchema, { role, parts: text !== "" ? [textPart(text)] : [] }));
    }
    // Reasoning and hosted-tool items have no place in a chat request.
  }
  return messages;
}

/** Input items for wire messages (rebuilding a session's conversation from the journal). */
export function toItems(messages: readonly Message[]): AgentInputItem[] {
  const items: AgentInputItem[] = [];
  const names = new Map<string, string>();
  for (const message of messages) {
    const text = messageText(message);
    if (message.role === "assistant") {
      if (text !== "") items.push(outputMessage(text));
      for (const part of message.parts) {
        if (part.part.case === "toolCall") {
          names.set(part.part.value.id, part.part.value.tool);
          items.push(functionCall(part.part.value));
        }
      }
    } else if (message.role === "tool") {
      for (const part of message.parts) {
        if (part.part.case === "toolResult") {
          const result = part.part.value;
          items.push({ type: "function_call_result", callId: result.id, name: names.get(result.id) ?? "", status: "completed", output: toolResultText(result) });
        }
      }
    } else if (message.role === "system") {
      items.push({ role: "system", content: text });
    } else {
      items.push({ role: "user", content: text });
    }
  }
  return items;
}

function outputMessage(text: string): AgentOutputItem {
  return { id: FAKE_ID, type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] };
}

function functionCall(call: ToolCall): AgentOutputItem & AgentInputItem {
  return { id: FAKE_ID, type: "function_call", callId: call.id, name: call.tool, arguments: JSON.stringify(call.args ?? {}), status: "completed" };
}

function modelOptions(request: ModelRequest, model: string): ModelOptions {
  const options: ModelOptions = { model, params: {} };
  if (request.modelSettings.temperature !== undefined && request.modelSettings.temperature !== null) {
    options.params = { temperature: String(request.modelSettings.temperature) };
  }
  options.tools = request.tools.flatMap((t) =>
    t.type === "function" ? [{ name: t.name, description: t.description, inputSchema: t.parameters as unknown as JsonObject }] : [],
  );
  const choice = request.modelSettings.toolChoice;
  if (choice === "auto") options.toolChoice = { mode: ToolChoice_Mode.AUTO };
  else if (choice === "none") options.toolChoice = { mode: ToolChoice_Mode.NONE };
  else if (choice === "required") options.toolChoice = { mode: ToolChoice_Mode.REQUIRED };
  else if (typeof choice === "string" && choice !== "") options.toolChoice = { mode: ToolChoice_Mode.REQUIRED, name: choice };
  return options;
}

/** An Agents SDK model served by the agentsessions host through `sink`. */
export class HostModel implements Model {
  /** Calls the model asked for; their outputs are reported once (unless the host ran them). */
  private readonly asked = new Set<string>();
  private readonly settled = new Set<string>();
  /** The text of the newest completion (to tell whether a turn ended on a tool). */
  lastText = "";

  constructor(
    private readonly sink: Sink,
    private readonly model = "",
  ) {}

  /** Marks a call the host ran (its TOOL_CALL and TOOL_RESULT are the host's records). */
  settledByHost(callId: string): void {
    this.settled.add(callId);
  }

  /** Journals the outputs of tools the agent ran for calls this model asked for, once. */
  async reportToolOutputs(items: string | readonly AgentInputItem[]): Promise<void> {
    if (typeof items === "string") return;
    for (const item of items) {
      if (item.type !== "function_call_result") continue;
      if (!this.asked.has(item.callId) || this.settled.has(item.callId)) continue;
      this.settled.add(item.callId);
      await this.sink.report({ id: item.callId, content: [textPart(contentText(item.output))] });
    }
  }

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    await this.reportToolOutputs(request.input);
    const reply = await this.sink.model(toMessages(request.systemInstructions, request.input), modelOptions(request, this.model));
    if (reply.usage !== undefined) await this.sink.usage(reply.usage);
    const text = messageText(reply.message);
    this.lastText = text;
    const output: AgentOutputItem[] = [];
    if (text !== "") output.push(outputMessage(text));
    for (const part of reply.message.parts) {
      if (part.part.case === "toolCall") {
        this.asked.add(part.part.value.id);
        output.push(functionCall(part.part.value));
      }
    }
    const inputTokens = Number(reply.usage?.inputTokens ?? 0n);
    const outputTokens = Number(reply.usage?.outputTokens ?? 0n);
    const usage = new AgentsUsage({ requests: 1, inputTokens, outputTokens, totalTokens: inputTokens + outputTokens });
    return { output, usage };
  }

  /** The completion as a stream: the host answers whole (its deltas go to the session's
   * clients), so this is its text as one delta, then the response. */
  async *getStreamedResponse(request: ModelRequest): AsyncIterable<StreamEvent> {
    const response = await this.getResponse(request);
    yield { type: "response_started" };
    if (this.lastText !== "") yield { type: "output_text_delta", delta: this.lastText };
    yield {
      type: "response_done",
      response: {
        id: FAKE_ID,
        usage: {
          requests: 1,
          inputTokens: response.usage.inputTokens,
          outputTokens: response.usage.outputTokens,
          totalTokens: response.usage.totalTokens,
        },
        output: response.output,
      },
    } as StreamEvent;
  }
}

/** A function tool the host runs (`MEDIATION_CONTROLLER_MEDIATED`: journaled before it runs,
 * at most once, deduplicated by its idempotency key), or, with `approval`, one behind a
 * durable approval (`MEDIATION_REQUIRES_APPROVAL`). `name` is the host's tool name;
 * `parameters` its JSON Schema. Runs only inside an {@link AgentsHarness}. */
export function hostTool(options: { name: string; description: string; parameters: JsonObject; approval?: boolean }): FunctionTool<HostContext> {
  return tool<any, HostContext>({
    name: options.name,
    description: options.description,
    parameters: options.parameters as never,
    strict: false,
    // A park or a cancel must end the run, not become text for the model.
    errorFunction: null,
    async execute(input: unknown, context?: RunContext<HostContext>, details?: { toolCall?: { callId: string } }) {
      const host = context?.context;
      const callId = details?.toolCall?.callId;
      if (host === undefined || callId === undefined) {
        throw new Error(`host tool ${options.name} runs only inside an AgentsHarness`);
      }
      const args = typeof input === "string" ? parseArguments(input) : (input as JsonObject);
      host.model.settledByHost(callId);
      const result = await host.sink.toolCall({
        id: callId,
        tool: options.name,
        args,
        mediation: options.approval === true ? Mediation.REQUIRES_APPROVAL : Mediation.CONTROLLER_MEDIATED,
        idempotencyKey: `${host.start.executionId}:${callId}`,
      });
      return toolResultText(result);
    },
  }) as FunctionTool<HostContext>;
}

/** Makes the agent of one execution around the host's model. */
export type AgentBuilder = (model: HostModel, start: Start) => Agent<any, any>;

/** Options of {@link AgentsHarness}. */
export interface AgentsHarnessOptions {
  /** Bump when a recorded turn would come out differently (instructions, tools). */
  version?: string;
  /** Harness-local tool names, declared in the descriptor (reported, not mediated). */
  tools?: string[];
  /** Host-mediated tool names, declared in the descriptor. */
  hostTools?: string[];
  maxTurns?: number;
  /** Run the agent streamed (`run(..., { stream: true })`), as an app that shows its events. */
  stream?: boolean;
}

/** Serves an Agents SDK agent as a harness: each turn runs the agent on the session's
 * conversation rebuilt from the journal. */
export class AgentsHarness implements Harness {
  constructor(
    private readonly id: string,
    private readonly build: AgentBuilder,
    private readonly options: AgentsHarnessOptions = {},
  ) {
    // The SDK's tracing exports to OpenAI; a harness must not reach a provider by itself.
    setTracingDisabled(true);
  }

  describe() {
    return descriptor(this.id, {
      version: this.options.version ?? "1",
      tools: [
        ...(this.options.tools ?? []).map((name) => ({ name, mediation: Mediation.IN_HARNESS_REPORTED })),
        ...(this.options.hostTools ?? []).map((name) => ({ name, mediation: Mediation.CONTROLLER_MEDIATED })),
      ],
    });
  }

  async run(start: Start, sink: Sink): Promise<void> {
    const model = new HostModel(sink, start.model);
    const agent = this.build(model, start);
    const context: HostContext = { sink, start, model };
    const options = { context, maxTurns: this.options.maxTurns ?? 10, signal: sink.signal };
    const input = toItems(start.conversation());
    let result;
    if (this.options.stream === true) {
      result = await run(agent, input, { ...options, stream: true });
      await result.completed;
      if (result.error !== null && result.error !== undefined) throw result.error;
    } else {
      result = await run(agent, input, options);
    }
    // A turn that ends on a tool (a tool-use behavior that stops there) reports its outputs
    // and says the final output, which no completion carried.
    await model.reportToolOutputs(result.newItems.flatMap((item) => (item.type === "tool_call_output_item" && item.rawItem.type === "function_call_result" ? [item.rawItem] : [])));
    const final = result.finalOutput;
    const text = typeof final === "string" ? final : final === undefined || final === null ? "" : JSON.stringify(final);
    if (text !== "" && text !== model.lastText) await sink.output(text);
  }
}
