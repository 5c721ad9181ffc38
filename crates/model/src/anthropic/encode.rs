//! The Messages API request: system text, turns, tools and params as Anthropic's JSON body.

use agentsessions_api::{
    Message, ModelRequest, Part, ReasoningPart, ToolChoice, ToolChoiceMode, ToolDefinition,
};
use serde_json::{Map, Value, json};

use super::PROVIDER;
use crate::content::{inline_opaque, input_schema, kind, unsupported};
use crate::error::{ModelError, Result};
use crate::params::{self, Kind, Rules};
use crate::tool_output::{self, Piece};

/// The keys only this dialect types or reserves; [`params::SHARED`] and [`params::RESERVED`]
/// hold the common ones.
const PARAMS: Rules = Rules {
    typed: &[
        ("top_k", Kind::Integer),
        ("thinking_budget_tokens", Kind::Integer),
        ("stop_sequences", Kind::Json),
        ("thinking", Kind::Json),
    ],
    reserved: &["system"],
};

/// How a request is encoded, besides the request itself.
#[derive(Debug, Clone, Copy)]
pub(super) struct Encoding {
    /// `max_tokens` when the params give none.
    pub(super) max_tokens: u32,
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
        max_tokens,
        images,
        stream,
    } = encoding;
    let mut body = Map::new();
    params::apply(request.params.as_ref(), &PARAMS, &mut body)?;
    if let Some(budget) = body.remove("thinking_budget_tokens") {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    body.entry("max_tokens")
        .or_insert_with(|| max_tokens.into());
    body.insert("model".into(), model.into());
    let (system, messages) = messages(&request.messages, images)?;
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        body.insert("tools".into(), tools(&request.tools));
    }
    if let Some(choice) = request.tool_choice.as_ref().and_then(tool_choice) {
        body.insert("tool_choice".into(), choice);
    }
    if stream {
        body.insert("stream".into(), true.into());
    }
    Ok(Value::Object(body).to_string().into_bytes())
}

/// The `system` blocks and the `messages` turns.
fn messages(messages: &[Message], images: bool) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut system = Vec::new();
    let mut turns = Vec::new();
    for message in messages {
        let role = message.role.as_str();
        if role == "system" {
            system.extend(system_blocks(message)?);
            continue;
        }
        let assistant = role == "assistant";
        let mut blocks = Vec::new();
        let mut results = Vec::new();
        for part in &message.parts {
            match part {
                Part::Text(t) if t.text.is_empty() => {}
                Part::Text(t) => blocks.push(json!({"type": "text", "text": t.text})),
                Part::Reasoning(r) if r.provider == PROVIDER => {
                    if !assistant {
                        return Err(unsupported(role, "reasoning"));
                    }
                    blocks.push(thinking_block(r)?);
                }
                Part::Reasoning(_) | Part::Empty => {}
                Part::ToolCall(call) => {
                    if !assistant {
                        return Err(unsupported(role, "tool call"));
                    }
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.tool,
                        "input": call.args.clone().unwrap_or_default(),
                    }));
                }
                Part::ToolResult(result) => {
                    let mut block = Map::new();
                    block.insert("type".into(), "tool_result".into());
                    block.insert("tool_use_id".into(), result.id.clone().into());
                    if let Some(content) = tool_result_content(&tool_output::pieces(result, images))
                    {
                        block.insert("content".into(), content);
                    }
                    if result.is_error {
                        block.insert("is_error".into(), true.into());
                    }
                    results.push(Value::Object(block));
                }
                Part::File(_) => return Err(unsupported(role, "file")),
                Part::Data(_) => return Err(unsupported(role, "data")),
            }
        }
        if assistant {
            // Results of an assistant's own calls go back as the user turn that follows it.
            if !blocks.is_empty() {
                turns.push(json!({"role": "assistant", "content": blocks}));
            }
            if !results.is_empty() {
                turns.push(json!({"role": "user", "content": results}));
            }
        } else {
            // The API wants tool results before anything else in a user turn.
            results.append(&mut blocks);
            if !results.is_empty() {
                turns.push(json!({"role": "user", "content": results}));
            }
        }
    }
    Ok((system, turns))
}

/// A `tool_result`'s content (extensions §10): a string when the result is only text (none when
/// it is empty), else its `text` and `image` blocks in order.
fn tool_result_content(pieces: &[Piece<'_>]) -> Option<Value> {
    match pieces {
        [] => None,
        [Piece::Text(text)] => Some(text.clone().into()),
        pieces => Some(Value::Array(
            pieces
                .iter()
                .map(|piece| match piece {
                    Piece::Text(text) => json!({"type": "text", "text": text}),
                    Piece::Image(image) => json!({
                        "type": "image",
                        "source": {"type": "base64", "media_type": image.mime, "data": image.base64()},
                    }),
                })
                .collect(),
        )),
    }
}

fn system_blocks(message: &Message) -> Result<Vec<Value>> {
    let mut blocks = Vec::new();
    for part in &message.parts {
        match part {
            Part::Text(t) if t.text.is_empty() => {}
            Part::Text(t) => blocks.push(json!({"type": "text", "text": t.text})),
            Part::Empty | Part::Reasoning(_) => {}
            Part::File(_) => return Err(unsupported("system", "file")),
            Part::Data(_) => return Err(unsupported("system", "data")),
            Part::ToolCall(_) => return Err(unsupported("system", "tool call")),
            Part::ToolResult(_) => return Err(unsupported("system", "tool result")),
        }
    }
    Ok(blocks)
}

/// The block a reasoning part came from, checked to be one the API takes back.
fn thinking_block(part: &ReasoningPart) -> Result<Value> {
    let invalid = |detail: String| ModelError::InvalidReasoning { detail };
    let block: Value = serde_json::from_slice(inline_opaque(part)?)
        .map_err(|err| invalid(format!("anthropic reasoning bytes are not json: {err}")))?;
    match block.get("type").and_then(Value::as_str) {
        Some("thinking" | "redacted_thinking") => Ok(block),
        _ => Err(invalid(format!(
            "anthropic reasoning bytes hold {}, not a thinking block",
            kind(&block)
        ))),
    }
}

fn tools(tools: &[ToolDefinition]) -> Value {
    let tools = tools.iter().map(|tool| {
        let mut entry = Map::new();
        entry.insert("name".into(), tool.name.clone().into());
        if !tool.description.is_empty() {
            entry.insert("description".into(), tool.description.clone().into());
        }
        entry.insert("input_schema".into(), input_schema(tool));
        Value::Object(entry)
    });
    Value::Array(tools.collect())
}

fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    Some(match choice.mode {
        ToolChoiceMode::Unspecified => return None,
        ToolChoiceMode::Auto => json!({"type": "auto"}),
        ToolChoiceMode::None => json!({"type": "none"}),
        ToolChoiceMode::Required if choice.name.is_empty() => json!({"type": "any"}),
        ToolChoiceMode::Required => json!({"type": "tool", "name": choice.name}),
    })
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{TextPart, ToolResult};

    use super::*;

    fn encoding(images: bool) -> Encoding {
        Encoding {
            max_tokens: 4096,
            images,
            stream: false,
        }
    }

    fn body_json(request: &ModelRequest) -> Value {
        serde_json::from_slice(&request_body(request, "claude", encoding(true)).unwrap()).unwrap()
    }

    // brief: system → top-level system; max_tokens default; params typed.
    #[test]
    fn system_and_params() {
        let request = ModelRequest {
            messages: vec![
                Message::text_message("system", "be brief"),
                Message::text_message("", "hi"),
            ],
            params: Some(
                [
                    ("temperature".to_owned(), "0.2".to_owned()),
                    ("thinking_budget_tokens".to_owned(), "1024".to_owned()),
                ]
                .into(),
            ),
            ..ModelRequest::default()
        };
        assert_eq!(
            body_json(&request),
            json!({
                "model": "claude",
                "max_tokens": 4096,
                "temperature": 0.2,
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "system": [{"type": "text", "text": "be brief"}],
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            })
        );
    }

    // Anthropic: tool_result blocks come first in a user turn; an error result is flagged.
    #[test]
    fn tool_results_lead_the_user_turn() {
        let request = ModelRequest {
            messages: vec![Message {
                role: "user".into(),
                parts: vec![
                    Part::Text(TextPart {
                        text: "next".into(),
                    }),
                    Part::ToolResult(ToolResult {
                        id: "toolu_1".into(),
                        is_error: true,
                        error: "boom".into(),
                        ..ToolResult::default()
                    }),
                ],
            }],
            ..ModelRequest::default()
        };
        assert_eq!(
            body_json(&request)["messages"],
            json!([{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": true},
                {"type": "text", "text": "next"},
            ]}])
        );
    }

    fn image_result() -> ModelRequest {
        let text = |t: &str| Part::Text(TextPart { text: t.into() });
        ModelRequest {
            messages: vec![Message {
                role: "tool".into(),
                parts: vec![Part::ToolResult(ToolResult {
                    id: "toolu_1".into(),
                    content: vec![
                        text("Here it is:"),
                        Part::File(agentsessions_api::FilePart {
                            mime: "image/png".into(),
                            bytes: b"png!".to_vec(),
                            ..agentsessions_api::FilePart::default()
                        }),
                        text("The MCP logo."),
                    ],
                    ..ToolResult::default()
                })],
            }],
            ..ModelRequest::default()
        }
    }

    // extensions §10: images go inside the tool_result as image blocks, in content order; a
    // text-only model gets the text with a placeholder.
    #[test]
    fn tool_result_images_are_image_blocks() {
        assert_eq!(
            body_json(&image_result())["messages"],
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
            "content": [
                {"type": "text", "text": "Here it is:"},
                {"type": "image", "source":
                    {"type": "base64", "media_type": "image/png", "data": "cG5nIQ=="}},
                {"type": "text", "text": "The MCP logo."},
            ]}]}])
        );
        let text_only: Value = serde_json::from_slice(
            &request_body(&image_result(), "claude", encoding(false)).unwrap(),
        )
        .unwrap();
        assert_eq!(
            text_only["messages"][0]["content"][0]["content"],
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
        assert_eq!(tool_choice(&choice(ToolChoiceMode::Unspecified, "x")), None);
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Auto, "")),
            Some(json!({"type": "auto"}))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::None, "")),
            Some(json!({"type": "none"}))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Required, "")),
            Some(json!({"type": "any"}))
        );
        assert_eq!(
            tool_choice(&choice(ToolChoiceMode::Required, "f")),
            Some(json!({"type": "tool", "name": "f"}))
        );
    }

    // brief: reasoning bytes that are not a thinking block are refused, not sent.
    #[test]
    fn foreign_or_broken_reasoning() {
        let reasoning = |provider: &str, opaque: &[u8]| Message {
            role: "assistant".into(),
            parts: vec![Part::Reasoning(ReasoningPart {
                provider: provider.into(),
                opaque: opaque.to_vec(),
                ..ReasoningPart::default()
            })],
        };
        let request = |message| ModelRequest {
            messages: vec![message],
            ..ModelRequest::default()
        };
        // Another provider's reasoning is dropped, leaving an empty turn that is left out.
        assert_eq!(
            body_json(&request(reasoning("openai", b"x")))["messages"],
            json!([])
        );
        let err =
            request_body(&request(reasoning(PROVIDER, b"[1]")), "c", encoding(true)).unwrap_err();
        assert!(matches!(err, ModelError::InvalidReasoning { .. }), "{err}");
    }
}
