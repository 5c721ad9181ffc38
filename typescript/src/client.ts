/**
 * The client of the `agentsessions.v1.Sessions` API.
 *
 * ```ts
 * const client = new Client("127.0.0.1:7070");
 * const turn = client.exec("hello", { harness: "echo" });
 * for await (const item of turn) console.log(item.case);   // session, records, deltas
 * console.log((await turn.result()).output);
 * client.close();
 * ```
 *
 * Every call takes an optional `signal` (an `AbortSignal`: cancels the call, CANCELLED) and
 * `timeoutMs` (a deadline, DEADLINE_EXCEEDED); failures are {@link AgentSessionsError}s.
 */
import { create } from "@bufbuild/protobuf";
import { createClient, type Client as RpcClient, type Transport } from "@connectrpc/connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { verifyRecords, type VerifyReport } from "./canonical.js";
import { AgentSessionsError, errorFor, StatusCode, translate } from "./errors.js";
import { EventKind, type IdentityRef, type LogRecord } from "./gen/common_pb.js";
import {
  Sessions,
  SessionSchema,
  type ApproveResponse,
  type ExecUpdate,
  type PendingApproval,
  type Session,
  type WatchUpdate,
} from "./gen/session_pb.js";
import { Resumability } from "./gen/harness_pb.js";
import { HarnessRegistry, type HarnessRegistration, type RegisterHarnessResponse } from "./gen/harness_registry_pb.js";
import { messageText, toMessages, type Input } from "./messages.js";
import { grpcTransport, type Tls } from "./transport.js";

/** Records per ReadRecords page: the server's maximum, so a 5,000-record session is one call. */
export const PAGE_RECORDS = 10_000;

/** Options of one call. */
export interface CallOptions {
  /** Cancels the call (it fails with CANCELLED). */
  signal?: AbortSignal;
  /** A deadline for the call, in milliseconds (it fails with DEADLINE_EXCEEDED). */
  timeoutMs?: number;
}

/** How a {@link Client} connects. */
export interface ClientOptions {
  /** Turns on TLS, and mutual TLS with a client certificate. */
  tls?: Tls;
  /** A bearer token sent on every call. */
  token?: string;
  /** The default project of created and listed sessions. */
  project?: string;
  /** The default deadline of unary calls and pages (not of Exec, Watch or Replay streams). */
  timeoutMs?: number;
}

/** A seq or a count: int64 fields are bigints; numbers are accepted where a value goes in. */
export type Int64 = number | bigint;

/** One frame of a running turn: `session` (always first), `record`, `delta` and, from servers
 * that send them, other frames of the Exec stream (such as tool progress). */
export type ExecItem = Exclude<ExecUpdate["update"], { case: undefined }>;

/** One frame of {@link Client.watchUpdates}: a committed record or a tool's progress. */
export type WatchItem = Exclude<WatchUpdate["update"], { case: undefined }>;

function tailOptions(signal: AbortSignal | undefined): { signal?: AbortSignal; timeoutMs: number } {
  return { ...(signal ? { signal } : {}), timeoutMs: 0 };
}

async function* frames(updates: AsyncIterable<WatchUpdate>): AsyncGenerator<WatchItem> {
  for await (const update of updates) {
    if (update.update.case !== undefined) yield update.update;
  }
}

/** A finished turn: the newest session frame, the records committed during the turn, the text
 * of its OUTPUT records, and the newest seq seen. */
export interface TurnResult {
  session: Session;
  records: LogRecord[];
  output: string;
  lastSeq: bigint;
  /** The execution (turn) id, from the first record that carries one. */
  executionId: string;
}

/** A listing read page by page: iterate it for the items, or `pages()` for whole pages; the
 * next page is fetched when the last one runs out. */
export class Paged<T> implements AsyncIterable<T> {
  constructor(private readonly fetchPages: () => AsyncGenerator<T[]>) {}

  /** The pages, one call each. */
  pages(): AsyncGenerator<T[]> {
    return this.fetchPages();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for await (const page of this.fetchPages()) {
      yield* page;
    }
  }

  /** Every item, as an array. */
  async toArray(): Promise<T[]> {
    const all: T[] = [];
    for await (const item of this) {
      all.push(item);
    }
    return all;
  }
}

/** A failed turn's error carries what the turn committed before it failed. */
export type TurnError = AgentSessionsError & { partial?: TurnResult };

/** One running turn. Iterating yields each frame as it arrives; {@link result} drains what
 * is left and returns the {@link TurnResult} (throwing the turn's error, if any). The stream
 * is read once. */
export class ExecStream implements AsyncIterable<ExecItem> {
  private readonly partial: TurnResult = { session: create(SessionSchema), records: [], output: "", lastSeq: 0n, executionId: "" };
  private iterator: AsyncIterator<ExecUpdate> | undefined;
  private done = false;

  constructor(
    private readonly updates: AsyncIterable<ExecUpdate>,
    private readonly reader: AbortController,
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<ExecItem> {
    this.iterator ??= this.updates[Symbol.asyncIterator]();
    while (!this.done) {
      let next: IteratorResult<ExecUpdate>;
      try {
        next = await this.iterator.next();
      } catch (err) {
        this.done = true;
        const error: TurnError = translate(err);
        error.partial = this.partial;
        throw error;
      }
      if (next.done === true) {
        this.done = true;
        return;
      }
      const item = this.absorb(next.value);
      if (item !== undefined) {
        yield item;
      }
    }
  }

  /** Only the text deltas of the turn. */
  async *deltas(): AsyncGenerator<string> {
    for await (const item of this) {
      if (item.case === "delta") {
        yield item.value.chunk;
      }
    }
  }

  /** Waits for the turn to end and returns its result. */
  async result(): Promise<TurnResult> {
    for await (const _ of this) {
      // drained for the result
    }
    return this.partial;
  }

  /** Stops reading (the turn itself goes on; {@link Client.cancel} stops it). */
  stop(): void {
    this.done = true;
    this.reader.abort();
  }

  private absorb(update: ExecUpdate): ExecItem | undefined {
    const item = update.update;
    const result = this.partial;
    switch (item.case) {
      case "record": {
        const record = item.value;
        result.records.push(record);
        if (record.seq > result.lastSeq) result.lastSeq = record.seq;
        if (result.executionId === "" && record.event?.executionId) result.executionId = record.event.executionId;
        if (record.event?.kind === EventKind.EVENT_OUTPUT && record.event.body.case === "message") {
          result.output += messageText(record.event.body.value);
        }
        return item;
      }
      case "session":
        result.session = item.value;
        if (item.value.lastSeq > result.lastSeq) result.lastSeq = item.value.lastSeq;
        return item;
      case undefined:
        return undefined;
      default:
        return item;
    }
  }
}

/** Options of {@link Client.exec}. */
export interface ExecOptions {
  /** The session; empty creates one. */
  session?: string;
  /** The harness of a new session, or this turn's override. */
  harness?: string;
  /** Opaque harness configuration, journaled verbatim. */
  config?: Uint8Array;
  /** When set, the journal head must equal this seq (ABORTED otherwise). */
  expectedLastSeq?: Int64;
  /** Optional deadline of the turn in unix seconds (the server enforces it). */
  deadlineUnix?: Int64;
  /** Harness cursor passed through to Start. */
  resumeFromSeq?: Int64;
  /** Close the session's unfinished last turn first instead of refusing the input. */
  abandonUnfinished?: boolean;
  /** Stops reading the stream (CANCELLED); cancelling the turn itself is {@link Client.cancel}. */
  signal?: AbortSignal;
}

/** What {@link Client.createSession} makes: a session on `harness` (the server's default when
 * empty), with the agent principal `identity` (provenance; a host with `[identity]` mints
 * delegated tokens for it). */
export interface SessionSpec {
  harness?: string;
  model?: string;
  name?: string;
  project?: string;
  labels?: Record<string, string>;
  identity?: Partial<Pick<IdentityRef, "principal" | "issuer" | "subject">>;
}

/** Options of {@link Client.approve}. Without a request reference, the session's pending
 * approval is decided. */
export interface DecisionOptions extends CallOptions {
  reason?: string;
  executionId?: string;
  toolCallId?: string;
  requestSeq?: Int64;
  /** Decider provenance, recorded on the decision. */
  identity?: Partial<Pick<IdentityRef, "principal" | "issuer" | "subject">>;
  /** Resume the session after the decision, as `agentctl approve` does (default true). */
  resume?: boolean;
}

/** What {@link Client.approve} did: the committed decision and the session afterwards. */
export interface Decided {
  decision: ApproveResponse["decision"];
  session: Session;
}

/** A connection to one of the daemon's APIs: its HTTP/2 session, default deadline, and the
 * calls' error mapping and paging. */
abstract class Connection {
  private readonly session: Http2SessionManager;
  protected readonly transport: Transport;
  private readonly timeoutMs: number | undefined;

  constructor(target: string, options: ClientOptions) {
    const { transport, session } = grpcTransport(target, options.tls, options.token);
    this.session = session;
    this.transport = transport;
    this.timeoutMs = options.timeoutMs;
  }

  /** Closes the connection; calls still running fail. */
  close(): void {
    this.session.abort();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  protected options(call: CallOptions | undefined): { signal?: AbortSignal; timeoutMs?: number } {
    const timeoutMs = call?.timeoutMs ?? this.timeoutMs;
    return { ...(call?.signal ? { signal: call.signal } : {}), ...(timeoutMs !== undefined ? { timeoutMs } : {}) };
  }

  protected async unary<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw translate(err);
    }
  }

  /** A listing whose pages follow `next_page_token` until it is empty. */
  protected byToken<T>(page: (token: string) => Promise<{ items: T[]; next: string }>): Paged<T> {
    const unary = this.unary.bind(this);
    return new Paged(async function* (): AsyncGenerator<T[]> {
      let token = "";
      for (;;) {
        const { items, next } = await unary(() => page(token));
        yield items;
        if (next === "") return;
        token = next;
      }
    });
  }

  protected async *streamed<T>(stream: AsyncIterable<T>): AsyncGenerator<T> {
    try {
      yield* stream;
    } catch (err) {
      throw translate(err);
    }
  }
}

/** A connection to an `agentsessionsd` Sessions endpoint. */
export class Client extends Connection {
  /** The generated client, for calls this class does not wrap. */
  readonly rpc: RpcClient<typeof Sessions>;
  readonly project: string;

  /** Connects to `target` (`host:port`, or an `http://`/`https://` URL). */
  constructor(target: string, options: ClientOptions = {}) {
    super(target, options);
    this.rpc = createClient(Sessions, this.transport);
    this.project = options.project ?? "";
  }

  // Sessions

  /** Creates a session on `harness` (the server's default when empty). */
  createSession(spec: SessionSpec = {}, call?: CallOptions): Promise<Session> {
    const session = {
      metadata: { project: spec.project || this.project, name: spec.name ?? "" },
      harness: spec.harness ?? "",
      model: spec.model ?? "",
      labels: spec.labels ?? {},
      ...(spec.identity !== undefined ? { identity: spec.identity } : {}),
    };
    return this.unary(() => this.rpc.createSession({ session }, this.options(call)));
  }

  /** Reads one session. */
  getSession(uid: string, call?: CallOptions): Promise<Session> {
    return this.unary(() => this.rpc.getSession({ uid }, this.options(call)));
  }

  /** Every session of `project` (default: the client's), fetched page by page. */
  listSessions(list: { project?: string; pageSize?: number } = {}, call?: CallOptions): Paged<Session> {
    const project = list.project || this.project;
    const pageSize = list.pageSize ?? 0;
    return this.byToken(async (pageToken) => {
      const page = await this.rpc.listSessions({ project, pageSize, pageToken }, this.options(call));
      return { items: page.sessions, next: page.nextPageToken };
    });
  }

  /** Marks a session for deletion. */
  deleteSession(uid: string, call?: CallOptions): Promise<Session> {
    return this.unary(() => this.rpc.deleteSession({ uid }, this.options(call)));
  }

  // Turns

  /** Runs one turn; an empty `session` creates one. Strings are user text messages. */
  exec(inputs?: Input | readonly Input[], options: ExecOptions = {}): ExecStream {
    const reader = new AbortController();
    const signal = options.signal === undefined ? reader.signal : AbortSignal.any([reader.signal, options.signal]);
    const request = {
      session: options.session ?? "",
      inputs: toMessages(inputs),
      harness: options.harness ?? "",
      config: options.config ?? new Uint8Array(),
      deadlineUnix: BigInt(options.deadlineUnix ?? 0),
      resumeFromSeq: BigInt(options.resumeFromSeq ?? 0),
      abandonUnfinished: options.abandonUnfinished ?? false,
      ...(options.expectedLastSeq !== undefined ? { expectedLastSeq: BigInt(options.expectedLastSeq) } : {}),
    };
    return new ExecStream(this.rpc.exec(request, { signal, timeoutMs: 0 }), reader);
  }

  /** {@link exec} and wait for the result. */
  run(inputs?: Input | readonly Input[], options: ExecOptions = {}): Promise<TurnResult> {
    return this.exec(inputs, options).result();
  }

  /** Stops a running execution (`reason`: USER, TIMEOUT or INTERNAL). */
  cancel(session: string, executionId: string, reason = "USER", call?: CallOptions): Promise<Session> {
    return this.unary(() => this.rpc.cancel({ session, executionId, reason }, this.options(call)));
  }

  // Reading the journal

  /** The committed records, streamed one message per record (`Sessions.Replay`). */
  async *replay(session: string, range: { fromSeq?: Int64; toSeq?: Int64 } = {}, call: { signal?: AbortSignal } = {}): AsyncGenerator<LogRecord> {
    yield* this.streamed(this.rpc.replay({ session, fromSeq: BigInt(range.fromSeq ?? 0), toSeq: BigInt(range.toSeq ?? 0) }, { ...call, timeoutMs: 0 }));
  }

  /** The committed records, many per message (`Sessions.ReadRecords`, the fast path). */
  records(session: string, range: { fromSeq?: Int64; toSeq?: Int64; pageRecords?: number } = {}, call?: CallOptions): Paged<LogRecord> {
    const toSeq = BigInt(range.toSeq ?? 0);
    const maxRecords = range.pageRecords ?? PAGE_RECORDS;
    const first = BigInt(range.fromSeq ?? 0);
    return new Paged(async function* (this: Client): AsyncGenerator<LogRecord[]> {
      let fromSeq: bigint = first;
      for (;;) {
        const page = await this.unary(() => this.rpc.readRecords({ session, fromSeq, toSeq, maxRecords }, this.options(call)));
        yield page.records;
        if (page.nextSeq === 0n) return;
        fromSeq = page.nextSeq;
      }
    }.bind(this));
  }

  /** {@link records} as an array. */
  readRecords(session: string, range: { fromSeq?: Int64; toSeq?: Int64 } = {}, call?: CallOptions): Promise<LogRecord[]> {
    return this.records(session, range, call).toArray();
  }

  /** The session's records from `fromSeq` on, then each new record as it commits, until the
   * session is deleted or `signal` aborts (then the iteration just ends). A server shutting
   * down ends it with UNAVAILABLE: watch again from the seq after the last record. */
  watch(session: string, options: { fromSeq?: Int64; signal?: AbortSignal } = {}): AsyncGenerator<LogRecord> {
    return this.tailed(this.rpc.watch({ session, fromSeq: BigInt(options.fromSeq ?? 0) }, tailOptions(options.signal)), options.signal);
  }

  /** {@link watch}, with the progress of the session's running tools between the records
   * (`{ case: "record" | "progress", value }`; progress is ephemeral, never replayed). */
  watchUpdates(session: string, options: { fromSeq?: Int64; signal?: AbortSignal } = {}): AsyncGenerator<WatchItem> {
    const updates = this.rpc.watchUpdates({ session, fromSeq: BigInt(options.fromSeq ?? 0) }, tailOptions(options.signal));
    return this.tailed(frames(updates), options.signal);
  }

  /** A stream that ends quietly when its own `signal` aborted it. */
  private async *tailed<T>(stream: AsyncIterable<T>, signal: AbortSignal | undefined): AsyncGenerator<T> {
    try {
      yield* this.streamed(stream);
    } catch (err) {
      if (signal?.aborted === true && err instanceof AgentSessionsError && err.codeName === "CANCELLED") {
        return;
      }
      throw err;
    }
  }

  /** Reads the whole journal and recomputes every hash and link in TypeScript. */
  verify(session: string, call?: CallOptions): Promise<VerifyReport> {
    return verifyRecords(this.records(session, {}, call));
  }

  // Lifecycle

  /** Creates `count` children of `session` at `atSeq` (0: the head). */
  async fork(session: string, fork: { atSeq?: Int64; count?: number; names?: string[]; labels?: Record<string, string> } = {}, call?: CallOptions): Promise<Session[]> {
    const response = await this.unary(() =>
      this.rpc.fork(
        { session, atSeq: BigInt(fork.atSeq ?? 0), count: fork.count ?? 1, childNames: fork.names ?? [], labels: fork.labels ?? {} },
        this.options(call),
      ),
    );
    return response.children;
  }

  /** Checkpoints the session and releases its compute. */
  suspend(session: string, call?: CallOptions): Promise<Session> {
    return this.unary(() => this.rpc.suspend({ session }, this.options(call)));
  }

  /** Brings the session back; an interrupted turn is re-driven from its journal. */
  resume(session: string, options: { boot?: boolean } & CallOptions = {}): Promise<Session> {
    return this.unary(() => this.rpc.resume({ session, boot: options.boot ?? false }, this.options(options)));
  }

  // Approvals

  /** Decides a pending approval (the session's pending one, unless a reference is given),
   * then resumes the session so the turn goes on, as `agentctl approve` does. */
  async approve(session: string, options: DecisionOptions & { approved?: boolean } = {}): Promise<Decided> {
    let { executionId = "", toolCallId = "" } = options;
    let requestSeq = BigInt(options.requestSeq ?? 0);
    if (requestSeq === 0n) {
      const pending = (await this.getSession(session, options)).pendingApproval;
      if (pending === undefined) {
        throw errorFor(StatusCode.FAILED_PRECONDITION, `session ${session} has no pending approval`);
      }
      ({ executionId, toolCallId, requestSeq } = pending);
    }
    const response = await this.unary(() =>
      this.rpc.approve(
        {
          session,
          executionId,
          toolCallId,
          requestSeq,
          approved: options.approved ?? true,
          reason: options.reason ?? "",
          ...(options.identity !== undefined ? { identity: options.identity } : {}),
        },
        this.options(options),
      ),
    );
    const after = options.resume === false ? response.session : await this.resume(session, options);
    return { decision: response.decision, session: after ?? create(SessionSchema) };
  }

  /** {@link approve} with `approved: false`. */
  deny(session: string, options: DecisionOptions = {}): Promise<Decided> {
    return this.approve(session, { ...options, approved: false });
  }

  /** Every approval request that waits for a decision, oldest first. */
  pendingApprovals(list: { project?: string; pageSize?: number } = {}, call?: CallOptions): Paged<PendingApproval> {
    const project = list.project || this.project;
    const pageSize = list.pageSize ?? 0;
    return this.byToken(async (pageToken) => {
      const page = await this.rpc.listApprovals({ project, pageSize, pageToken }, this.options(call));
      return { items: page.approvals, next: page.nextPageToken };
    });
  }
}

/** The operator's `HarnessRegistry` API (served on the daemon's `--registry-addr`). */
export class RegistryClient extends Connection {
  /** The generated client, for calls this class does not wrap. */
  readonly rpc: RpcClient<typeof HarnessRegistry>;

  constructor(target: string, options: Omit<ClientOptions, "project"> = {}) {
    super(target, options);
    this.rpc = createClient(HarnessRegistry, this.transport);
  }

  /** Registers the harness served at `address` under `name`. */
  register(name: string, address: string, options: { resumability?: Resumability; descriptorId?: string } & CallOptions = {}): Promise<RegisterHarnessResponse> {
    const spec = {
      placement: { case: "remote" as const, value: { address } },
      capabilities: { resumability: options.resumability ?? Resumability.STATELESS_REPLAY },
      descriptorId: options.descriptorId ?? "",
    };
    return this.unary(() => this.rpc.registerHarness({ name, spec }, this.options(options)));
  }

  /** Reads one registration (`observe` also calls the harness's Describe). */
  get(name: string, options: { observe?: boolean } & CallOptions = {}): Promise<HarnessRegistration> {
    return this.unary(() => this.rpc.getHarness({ name, observe: options.observe ?? false }, this.options(options)));
  }

  /** Stops new sessions from selecting `name`. */
  retire(name: string, reason = "", call?: CallOptions): Promise<HarnessRegistration> {
    return this.unary(() => this.rpc.retireHarness({ name, reason }, this.options(call)));
  }

  /** Every registration, in name order. */
  list(options: { includeRetired?: boolean; pageSize?: number } = {}, call?: CallOptions): Paged<HarnessRegistration> {
    return this.byToken(async (pageToken) => {
      const page = await this.rpc.listHarnesses({ pageToken, pageSize: options.pageSize ?? 0, includeRetired: options.includeRetired ?? false }, this.options(call));
      return { items: page.harnesses, next: page.nextPageToken };
    });
  }
}
