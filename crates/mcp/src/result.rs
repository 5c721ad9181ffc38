//! Turning an MCP `tools/call` answer (or the lack of one) into the host's [`ToolResult`].

use agentsessions_api::{FilePart, JsonObject, Part, TextPart, ToolResult};
use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::ledger::StoredOutcome;

/// An error result the model sees (the call was refused, failed or has no known outcome).
pub(crate) fn error_result(text: impl Into<String>) -> ToolResult {
    let text = text.into();
    ToolResult {
        is_error: true,
        content: vec![Part::Text(TextPart { text: text.clone() })],
        error: text,
        ..ToolResult::default()
    }
}

/// The result for a stored outcome.
pub(crate) fn from_outcome(outcome: &StoredOutcome) -> ToolResult {
    match outcome {
        StoredOutcome::Answered(answer) => from_answer(answer),
        StoredOutcome::Unanswered(text) => error_result(text.clone()),
    }
}

/// Maps the server's answer: content blocks to parts, structured content to `output` (a
/// non-object value is wrapped as `{"result": value}`), `isError` to `is_error` with the text
/// of the answer as `error`.
pub(crate) fn from_answer(answer: &CallToolResult) -> ToolResult {
    let content: Vec<Part> = answer.content.iter().map(part).collect();
    let output = answer.structured_content.as_ref().map(|value| match value {
        Value::Object(object) => object.clone(),
        other => JsonObject::from_iter([("result".to_owned(), other.clone())]),
    });
    let is_error = answer.is_error.unwrap_or(false);
    let error = if is_error {
        let text: Vec<&str> = answer
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect();
        if text.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            text.join("\n")
        }
    } else {
        String::new()
    };
    ToolResult {
        output,
        is_error,
        error,
        content,
        ..ToolResult::default()
    }
}

fn part(block: &ContentBlock) -> Part {
    match block {
        // A block with annotations or `_meta` is kept whole, as JSON: a text or file part has no
        // place for them, and the journal keeps what the server returned (extensions §10).
        ContentBlock::Text(text) if text.annotations.is_none() && text.meta.is_none() => {
            Part::Text(TextPart {
                text: text.text.clone(),
            })
        }
        ContentBlock::Image(image) if image.annotations.is_none() && image.meta.is_none() => {
            media(&image.data, &image.mime_type, block)
        }
        ContentBlock::Audio(audio) if audio.annotations.is_none() && audio.meta.is_none() => {
            media(&audio.data, &audio.mime_type, block)
        }
        // Resources, links, annotated blocks and any kind a later protocol adds: kept whole.
        _ => as_data(block),
    }
}

/// Inline media as a file part; base64 that does not decode is kept as data, never dropped.
fn media(data: &str, mime: &str, block: &ContentBlock) -> Part {
    match base64::engine::general_purpose::STANDARD.decode(data) {
        Ok(bytes) => Part::File(FilePart {
            mime: mime.to_owned(),
            bytes,
            ..FilePart::default()
        }),
        Err(_) => as_data(block),
    }
}

fn as_data(block: &ContentBlock) -> Part {
    match serde_json::to_value(block) {
        Ok(Value::Object(object)) => Part::Data(object),
        Ok(other) => Part::Data(JsonObject::from_iter([("content".to_owned(), other)])),
        Err(e) => Part::Text(TextPart {
            text: format!("unrepresentable content block: {e}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_and_structured_output_are_kept() {
        let mut answer = CallToolResult::success(vec![
            ContentBlock::text("3"),
            ContentBlock::image("aGk=", "image/png"),
        ]);
        answer.structured_content = Some(serde_json::json!({"sum": 3}));
        let result = from_answer(&answer);
        assert!(!result.is_error);
        assert_eq!(result.output.unwrap()["sum"], 3);
        assert_eq!(result.content[0], Part::Text(TextPart { text: "3".into() }));
        assert!(
            matches!(&result.content[1], Part::File(f) if f.bytes == b"hi" && f.mime == "image/png")
        );
    }

    // extensions §10: annotations stay in the journal, with the block they annotate.
    #[test]
    fn annotated_blocks_are_kept_whole() {
        let annotations = rmcp::model::Annotations::default().with_priority(0.5);
        let mut text = rmcp::model::TextContent::new("Error: Operation failed");
        text.annotations = Some(annotations);
        let result = from_answer(&CallToolResult::success(vec![ContentBlock::Text(text)]));
        let Part::Data(data) = &result.content[0] else {
            panic!("kept whole: {:?}", result.content)
        };
        assert_eq!(data["type"], "text");
        assert_eq!(data["text"], "Error: Operation failed");
        assert_eq!(data["annotations"]["priority"], 0.5);
    }

    #[test]
    fn an_error_answer_carries_its_text() {
        let result = from_answer(&CallToolResult::error(vec![ContentBlock::text("nope")]));
        assert!(result.is_error);
        assert_eq!(result.error, "nope");
        let scalar = {
            let mut answer = CallToolResult::success(vec![]);
            answer.structured_content = Some(serde_json::json!(7));
            from_answer(&answer)
        };
        assert_eq!(scalar.output.unwrap()["result"], 7);
    }
}
