//! The chat completions request: history, tools and params as OpenAI's JSON body.

use agentsessions_api::{Message, ModelRequest, Part, ToolChoice, ToolChoiceMode, ToolDefinition};
use serde_json::{Map, Value, json};

use super::PROVIDER;
use crate::content::{inline_opaque, input_schema, unsupported};
use crate::error::{ModelError, Result};
use crate::params::{self, Kind, Rules};
use crate::tool_output;

/// The keys only this dialect types or reserves; [`params::SHARED`] and [`params::RESERVED`]
/// hold the common ones.
const PARAMS: Rules = Rules {
    typed: &[
        ("frequency_penalty", Kind::Float),
        ("presence_penalty", Kind::Float),
        ("max_completion_tokens", Kind::Integer),
        ("seed", Kind::Integer),
        ("top_logprobs", Kind::Integer),
        ("logprobs", Kind::Bool),
        ("parallel_tool_calls", Kind::Bool),
        ("store", Kind::Bool),
        ("response_format", Kind::Json),
        ("logit_bias", Kind::Json),
    ],
    reserved: &["stream_options", "n"],
};

/// How a request is encoded, besides the request itself.
#[derive(Debug, Clone, Copy)]
pub(super) struct Encoding {
    /// Send this provider's reasoning back as `reasoning_content`.
    pub(super) send_reasoning: bool,
    /// The model takes images (extensions §10); else each is described in text.
    pub(super) images: bool,
    /// Ask for a stream.
    pub(super) stream: bool,
}

/// The JSON body for `request`.
pub(super) fn request_body(
    request: &ModelRequest,
    model: &str,
    encoding: Encoding,
) -> Result<Vec<u8>> {
    let Encoding {
        send_reasoning,
        images,
        stream,
    } = encoding;
    let mut body = Map::new();
    params::apply(request.params.as_ref(), &PARAMS, &mut body)?;
    body.insert("model".into(), model.into());
    body.insert(
        "messages".into(),
        Value::Array(messages(&request.messages, send_reasoning, images)?),
    );
    if !request.tools.is_empty() {
        body.insert("tools".into(), tools(&request.tools));
    }
    if let Some(choice) = request.tool_choice.as_ref().and_then(tool_choice) {
        body.insert("tool_choice".into(), choice);
    }
    if stream {
        body.insert("stream".into(), true.into());
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(body).to_string().into_bytes())
}

fn messages(messages: &[Message], send_reasoning: bool, images: bool) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for message in messages {
        let role = if message.role.is_empty() {
            "user"
        } else {
            message.role.as_str()
        };
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls = Vec::new();
        let mut results = Vec::new();
        let mut shown = Vec::new();
        for part in &message.parts {
            match part {
                Part::Text(t) => text.push_str(&t.text),
                Part::Reasoning(r) if send_reasoning && r.provider == PROVIDER => {
                    let bytes = inline_opaque(r)?;
                    let chunk =
                        std::str::from_utf8(bytes).map_err(|_| ModelError::InvalidReasoning {
                            detail: "openai reasoning bytes are not utf-8".to_owned(),
                        })?;
                    reasoning.push_str(chunk);
                }
                // Opaque reasoning is for the provider that made it, and only when asked.
                Part::Reasoning(_) | Part::Empty => {}
                Part::ToolCall(call) => {
                    if role != "assistant" {
                        return Err(unsupported(role, "tool call"));
                    }
                    let args = Value::Object(call.args.clone().unwrap_or_default());
                    calls.push(json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.tool, "arguments": args.to_string()},
                    }));
                }
                Part::ToolResult(result) => {
                    let pieces = tool_output::pieces(result, images);
                    let (text, pictures) = tool_output::text_and_images(&pieces);
                    results.push(json!({
                        "role": "tool",
                        "tool_call_id": result.id,
                        "content": text,
                    }));
                    shown.extend(images_of_call(&result.id, &pictures));
                }
                Part::File(_) => return Err(unsupported(role, "file")),
                Part::Data(_) => return Err(unsupported(role, "data")),
            }
        }
        let has_head =
            results.is_empty() || !text.is_empty() || !calls.is_empty() || !reasoning.is_empty();
        let head = has_head.then(|| {
            // Text beside tool results is the user's; OpenAI has no text-only tool message.
            let head_role = if results.is_empty() || role != "tool" {
                role
            } else {
                "user"
            };
            let mut head = Map::new();
            head.insert("role".into(), head_role.into());
            let content = if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                Value::String(std::mem::take(&mut text))
            };
            head.insert("content".into(), content);
            if !calls.is_empty() {
                head.insert(
                    "tool_calls".into(),
                    Value::Array(std::mem::take(&mut calls)),
                );
            }
            if !reasoning.is_empty() {
                head.insert("reasoning_content".into(), reasoning.clone().into());
            }
            Value::Object(head)
        });
        // A tool message carries text only: the images of this message's results follow all of
        // its tool messages (which must stay together) as one user message.
        if !shown.is_empty() {
            results.push(json!({"role": "user", "content": shown}));
        }
        // Tool messages must directly follow the assistant message that called them, and come
        // before any new user text.
        let calls_first = head.as_ref().is_some_and(|h| h.get("tool_calls").is_some());
        match head {
            Some(head) if calls_first => {
                out.push(head);
                out.append(&mut results);
            }
            Some(head) => {
                out.append(&mut results);
                out.push(head);
            }
            None => out.append(&mut results),
        }
    }
    Ok(out)
}

/// The user-message content parts that show call `id`'s images: a text part naming the call,
/// then each image as a data URL (extensions §10).
fn images_of_call(id: &str, images: &[&tool_output::Image<'_>]) -> Vec<Value> {
    if images.is_empty() {
        return Vec::new();
    }
    let mut parts = vec![json!({"type": "text", "text": format!("Images from tool call {id}:")})];
    parts.extend(images.iter().map(|image| {
        json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{};base64,{}", image.mime, image.base64())},
        })
    }));
    parts
}

fn tools(tools: &[ToolDefinition]) -> Value {
    let tools = tools.iter().map(|tool| {
        let mut function = Map::new();
        function.insert("name".into(), tool.name.clone().into());
        if !tool.description.is_empty() {
            function.insert("description".into(), tool.description.clone().into());
        }
        function.insert("parameters".into(), input_schema(tool));
        json!({"type": "function", "function": function})
    });
    Value::Array(tools.collect())
}

fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    Some(match choice.mode {
        ToolChoiceMode::Unspecified => return None,
        ToolChoiceMode::Auto => "auto".into(),
        ToolChoiceMode::None => "none".into(),
        ToolChoiceMode::Required if choice.name.is_empty() => "required".into(),
        ToolChoiceMode::Required => {
            json!({"type": "function", "function": {"name": choice.name}})
        }
    })
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{ReasoningPart, TextPart, ToolResult};

    use super::*;

    fn body_json(request: &ModelRequest, send_reasoning: bool) -> Value {
        let encoding = Encoding {
            send_reasoning,
            images: true,
            stream: false,
        };
        let bytes = request_body(request, "m", encoding).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    // semantics §10.6: empty role → user; text parts concatenated; reasoning dropped by default.
    #[test]
    fn messages_map_roles_text_and_drop_reasoning() {
        let mut assistant = Message::text_message("assistant", "a");
        assistant.parts.insert(
            0,
            Part::Reasoning(ReasoningPart {
                provider: PROVIDER.into(),
                opaque: b"thought".to_vec(),
                ..ReasoningPart::default()
            }),
        );
        let mut user = Message::text_message("", "x");
        user.parts.push(Part::Text(TextPart { text: "y".into() }));
        let request = ModelRequest {
            messages: vec![user, assistant],
            ..ModelRequest::default()
        };
        assert_eq!(
            body_json(&request, false)["messages"],
            json!([{"role": "user", "content": "xy"}, {"role": "assistant", "content": "a"}])
        );
        assert_eq!(
            body_json(&request, true)["messages"][1]["reasoning_content"],
            "thought"
        );
    }

    // brief: file and data parts are refused, not silently dropped.
    #[test]
    fn unsupported_parts_are_refused() {
        let request = ModelRequest {
            messages: vec![Message {
                role: "user".into(),
                parts: vec![Part::Data(Map::new())],
            }],
            ..ModelRequest::default()
        };
        let encoding = Encoding {
            send_reasoning: false,
            images: true,
            stream: false,
        };
        let err = request_body(&request, "m", encoding).unwrap_err();
        assert_eq!(
            err.status_code(),
            agentsessions_api::StatusCode::InvalidArgument
        );
    }

    // brief: tool results become tool messages; text beside them follows as a user message.
    #[test]
    fn tool_results_precede_user_text() {
        let request = ModelRequest {
            messages: vec![Message {
                role: "tool".into(),
                parts: vec![
                    Part::Text(TextPart {
                        text: "and now?".into(),
                    }),
                    Part::ToolResult(ToolResult {
                        id: "c1".into(),
                        content: vec![Part::Text(TextPart { text: "ok".into() })],
                        ..ToolResult::default()
                    }),
                ],
            }],
            ..ModelRequest::default()
        };
        assert_eq!(
            body_json(&request, false)["messages"],
            json!([
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "user", "content": "and now?"},
            ])
        );
    }

    fn image_round() -> ModelRequest {
        let png = Part::File(agentsessions_api::FilePart {
            mime: "image/png".into(),
            bytes: b"png!".to_vec(),
            ..agentsessions_api::FilePart::default()
        });
        let text = |t: &str| Part::Text(TextPart { text: t.into() });
        ModelRequest {
            messages: vec![
                Message {
                    role: "assistant".into(),
                    parts: vec![
                        Part::ToolCall(agentsessions_api::ToolCall {
                            id: "c1".into(),
                            tool: "img".into(),
                            ..agentsessions_api::ToolCall::default()
                        }),
                        Part::ToolCall(agentsessions_api::ToolCall {
                            id: "c2".into(),
                            tool: "echo".into(),
                            ..agentsessions_api::ToolCall::default()
                        }),
                    ],
                },
                Message {
                    role: "tool".into(),
                    parts: vec![
                        Part::ToolResult(ToolResult {
                            id: "c1".into(),
                            content: vec![text("Here it is:"), png, text("The MCP logo.")],
                            ..ToolResult::default()
                        }),
                        Part::ToolResult(ToolResult {
                            id: "c2".into(),
                            content: vec![text("a"), text("b")],
                            ..ToolResult::default()
                        }),
                    ],
                },
            ],
            ..ModelRequest::default()
        }
    }

    // extensions §10: a tool message carries text, each image standing in by number; the
    // images follow all tool messages of the answer in one user message naming their call.
    #[test]
    fn tool_result_images_follow_as_a_user_message() {
        let messages = body_json(&image_round(), false)["messages"].clone();
        assert_eq!(
            messages.as_array().unwrap()[1..],
            [
                json!({"role": "tool", "tool_call_id": "c1", "content":
                    "Here it is:\n[image 1: image/png, 4 bytes, in the next user message]\nThe MCP logo."}),
                json!({"role": "tool", "tool_call_id": "c2", "content": "a\nb"}),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "Images from tool call c1:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,cG5nIQ=="}},
                ]}),
            ]
        );
    }

    // extensions §10: a text-only model gets a placeholder and no image message.
    #[test]
    fn a_text_only_model_gets_a_placeholder() {
        let encoding = Encoding {
            send_reasoning: false,
            images: false,
            stream: false,
        };
        let body: Value =
            serde_json::from_slice(&request_body(&image_round(), "m", encoding).unwrap()).unwrap();
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert_eq!(
            messages[1]["content"],
            "Here it is:\n[image image/png, 4 bytes: not shown, this model takes text only]\nThe \
             MCP logo."
        );
    }

    #[test]
    fn tool_choice_modes() {
        let choice = |mode, name: &str| ToolChoice {
            mode,
            name: name.into(),
        };
        assert_eq!(tool_choice(&choice(ToolChoiceMode::Unspecified, "")), None);
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Auto, "")),
            Some(json!("auto"))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::None, "")),
            Some(json!("none"))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Required, "")),
            Some(json!("required"))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Required, "f")),
            Some(json!({"type": "function", "function": {"name": "f"}}))
        );
    }
}
