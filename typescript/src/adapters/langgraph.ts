/**
 * LangGraph.js (`@langchain/langgraph`) on agentsessions.
 *
 * {@link HostChatModel} is a LangChain chat model served by the host through the sink: every
 * call is journaled and served from the journal on replay and resume, its usage recorded, and
 * `bindTools` offers the graph's tools to the host's model.
 *
 * Tools are either harness-local (ordinary LangChain tools run by the graph's `ToolNode`,
 * reported as TOOL_RESULT records once, before the model sees their outputs or when the turn
 * ends) or host-mediated ({@link hostTool}: the host runs them at most once, with an
 * idempotency key; `approval: true` puts them behind a durable approval).
 *
 * {@link LangGraphHarness} serves a compiled graph whose state has a `messages` list.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import { BaseChatModel, type BaseChatModelCallOptions, type BindToolsInput } from "@langchain/core/language_models/chat_models";
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import type { Runnable, RunnableConfig } from "@langchain/core/runnables";
import { tool, type StructuredToolInterface } from "@langchain/core/tools";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import { Mediation, MessageSchema, PartSchema, ToolDefinitionSchema, type Message, type Part, type ToolDefinition } from "../gen/common_pb.js";
import { descriptor, type Harness, type Sink, type Start } from "../harness.js";
import { messageText, toolResultText } from "../messages.js";

function textPart(text: string): Part {
  return create(PartSchema, { part: { case: "text", value: { text } } });
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((block: unknown) => (block !== null && typeof block === "object" && (block as { type?: string }).type === "text" ? String((block as { text?: unknown }).text ?? "") : ""))
    .join("");
}

/** Wire messages for LangChain messages. */
export function toMessages(messages: readonly BaseMessage[]): Message[] {
  const out: Message[] = [];
  for (const message of messages) {
    const text = contentText(message.content);
    if (message instanceof ToolMessage) {
      const result = { id: message.tool_call_id, content: [textPart(text)] };
      out.push(create(MessageSchema, { role: "tool", parts: [{ part: { case: "toolResult", value: result } }] }));
    } else if (message instanceof AIMessage) {
      const parts: Part[] = text !== "" ? [textPart(text)] : [];
      for (const call of message.tool_calls ?? []) {
        parts.push(create(PartSchema, { part: { case: "toolCall", value: { id: call.id ?? "", tool: call.name, args: call.args as JsonObject } } }));
      }
      out.push(create(MessageSchema, { role: "assistant", parts }));
    } else if (message instanceof SystemMessage) {
      out.push(create(MessageSchema, { role: "system", parts: [textPart(text)] }));
    } else {
      out.push(create(MessageSchema, { role: "user", parts: [textPart(text)] }));
    }
  }
  return out;
}

/** LangChain messages for wire messages (rebuilding a session's conversation). */
export function toLangChain(messages: readonly Message[]): BaseMessage[] {
  const out: BaseMessage[] = [];
  for (const message of messages) {
    const text = messageText(message);
    if (message.role === "assistant") {
      const toolCalls = message.parts.flatMap((p) =>
        p.part.case === "toolCall" ? [{ id: p.part.value.id, name: p.part.value.tool, args: (p.part.value.args ?? {}) as Record<string, unknown>, type: "tool_call" as const }] : [],
      );
      out.push(new AIMessage({ content: text, tool_calls: toolCalls }));
    } else if (message.role === "tool") {
      for (const part of message.parts) {
        if (part.part.case === "toolResult") out.push(new ToolMessage({ content: toolResultText(part.part.value), tool_call_id: part.part.value.id }));
      }
    } else if (message.role === "system") {
      out.push(new SystemMessage(text));
    } else {
      out.push(new HumanMessage(text));
    }
  }
  return out;
}

/** Call options of {@link HostChatModel}: the tools `bindTools` bound. */
export interface HostChatModelCallOptions extends BaseChatModelCallOptions {
  tools?: ToolDefinition[];
}

/** A LangChain chat model served by the agentsessions host through `sink`. */
export class HostChatModel extends BaseChatModel<HostChatModelCallOptions, AIMessageChunk> {
  private readonly asked = new Set<string>();
  private readonly settled = new Set<string>();

  constructor(
    readonly sink: Sink,
    readonly model = "",
  ) {
    super({});
  }

  _llmType(): string {
    return "agentsessions-host";
  }

  /** Marks a call the host ran (its TOOL_CALL and TOOL_RESULT are the host's records). */
  settledByHost(callId: string): void {
    this.settled.add(callId);
  }

  /** Journals the outputs of tools the graph ran for calls this model asked for, once. */
  async reportToolOutputs(messages: readonly BaseMessage[]): Promise<void> {
    for (const message of messages) {
      if (!(message instanceof ToolMessage)) continue;
      const id = message.tool_call_id;
      if (!this.asked.has(id) || this.settled.has(id)) continue;
      this.settled.add(id);
      await this.sink.report({ id, content: [textPart(contentText(message.content))] });
    }
  }

  override bindTools(tools: BindToolsInput[], kwargs?: Partial<HostChatModelCallOptions>): Runnable<BaseLanguageModelInput, AIMessageChunk, HostChatModelCallOptions> {
    const definitions = tools.map((t) => {
      const { function: f } = convertToOpenAITool(t as Parameters<typeof convertToOpenAITool>[0]);
      return create(ToolDefinitionSchema, { name: f.name, description: f.description ?? "", inputSchema: (f.parameters ?? {}) as JsonObject });
    });
    return this.withConfig({ ...kwargs, tools: definitions } as Partial<HostChatModelCallOptions>);
  }

  async _generate(messages: BaseMessage[], options: this["ParsedCallOptions"], _runManager?: CallbackManagerForLLMRun): Promise<ChatResult> {
    await this.reportToolOutputs(messages);
    const reply = await this.sink.model(toMessages(messages), { model: this.model, tools: options.tools ?? [] });
    if (reply.usage !== undefined) await this.sink.usage(reply.usage);
    const [message] = toLangChain([reply.message]) as [AIMessage];
    for (const call of message.tool_calls ?? []) if (call.id) this.asked.add(call.id);
    const input = Number(reply.usage?.inputTokens ?? 0n);
    const output = Number(reply.usage?.outputTokens ?? 0n);
    message.usage_metadata = { input_tokens: input, output_tokens: output, total_tokens: input + output };
    return { generations: [{ text: messageText(reply.message), message }] };
  }
}

/** What a host-mediated tool needs at run time: {@link LangGraphHarness} passes it as the
 * graph's `configurable.agentsessions`. */
export interface HostContext {
  sink: Sink;
  start: Start;
  model: HostChatModel;
}

/** A LangChain tool the host runs (`MEDIATION_CONTROLLER_MEDIATED`: journaled before it runs,
 * at most once, deduplicated by its idempotency key), or, with `approval`, one behind a
 * durable approval. `name` is the host's tool name; `schema` its JSON Schema. Runs only
 * inside a {@link LangGraphHarness}. */
export function hostTool(options: { name: string; description: string; schema: JsonObject; approval?: boolean }): StructuredToolInterface {
  return tool(
    async (input: unknown, config?: RunnableConfig & { toolCall?: { id?: string } }) => {
      const host = config?.configurable?.agentsessions as HostContext | undefined;
      const callId = config?.toolCall?.id;
      if (host === undefined || callId === undefined) {
        throw new Error(`host tool ${options.name} runs only inside a LangGraphHarness`);
      }
      host.model.settledByHost(callId);
      const result = await host.sink.toolCall({
        id: callId,
        tool: options.name,
        args: (input ?? {}) as JsonObject,
        mediation: options.approval === true ? Mediation.REQUIRES_APPROVAL : Mediation.CONTROLLER_MEDIATED,
        idempotencyKey: `${host.start.executionId}:${callId}`,
      });
      return toolResultText(result);
    },
    { name: options.name, description: options.description, schema: options.schema as never },
  ) as unknown as StructuredToolInterface;
}

/** A compiled graph whose state carries the conversation as `messages`. */
export interface MessagesGraph {
  invoke(input: { messages: BaseMessage[] }, config?: RunnableConfig): Promise<{ messages: BaseMessage[] }>;
}

/** Makes the graph of one execution around the host's model. */
export type GraphBuilder = (model: HostChatModel, start: Start) => MessagesGraph;

/** Options of {@link LangGraphHarness}. */
export interface LangGraphHarnessOptions {
  /** Bump when a recorded turn would come out differently (prompt, graph, tools). */
  version?: string;
  /** Harness-local tool names, declared in the descriptor (reported, not mediated). */
  tools?: string[];
  /** Host-mediated tool names, declared in the descriptor. */
  hostTools?: string[];
  /** LangGraph's recursion limit (graph steps per turn). */
  recursionLimit?: number;
}

/** Serves a LangGraph graph as a harness: each turn invokes the graph on the session's
 * conversation rebuilt from the journal. */
export class LangGraphHarness implements Harness {
  constructor(
    private readonly id: string,
    private readonly build: GraphBuilder,
    private readonly options: LangGraphHarnessOptions = {},
  ) {}

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
    const model = new HostChatModel(sink, start.model);
    const graph = this.build(model, start);
    const context: HostContext = { sink, start, model };
    const state = await graph.invoke(
      { messages: toLangChain(start.conversation()) },
      { configurable: { agentsessions: context }, recursionLimit: this.options.recursionLimit ?? 25, signal: sink.signal },
    );
    // A turn that ends on a tool reports its outputs and says its last tool's answer, which
    // no completion carried.
    await model.reportToolOutputs(state.messages);
    const last = state.messages.at(-1);
    if (last instanceof ToolMessage) await sink.output(contentText(last.content));
  }
}
