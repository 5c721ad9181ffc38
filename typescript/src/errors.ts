/**
 * Errors of the client and the harness SDK: one base class, one subclass per gRPC status code,
 * each carrying the code, the server's message and the status details.
 */
import { Code, ConnectError } from "@connectrpc/connect";

/** The gRPC status codes by name (numbers as gRPC defines them). */
export const StatusCode = {
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

export type StatusCodeName = keyof typeof StatusCode;

/** One status detail as the server sent it (a `google.protobuf.Any`: its type and bytes). */
export interface StatusDetail {
  type: string;
  value: Uint8Array;
}

/** A failed call. `code` is the gRPC status code the server (or the transport) returned. */
export class AgentSessionsError extends Error {
  /** The gRPC status code. */
  readonly code: number;
  /** The server's message, without the code. */
  readonly details: string;
  /** The status details (`grpc-status-details-bin`), undecoded. */
  readonly statusDetails: StatusDetail[];
  /** Response headers and trailers of the failed call. */
  readonly metadata: Headers;

  constructor(details: string, code: number = StatusCode.UNKNOWN, statusDetails: StatusDetail[] = [], metadata: Headers = new Headers(), options?: { cause?: unknown }) {
    super(`${codeName(code)}: ${details}`, options);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
    this.statusDetails = statusDetails;
    this.metadata = metadata;
  }

  /** The code's name, e.g. `NOT_FOUND`. */
  get codeName(): StatusCodeName | "UNKNOWN" {
    return codeName(this.code);
  }
}

function codeName(code: number): StatusCodeName | "UNKNOWN" {
  const found = (Object.keys(StatusCode) as StatusCodeName[]).find((name) => StatusCode[name] === code);
  return found ?? "UNKNOWN";
}

/** The call or the execution was cancelled (CANCELLED), including by an `AbortSignal`. */
export class Cancelled extends AgentSessionsError {}
/** The server could not classify the failure (UNKNOWN). */
export class Unknown extends AgentSessionsError {}
/** The request was malformed (INVALID_ARGUMENT). */
export class InvalidArgument extends AgentSessionsError {}
/** The call ran past its deadline (DEADLINE_EXCEEDED). */
export class DeadlineExceeded extends AgentSessionsError {}
/** The session (or harness) does not exist (NOT_FOUND). */
export class NotFound extends AgentSessionsError {}
/** The name is taken (ALREADY_EXISTS). */
export class AlreadyExists extends AgentSessionsError {}
/** The caller may not touch this session (PERMISSION_DENIED). */
export class PermissionDenied extends AgentSessionsError {}
/** A limit was hit (RESOURCE_EXHAUSTED). */
export class ResourceExhausted extends AgentSessionsError {}
/** The session's state refuses the call, e.g. an approval blocks it (FAILED_PRECONDITION). */
export class FailedPrecondition extends AgentSessionsError {}
/** A concurrent writer won: the session is busy or the expected seq moved (ABORTED). */
export class Aborted extends AgentSessionsError {}
/** A value lies outside its range (OUT_OF_RANGE). */
export class OutOfRange extends AgentSessionsError {}
/** The server does not offer this call (UNIMPLEMENTED). */
export class Unimplemented extends AgentSessionsError {}
/** The server failed, e.g. the harness failed mid-turn (INTERNAL). */
export class Internal extends AgentSessionsError {}
/** The server or a harness cannot be reached (UNAVAILABLE). */
export class Unavailable extends AgentSessionsError {}
/** Data was lost or corrupted (DATA_LOSS). */
export class DataLoss extends AgentSessionsError {}
/** No or a bad credential (UNAUTHENTICATED). */
export class Unauthenticated extends AgentSessionsError {}

type ErrorClass = new (details: string, code?: number, statusDetails?: StatusDetail[], metadata?: Headers, options?: { cause?: unknown }) => AgentSessionsError;

const BY_CODE: ReadonlyMap<number, ErrorClass> = new Map<number, ErrorClass>([
  [StatusCode.CANCELLED, Cancelled],
  [StatusCode.UNKNOWN, Unknown],
  [StatusCode.INVALID_ARGUMENT, InvalidArgument],
  [StatusCode.DEADLINE_EXCEEDED, DeadlineExceeded],
  [StatusCode.NOT_FOUND, NotFound],
  [StatusCode.ALREADY_EXISTS, AlreadyExists],
  [StatusCode.PERMISSION_DENIED, PermissionDenied],
  [StatusCode.RESOURCE_EXHAUSTED, ResourceExhausted],
  [StatusCode.FAILED_PRECONDITION, FailedPrecondition],
  [StatusCode.ABORTED, Aborted],
  [StatusCode.OUT_OF_RANGE, OutOfRange],
  [StatusCode.UNIMPLEMENTED, Unimplemented],
  [StatusCode.INTERNAL, Internal],
  [StatusCode.UNAVAILABLE, Unavailable],
  [StatusCode.DATA_LOSS, DataLoss],
  [StatusCode.UNAUTHENTICATED, Unauthenticated],
]);

/** The SDK error of code `code` (the base class for a code outside gRPC's). */
export function errorFor(code: number, details: string, statusDetails: StatusDetail[] = [], metadata: Headers = new Headers(), cause?: unknown): AgentSessionsError {
  const Class = BY_CODE.get(code) ?? AgentSessionsError;
  return new Class(details || codeName(code), code, statusDetails, metadata, { cause });
}

/** The SDK error for anything a call threw: a ConnectError keeps its code (connect's codes are
 * gRPC's numbers), an abort is CANCELLED, anything else is UNKNOWN. An SDK error passes
 * through unchanged. */
export function translate(err: unknown): AgentSessionsError {
  if (err instanceof AgentSessionsError) {
    return err;
  }
  if (err instanceof ConnectError) {
    const details = err.details.map((d) => ("desc" in d ? { type: d.desc.typeName, value: new Uint8Array() } : { type: d.type, value: d.value }));
    return errorFor(err.code, err.rawMessage, details, err.metadata, err);
  }
  if (err instanceof Error && err.name === "AbortError") {
    return errorFor(Code.Canceled, err.message, [], new Headers(), err);
  }
  return errorFor(StatusCode.UNKNOWN, err instanceof Error ? err.message : String(err), [], new Headers(), err);
}

