//! [`RecordingSink`], the host side of a harness under test: it remembers every call in order and
//! answers model calls with the next scripted answer, else like the built-in echo model
//! (`"echo:" + the last message's text`), with a usage naming the requested model; or with a
//! scripted error, or only once a test releases it. Tool calls get an empty result or a scripted
//! error. The unit tests here and the runtime and harnessnode tests share it (feature
//! `test-util`).

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use agentsessions_api::{
    ApiError, EventSink, Message, ModelRequest, ModelResponse, Result, ToolCall, ToolResult, Usage,
};
use async_trait::async_trait;
use tokio::sync::Notify;

/// One sink call, as the harness made it.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// A model call.
    Model(ModelRequest),
    /// Output text.
    Output(String),
    /// A tool call to mediate.
    ToolCall(ToolCall),
    /// A result of a tool the harness ran.
    Report(ToolResult),
    /// Token usage.
    Usage(Usage),
}

/// A recording, echo-answering sink; see the module docs.
#[derive(Debug, Default)]
pub struct RecordingSink {
    calls: Mutex<Vec<Call>>,
    /// The text of every answer given, in order.
    given: Mutex<Vec<String>>,
    scripted: Mutex<VecDeque<Message>>,
    model_error: Option<ApiError>,
    tool_error: Option<ApiError>,
    no_usage: bool,
    gate: Option<ModelGate>,
}

/// Holds each model call until the test releases it.
#[derive(Debug, Default)]
struct ModelGate {
    entered: Notify,
    release: Notify,
}

impl RecordingSink {
    /// A sink whose model calls fail with `err`.
    pub fn failing_models(err: ApiError) -> Self {
        Self {
            model_error: Some(err),
            ..Self::default()
        }
    }

    /// A sink answering model calls with `answers` in order (then echoing).
    pub fn answering(answers: Vec<Message>) -> Self {
        Self {
            scripted: Mutex::new(answers.into()),
            ..Self::default()
        }
    }

    /// A sink whose every model call waits, after [`Self::entered`] fires, until
    /// [`Self::release`].
    pub fn holding_models() -> Self {
        Self {
            gate: Some(ModelGate::default()),
            ..Self::default()
        }
    }

    /// This sink, answering without usage (as replay serves a completion recorded without it).
    #[must_use]
    pub fn without_usage(self) -> Self {
        Self {
            no_usage: true,
            ..self
        }
    }

    /// This sink, failing every tool call with `err`.
    #[must_use]
    pub fn failing_tools(self, err: ApiError) -> Self {
        Self {
            tool_error: Some(err),
            ..self
        }
    }

    /// Waits until a model call has entered a holding sink.
    pub async fn entered(&self) {
        if let Some(gate) = &self.gate {
            gate.entered.notified().await;
        }
    }

    /// Lets one held model call answer.
    pub fn release(&self) {
        if let Some(gate) = &self.gate {
            gate.release.notify_one();
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.calls).clone()
    }

    /// The model requests so far, in order.
    pub fn model_requests(&self) -> Vec<ModelRequest> {
        self.calls()
            .into_iter()
            .filter_map(|call| match call {
                Call::Model(request) => Some(request),
                _ => None,
            })
            .collect()
    }

    /// The text of every model answer given so far, in order.
    pub fn answers(&self) -> Vec<String> {
        lock(&self.given).clone()
    }

    fn record(&self, call: Call) {
        lock(&self.calls).push(call);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
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
        if let Some(gate) = &self.gate {
            gate.entered.notify_one();
            gate.release.notified().await;
        }
        if let Some(err) = &self.model_error {
            return Err(err.clone());
        }
        let message = lock(&self.scripted)
            .pop_front()
            .unwrap_or_else(|| Message::text_message("assistant", format!("echo:{last}")));
        lock(&self.given).push(message.text());
        let usage = if self.no_usage {
            Usage::default()
        } else {
            Usage {
                model: request_model,
                output_tokens: 1,
                ..Usage::default()
            }
        };
        Ok(ModelResponse { message, usage })
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
