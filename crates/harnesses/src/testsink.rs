//! A recording [`EventSink`] for the unit tests: it remembers every call in order and answers
//! model calls with the next scripted answer, else `"echo:" + the last message's text` (the
//! built-in echo model), with a usage naming the requested model, or with a scripted error; tool
//! calls get an empty result or a scripted error.

use std::collections::VecDeque;
use std::sync::Mutex;

use agentsessions_api::{
    ApiError, EventSink, Message, ModelRequest, ModelResponse, Result, ToolCall, ToolResult, Usage,
};
use async_trait::async_trait;

/// One sink call, as the harness made it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Call {
    Model(ModelRequest),
    Output(String),
    ToolCall(ToolCall),
    Report(ToolResult),
    Usage(Usage),
}

#[derive(Debug, Default)]
pub(crate) struct RecordingSink {
    calls: Mutex<Vec<Call>>,
    model_error: Option<ApiError>,
    answers: Mutex<VecDeque<Message>>,
    tool_error: Option<ApiError>,
    no_usage: bool,
}

impl RecordingSink {
    /// A sink whose model calls fail with `err`.
    pub(crate) fn failing_models(err: ApiError) -> Self {
        Self {
            model_error: Some(err),
            ..Self::default()
        }
    }

    /// A sink answering model calls with `answers` in order (then echoing).
    pub(crate) fn answering(answers: Vec<Message>) -> Self {
        Self {
            answers: Mutex::new(answers.into()),
            ..Self::default()
        }
    }

    /// This sink, answering without usage (as replay serves a completion recorded without it).
    pub(crate) fn without_usage(self) -> Self {
        Self {
            no_usage: true,
            ..self
        }
    }

    /// This sink, failing every tool call with `err`.
    pub(crate) fn failing_tools(self, err: ApiError) -> Self {
        Self {
            tool_error: Some(err),
            ..self
        }
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }
}

#[async_trait]
impl EventSink for RecordingSink {
    async fn model(&self, request: ModelRequest) -> Result<ModelResponse> {
        let last = request
            .messages
            .last()
            .map(Message::text)
            .unwrap_or_default();
        let request_model = request.model.clone();
        self.record(Call::Model(request));
        if let Some(err) = &self.model_error {
            return Err(err.clone());
        }
        let scripted = self.answers.lock().unwrap().pop_front();
        let usage = if self.no_usage {
            Usage::default()
        } else {
            Usage {
                model: request_model,
                output_tokens: 1,
                ..Usage::default()
            }
        };
        Ok(ModelResponse {
            message: scripted
                .unwrap_or_else(|| Message::text_message("assistant", format!("echo:{last}"))),
            usage,
        })
    }

    async fn output(&self, text: String) -> Result<()> {
        self.record(Call::Output(text));
        Ok(())
    }

    async fn tool_call(&self, call: ToolCall) -> Result<ToolResult> {
        let id = call.id.clone();
        self.record(Call::ToolCall(call));
        if let Some(err) = &self.tool_error {
            return Err(err.clone());
        }
        Ok(ToolResult {
            id,
            ..ToolResult::default()
        })
    }

    async fn report(&self, result: ToolResult) -> Result<()> {
        self.record(Call::Report(result));
        Ok(())
    }

    async fn usage(&self, usage: Usage) -> Result<()> {
        self.record(Call::Usage(usage));
        Ok(())
    }
}
