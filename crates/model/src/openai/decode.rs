//! Chat completions answers, whole (`chat.completion`) or streamed (`chat.completion.chunk`s),
//! read into the shared [`Draft`]: the reasoning, the text and the tool calls each have a lane,
//! so the message holds them in that order.

use agentsessions_api::{DeltaSink, Part};
use serde::Deserialize;

use super::PROVIDER;
use crate::assembly::{Block, CallDraft, Counts, Decode, Draft, Reasoning, Slot, WireError, relay};
use crate::error::{ModelError, Result};
use crate::sse::Flow;

/// Where `reasoning_content` goes: first.
const REASONING: Slot = Slot::new(0, 0);
/// Where `content` goes: after the reasoning.
const TEXT: Slot = Slot::new(1, 0);
/// The lane of the tool calls, by their index: last.
const CALLS: u8 = 2;

/// Reads chat completions into the draft; one per streamed answer.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// Whether a chunk carried a choice.
    saw_choice: bool,
}

impl Decode for Decoder {
    type Reasoning = ReasoningContent;
    type Answer = Completion;
    type Event = Chunk;

    const ANSWER: &'static str = "chat completion";
    const EVENT: &'static str = "stream chunk";
    const END: Option<&'static str> = Some("[DONE]");

    fn answer(completion: Completion, draft: &mut Draft<ReasoningContent>) -> Result<()> {
        let choices = completion.choices.unwrap_or_default();
        let Some(choice) = choices.into_iter().next() else {
            return Err(completion
                .error
                .map_or(ModelError::NoChoices, WireError::into_model_error));
        };
        let message = choice
            .message
            .ok_or_else(|| ModelError::MalformedResponse {
                detail: "choice has no message".to_owned(),
            })?;
        draft.set_model(completion.model.unwrap_or_default());
        let reasoning = message.reasoning_content.unwrap_or_default();
        draft.open(REASONING, Block::Reasoning(ReasoningContent(reasoning)));
        draft.open(TEXT, Block::Text(message.content.unwrap_or_default()));
        if let Some(usage) = completion.usage {
            draft.count(usage.counts());
        }
        for (position, call) in message.tool_calls.into_iter().flatten().enumerate() {
            merge_call(draft, position, call);
        }
        Ok(())
    }

    fn event(
        &mut self,
        chunk: Chunk,
        draft: &mut Draft<ReasoningContent>,
        deltas: &dyn DeltaSink,
    ) -> Result<Flow> {
        if let Some(error) = chunk.error {
            return Err(error.into_model_error());
        }
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            draft.set_model(model);
        }
        if let Some(usage) = chunk.usage {
            draft.count(usage.counts());
        }
        let Some(choice) = chunk.choices.into_iter().flatten().next() else {
            return Ok(Flow::Continue);
        };
        self.saw_choice = true;
        if choice.finish_reason.is_some() {
            draft.mark_finished();
        }
        let Some(delta) = choice.delta else {
            return Ok(Flow::Continue);
        };
        if let Some(content) = delta.content
            && let Block::Text(text) = draft.entry(TEXT, || Block::Text(String::new()))
        {
            // Documented: every text chunk is part 0, whatever reasoning comes before it.
            relay(text, &content, 0, deltas);
        }
        if let Some(piece) = delta.reasoning_content
            && let Block::Reasoning(ReasoningContent(reasoning)) =
                draft.entry(REASONING, || Block::Reasoning(ReasoningContent::default()))
        {
            reasoning.push_str(&piece);
        }
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            merge_call(draft, position, call);
        }
        Ok(Flow::Continue)
    }

    fn ended(&self) -> Result<()> {
        if self.saw_choice {
            Ok(())
        } else {
            Err(ModelError::NoChoices)
        }
    }
}

/// Adds a whole call, or a streamed fragment of one: ids and names arrive once (some servers
/// repeat them), arguments arrive in pieces. A whole answer lists its calls in order.
fn merge_call(draft: &mut Draft<ReasoningContent>, position: usize, call: WireToolCall) {
    let slot = Slot::new(CALLS, call.index.unwrap_or(position));
    let Block::Call(draft_call) = draft.entry(slot, || Block::Call(CallDraft::default())) else {
        return;
    };
    if let Some(id) = call.id.filter(|id| !id.is_empty()) {
        draft_call.id = id;
    }
    if let Some(function) = call.function {
        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
            draft_call.name = Some(name);
        }
        if let Some(arguments) = function.arguments {
            draft_call.arguments.push_str(&arguments);
        }
    }
}

/// `reasoning_content`, sent back as is; left out when empty.
#[derive(Debug, Default)]
pub(crate) struct ReasoningContent(String);

impl Reasoning for ReasoningContent {
    const PROVIDER: &'static str = PROVIDER;

    fn makes_part(&self) -> bool {
        !self.0.is_empty()
    }

    fn seal(self) -> (Vec<u8>, Vec<Part>) {
        (self.0.into_bytes(), Vec::new())
    }
}

impl WireUsage {
    /// Every count, 0 when missing: a later report replaces the whole of an earlier one.
    fn counts(self) -> Counts {
        Counts {
            input: Some(self.prompt_tokens.unwrap_or(0)),
            output: Some(self.completion_tokens.unwrap_or(0)),
            reasoning: Some(
                self.completion_tokens_details
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or(0),
            ),
            cached_input: Some(
                self.prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
            ),
        }
    }
}

/// A non-streaming answer (the fields read; the rest is ignored).
#[derive(Deserialize)]
pub(crate) struct Completion {
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<ChoiceMessage>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    /// Only streamed calls carry it; a whole answer lists calls in order.
    index: Option<usize>,
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
struct WireUsage {
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    prompt_tokens_details: Option<WirePromptDetails>,
    completion_tokens_details: Option<WireUsageDetails>,
}

#[derive(Deserialize, Clone, Copy)]
struct WirePromptDetails {
    cached_tokens: Option<i64>,
}

#[derive(Deserialize, Clone, Copy)]
struct WireUsageDetails {
    reasoning_tokens: Option<i64>,
}

/// One streamed `chat.completion.chunk`.
#[derive(Deserialize)]
pub(crate) struct Chunk {
    model: Option<String>,
    choices: Option<Vec<ChunkChoice>>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    delta: Option<ChunkDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assembly::read_answer;

    // semantics §10.6: no choices → error; a body error object is reported as the provider's.
    #[test]
    fn empty_choices_are_an_error() {
        assert!(matches!(
            read_answer::<Decoder>(br#"{"choices":[]}"#, "m"),
            Err(ModelError::NoChoices)
        ));
        assert!(matches!(
            read_answer::<Decoder>(
                br#"{"error":{"message":"busy","type":"server_error"}}"#,
                "m"
            ),
            Err(ModelError::ProviderError { .. })
        ));
    }
}
