//! Messages API answers, whole (`message`) or streamed (events), read into the shared [`Draft`]:
//! each content block sits in the slot of its index, so the message keeps the blocks' order.

use agentsessions_api::{DeltaSink, Part, TextPart};
use serde::Deserialize;
use serde_json::{Value, json};

use super::PROVIDER;
use crate::assembly::{Block, CallDraft, Counts, Decode, Draft, Reasoning, Slot, WireError, relay};
use crate::error::{ModelError, Result};
use crate::sse::Flow;

/// Reads Messages API answers into the draft.
#[derive(Debug, Default)]
pub(crate) struct Decoder;

impl Decode for Decoder {
    type Reasoning = Thinking;
    type Answer = WireMessage;
    type Event = Event;

    const ANSWER: &'static str = "message";
    const EVENT: &'static str = "stream event";

    fn answer(message: WireMessage, draft: &mut Draft<Thinking>) -> Result<()> {
        if let Some(error) = message.error {
            return Err(error.into_model_error());
        }
        let content = message
            .content
            .ok_or_else(|| ModelError::MalformedResponse {
                detail: "message has no content".to_owned(),
            })?;
        draft.set_model(message.model.unwrap_or_default());
        for (index, block) in content.into_iter().enumerate() {
            draft.open(Slot::at(index), block.into_draft());
        }
        count(draft, message.usage);
        Ok(())
    }

    fn event(
        &mut self,
        event: Event,
        draft: &mut Draft<Thinking>,
        deltas: &dyn DeltaSink,
    ) -> Result<Flow> {
        match event {
            Event::MessageStart { message } => {
                draft.set_model(message.model.unwrap_or_default());
                count(draft, message.usage);
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => draft.open(Slot::at(index), content_block.into_draft()),
            Event::ContentBlockDelta { index, delta } => apply(draft, index, delta, deltas)?,
            Event::MessageDelta { usage } => count(draft, usage),
            Event::MessageStop => return Ok(Flow::Stop),
            Event::Error { error } => return Err(error.into_model_error()),
            Event::Other => {}
        }
        Ok(Flow::Continue)
    }
}

/// Applies a streamed `delta` to the block at `index`.
fn apply(
    draft: &mut Draft<Thinking>,
    index: usize,
    delta: WireDelta,
    deltas: &dyn DeltaSink,
) -> Result<()> {
    let slot = Slot::at(index);
    // Blocks stream one after another, so every earlier block is complete by now.
    let part = draft.part_index(slot);
    let block = draft
        .block_mut(slot)
        .ok_or_else(|| ModelError::MalformedResponse {
            detail: format!("delta for content block {index}, which never started"),
        })?;
    match (block, delta) {
        (Block::Text(text), WireDelta::TextDelta { text: piece }) => {
            relay(text, &piece, part, deltas);
        }
        (Block::Call(call), WireDelta::InputJsonDelta { partial_json }) => {
            call.arguments.push_str(&partial_json);
        }
        (
            Block::Reasoning(Thinking::Signed { thinking, .. }),
            WireDelta::ThinkingDelta { thinking: piece },
        ) => thinking.push_str(&piece),
        (
            Block::Reasoning(Thinking::Signed { signature, .. }),
            WireDelta::SignatureDelta { signature: piece },
        ) => signature.push_str(&piece),
        (_, WireDelta::Other) | (Block::Other, _) => {}
        _ => {
            return Err(ModelError::MalformedResponse {
                detail: format!("delta does not fit content block {index}"),
            });
        }
    }
    Ok(())
}

/// Takes the counts a usage object carries; a stream's later counts replace earlier ones.
fn count(draft: &mut Draft<Thinking>, usage: Option<WireUsage>) {
    if let Some(usage) = usage {
        draft.count(Counts {
            input: usage.input_tokens,
            output: usage.output_tokens,
            reasoning: None,
            cached_input: usage.cache_read_input_tokens,
        });
    }
}

/// A `thinking` or `redacted_thinking` block, sent back as the block's JSON.
#[derive(Debug)]
pub(crate) enum Thinking {
    Signed { thinking: String, signature: String },
    Redacted { data: String },
}

impl Reasoning for Thinking {
    const PROVIDER: &'static str = PROVIDER;

    fn makes_part(&self) -> bool {
        true
    }

    fn seal(self) -> (Vec<u8>, Vec<Part>) {
        let (block, summary) = match self {
            Self::Signed {
                thinking,
                signature,
            } => {
                let block = json!({
                    "type": "thinking",
                    "thinking": thinking,
                    "signature": signature,
                });
                let summary = if thinking.is_empty() {
                    Vec::new()
                } else {
                    vec![Part::Text(TextPart { text: thinking })]
                };
                (block, summary)
            }
            Self::Redacted { data } => (
                json!({"type": "redacted_thinking", "data": data}),
                Vec::new(),
            ),
        };
        (block.to_string().into_bytes(), summary)
    }
}

impl WireBlock {
    fn into_draft(self) -> Block<Thinking> {
        match self {
            Self::Text { text } => Block::Text(text),
            Self::Thinking {
                thinking,
                signature,
            } => Block::Reasoning(Thinking::Signed {
                thinking,
                signature,
            }),
            Self::RedactedThinking { data } => Block::Reasoning(Thinking::Redacted { data }),
            Self::ToolUse { id, name, input } => {
                // A stream announces `input: {}` and sends the real input as deltas.
                let arguments = match input {
                    Value::Null => String::new(),
                    Value::Object(map) if map.is_empty() => String::new(),
                    other => other.to_string(),
                };
                Block::Call(CallDraft {
                    id,
                    name: Some(name),
                    arguments,
                })
            }
            Self::Other => Block::Other,
        }
    }
}

/// A non-streaming answer (the fields read; the rest is ignored).
#[derive(Deserialize)]
pub(crate) struct WireMessage {
    model: Option<String>,
    content: Option<Vec<WireBlock>>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

/// A content block, whole or as a stream announces it.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Server-tool blocks and anything newer: not ours to interpret.
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Clone, Copy)]
pub(crate) struct WireUsage {
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cache_read_input_tokens: Option<i64>,
}

/// One streamed event's data.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta,
    },
    MessageDelta {
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: WireError,
    },
    /// `ping`, `content_block_stop` and event types added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
pub(crate) struct StartMessage {
    model: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum WireDelta {
    TextDelta {
        #[serde(default)]
        text: String,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    ThinkingDelta {
        #[serde(default)]
        thinking: String,
    },
    SignatureDelta {
        #[serde(default)]
        signature: String,
    },
    #[serde(other)]
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ignore;

    impl DeltaSink for Ignore {
        fn chunk(&self, _part_index: i32, _text: &str) {}
    }

    // A delta goes to a block that started and is of its kind; deltas and blocks this dialect
    // does not know are passed over.
    #[test]
    fn deltas_must_fit_a_started_block() {
        let delta = |json: &str| serde_json::from_str::<WireDelta>(json).unwrap();
        let mut draft = Draft::<Thinking>::default();
        draft.open(Slot::at(0), Block::Text(String::new()));
        draft.open(
            Slot::at(1),
            Block::Reasoning(Thinking::Redacted { data: "x".into() }),
        );
        draft.open(Slot::at(2), Block::Other);
        let text = r#"{"type":"text_delta","text":"hi"}"#;
        let thinking = r#"{"type":"thinking_delta","thinking":"t"}"#;
        apply(&mut draft, 0, delta(text), &Ignore).unwrap();
        apply(
            &mut draft,
            0,
            delta(r#"{"type":"citations_delta"}"#),
            &Ignore,
        )
        .unwrap();
        apply(&mut draft, 2, delta(text), &Ignore).unwrap();
        for (index, json, detail) in [
            (3, text, "delta for content block 3, which never started"),
            (0, thinking, "delta does not fit content block 0"),
            (1, thinking, "delta does not fit content block 1"),
        ] {
            assert_eq!(
                apply(&mut draft, index, delta(json), &Ignore),
                Err(ModelError::MalformedResponse {
                    detail: detail.to_owned()
                })
            );
        }
    }

    // The stream's event types parse, unknown ones included.
    #[test]
    fn events_parse() {
        for (data, ok) in [
            (r#"{"type":"message_stop"}"#, true),
            (r#"{"type":"ping"}"#, true),
            (r#"{"type":"content_block_stop","index":0}"#, true),
            (r#"{"type":"brand_new","x":1}"#, true),
            (
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta"}}"#,
                true,
            ),
            (r#"{"type":"content_block_start"}"#, false),
        ] {
            assert_eq!(serde_json::from_str::<Event>(data).is_ok(), ok, "{data}");
        }
    }
}
