//! [`ChatHarness`]: the conversation harness, and the JSON config it reads per execution.
//!
//! # Tools
//!
//! Built [`ChatHarness::with_tools`], the harness runs a tool loop inside one turn: every model
//! call offers what the host's [`ToolCatalog`] offers at that moment; when the answer asks for
//! tools, each call goes through [`EventSink::tool_call`] with the mediation the catalog gives it
//! (see [`crate::tool_round`]), the results go back to the model as one `tool` message, and the
//! model is asked again, until it answers without tool calls or the step limit
//! ([`ChatHarness::with_max_steps`], [`ChatHarness::DEFAULT_MAX_STEPS`] by default) is reached,
//! which fails the turn with [`HarnessesError::StepLimit`].
//!
//! Each answer's usage is reported through [`EventSink::usage`] right after the answer, so the
//! journal holds one USAGE record per model call (semantics §2.5: the host records usage only
//! when the harness reports it). An answer that carries no usage at all (the default value, which
//! is also what replay serves for a completion recorded without USAGE) reports none.
//!
//! History from earlier turns keeps their tool rounds (extensions §10): every answer that asked for
//! tools is sent with its tool calls, followed by a `tool` message answering each of them, so the
//! model remembers what a tool returned turns ago. The answer is the recorded TOOL_RESULT (a denial
//! receipt, the host's "outcome unknown, not retried" or "not run" for a turn it closed, extensions
//! §9, included); a call that was made but has no result is "outcome unknown"; a call that was
//! never made (its tool was not offered, the step limit was reached, or the turn ended first) is
//! "not run". Everything comes from the journal, so replay and resume build the same messages and
//! call no model and no tool. Journals written before the tool rounds were kept give other messages
//! for the turns after a tool round, so replaying those turns reports a divergence.
//!
//! # Config
//!
//! [`Start::config`] is either empty or a JSON object. Its one known member is `system_prompt`:
//!
//! | config | system message |
//! |---|---|
//! | empty bytes, `{}`, `{"system_prompt": ""}`, no `system_prompt` member | none |
//! | `{"system_prompt": "…"}` (non-empty) | exactly one leading `system` text message, verbatim |
//! | unknown members | ignored |
//! | malformed JSON, trailing tokens, a non-object top level (`null` included), a non-string `system_prompt` (`null` included) | the run fails before any model call |
//!
//! The failure message is fixed ([`HarnessesError::InvalidChatConfig`]) and never quotes the
//! config. The rejected turn stays incomplete: a resume reads the same journaled config and fails
//! the same way, and a new execution supersedes it.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use agentsessions_api::{
    Capabilities, Descriptor, EventBody, EventKind, EventSink, Harness, History, Message,
    ModelRequest, Part, Result, Resumability, Start, ToolCall, ToolCatalog, ToolResult, Usage,
};
use async_trait::async_trait;
use serde_json::Value;

use crate::error::HarnessesError;
use crate::tool_round::{CallSite, Offer, model_facing, requested_calls, run_calls};

/// The `chat` harness (semantics §10.5): rebuilds the whole conversation from history on every
/// execution and asks the configured model, running the tools the model asks for when built
/// with a catalog. Stateless (replays on any runtime) and fork-safe.
#[derive(Clone)]
pub struct ChatHarness {
    model: String,
    tools: Option<Arc<dyn ToolCatalog>>,
    max_steps: u32,
}

impl ChatHarness {
    /// The harness id.
    pub const ID: &'static str = "chat";
    /// The advertised replay version.
    pub const VERSION: &'static str = "1";
    /// Model calls one turn may make when none is configured.
    pub const DEFAULT_MAX_STEPS: u32 = 16;

    /// A chat harness calling `model`, with no tools.
    ///
    /// # Errors
    ///
    /// [`HarnessesError::EmptyModel`] when `model` is empty or only whitespace.
    pub fn new(model: impl Into<String>) -> Result<Self, HarnessesError> {
        let model = model.into();
        if model.trim().is_empty() {
            return Err(HarnessesError::EmptyModel);
        }
        Ok(Self {
            model,
            tools: None,
            max_steps: Self::DEFAULT_MAX_STEPS,
        })
    }

    /// Offers `catalog`'s tools on every model call and runs the calls the model asks for.
    #[must_use]
    pub fn with_tools(mut self, catalog: Arc<dyn ToolCatalog>) -> Self {
        self.tools = Some(catalog);
        self
    }

    /// Caps the model calls of one turn at `max_steps` (at least one).
    #[must_use]
    pub fn with_max_steps(mut self, max_steps: u32) -> Self {
        self.max_steps = max_steps.max(1);
        self
    }

    /// The model every execution calls.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The most model calls one turn makes.
    pub fn max_steps(&self) -> u32 {
        self.max_steps
    }
}

impl fmt::Debug for ChatHarness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatHarness")
            .field("model", &self.model)
            .field("tools", &self.tools)
            .field("max_steps", &self.max_steps)
            .finish()
    }
}

/// Same model, same step limit, and the same catalog instance (or none on both sides).
impl PartialEq for ChatHarness {
    fn eq(&self, other: &Self) -> bool {
        let same_tools = match (&self.tools, &other.tools) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        self.model == other.model && self.max_steps == other.max_steps && same_tools
    }
}

#[async_trait]
impl Harness for ChatHarness {
    async fn describe(&self) -> Result<Descriptor> {
        Ok(Descriptor {
            id: Self::ID.to_owned(),
            version: Self::VERSION.to_owned(),
            models: vec![self.model.clone()],
            tools: Vec::new(),
            capabilities: Capabilities {
                resumability: Resumability::StatelessReplay,
                fork_safe: true,
                ..Capabilities::default()
            },
        })
    }

    /// Model calls with, in order: the system message from the config (if any), every history
    /// event of kind INPUT or OUTPUT that carries a message (journal order, each answer that
    /// asked for tools followed by their answers, see the module docs), all of this execution's
    /// inputs, then each earlier step's answer and tool results.
    ///
    /// # Errors
    ///
    /// [`HarnessesError::InvalidChatConfig`] (as `INVALID_ARGUMENT`) for a config the table in
    /// the module docs rejects, before any model call; [`HarnessesError::StepLimit`] when the
    /// model still asks for tools at the last allowed step; otherwise whatever the sink returns,
    /// unchanged (a park for approval included).
    async fn run(&self, start: &Start, sink: &dyn EventSink) -> Result<()> {
        let system = system_prompt(&start.config)?;
        let history = history_messages(&start.history);
        let mut messages: Vec<Message> = system
            .map(|prompt| Message::text_message("system", prompt))
            .into_iter()
            .chain(history)
            .chain(start.inputs.iter().cloned())
            .collect();
        for step in 0..self.max_steps {
            let offer = Offer::read(self.tools.as_deref());
            let response = sink
                .model(ModelRequest {
                    model: self.model.clone(),
                    messages: messages.clone(),
                    tools: offer.definitions(),
                    ..ModelRequest::default()
                })
                .await?;
            // An answer without usage (replaying a turn recorded before usage was reported, or
            // a provider that counts nothing) records none, so such turns replay as recorded.
            if response.usage != Usage::default() {
                sink.usage(response.usage).await?;
            }
            let calls = requested_calls(&response.message);
            if calls.is_empty() {
                return Ok(());
            }
            if step + 1 == self.max_steps {
                break;
            }
            let results = run_calls(sink, &offer, &start.execution_id, step, &calls).await?;
            messages.push(response.message);
            messages.push(results);
        }
        Err(HarnessesError::StepLimit {
            limit: self.max_steps,
        }
        .into())
    }
}

/// The history as model messages (see the module docs): INPUTs (without tool-call parts) and
/// OUTPUTs in journal order, each OUTPUT that asks for tools followed by the `tool` message
/// answering every one of its calls, as the turn's next model call read it.
fn history_messages(history: &History) -> Vec<Message> {
    let results: HashMap<&str, &ToolResult> = history
        .iter()
        .filter(|event| event.kind == EventKind::ToolResult)
        .filter_map(|event| match &event.body {
            Some(EventBody::Result(result)) => Some((result.id.as_str(), result)),
            _ => None,
        })
        .collect();
    let made: HashSet<&str> = history
        .iter()
        .filter(|event| event.kind == EventKind::ToolCall)
        .filter_map(|event| match &event.body {
            Some(EventBody::ToolCall(call)) => Some(call.id.as_str()),
            _ => None,
        })
        .collect();
    // Each model answer of an execution is one step of its tool loop, in order.
    let mut steps: HashMap<&str, u32> = HashMap::new();
    let mut messages = Vec::new();
    for event in history.iter() {
        let Some(message) = event.message() else {
            continue;
        };
        match event.kind {
            EventKind::Input => messages.extend(without_tool_calls(message)),
            EventKind::Output => {
                let step = steps.entry(event.execution_id.as_str()).or_default();
                let site = |index| CallSite {
                    execution_id: &event.execution_id,
                    step: *step,
                    index,
                };
                let calls = requested_calls(message);
                let answers: Vec<ToolResult> = (0..calls.len())
                    .map(|index| {
                        let id = site(index).call_id();
                        match results.get(id.as_str()) {
                            Some(result) => model_facing((*result).clone()),
                            None if made.contains(id.as_str()) => {
                                model_facing(ToolResult::outcome_unknown(""))
                            }
                            None => ToolResult {
                                is_error: true,
                                error: NEVER_MADE.to_owned(),
                                ..ToolResult::default()
                            },
                        }
                    })
                    .collect();
                *step += 1;
                messages.push(message.clone());
                if !calls.is_empty() {
                    messages.push(answered_calls(&calls, answers));
                }
            }
            _ => {}
        }
    }
    messages
}

/// What the model is told of a call its answer asked for that was never made: the tool was not
/// offered, the turn reached its step limit, or the turn ended before the call.
const NEVER_MADE: &str = "not run: this call was never made (its tool was not offered, the \
                          turn reached its step limit, or the turn ended before it)";

/// The `tool` message answering `calls` with `answers`, under the model's own call ids.
fn answered_calls(calls: &[ToolCall], answers: Vec<ToolResult>) -> Message {
    let parts = calls
        .iter()
        .zip(answers)
        .map(|(call, answer)| {
            Part::ToolResult(ToolResult {
                id: call.id.clone(),
                ..answer
            })
        })
        .collect();
    Message {
        role: "tool".to_owned(),
        parts,
    }
}

/// An input message as model calls see it: without tool-call parts (an input cannot carry their
/// answers), and left out when nothing else remains.
fn without_tool_calls(message: &Message) -> Option<Message> {
    if !message.parts.iter().any(|p| matches!(p, Part::ToolCall(_))) {
        return Some(message.clone());
    }
    let parts: Vec<Part> = message
        .parts
        .iter()
        .filter(|p| !matches!(p, Part::ToolCall(_)))
        .cloned()
        .collect();
    (!parts.is_empty()).then(|| Message {
        role: message.role.clone(),
        parts,
    })
}

/// The system prompt a config asks for; `None` for no system message. See the module docs.
fn system_prompt(config: &[u8]) -> Result<Option<String>, HarnessesError> {
    if config.is_empty() {
        return Ok(None);
    }
    // `from_slice` rejects trailing tokens and bounds nesting depth, so bad input is an error.
    let value: Value =
        serde_json::from_slice(config).map_err(|_| HarnessesError::InvalidChatConfig)?;
    let Value::Object(object) = value else {
        return Err(HarnessesError::InvalidChatConfig);
    };
    match object.get("system_prompt") {
        None => Ok(None),
        Some(Value::String(prompt)) if prompt.is_empty() => Ok(None),
        Some(Value::String(prompt)) => Ok(Some(prompt.clone())),
        Some(_) => Err(HarnessesError::InvalidChatConfig),
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{
        ApiError, Event, EventBody, LifecycleKind, Mediation, ModelCall, OfferedTool, StatusCode,
        ToolCall, ToolDefinition, Usage,
    };

    use super::*;
    use crate::testsink::{Call, RecordingSink};

    fn chat() -> ChatHarness {
        ChatHarness::new("gpt-test").unwrap()
    }

    fn start_with_config(config: &[u8]) -> Start {
        Start {
            config: config.to_vec(),
            inputs: vec![Message::text_message("user", "hi")],
            ..Start::default()
        }
    }

    /// The one model request of a tool-free run, which reports that answer's usage after it.
    fn only_request(sink: &RecordingSink) -> ModelRequest {
        match sink.calls().as_slice() {
            [Call::Model(request), Call::Usage(_)] => request.clone(),
            calls => panic!("want exactly one model call and its usage, got {calls:?}"),
        }
    }

    // semantics §10.5: id chat, models [configured model], STATELESS_REPLAY, fork-safe.
    #[tokio::test]
    async fn describes_itself_with_the_configured_model() {
        let d = chat().describe().await.unwrap();
        assert_eq!(d.id, "chat");
        assert_eq!(d.version, "1");
        assert_eq!(d.models, vec!["gpt-test".to_owned()]);
        assert_eq!(d.capabilities.resumability, Resumability::StatelessReplay);
        assert!(d.capabilities.fork_safe);
    }

    // semantics §10.5: the constructor validates the model name.
    #[test]
    fn an_empty_model_is_refused() {
        assert_eq!(ChatHarness::new(""), Err(HarnessesError::EmptyModel));
        assert_eq!(ChatHarness::new("  \t"), Err(HarnessesError::EmptyModel));
        assert_eq!(chat().model(), "gpt-test");
    }

    // semantics §10.5: history INPUT/OUTPUT events with a message, in journal order, then all
    // current inputs; other kinds and message-less events are skipped; one call, configured model.
    #[tokio::test]
    async fn sends_history_messages_then_inputs_to_the_configured_model() {
        let msg = |kind, role, text| {
            Event::new(kind, EventBody::Message(Message::text_message(role, text)))
        };
        let start = Start {
            model: "host-default".into(),
            history: vec![
                msg(EventKind::Input, "user", "q1"),
                Event::new(
                    EventKind::ModelCall,
                    EventBody::ModelCall(ModelCall::default()),
                ),
                msg(EventKind::Output, "assistant", "a1"),
                Event::new(EventKind::Usage, EventBody::Usage(Usage::default())),
                Event::new(
                    EventKind::ToolCall,
                    EventBody::ToolCall(ToolCall::default()),
                ),
                Event {
                    kind: EventKind::Output,
                    ..Event::default()
                },
                Event::new(
                    EventKind::Lifecycle,
                    EventBody::Lifecycle(agentsessions_api::Lifecycle {
                        kind: LifecycleKind::Suspend,
                        ..agentsessions_api::Lifecycle::default()
                    }),
                ),
                // A message body under another kind is not part of the conversation.
                msg(EventKind::Error, "user", "not me"),
                msg(EventKind::Input, "user", "q2"),
            ]
            .into(),
            inputs: vec![
                Message::text_message("user", "q3"),
                Message::text_message("user", "q4"),
            ],
            ..Start::default()
        };
        let sink = RecordingSink::default();
        chat().run(&start, &sink).await.unwrap();
        assert_eq!(
            only_request(&sink),
            ModelRequest {
                model: "gpt-test".into(),
                messages: vec![
                    Message::text_message("user", "q1"),
                    Message::text_message("assistant", "a1"),
                    Message::text_message("user", "q2"),
                    Message::text_message("user", "q3"),
                    Message::text_message("user", "q4"),
                ],
                ..ModelRequest::default()
            }
        );
    }

    // semantics §10.5: empty config, {}, absent or "" system_prompt, and unknown fields → no
    // system message.
    #[tokio::test]
    async fn configs_without_a_prompt_add_no_system_message() {
        for config in [
            &b""[..],
            b"{}",
            b" { } \n",
            br#"{"system_prompt":""}"#,
            br#"{"other":1,"nested":{"system_prompt":5}}"#,
        ] {
            let sink = RecordingSink::default();
            chat().run(&start_with_config(config), &sink).await.unwrap();
            assert_eq!(
                only_request(&sink).messages,
                vec![Message::text_message("user", "hi")],
                "{}",
                String::from_utf8_lossy(config)
            );
        }
    }

    // semantics §10.5: a non-empty string → exactly one leading system text message, verbatim;
    // unknown fields are ignored.
    #[tokio::test]
    async fn a_system_prompt_leads_verbatim() {
        let config = br#"{"unknown":[1,2],"system_prompt":"  Be brief.\n\u00e9 "}"#;
        let start = Start {
            history: vec![Event::new(
                EventKind::Input,
                EventBody::Message(Message::text_message("user", "earlier")),
            )]
            .into(),
            ..start_with_config(config)
        };
        let sink = RecordingSink::default();
        chat().run(&start, &sink).await.unwrap();
        assert_eq!(
            only_request(&sink).messages,
            vec![
                Message::text_message("system", "  Be brief.\n\u{e9} "),
                Message::text_message("user", "earlier"),
                Message::text_message("user", "hi"),
            ]
        );
    }

    // semantics §10.5: malformed JSON, trailing tokens, non-object top level (incl. null), a
    // non-string system_prompt (incl. null) → fail before any model call, with a fixed message
    // that never echoes the config.
    #[tokio::test]
    async fn bad_configs_fail_before_any_model_call_without_echoing() {
        for config in [
            &br#"{"system_prompt":"SECRET""#[..],
            br#"{"system_prompt":"SECRET"} {}"#,
            br#"{"system_prompt":"SECRET"}x"#,
            b"   ",
            b"null",
            b"[]",
            br#""SECRET""#,
            b"42",
            b"true",
            br#"{"system_prompt":null}"#,
            br#"{"system_prompt":42}"#,
            br#"{"system_prompt":["SECRET"]}"#,
            br#"{"system_prompt":{"text":"SECRET"}}"#,
            br#"{"system_prompt":false}"#,
            b"\xff\xfe",
            &[b'['; 10_000],
        ] {
            let sink = RecordingSink::default();
            let err = chat()
                .run(&start_with_config(config), &sink)
                .await
                .unwrap_err();
            assert_eq!(err, ApiError::from(HarnessesError::InvalidChatConfig));
            assert!(matches!(
                err,
                ApiError::Status {
                    code: StatusCode::InvalidArgument,
                    ..
                }
            ));
            assert!(!err.to_string().contains("SECRET"));
            assert_eq!(
                sink.calls(),
                Vec::new(),
                "{}",
                String::from_utf8_lossy(config)
            );
        }
    }

    // semantics §9.6: the model error is returned, not retried.
    #[tokio::test]
    async fn returns_the_model_error() {
        let err = ApiError::ModelNotAllowed {
            model: "gpt-test".into(),
        };
        let sink = RecordingSink::failing_models(err.clone());
        assert_eq!(chat().run(&start_with_config(b""), &sink).await, Err(err));
        assert_eq!(sink.calls().len(), 1);
    }

    #[derive(Debug, Default)]
    struct CountingCatalog {
        tools: Vec<OfferedTool>,
        reads: std::sync::atomic::AtomicUsize,
    }

    impl ToolCatalog for CountingCatalog {
        fn offered(&self) -> Vec<OfferedTool> {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.tools.clone()
        }
    }

    fn offered(name: &str, mediation: Mediation) -> OfferedTool {
        OfferedTool {
            definition: ToolDefinition {
                name: name.into(),
                ..ToolDefinition::default()
            },
            mediation,
        }
    }

    fn asks_for(calls: &[(&str, &str)]) -> Message {
        Message {
            role: "assistant".into(),
            parts: calls
                .iter()
                .map(|(id, tool)| {
                    Part::ToolCall(ToolCall {
                        id: (*id).into(),
                        tool: (*tool).into(),
                        args: serde_json::json!({"q": 1}).as_object().cloned(),
                        ..ToolCall::default()
                    })
                })
                .collect(),
        }
    }

    fn tool_chat(catalog: &Arc<CountingCatalog>) -> ChatHarness {
        chat().with_tools(Arc::clone(catalog) as Arc<dyn ToolCatalog>)
    }

    fn catalog() -> Arc<CountingCatalog> {
        Arc::new(CountingCatalog {
            tools: vec![
                offered("lookup", Mediation::ControllerMediated),
                offered("pay", Mediation::RequiresApproval),
            ],
            ..CountingCatalog::default()
        })
    }

    fn exec_start() -> Start {
        Start {
            execution_id: "x1".into(),
            ..start_with_config(b"")
        }
    }

    // Tool loop: the catalog is read per model call; each requested call carries its offered
    // mediation, a deterministic id and key; a tool not offered gets an error result without
    // reaching the sink; all results go back under the model's ids in one tool message.
    #[tokio::test]
    async fn runs_each_requested_call_with_its_mediation_and_feeds_results_back() {
        let catalog = catalog();
        let sink = RecordingSink::answering(vec![asks_for(&[
            ("m1", "lookup"),
            ("m2", "pay"),
            ("m3", "missing"),
        ])]);
        tool_chat(&catalog).run(&exec_start(), &sink).await.unwrap();
        let calls = sink.calls();
        assert_eq!(calls.len(), 6, "{calls:?}");
        let [
            Call::Model(first),
            Call::Usage(_),
            Call::ToolCall(lookup),
            Call::ToolCall(pay),
            Call::Model(second),
            Call::Usage(_),
        ] = calls.as_slice()
        else {
            panic!("unexpected calls {calls:?}")
        };
        let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["lookup", "pay"]);
        assert_eq!(catalog.reads.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(
            (lookup.id.as_str(), lookup.idempotency_key.as_str()),
            ("x1/tool/0/0", "chat:x1:0:0")
        );
        assert_eq!(lookup.mediation, Mediation::ControllerMediated);
        assert_eq!(
            lookup.args,
            serde_json::json!({"q": 1}).as_object().cloned()
        );
        assert_eq!(
            (pay.id.as_str(), pay.mediation),
            ("x1/tool/0/1", Mediation::RequiresApproval)
        );
        let [.., answer, results] = second.messages.as_slice() else {
            panic!("no tool round in {second:?}")
        };
        assert_eq!(answer.parts.len(), 3);
        assert_eq!(results.role, "tool");
        let ids: Vec<(&str, bool)> = results
            .parts
            .iter()
            .map(|p| match p {
                Part::ToolResult(r) => (r.id.as_str(), r.is_error),
                other => panic!("not a result: {other:?}"),
            })
            .collect();
        assert_eq!(ids, [("m1", false), ("m2", false), ("m3", true)]);
    }

    // semantics §3.3: an answer without usage (what replay serves for a turn recorded before
    // usage was reported) reports none, so such turns replay without divergence.
    #[tokio::test]
    async fn an_answer_without_usage_reports_none() {
        let sink = RecordingSink::default().without_usage();
        chat().run(&start_with_config(b""), &sink).await.unwrap();
        assert!(matches!(sink.calls().as_slice(), [Call::Model(_)]));
    }

    // Tool loop, extensions §6: a park raised by the sink reaches the host unchanged.
    #[tokio::test]
    async fn a_park_propagates_unchanged() {
        let park = agentsessions_api::ApprovalRef {
            execution_id: "x1".into(),
            tool_call_id: "x1/tool/0/1".into(),
            request_seq: 9,
        };
        let sink = RecordingSink::answering(vec![asks_for(&[("m2", "pay")])])
            .failing_tools(ApiError::ApprovalParked(park.clone()));
        let err = tool_chat(&catalog())
            .run(&exec_start(), &sink)
            .await
            .unwrap_err();
        assert!(agentsessions_api::is_park_unwind(&err, &park), "{err}");
        assert_eq!(sink.calls().len(), 3, "nothing after the park");
    }

    // Tool loop: the step limit counts model calls; the last answer's calls are not run.
    #[tokio::test]
    async fn the_step_limit_stops_the_loop() {
        let sink = RecordingSink::answering(vec![
            asks_for(&[("m1", "lookup")]),
            asks_for(&[("m2", "lookup")]),
        ]);
        let err = tool_chat(&catalog())
            .with_max_steps(2)
            .run(&exec_start(), &sink)
            .await
            .unwrap_err();
        assert_eq!(err, ApiError::from(HarnessesError::StepLimit { limit: 2 }));
        let models = sink
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::Model(_)))
            .count();
        let tools = sink
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::ToolCall(_)))
            .count();
        assert_eq!((models, tools), (2, 1));
    }

    fn at(execution: &str, kind: EventKind, body: EventBody) -> Event {
        Event::new(kind, body).with_execution(execution.to_owned())
    }

    fn recorded(id: &str, result: ToolResult) -> Event {
        at(
            "x0",
            EventKind::ToolResult,
            EventBody::Result(ToolResult {
                id: id.into(),
                ..result
            }),
        )
    }

    fn made(id: &str) -> Event {
        at(
            "x0",
            EventKind::ToolCall,
            EventBody::ToolCall(ToolCall {
                id: id.into(),
                tool: "lookup".into(),
                ..ToolCall::default()
            }),
        )
    }

    /// The (model call id, is_error, error, text) of each answer in a `tool` message.
    fn answers(message: &Message) -> Vec<(String, bool, String, String)> {
        assert_eq!(message.role, "tool");
        message
            .parts
            .iter()
            .map(|part| match part {
                Part::ToolResult(r) => (
                    r.id.clone(),
                    r.is_error,
                    r.error.clone(),
                    r.content
                        .iter()
                        .filter_map(|p| match p {
                            Part::Text(t) => Some(t.text.as_str()),
                            _ => None,
                        })
                        .collect(),
                ),
                other => panic!("a tool message holds results, got {other:?}"),
            })
            .collect()
    }

    // Tool loop: an earlier turn's answers keep their tool calls, each followed by the tool
    // message answering every call (the recorded result without the host's receipt fields, a
    // denial, "outcome unknown" for a call made without a result, "not run" for one never made);
    // an answer without calls is kept as it is.
    #[tokio::test]
    async fn history_keeps_earlier_tool_rounds_with_their_answers() {
        let mut first = asks_for(&[("m0", "lookup"), ("m1", "pay")]);
        first.parts.insert(
            0,
            Part::Text(agentsessions_api::TextPart {
                text: "checking".into(),
            }),
        );
        let second = asks_for(&[("m2", "lookup"), ("m3", "missing")]);
        let ran = ToolResult {
            content: vec![Part::Text(agentsessions_api::TextPart {
                text: "21C".into(),
            })],
            approval_request_seq: 0,
            ..ToolResult::default()
        };
        let denied = ToolResult {
            is_error: true,
            error: "approval denied: not today".into(),
            code: agentsessions_api::ToolResultCode::ApprovalDenied,
            approval_request_seq: 5,
            approval_decision_seq: 6,
            ..ToolResult::default()
        };
        let start = Start {
            history: vec![
                at(
                    "x0",
                    EventKind::Input,
                    EventBody::Message(Message::text_message("user", "weather?")),
                ),
                at("x0", EventKind::Output, EventBody::Message(first.clone())),
                made("x0/tool/0/0"),
                recorded("x0/tool/0/0", ran),
                made("x0/tool/0/1"),
                recorded("x0/tool/0/1", denied),
                at("x0", EventKind::Output, EventBody::Message(second.clone())),
                made("x0/tool/1/0"),
                at(
                    "x0",
                    EventKind::Output,
                    EventBody::Message(Message::text_message("assistant", "done")),
                ),
            ]
            .into(),
            ..exec_start()
        };
        let sink = RecordingSink::default();
        chat().run(&start, &sink).await.unwrap();
        let messages = only_request(&sink).messages;
        assert_eq!(messages.len(), 7, "{messages:?}");
        assert_eq!(messages[1], first);
        assert_eq!(
            answers(&messages[2]),
            [
                ("m0".into(), false, String::new(), "21C".into()),
                (
                    "m1".into(),
                    true,
                    "approval denied: not today".into(),
                    String::new()
                ),
            ]
        );
        let Part::ToolResult(denial) = &messages[2].parts[1] else {
            panic!("a result")
        };
        assert_eq!(
            (denial.approval_request_seq, denial.code),
            (0, agentsessions_api::ToolResultCode::Unspecified),
            "the host's receipt fields stay out"
        );
        assert_eq!(messages[3], second);
        assert_eq!(
            answers(&messages[4]),
            [
                (
                    "m2".into(),
                    true,
                    agentsessions_api::OUTCOME_UNKNOWN.into(),
                    String::new()
                ),
                ("m3".into(), true, NEVER_MADE.into(), String::new()),
            ]
        );
        assert_eq!(messages[5], Message::text_message("assistant", "done"));
        assert_eq!(messages[6], Message::text_message("user", "hi"));
    }

    // Tool loop: the second turn's model call reads the first turn's tool call and its answer
    // exactly as the first turn's own next step did.
    #[tokio::test]
    async fn a_second_turn_reads_the_first_turns_tool_round() {
        let catalog = catalog();
        let sink = RecordingSink::answering(vec![asks_for(&[("m1", "lookup")])]);
        tool_chat(&catalog).run(&exec_start(), &sink).await.unwrap();
        let calls = sink.calls();
        let [.., Call::Model(live_next), Call::Usage(_)] = calls.as_slice() else {
            panic!("unexpected calls {calls:?}")
        };
        // The first turn as the journal holds it: its input, the answer asking for the tool, the
        // call and its result, the final answer.
        let mut history = vec![at(
            "x1",
            EventKind::Input,
            EventBody::Message(Message::text_message("user", "hi")),
        )];
        for call in &calls {
            match call {
                Call::Model(_) | Call::Usage(_) => {}
                Call::ToolCall(made) => {
                    history.push(at(
                        "x1",
                        EventKind::ToolCall,
                        EventBody::ToolCall(made.clone()),
                    ));
                    history.push(at(
                        "x1",
                        EventKind::ToolResult,
                        EventBody::Result(ToolResult {
                            id: made.id.clone(),
                            ..ToolResult::default()
                        }),
                    ));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        history.insert(
            1,
            at(
                "x1",
                EventKind::Output,
                EventBody::Message(asks_for(&[("m1", "lookup")])),
            ),
        );
        let next = Start {
            execution_id: "x2".into(),
            history: history.into(),
            inputs: vec![Message::text_message("user", "and again?")],
            ..Start::default()
        };
        let second = RecordingSink::default();
        tool_chat(&catalog).run(&next, &second).await.unwrap();
        let request = second
            .calls()
            .into_iter()
            .find_map(|c| match c {
                Call::Model(request) => Some(request),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            request.messages[..3],
            live_next.messages[..3],
            "the first turn's input, tool call and answer, as the first turn sent them"
        );
        assert_eq!(
            request.messages[3],
            Message::text_message("user", "and again?")
        );
    }
}
