//! [`CounterHarness`]: the reference stateful harness.

use std::sync::atomic::{AtomicU64, Ordering};

use agentsessions_api::{
    Capabilities, Descriptor, EventSink, Harness, Result, Resumability, Start,
};
use async_trait::async_trait;

/// The `counter` harness (semantics §10.5): each execution increments a counter held only in
/// this value's memory and outputs the new value in decimal. It never reads history, so its
/// state survives suspend and resume only on a runtime that snapshots memory, which is what it
/// declares (`REQUIRES_MEMORY_SNAPSHOT`, not fork-safe).
#[derive(Debug, Default)]
pub struct CounterHarness {
    count: AtomicU64,
}

impl CounterHarness {
    /// The harness id.
    pub const ID: &'static str = "counter";
    /// The advertised replay version.
    pub const VERSION: &'static str = "1";

    /// A fresh counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current value (how many executions have run on this instance).
    pub fn value(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Harness for CounterHarness {
    async fn describe(&self) -> Result<Descriptor> {
        Ok(Descriptor {
            id: Self::ID.to_owned(),
            version: Self::VERSION.to_owned(),
            models: Vec::new(),
            tools: Vec::new(),
            capabilities: Capabilities {
                resumability: Resumability::RequiresMemorySnapshot,
                fork_safe: false,
                ..Capabilities::default()
            },
        })
    }

    /// Increments the counter and emits its new value through [`EventSink::output`]. The
    /// increment happens before the output, so a dropped or failed run still counts: the state
    /// is the process's memory, not the journal (I4).
    ///
    /// # Errors
    ///
    /// Whatever [`EventSink::output`] returns, unchanged.
    async fn run(&self, _start: &Start, sink: &dyn EventSink) -> Result<()> {
        let value = self.count.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        sink.output(value.to_string()).await
    }
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{Event, EventBody, EventKind, Message};

    use super::*;
    use crate::testsink::{Call, RecordingSink};

    // semantics §10.5: id counter, REQUIRES_MEMORY_SNAPSHOT, not fork-safe, version "1".
    #[tokio::test]
    async fn describes_itself_as_a_memory_harness() {
        let d = CounterHarness::new().describe().await.unwrap();
        assert_eq!(d.id, "counter");
        assert_eq!(d.version, "1");
        assert_eq!(
            d.capabilities.resumability,
            Resumability::RequiresMemorySnapshot
        );
        assert!(!d.capabilities.fork_safe);
    }

    // semantics §10.5: 0 on a fresh instance, incremented per run, output in decimal; history
    // (even one that says otherwise) is never read, and no model is called.
    #[tokio::test]
    async fn counts_runs_in_memory_and_ignores_history() {
        let counter = CounterHarness::new();
        assert_eq!(counter.value(), 0);
        let start = Start {
            history: vec![Event::new(
                EventKind::Output,
                EventBody::Message(Message::text_message("assistant", "41")),
            )]
            .into(),
            ..Start::default()
        };
        let sink = RecordingSink::default();
        for _ in 0..3 {
            counter.run(&start, &sink).await.unwrap();
        }
        assert_eq!(
            sink.calls(),
            vec![
                Call::Output("1".into()),
                Call::Output("2".into()),
                Call::Output("3".into())
            ]
        );
        assert_eq!(counter.value(), 3);
        // A second instance is a fresh process.
        let fresh = RecordingSink::default();
        CounterHarness::new().run(&start, &fresh).await.unwrap();
        assert_eq!(fresh.calls(), vec![Call::Output("1".into())]);
    }
}
