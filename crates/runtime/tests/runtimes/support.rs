//! A host-side sink answering model calls like the built-in echo model, and a start frame.

use std::sync::Mutex;

use agentsessions_api::{
    EventSink, Message, ModelRequest, ModelResponse, Result, Start, ToolCall, ToolResult, Usage,
};
use async_trait::async_trait;

/// Answers each model call with `"echo:" + last message text`; records the outputs.
#[derive(Debug, Default)]
pub(crate) struct EchoSink {
    pub(crate) answers: Mutex<Vec<String>>,
}

#[async_trait]
impl EventSink for EchoSink {
    async fn model(&self, request: ModelRequest) -> Result<ModelResponse> {
        let last = request
            .messages
            .last()
            .map(Message::text)
            .unwrap_or_default();
        let text = format!("echo:{last}");
        self.answers.lock().unwrap().push(text.clone());
        Ok(ModelResponse {
            message: Message::text_message("assistant", text),
            usage: Usage::default(),
        })
    }

    async fn output(&self, _text: String) -> Result<()> {
        Ok(())
    }

    async fn tool_call(&self, call: ToolCall) -> Result<ToolResult> {
        Ok(ToolResult {
            id: call.id,
            ..ToolResult::default()
        })
    }

    async fn report(&self, _result: ToolResult) -> Result<()> {
        Ok(())
    }

    async fn usage(&self, _usage: Usage) -> Result<()> {
        Ok(())
    }
}

pub(crate) fn start(session: &str, text: &str) -> Start {
    Start {
        execution_id: format!("exec-{session}"),
        session_uid: session.to_owned(),
        inputs: vec![Message::text_message("user", text)],
        ..Start::default()
    }
}
