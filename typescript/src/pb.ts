/** The generated messages, enums and services of `agentsessions.v1` (crates/wire/proto). */
export * from "./gen/common_pb.js";
export * from "./gen/harness_pb.js";
export * from "./gen/harness_registry_pb.js";
export * from "./gen/session_pb.js";
