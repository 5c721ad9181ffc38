//! [`HeldAnswers`]: a test hook (`--answer-delay-ms`) that holds each `Output` and each usage
//! report of the served harness for a while before sending it. The counter has then counted but
//! not yet answered (the chat harness has its answer but has not reported its usage), so a test
//! can kill the harness, the VM it runs in or the host while a turn is in progress.

use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{
    Descriptor, EventSink, Harness, ModelRequest, ModelResponse, Result, Start, ToolCall,
    ToolResult, Usage,
};
use async_trait::async_trait;

/// The served harness, its outputs held for `delay` each.
pub(crate) struct HeldAnswers {
    inner: Arc<dyn Harness>,
    delay: Duration,
}

impl HeldAnswers {
    pub(crate) fn new(inner: Arc<dyn Harness>, delay: Duration) -> Self {
        Self { inner, delay }
    }
}

#[async_trait]
impl Harness for HeldAnswers {
    async fn describe(&self) -> Result<Descriptor> {
        self.inner.describe().await
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> Result<()> {
        let held = HeldSink {
            inner: sink,
            delay: self.delay,
        };
        self.inner.run(start, &held).await
    }
}

/// The execution's sink, with `output` and `usage` held for `delay`; everything else passes
/// through.
struct HeldSink<'a> {
    inner: &'a dyn EventSink,
    delay: Duration,
}

#[async_trait]
impl EventSink for HeldSink<'_> {
    async fn model(&self, request: ModelRequest) -> Result<ModelResponse> {
        self.inner.model(request).await
    }

    async fn output(&self, text: String) -> Result<()> {
        tokio::time::sleep(self.delay).await;
        self.inner.output(text).await
    }

    async fn tool_call(&self, call: ToolCall) -> Result<ToolResult> {
        self.inner.tool_call(call).await
    }

    async fn report(&self, result: ToolResult) -> Result<()> {
        self.inner.report(result).await
    }

    async fn usage(&self, usage: Usage) -> Result<()> {
        tokio::time::sleep(self.delay).await;
        self.inner.usage(usage).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use agentsessions_harnesses::CounterHarness;
    use agentsessions_harnesses::testsink::{Call, RecordingSink};

    use super::*;

    #[tokio::test]
    async fn outputs_are_held_then_sent_unchanged() {
        let held = HeldAnswers::new(Arc::new(CounterHarness::new()), Duration::from_millis(200));
        let sink = RecordingSink::default();
        let started = Instant::now();
        held.run(&Start::default(), &sink).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert_eq!(sink.calls(), vec![Call::Output("1".into())]);
        assert_eq!(held.describe().await.unwrap().id, "counter");
    }
}
