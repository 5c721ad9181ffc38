//! [`EchoHarness`]: the smallest useful harness, one model call per execution.

use agentsessions_api::{
    Capabilities, Descriptor, EventSink, Harness, Message, ModelRequest, Result, Resumability,
    Start,
};
use async_trait::async_trait;

/// The `echo` harness (semantics §10.5): sends the text of the execution's last input to the
/// model `echo` and lets the host record the completion. It keeps no state, so it replays from
/// history on any runtime and is safe to fork.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoHarness;

impl EchoHarness {
    /// The harness id.
    pub const ID: &'static str = "echo";
    /// The advertised replay version.
    pub const VERSION: &'static str = "1";
    /// The one model it calls.
    pub const MODEL: &'static str = "echo";

    /// The echo harness.
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl Harness for EchoHarness {
    async fn describe(&self) -> Result<Descriptor> {
        Ok(Descriptor {
            id: Self::ID.to_owned(),
            version: Self::VERSION.to_owned(),
            models: vec![Self::MODEL.to_owned()],
            tools: Vec::new(),
            capabilities: Capabilities {
                resumability: Resumability::StatelessReplay,
                fork_safe: true,
                ..Capabilities::default()
            },
        })
    }

    /// One model call: `echo`, with a single user message holding the concatenated text parts
    /// of the last input (empty when there is no input). The completion is the turn's output,
    /// so nothing is emitted through [`EventSink::output`].
    ///
    /// # Errors
    ///
    /// Whatever [`EventSink::model`] returns, unchanged.
    async fn run(&self, start: &Start, sink: &dyn EventSink) -> Result<()> {
        let text = start.inputs.last().map(Message::text).unwrap_or_default();
        sink.model(ModelRequest {
            model: Self::MODEL.to_owned(),
            messages: vec![Message::text_message("user", text)],
            ..ModelRequest::default()
        })
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{ApiError, Event, EventBody, EventKind, Part, StatusCode, TextPart};

    use super::*;
    use crate::testsink::{Call, RecordingSink};

    fn echo_request(text: &str) -> Call {
        Call::Model(ModelRequest {
            model: "echo".into(),
            messages: vec![Message::text_message("user", text)],
            ..ModelRequest::default()
        })
    }

    // semantics §10.5: id echo, models [echo], STATELESS_REPLAY, fork-safe, version "1".
    #[tokio::test]
    async fn describes_itself_as_a_stateless_fork_safe_echo() {
        let d = EchoHarness::new().describe().await.unwrap();
        assert_eq!(d.id, "echo");
        assert_eq!(d.version, "1");
        assert_eq!(d.models, vec!["echo".to_owned()]);
        assert_eq!(d.capabilities.resumability, Resumability::StatelessReplay);
        assert!(d.capabilities.fork_safe);
    }

    // semantics §10.5: the text of the LAST input, its text parts concatenated; one model call,
    // no output call; history is not read.
    #[tokio::test]
    async fn sends_the_concatenated_text_of_the_last_input_only() {
        let last = Message {
            role: "user".into(),
            parts: vec![
                Part::Text(TextPart { text: "b".into() }),
                Part::Empty,
                Part::Text(TextPart { text: "c".into() }),
            ],
        };
        let start = Start {
            history: vec![Event::new(
                EventKind::Input,
                EventBody::Message(Message::text_message("user", "old")),
            )]
            .into(),
            inputs: vec![Message::text_message("user", "a"), last],
            ..Start::default()
        };
        let sink = RecordingSink::default();
        EchoHarness.run(&start, &sink).await.unwrap();
        assert_eq!(sink.calls(), vec![echo_request("bc")]);
    }

    // semantics §10.5: "" if there is no input.
    #[tokio::test]
    async fn no_input_echoes_the_empty_string() {
        let sink = RecordingSink::default();
        EchoHarness.run(&Start::default(), &sink).await.unwrap();
        assert_eq!(sink.calls(), vec![echo_request("")]);
    }

    // semantics §10.5 / §9.6: the model error is returned, not retried.
    #[tokio::test]
    async fn returns_the_model_error() {
        let err = ApiError::status(StatusCode::Unavailable, "provider down");
        let sink = RecordingSink::failing_models(err.clone());
        assert_eq!(EchoHarness.run(&Start::default(), &sink).await, Err(err));
        assert_eq!(sink.calls().len(), 1);
    }
}
