//! The answer both HTTP dialects put together. A [`Draft`] is the assistant message being read,
//! whole or streamed; [`read_answer`] and [`Stream`] feed it a dialect's whole answer or its
//! server-sent events through the dialect's [`Decode`], which only translates its wire format
//! into the draft's operations. The draft alone decides the message's shape, so a whole answer
//! and a streamed one cannot disagree, and neither can two dialects:
//!
//! - parts follow their [`Slot`]s: text (left out when empty), reasoning marked with the
//!   provider that made it, and tool calls whose arguments are parsed once complete;
//! - the model the answer names, else the one asked for, names the reasoning and the usage;
//! - a later count replaces an earlier one; a count never given is 0;
//! - a stream is complete only at its end marker or after a finish reason
//!   ([`ModelError::TruncatedStream`] otherwise), and breaks on data that is not JSON
//!   ([`ModelError::MalformedResponse`]) or on the provider's own error object
//!   ([`WireError`] → [`ModelError::ProviderError`]).
//!
//! ```text
//!   whole body ──> read_answer::<D> ──> D::answer ──┐
//!                                                   ├──> Draft ──into_response──> ModelResponse
//!   SSE events ──> Stream<D>::event ──> D::event ───┘    (text relayed to the DeltaSink)
//! ```

use std::collections::BTreeMap;

use agentsessions_api::{
    DeltaSink, Message, ModelResponse, Part, ReasoningPart, TextPart, ToolCall, Usage,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::content::parse_arguments;
use crate::error::{ModelError, Result};
use crate::sse::Flow;

/// How one dialect's answers feed a [`Draft`]: the wire types, and what each means for the draft.
/// A stream is read across awaits on any worker, hence `Send`.
pub(crate) trait Decode: Default + Send {
    /// The dialect's reasoning blocks.
    type Reasoning: Reasoning;
    /// A whole answer, as the dialect sends it.
    type Answer: DeserializeOwned;
    /// The data of one streamed event, as the dialect sends it.
    type Event: DeserializeOwned;

    /// What errors call a whole answer (`chat completion`, `message`).
    const ANSWER: &'static str;
    /// What errors call one streamed event.
    const EVENT: &'static str;
    /// Event data that ends the stream without being JSON (OpenAI's `[DONE]`).
    const END: Option<&'static str> = None;

    /// Puts a whole `answer` into `draft`.
    ///
    /// # Errors
    /// The provider's error in the answer, or an answer without the parts the dialect requires.
    fn answer(answer: Self::Answer, draft: &mut Draft<Self::Reasoning>) -> Result<()>;

    /// Applies one streamed `event` to `draft`, relaying text to `deltas`.
    ///
    /// # Errors
    /// The provider's error event, or an event that does not fit the draft.
    fn event(
        &mut self,
        event: Self::Event,
        draft: &mut Draft<Self::Reasoning>,
        deltas: &dyn DeltaSink,
    ) -> Result<Flow>;

    /// What the dialect requires of a stream that ended complete, beyond the draft's own rules.
    ///
    /// # Errors
    /// As the dialect decides (OpenAI: [`ModelError::NoChoices`]).
    fn ended(&self) -> Result<()> {
        Ok(())
    }
}

/// A reasoning block as one dialect reads it, and how it is kept for sending back.
pub(crate) trait Reasoning: Send {
    /// The provider that made it: only that provider is sent it back.
    const PROVIDER: &'static str;

    /// Whether the finished block becomes a part of the message.
    fn makes_part(&self) -> bool;

    /// The part's `opaque` bytes (what a later request sends back) and its `summary`.
    fn seal(self) -> (Vec<u8>, Vec<Part>);
}

/// Reads a whole answer `body`; `model` names it when the body does not.
///
/// # Errors
/// [`ModelError::MalformedResponse`] for a body that is not the dialect's JSON, as
/// [`Decode::answer`], and as [`Draft::into_response`].
pub(crate) fn read_answer<D: Decode>(body: &[u8], model: &str) -> Result<ModelResponse> {
    let answer = from_json(body, D::ANSWER)?;
    let mut draft = Draft::default();
    D::answer(answer, &mut draft)?;
    draft.into_response(model)
}

/// Puts one streamed answer together from its server-sent events.
pub(crate) struct Stream<D: Decode> {
    decode: D,
    draft: Draft<D::Reasoning>,
}

impl<D: Decode> Default for Stream<D> {
    fn default() -> Self {
        Self {
            decode: D::default(),
            draft: Draft::default(),
        }
    }
}

impl<D: Decode> Stream<D> {
    /// Takes the data of one event, relaying text chunks to `deltas`.
    ///
    /// # Errors
    /// [`ModelError::MalformedResponse`] for data that is not the dialect's JSON, and as
    /// [`Decode::event`].
    pub(crate) fn event(&mut self, data: &str, deltas: &dyn DeltaSink) -> Result<Flow> {
        if D::END.is_some_and(|end| data.trim() == end) {
            return Ok(Flow::Stop);
        }
        let event = from_json(data.as_bytes(), D::EVENT)?;
        self.decode.event(event, &mut self.draft, deltas)
    }

    /// The answer, once the events ended: `stopped` when the provider marked the end, false
    /// when the body just ended; `model` names it when the stream does not.
    ///
    /// # Errors
    /// [`ModelError::TruncatedStream`] for an answer that did not finish, as [`Decode::ended`],
    /// and as [`Draft::into_response`].
    pub(crate) fn finish(self, stopped: bool, model: &str) -> Result<ModelResponse> {
        // Without the end marker the only proof of a complete answer is a finish reason.
        if !stopped && !self.draft.finished {
            return Err(ModelError::TruncatedStream);
        }
        self.decode.ended()?;
        self.draft.into_response(model)
    }
}

/// `data` as the dialect's `T`; `what` names it in the error.
fn from_json<T: DeserializeOwned>(data: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(data).map_err(|err| ModelError::MalformedResponse {
        detail: format!("{what} is not valid json: {err}"),
    })
}

/// The error object both vendors put in a body or a stream: `{"type": …, "message": …}`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireError {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

impl WireError {
    pub(crate) fn into_model_error(self) -> ModelError {
        ModelError::ProviderError {
            kind: self.kind.unwrap_or_else(|| "error".to_owned()),
            message: self.message.unwrap_or_default(),
        }
    }
}

/// Where a block sits in the message: blocks are ordered by lane, then by index. Anthropic's
/// content blocks all sit in lane 0 at their own index; OpenAI gives its reasoning, its text and
/// its tool calls a lane each. A reasoning part's `ordinal` is its slot's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Slot {
    lane: u8,
    index: usize,
}

impl Slot {
    /// The slot at `index` of `lane`.
    pub(crate) const fn new(lane: u8, index: usize) -> Self {
        Self { lane, index }
    }

    /// The slot at `index` of lane 0.
    pub(crate) const fn at(index: usize) -> Self {
        Self::new(0, index)
    }
}

/// One block of the message being put together.
#[derive(Debug)]
pub(crate) enum Block<R> {
    /// Text, left out when empty.
    Text(String),
    /// A reasoning block of the dialect.
    Reasoning(R),
    /// A tool call, its arguments still in pieces.
    Call(CallDraft),
    /// A block the dialect does not interpret: it keeps its place and makes no part.
    Other,
}

impl<R: Reasoning> Block<R> {
    /// Whether the block becomes a part of the message.
    fn makes_part(&self) -> bool {
        match self {
            Self::Text(text) => !text.is_empty(),
            Self::Reasoning(reasoning) => reasoning.makes_part(),
            Self::Call(_) => true,
            Self::Other => false,
        }
    }
}

/// A tool call being put together.
#[derive(Debug, Default)]
pub(crate) struct CallDraft {
    pub(crate) id: String,
    /// The tool's name, once it arrived.
    pub(crate) name: Option<String>,
    /// The JSON arguments as sent so far.
    pub(crate) arguments: String,
}

impl CallDraft {
    fn into_part(self) -> Result<Part> {
        let Some(name) = self.name else {
            return Err(ModelError::MalformedResponse {
                detail: format!("tool call {:?} has no function name", self.id),
            });
        };
        let args = parse_arguments(&self.id, &name, &self.arguments)?;
        Ok(Part::ToolCall(ToolCall {
            id: self.id,
            tool: name,
            args: Some(args),
            ..ToolCall::default()
        }))
    }
}

/// Token counts as an answer reports them; `None` is a count the report does not carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) input: Option<i64>,
    pub(crate) output: Option<i64>,
    pub(crate) reasoning: Option<i64>,
    pub(crate) cached_input: Option<i64>,
}

/// A message being put together, from one body or from many events; both paths end in
/// [`Draft::into_response`].
#[derive(Debug)]
pub(crate) struct Draft<R> {
    /// The model the answer names; empty until it does.
    model: String,
    blocks: BTreeMap<Slot, Block<R>>,
    counts: Counts,
    /// Whether the provider gave a finish reason.
    finished: bool,
}

impl<R> Default for Draft<R> {
    fn default() -> Self {
        Self {
            model: String::new(),
            blocks: BTreeMap::new(),
            counts: Counts::default(),
            finished: false,
        }
    }
}

impl<R: Reasoning> Draft<R> {
    /// The model the answer names (empty: the one asked for).
    pub(crate) fn set_model(&mut self, model: String) {
        self.model = model;
    }

    /// Takes the counts of a usage report: each count it carries replaces the one before.
    pub(crate) fn count(&mut self, counts: Counts) {
        let kept = &mut self.counts;
        for (kept, new) in [
            (&mut kept.input, counts.input),
            (&mut kept.output, counts.output),
            (&mut kept.reasoning, counts.reasoning),
            (&mut kept.cached_input, counts.cached_input),
        ] {
            if new.is_some() {
                *kept = new;
            }
        }
    }

    /// The provider gave a finish reason: the answer is complete even if the stream's end marker
    /// never comes.
    pub(crate) fn mark_finished(&mut self) {
        self.finished = true;
    }

    /// Puts `block` at `slot`, in place of any block there.
    pub(crate) fn open(&mut self, slot: Slot, block: Block<R>) {
        self.blocks.insert(slot, block);
    }

    /// The block at `slot`, if one was opened.
    pub(crate) fn block_mut(&mut self, slot: Slot) -> Option<&mut Block<R>> {
        self.blocks.get_mut(&slot)
    }

    /// The block at `slot`, opened with `open` when there is none yet.
    pub(crate) fn entry(&mut self, slot: Slot, open: impl FnOnce() -> Block<R>) -> &mut Block<R> {
        self.blocks.entry(slot).or_insert_with(open)
    }

    /// The index the part of the block at `slot` will have in the message, as things stand: the
    /// parts that the blocks before it make. Right for a block that is streaming once every
    /// block before it is complete.
    pub(crate) fn part_index(&self, slot: Slot) -> i32 {
        let before = self
            .blocks
            .range(..slot)
            .filter(|(_, block)| block.makes_part())
            .count();
        i32::try_from(before).unwrap_or(i32::MAX)
    }

    /// The assistant message and its usage; `requested_model` names them when the answer did
    /// not name its model.
    ///
    /// # Errors
    /// [`ModelError::MalformedResponse`] for a tool call whose name never came,
    /// [`ModelError::InvalidToolArguments`] for one whose arguments are not a JSON object.
    pub(crate) fn into_response(self, requested_model: &str) -> Result<ModelResponse> {
        let model = if self.model.is_empty() {
            requested_model.to_owned()
        } else {
            self.model
        };
        let mut parts = Vec::new();
        for (slot, block) in self.blocks {
            if !block.makes_part() {
                continue;
            }
            parts.push(match block {
                Block::Text(text) => Part::Text(TextPart { text }),
                Block::Reasoning(reasoning) => {
                    let (opaque, summary) = reasoning.seal();
                    Part::Reasoning(ReasoningPart {
                        provider: R::PROVIDER.to_owned(),
                        model_id: model.clone(),
                        opaque,
                        summary,
                        ordinal: i32::try_from(slot.index).unwrap_or(i32::MAX),
                        ..ReasoningPart::default()
                    })
                }
                Block::Call(call) => call.into_part()?,
                Block::Other => continue,
            });
        }
        let counts = self.counts;
        Ok(ModelResponse {
            message: Message {
                role: "assistant".to_owned(),
                parts,
            },
            usage: Usage {
                model,
                input_tokens: counts.input.unwrap_or(0),
                output_tokens: counts.output.unwrap_or(0),
                reasoning_tokens: counts.reasoning.unwrap_or(0),
                cached_input_tokens: counts.cached_input.unwrap_or(0),
            },
        })
    }
}

/// Keeps a streamed `piece` of `text` after relaying it to `deltas` as part `part`; an empty
/// piece is neither.
pub(crate) fn relay(text: &mut String, piece: &str, part: i32, deltas: &dyn DeltaSink) {
    if !piece.is_empty() {
        deltas.chunk(part, piece);
        text.push_str(piece);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::{Value, json};

    use super::*;
    use crate::anthropic::AnthropicDialect;
    use crate::openai::OpenAiDialect;
    use crate::provider::Dialect;

    type OpenAi = <OpenAiDialect as Dialect>::Decode;
    type Anthropic = <AnthropicDialect as Dialect>::Decode;

    /// The text chunks a stream relays, with their part index.
    #[derive(Default)]
    struct Chunks(Mutex<Vec<(i32, String)>>);

    impl DeltaSink for Chunks {
        fn chunk(&self, part_index: i32, text: &str) {
            self.0.lock().unwrap().push((part_index, text.to_owned()));
        }
    }

    impl Chunks {
        fn texts(&self) -> Vec<(i32, String)> {
            self.0.lock().unwrap().clone()
        }
    }

    /// Feeds `events` to a stream of dialect `D` as `sse::read_events` would: until one stops it
    /// (the end marker) or they run out (the body ended).
    fn streamed<D: Decode>(events: &[String], deltas: &Chunks) -> Result<ModelResponse> {
        let mut stream = Stream::<D>::default();
        for data in events {
            if stream.event(data, deltas)? == Flow::Stop {
                return stream.finish(true, "asked");
            }
        }
        stream.finish(false, "asked")
    }

    fn data(events: &[Value]) -> Vec<String> {
        events.iter().map(Value::to_string).collect()
    }

    /// A reasoning block for the draft's own rules: its text, left out when empty.
    #[derive(Debug)]
    struct Note(&'static str);

    impl Reasoning for Note {
        const PROVIDER: &'static str = "test";

        fn makes_part(&self) -> bool {
            !self.0.is_empty()
        }

        fn seal(self) -> (Vec<u8>, Vec<Part>) {
            (self.0.as_bytes().to_vec(), Vec::new())
        }
    }

    fn call(id: &str, name: Option<&str>, arguments: &str) -> Block<Note> {
        Block::Call(CallDraft {
            id: id.into(),
            name: name.map(Into::into),
            arguments: arguments.into(),
        })
    }

    fn tool_call(id: &str, tool: &str, args: &Value) -> Part {
        Part::ToolCall(ToolCall {
            id: id.into(),
            tool: tool.into(),
            args: args.as_object().cloned(),
            ..ToolCall::default()
        })
    }

    fn text(text: &str) -> Part {
        Part::Text(TextPart { text: text.into() })
    }

    // The draft's order: lane, then index, whatever order blocks arrive in; empty text and
    // uninterpreted blocks keep their place but make no part; a reasoning part is marked with
    // its provider, the model and its slot's index.
    #[test]
    fn parts_follow_their_slots() {
        let mut draft = Draft::<Note>::default();
        draft.open(Slot::new(1, 0), call("c2", Some("t"), r#"{"b":2}"#));
        draft.open(Slot::at(3), Block::Text("late".into()));
        draft.open(Slot::at(2), Block::Reasoning(Note("why")));
        draft.open(Slot::at(1), Block::Text(String::new()));
        draft.open(Slot::at(0), Block::Other);
        draft.open(Slot::at(4), Block::Reasoning(Note("")));
        assert_eq!(draft.part_index(Slot::at(2)), 0);
        assert_eq!(draft.part_index(Slot::at(3)), 1);
        assert_eq!(draft.part_index(Slot::new(1, 0)), 2);
        let response = draft.into_response("asked").unwrap();
        assert_eq!(
            response.message,
            Message {
                role: "assistant".into(),
                parts: vec![
                    Part::Reasoning(ReasoningPart {
                        provider: "test".into(),
                        model_id: "asked".into(),
                        opaque: b"why".to_vec(),
                        ordinal: 2,
                        ..ReasoningPart::default()
                    }),
                    text("late"),
                    tool_call("c2", "t", &json!({"b": 2})),
                ],
            }
        );
    }

    // A later count replaces an earlier one; a count no report carries is 0; the model the
    // answer names wins over the one asked for.
    #[test]
    fn counts_and_model() {
        let mut draft = Draft::<Note>::default();
        draft.count(Counts {
            input: Some(3),
            output: Some(1),
            reasoning: None,
            cached_input: Some(2),
        });
        draft.count(Counts {
            output: Some(4),
            ..Counts::default()
        });
        let usage = draft.into_response("asked").unwrap().usage;
        assert_eq!(
            usage,
            Usage {
                model: "asked".into(),
                input_tokens: 3,
                output_tokens: 4,
                reasoning_tokens: 0,
                cached_input_tokens: 2,
            }
        );
        let mut draft = Draft::<Note>::default();
        draft.set_model("named".into());
        assert_eq!(draft.into_response("asked").unwrap().usage.model, "named");
    }

    // brief: a call needs its name and arguments that are a JSON object (empty means none); the
    // first broken call in slot order is the one reported.
    #[test]
    fn calls_need_a_name_and_object_arguments() {
        let finish = |blocks: Vec<Block<Note>>| {
            let mut draft = Draft::<Note>::default();
            for (index, block) in blocks.into_iter().enumerate() {
                draft.open(Slot::at(index), block);
            }
            draft.into_response("asked")
        };
        let message = finish(vec![call("c", Some("t"), " ")]).unwrap().message;
        assert_eq!(message.parts, vec![tool_call("c", "t", &json!({}))]);
        let err = finish(vec![call("c", None, "{}")]).unwrap_err();
        assert!(matches!(err, ModelError::MalformedResponse { .. }), "{err}");
        assert!(err.to_string().contains("no function name"), "{err}");
        let err = finish(vec![call("c1", Some("t"), "[1]"), call("c2", None, "")]).unwrap_err();
        assert!(
            matches!(&err, ModelError::InvalidToolArguments { id, .. } if id == "c1"),
            "{err}"
        );
    }

    /// One answer — reasoning, text, two calls, usage — as each dialect sends it whole.
    fn whole(dialect: &str) -> Vec<u8> {
        let body = if dialect == "openai" {
            json!({"model": "m-1", "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": "It is sunny.",
                    "reasoning_content": "Thinking.", "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "c2", "type": "function",
                     "function": {"name": "time", "arguments": ""}}]}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4,
                    "prompt_tokens_details": {"cached_tokens": 2}}})
        } else {
            json!({"type": "message", "model": "m-1", "content": [
                    {"type": "thinking", "thinking": "Thinking.", "signature": "sig"},
                    {"type": "text", "text": "It is sunny."},
                    {"type": "tool_use", "id": "c1", "name": "weather",
                     "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "c2", "name": "time", "input": {}}],
                "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 2}})
        };
        body.to_string().into_bytes()
    }

    /// The same answer streamed: OpenAI's chunks (the calls announced out of order), or
    /// Anthropic's events.
    fn events(dialect: &str) -> Vec<String> {
        if dialect == "openai" {
            let delta =
                |delta: Value| json!({"model": "m-1", "choices": [{"index": 0, "delta": delta}]});
            let mut events = data(&[
                delta(json!({"reasoning_content": "Think"})),
                delta(json!({"reasoning_content": "ing."})),
                delta(json!({"content": "It is "})),
                delta(json!({"content": "sunny."})),
                delta(json!({"tool_calls": [{"index": 1, "id": "c2",
                    "function": {"name": "time", "arguments": ""}}]})),
                delta(json!({"tool_calls": [{"index": 0, "id": "c1",
                    "function": {"name": "weather", "arguments": "{\"city\":"}}]})),
                delta(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}),
                ),
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
                json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4,
                    "prompt_tokens_details": {"cached_tokens": 2}}}),
            ]);
            events.push("[DONE]".into());
            events
        } else {
            let start = |index: usize, block: Value| json!({"type": "content_block_start", "index": index, "content_block": block});
            let delta = |index: usize, delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
            data(&[
                json!({"type": "message_start", "message": {"model": "m-1",
                    "usage": {"input_tokens": 3, "output_tokens": 1, "cache_read_input_tokens": 2}}}),
                start(0, json!({"type": "thinking", "thinking": ""})),
                delta(0, json!({"type": "thinking_delta", "thinking": "Think"})),
                delta(0, json!({"type": "thinking_delta", "thinking": "ing."})),
                delta(0, json!({"type": "signature_delta", "signature": "sig"})),
                start(1, json!({"type": "text", "text": ""})),
                delta(1, json!({"type": "text_delta", "text": "It is "})),
                delta(1, json!({"type": "text_delta", "text": "sunny."})),
                start(
                    2,
                    json!({"type": "tool_use", "id": "c1", "name": "weather", "input": {}}),
                ),
                delta(
                    2,
                    json!({"type": "input_json_delta", "partial_json": "{\"city\":"}),
                ),
                delta(
                    2,
                    json!({"type": "input_json_delta", "partial_json": "\"Paris\"}"}),
                ),
                start(
                    3,
                    json!({"type": "tool_use", "id": "c2", "name": "time", "input": {}}),
                ),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 4}}),
                json!({"type": "message_stop"}),
            ])
        }
    }

    // brief: both dialects feed one draft, whole or streamed, and get the same message: their
    // own reasoning first, then the text, then the calls in order, and the same usage. Streamed
    // text is relayed as it comes (OpenAI as part 0, as documented; Anthropic with its part's
    // index).
    #[test]
    fn both_dialects_assemble_the_same_answer_whole_or_streamed() {
        let openai_chunks = Chunks::default();
        let anthropic_chunks = Chunks::default();
        let answers = [
            read_answer::<OpenAi>(&whole("openai"), "asked").unwrap(),
            streamed::<OpenAi>(&events("openai"), &openai_chunks).unwrap(),
            read_answer::<Anthropic>(&whole("anthropic"), "asked").unwrap(),
            streamed::<Anthropic>(&events("anthropic"), &anthropic_chunks).unwrap(),
        ];
        let rest = [
            text("It is sunny."),
            tool_call("c1", "weather", &json!({"city": "Paris"})),
            tool_call("c2", "time", &json!({})),
        ];
        let usage = Usage {
            model: "m-1".into(),
            input_tokens: 3,
            output_tokens: 4,
            reasoning_tokens: 0,
            cached_input_tokens: 2,
        };
        for answer in &answers {
            assert_eq!(answer.message.role, "assistant");
            assert_eq!(answer.message.parts[1..], rest[..]);
            assert_eq!(answer.usage, usage);
        }
        assert_eq!(answers[0], answers[1]);
        assert_eq!(answers[2], answers[3]);
        assert_eq!(
            answers[0].message.parts[0],
            Part::Reasoning(ReasoningPart {
                provider: "openai".into(),
                model_id: "m-1".into(),
                opaque: b"Thinking.".to_vec(),
                ..ReasoningPart::default()
            })
        );
        let Part::Reasoning(thinking) = &answers[2].message.parts[0] else {
            panic!("{:?}", answers[2].message.parts[0]);
        };
        assert_eq!(
            (
                thinking.provider.as_str(),
                thinking.ordinal,
                &thinking.summary
            ),
            ("anthropic", 0, &vec![text("Thinking.")])
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&thinking.opaque).unwrap(),
            json!({"type": "thinking", "thinking": "Thinking.", "signature": "sig"})
        );
        let relayed = |part| vec![(part, "It is ".to_owned()), (part, "sunny.".to_owned())];
        assert_eq!(openai_chunks.texts(), relayed(0));
        assert_eq!(anthropic_chunks.texts(), relayed(1));
    }

    // brief: a stream is complete only at its end marker or after a finish reason; Anthropic
    // has only its marker (a stop_reason alone does not count).
    #[test]
    fn a_stream_needs_its_end_marker_or_a_finish_reason() {
        let sink = Chunks::default();
        let complete = streamed::<OpenAi>(&events("openai"), &sink).unwrap();
        let mut openai = events("openai");
        openai.pop();
        assert_eq!(streamed::<OpenAi>(&openai, &sink).unwrap(), complete);
        openai.truncate(7);
        assert_eq!(
            streamed::<OpenAi>(&openai, &sink),
            Err(ModelError::TruncatedStream)
        );
        let mut anthropic = events("anthropic");
        anthropic.pop();
        assert_eq!(
            streamed::<Anthropic>(&anthropic, &sink),
            Err(ModelError::TruncatedStream)
        );
        // OpenAI: a complete stream must still have carried a choice.
        assert_eq!(
            streamed::<OpenAi>(&["[DONE]".to_owned()], &sink),
            Err(ModelError::NoChoices)
        );
    }

    // brief: data that is not JSON breaks either stream, named for the dialect's event; the
    // provider's error object, in a body or a stream, is the provider's error in both.
    #[test]
    fn broken_data_and_provider_errors_alike() {
        let sink = Chunks::default();
        let broken = ["{oops".to_owned()];
        for (err, what) in [
            (streamed::<OpenAi>(&broken, &sink), "stream chunk"),
            (streamed::<Anthropic>(&broken, &sink), "stream event"),
            (read_answer::<OpenAi>(b"[", "m"), "chat completion"),
            (read_answer::<Anthropic>(b"[", "m"), "message"),
        ] {
            let err = err.unwrap_err();
            assert!(matches!(err, ModelError::MalformedResponse { .. }), "{err}");
            assert!(
                err.to_string()
                    .contains(&format!("{what} is not valid json")),
                "{err}"
            );
        }
        let error = json!({"type": "overloaded_error", "message": "busy"});
        let busy = ModelError::ProviderError {
            kind: "overloaded_error".into(),
            message: "busy".into(),
        };
        let openai = data(&[json!({"error": error})]);
        let anthropic = data(&[json!({"type": "error", "error": error})]);
        assert_eq!(streamed::<OpenAi>(&openai, &sink), Err(busy.clone()));
        assert_eq!(streamed::<Anthropic>(&anthropic, &sink), Err(busy.clone()));
        let body = json!({"error": error}).to_string();
        assert_eq!(
            read_answer::<OpenAi>(body.as_bytes(), "m"),
            Err(busy.clone())
        );
        assert_eq!(read_answer::<Anthropic>(body.as_bytes(), "m"), Err(busy));
        assert!(sink.texts().is_empty());
    }
}
