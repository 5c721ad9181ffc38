/** Building and reading messages: text messages, exec inputs, JSON structs. */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { MessageSchema, type Message } from "./gen/common_pb.js";

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
