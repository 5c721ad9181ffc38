/**
 * agentsessions for TypeScript: the Sessions client ({@link Client}), the hash-chain verifier
 * ({@link verifyRecords}), the errors, and the generated protobuf types (`pb`). The harness SDK
 * is `agentsessions/harness`; the agent adapters are `agentsessions/adapters/openai-agents`
 * and `agentsessions/adapters/langgraph`.
 */
export { Client, ExecStream, Paged, PAGE_RECORDS, RegistryClient } from "./client.js";
export type { CallOptions, ClientOptions, Decided, DecisionOptions, ExecItem, ExecOptions, Int64, SessionSpec, TurnError, TurnResult, WatchItem } from "./client.js";
export { CanonicalError, canonicalEvent, canonicalMessage, canonicalRecord, contentHash, eventJson, jcs, verifyRecords } from "./canonical.js";
export type { VerifyFailure, VerifyReport } from "./canonical.js";
export * from "./errors.js";
export { messageText, textMessage, toMessages } from "./messages.js";
export type { Input } from "./messages.js";
export type { Pem, Tls } from "./transport.js";
export * as pb from "./pb.js";
