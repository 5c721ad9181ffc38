/** Building and reading messages: text messages, exec inputs, JSON structs. */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { jcs } from "./canonical.js";
import { MessageSchema, type Message, type ToolResult } from "./gen/common_pb.js";

/** An exec input: a string is a user text message. */
export type Input = string | Message;

/** A message with one text part. */
export function textMessage(text: string, role = "user"): Message {
  return create(MessageSchema, { role, parts: [{ part: { case: "text", value: { text } } }] });
}

/** Exec inputs as messages: strings become user text messages, messages pass through. */
export function toMessages(inputs: Input | readonly Input[] | undefined): Message[] {
  if (inputs === undefined) {
    return [];
  }
  const list = typeof inputs === "string" || !Array.isArray(inputs) ? [inputs as Input] : inputs;
  return list.map((input) => (typeof input === "string" ? textMessage(input) : input));
}

/** The concatenated text parts of a message. */
export function messageText(message: Message | undefined): string {
  if (message === undefined) {
    return "";
  }
  return message.parts.map((p) => (p.part.case === "text" ? p.part.value.text : "")).join("");
}

export type { JsonObject };

/** The text a model sees for a tool result: its text parts, else its JSON output (in
 * canonical key order, so a replay sees the same text), else its error. */
export function toolResultText(result: ToolResult): string {
  const text = result.content.map((p) => (p.part.case === "text" ? p.part.value.text : "")).join("");
  if (text !== "") return text;
  if (result.output !== undefined) return jcs(result.output);
  return result.isError ? `error: ${result.error}` : "";
}
