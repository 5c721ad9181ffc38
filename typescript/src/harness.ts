/**
 * Write a harness in TypeScript and serve it over `Harness.Connect` (semantics §9,
 * docs/harness-authoring.md).
 *
 * A harness is an object with `describe()` and `run(start, sink)`; the host drives one
 * execution (turn) per Connect stream. Everything the turn does goes through the sink, so the
 * host journals it and a replay, a resume or a fork reproduces it:
 *
 * - `sink.model(messages, {tools})` asks the host's model (live, or the recorded answer on
 *   replay) and returns the completion and its usage; the host already recorded the completion
 *   as the turn's OUTPUT;
 * - `sink.toolCall(call)` runs a host-mediated tool, or one behind an approval (it throws
 *   {@link ApprovalParked} while a person decides: let it propagate);
 * - `sink.report(result)` records a tool the harness ran itself;
 * - `sink.output(text)` and `sink.usage(usage)` record text and token counts;
 * - `sink.mint(audience)` asks the host for a delegated token.
 *
 * {@link serve} listens and returns the running {@link HarnessServer}.
 */
import { randomBytes } from "node:crypto";
import { createServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  EventKind,
  EventSchema,
  MessageSchema,
  ToolCallSchema,
  ToolChoiceSchema,
  ToolDefinitionSchema,
  ToolResultSchema,
  UsageSchema,
  type ApprovalRef,
  type Event,
  type Message,
  type ToolCall,
  type ToolChoice,
  type ToolDefinition,
  type ToolResult,
  type Usage,
} from "./gen/common_pb.js";
import {
  Harness as HarnessService,
  HarnessDescriptorSchema,
  Resumability,
  type ControllerFrame,
  type HarnessDescriptor,
  type IdentityContext,
} from "./gen/harness_pb.js";
import { messageText, textMessage } from "./messages.js";
import { BoundedQueue } from "./queue.js";
import { MAX_MESSAGE_BYTES } from "./transport.js";

/** Events buffered between the run and the transport before the run waits. */
export const EVENT_BUFFER = 16;
/** Host frames queued for the sink: it asks for one answer at a time, so a host that keeps the
 * protocol has at most one queued; frames beyond this were never asked for and are dropped. */
export const REPLY_BUFFER = 8;

/** A sink call that cannot go on; the host gets END{FAILED}. */
export class HarnessError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The host cancelled the execution (a `cancel` frame); the stream ends END{CANCELED}. */
export class Cancelled extends HarnessError {}

/** The host closed the stream (it failed, was cancelled, or a model call failed there). */
export class HostGone extends HarnessError {}

/** A gated tool call waits for a person's decision. Let it propagate out of `run`: the host
 * records the request, and resumes the turn once the decision is made. */
export class ApprovalParked extends HarnessError {
  constructor(readonly ref: ApprovalRef) {
    super(`tool call ${ref.toolCallId} parked for approval (request seq ${ref.requestSeq})`);
  }
}

/** Everything one execution gets from the host. */
export interface Start {
  executionId: string;
  sessionUid: string;
  /** Messages that open this turn. */
  inputs: Message[];
  /** The session's earlier events (empty after a memory restore). */
  history: Event[];
  /** Opaque configuration, passed through unchanged. */
  config: Uint8Array;
  resumeFromSeq: bigint;
  /** The host's default model; empty means the harness's own choice. */
  model: string;
  identity: IdentityContext | undefined;
  /** The text of the turn's inputs, one line each. */
  readonly inputText: string;
  /** The session so far as model messages: {@link conversation} of `history`, then `inputs`. */
  conversation(): Message[];
}

/** Model messages from journaled events: INPUT and OUTPUT messages as recorded, and each
 * TOOL_RESULT as a `tool` message (what the model saw on the next call). Built only from the
 * journal, so a replay rebuilds exactly the same conversation. */
export function conversation(history: readonly Event[]): Message[] {
  const messages: Message[] = [];
  for (const event of history) {
    const body = event.body;
    if ((event.kind === EventKind.EVENT_INPUT || event.kind === EventKind.EVENT_OUTPUT) && body.case === "message") {
      messages.push(body.value);
    } else if (event.kind === EventKind.EVENT_TOOL_RESULT && body.case === "result") {
      messages.push(create(MessageSchema, { role: "tool", parts: [{ part: { case: "toolResult", value: body.value } }] }));
    }
  }
  return messages;
}

/** Options of {@link descriptor}. */
export interface DescriptorOptions {
  /** Bump whenever a recorded turn would come out differently (prompt, request order, tools):
   * replay refuses a version mismatch up front. */
  version?: string;
  models?: string[];
  tools?: Array<{ name: string; description?: string; mediation?: number }>;
  resumability?: Resumability;
  forkSafe?: boolean;
}

/** A harness descriptor. */
export function descriptor(id: string, options: DescriptorOptions = {}): HarnessDescriptor {
  return create(HarnessDescriptorSchema, {
    id,
    version: options.version ?? "1",
    models: options.models ?? [],
    tools: options.tools ?? [],
    capabilities: { resumability: options.resumability ?? Resumability.STATELESS_REPLAY, forkSafe: options.forkSafe ?? true },
  });
}

/** What {@link serve} serves. */
export interface Harness {
  /** The static contract; constant for a version. */
  describe(): HarnessDescriptor | Promise<HarnessDescriptor>;
  /** Drives one turn through `sink`; resolves when the turn is done. */
  run(start: Start, sink: Sink): void | Promise<void>;
}

/** The completion of a model call served by the host. */
export interface ModelReply {
  /** The assistant message: text and/or tool_call parts. */
  message: Message;
  /** Token accounting as the provider reported it (recorded again on replay). */
  usage: Usage | undefined;
}

/** Options of {@link Sink.model}. */
export interface ModelOptions {
  model?: string;
  params?: Record<string, string>;
  tools?: Array<ToolDefinition | MessageInitShape<typeof ToolDefinitionSchema>>;
  toolChoice?: ToolChoice | MessageInitShape<typeof ToolChoiceSchema>;
}

/** The shared state of one Connect stream: its outgoing events, the host's answers, and why
 * it stopped (cancelled, host gone). */
class Execution {
  readonly events = new BoundedQueue<Event>(EVENT_BUFFER);
  readonly replies = new BoundedQueue<ControllerFrame>(REPLY_BUFFER);
  readonly abort = new AbortController();
  stopped: HarnessError | undefined;

  constructor(readonly executionId: string) {}

  stop(why: HarnessError): void {
    if (this.stopped !== undefined) return;
    this.stopped = why;
    this.events.fail(why);
    this.replies.fail(why);
    this.abort.abort(why);
  }

  async emit(event: Event): Promise<void> {
    if (this.stopped !== undefined) throw this.stopped;
    event.executionId = this.executionId;
    await this.events.put(event);
  }

  async reply(): Promise<ControllerFrame> {
    const frame = await this.replies.take();
    if (frame === undefined) throw this.stopped ?? new HostGone("the host closed the stream");
    if (frame.executionId !== "" && frame.executionId !== this.executionId) {
      throw new HarnessError(`host frame for execution ${frame.executionId}, expected ${this.executionId}`);
    }
    return frame;
  }
}

/** Serializes the sink's calls: each waits for the one before. */
class Turnstile {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(step: () => Promise<T>): Promise<T> {
    const next = this.tail.then(step, step);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

/** The harness's handle on the host for one execution. Calls are serialized; a failed call
 * (cancelled, host gone, protocol) fails every later one too. */
export class Sink {
  /** The approval the turn parked on, if any. */
  parked: ApprovalRef | undefined;
  /** The protocol failure that ended the turn, if any. */
  failure: HarnessError | undefined;
  private readonly turnstile = new Turnstile();

  /** @internal */
  constructor(private readonly x: Execution) {}

  /** Aborted once the host cancelled the execution or went away: pass it to anything slow. */
  get signal(): AbortSignal {
    return this.x.abort.signal;
  }

  /** True once the host cancelled the execution or went away. */
  get cancelled(): boolean {
    return this.x.stopped !== undefined;
  }

  /** Runs one sink call after the ones before it; after a protocol failure, none. */
  private call<T>(step: () => Promise<T>): Promise<T> {
    return this.turnstile.run(async () => {
      if (this.failure !== undefined) throw this.failure;
      return step();
    });
  }

  private fail(why: string): HarnessError {
    this.failure = new HarnessError(why);
    return this.failure;
  }

  /** Asks the host's model; returns the completion (text and/or tool_call parts) and its
   * usage. The host records the completion as the turn's OUTPUT: do not emit it again with
   * {@link output}. Report the usage with {@link usage} if the turn should count it. */
  model(messages: readonly Message[], options: ModelOptions = {}): Promise<ModelReply> {
    const id = randomBytes(8).toString("hex");
    const event = create(EventSchema, {
      kind: EventKind.EVENT_MODEL_CALL,
      body: {
        case: "model",
        value: {
          id,
          model: options.model ?? "",
          params: options.params ?? {},
          messages: [...messages],
          tools: options.tools ?? [],
          ...(options.toolChoice !== undefined ? { toolChoice: options.toolChoice } : {}),
        },
      },
    });
    return this.call(async () => {
      await this.x.emit(event);
      const frame = await this.x.reply();
      if (frame.frame.case !== "model" || frame.frame.value.modelCallId !== id) {
        throw this.fail(`expected the completion of model call ${id}, got ${frame.frame.case ?? "nothing"}`);
      }
      return { message: frame.frame.value.message ?? create(MessageSchema, { role: "assistant" }), usage: frame.frame.value.usage };
    });
  }

  /** A tool the host runs (`MEDIATION_CONTROLLER_MEDIATED`, with an idempotency key) or one
   * that needs approval (`MEDIATION_REQUIRES_APPROVAL`). Returns the recorded result; throws
   * {@link ApprovalParked} while a decision is pending. */
  toolCall(call: ToolCall | MessageInitShape<typeof ToolCallSchema>): Promise<ToolResult> {
    const tool = create(ToolCallSchema, call);
    const event = create(EventSchema, { kind: EventKind.EVENT_TOOL_CALL, body: { case: "tool", value: tool } });
    return this.call(async () => {
      await this.x.emit(event);
      let frame = await this.x.reply();
      if (frame.frame.case === "park") {
        const ref = frame.frame.value;
        if (ref.toolCallId !== tool.id || ref.requestSeq <= 0n) {
          throw this.fail(`park for call ${ref.toolCallId}, expected ${tool.id}`);
        }
        this.parked = ref;
        throw new ApprovalParked(ref);
      }
      if (frame.frame.case === "approval") {
        if (frame.frame.value.toolCallId !== tool.id) {
          throw this.fail(`decision for call ${frame.frame.value.toolCallId}, expected ${tool.id}`);
        }
        frame = await this.x.reply();
      }
      if (frame.frame.case !== "tool" || frame.frame.value.id !== tool.id) {
        throw this.fail(`expected the result of tool call ${tool.id}, got ${frame.frame.case ?? "nothing"}`);
      }
      return frame.frame.value;
    });
  }

  /** Records a tool the harness ran itself (`MEDIATION_IN_HARNESS_REPORTED`). Such tools run
   * again on replay: keep them free of effects that must not repeat. */
  report(result: ToolResult | MessageInitShape<typeof ToolResultSchema>): Promise<void> {
    const event = create(EventSchema, { kind: EventKind.EVENT_TOOL_RESULT, body: { case: "result", value: create(ToolResultSchema, result) } });
    return this.call(() => this.x.emit(event));
  }

  /** Records text the harness produced itself (not a model's answer). */
  output(text: string): Promise<void> {
    const event = create(EventSchema, { kind: EventKind.EVENT_OUTPUT, body: { case: "message", value: textMessage(text, "assistant") } });
    return this.call(() => this.x.emit(event));
  }

  /** Records token accounting. */
  usage(usage: Usage | MessageInitShape<typeof UsageSchema>): Promise<void> {
    const event = create(EventSchema, { kind: EventKind.EVENT_USAGE, body: { case: "usage", value: create(UsageSchema, usage) } });
    return this.call(() => this.x.emit(event));
  }

  /** Asks the host for a delegated token for `audience` (the Start's identity says whether the
   * harness may). Never journaled. */
  mint(audience: string[]): Promise<string> {
    const requestId = randomBytes(8).toString("hex");
    const event = create(EventSchema, { kind: EventKind.EVENT_KIND_UNSPECIFIED, body: { case: "mintRequest", value: { requestId, audience } } });
    return this.call(async () => {
      await this.x.emit(event);
      const frame = await this.x.reply();
      if (frame.frame.case !== "mintResult" || frame.frame.value.requestId !== requestId) {
        throw this.fail(`expected the answer to mint request ${requestId}, got ${frame.frame.case ?? "nothing"}`);
      }
      const minted = frame.frame.value;
      if (minted.error !== undefined) {
        throw new HarnessError(`no token minted: ${minted.error.description}`);
      }
      return minted.token;
    });
  }
}

function endEvent(state: string, error = "", code = 0): Event {
  return create(EventSchema, {
    kind: EventKind.EVENT_END,
    body: { case: "end", value: { state, ...(error !== "" ? { error: { code, description: error } } : {}) } },
  });
}

function startOf(first: ControllerFrame): Start {
  if (first.frame.case !== "start") {
    throw new ConnectError("the first frame must be start", Code.InvalidArgument);
  }
  if (first.executionId === "") {
    throw new ConnectError("the start frame has no execution id", Code.InvalidArgument);
  }
  const s = first.frame.value;
  const inputs = s.inputs;
  const history = s.history;
  return {
    executionId: first.executionId,
    sessionUid: s.sessionUid || first.session,
    inputs,
    history,
    config: s.config,
    resumeFromSeq: s.resumeFromSeq,
    model: s.model,
    identity: s.identity,
    get inputText() {
      return inputs.map(messageText).join("\n");
    },
    conversation() {
      return [...conversation(history), ...inputs];
    },
  };
}

/** Reads host frames: a cancel stops the execution, answers go to the sink, the end of the
 * stream means the host is gone. */
async function route(frames: AsyncIterator<ControllerFrame>, x: Execution): Promise<void> {
  try {
    for (;;) {
      const next = await frames.next();
      if (next.done === true) break;
      const frame = next.value;
      if (frame.frame.case === "cancel") {
        x.stop(new Cancelled(`cancelled by the host (${frame.frame.value.reason})`));
        return;
      }
      x.replies.offer(frame); // a frame beyond REPLY_BUFFER was never asked for
    }
  } catch {
    // the stream broke: the host is gone
  }
  x.stop(new HostGone("the host closed the stream"));
}

/** Runs the harness; returns the stream's last event (END, or PARKED). */
async function outcome(harness: Harness, start: Start, sink: Sink): Promise<Event> {
  let error: unknown;
  let failed = false;
  try {
    await harness.run(start, sink);
  } catch (err) {
    failed = true;
    error = err;
  }
  if (sink.parked !== undefined && (!failed || error instanceof ApprovalParked)) {
    return create(EventSchema, { kind: EventKind.EVENT_PARKED, body: { case: "parked", value: sink.parked } });
  }
  if (failed) {
    const description = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    return endEvent("FAILED", description, Code.Internal);
  }
  if (sink.failure !== undefined) {
    return endEvent("FAILED", sink.failure.message, Code.Internal);
  }
  return endEvent("COMPLETED");
}

/** The Connect handler of one execution. */
async function* execute(harness: Harness, frames: AsyncIterable<ControllerFrame>, context: HandlerContext): AsyncGenerator<Event> {
  const iterator = frames[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done === true) return;
  const start = startOf(first.value);
  const x = new Execution(start.executionId);
  const sink = new Sink(x);
  const gone = () => x.stop(new HostGone("the host closed the stream"));
  context.signal.addEventListener("abort", gone, { once: true });
  void route(iterator, x);
  const running = (async () => {
    const last = await outcome(harness, start, sink);
    try {
      await x.emit(last);
      x.events.close();
    } catch {
      // the stream already stopped; nobody reads the outcome
    }
  })();
  let failed = "";
  try {
    for (;;) {
      let event: Event | undefined;
      try {
        event = await x.events.take();
      } catch {
        break; // stopped: cancelled or the host went away
      }
      if (event === undefined) break;
      yield event;
      if (event.kind === EventKind.EVENT_END && event.body.case === "end" && event.body.value.state === "FAILED") {
        failed = event.body.value.error?.description || "the harness failed";
      }
    }
  } finally {
    context.signal.removeEventListener("abort", gone);
  }
  if (x.stopped instanceof Cancelled) {
    yield endEvent("CANCELED", x.stopped.message, Code.Canceled);
  } else if (failed !== "") {
    await running;
    throw new ConnectError(failed, Code.Internal);
  }
}

/** Where {@link serve} listens: `host:port` (port 0 picks one), `:port` (all interfaces) or
 * `unix:/path`. */
function listenTarget(address: string): { path: string } | { host: string; port: number } {
  if (address.startsWith("unix:")) {
    const path = address.slice("unix:".length).replace(/^\/\/(?=\/)/, "");
    if (path === "") throw new Error(`no socket path in ${address}`);
    return { path };
  }
  const colon = address.lastIndexOf(":");
  const port = Number(address.slice(colon + 1));
  if (colon < 0 || !Number.isInteger(port) || port < 0 || port > 65535 || address.slice(colon + 1) === "") {
    throw new Error(`cannot listen on ${JSON.stringify(address)}: expected host:port or unix:/path`);
  }
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  return { host: host === "" ? "0.0.0.0" : host, port };
}

/** Options of {@link serve}. */
export interface ServeOptions {
  /** Most concurrent executions; more are refused with RESOURCE_EXHAUSTED. */
  maxTurns?: number;
  /** Close the server on SIGINT and SIGTERM (letting running turns finish). */
  stopOnSignals?: boolean;
}

/** A running harness server; {@link address} is what the host dials. */
export class HarnessServer {
  constructor(
    private readonly server: Http2Server,
    readonly address: string,
    private readonly detach: () => void,
  ) {}

  /** Stops accepting streams and waits for running ones to end (or closes them after
   * `graceMs`). */
  async close(graceMs = 1000): Promise<void> {
    this.detach();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    const timer = setTimeout(() => this.closeAll(), graceMs);
    await closed;
    clearTimeout(timer);
  }

  private readonly sessions = new Set<ServerHttp2Session>();

  /** @internal */
  track(session: ServerHttp2Session): void {
    this.sessions.add(session);
    session.once("close", () => this.sessions.delete(session));
  }

  private closeAll(): void {
    for (const session of this.sessions) session.destroy();
  }
}

/** Serves `harness` on `address` and resolves once it listens. */
export async function serve(harness: Harness, address = "127.0.0.1:0", options: ServeOptions = {}): Promise<HarnessServer> {
  const maxTurns = options.maxTurns ?? 32;
  let running = 0;
  const handler = connectNodeAdapter({
    grpc: true,
    connect: false,
    grpcWeb: false,
    readMaxBytes: MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
    routes(router) {
      router.service(HarnessService, {
        async describe() {
          try {
            return await harness.describe();
          } catch (err) {
            throw new ConnectError(`describe failed: ${err instanceof Error ? err.message : String(err)}`, Code.Internal);
          }
        },
        async *connect(frames, context) {
          if (running >= maxTurns) {
            throw new ConnectError(`the harness runs ${maxTurns} turns already`, Code.ResourceExhausted);
          }
          running += 1;
          try {
            yield* execute(harness, frames, context);
          } finally {
            running -= 1;
          }
        },
      });
    },
  });
  const server = createServer(handler);
  const target = listenTarget(address);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    if ("path" in target) server.listen(target.path, resolve);
    else server.listen(target.port, target.host, resolve);
  });
  const bound = server.address();
  const where = typeof bound === "string" || bound === null ? address : `${(bound as AddressInfo).address.includes(":") ? `[${(bound as AddressInfo).address}]` : (bound as AddressInfo).address}:${(bound as AddressInfo).port}`;
  let detach = () => {};
  const harnessServer = new HarnessServer(server, where, () => detach());
  server.on("session", (session) => harnessServer.track(session));
  if (options.stopOnSignals === true) {
    const stop = () => void harnessServer.close(5000);
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
    detach = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
    };
  }
  return harnessServer;
}
