//! A complete harness in one file: the conversation so far plus this turn's input, sent to the
//! model through the host, served with one call. Run it with
//!
//! ```text
//! cargo run -p agentsessions-harnesswire --example notes_harness -- unix:/tmp/notes.sock
//! ```
//!
//! and point a host at `unix:/tmp/notes.sock` (docs/harness-authoring.md walks through it).

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use agentsessions_api::{
    Capabilities, Descriptor, EventKind, EventSink, Harness, Message, ModelRequest, Result,
    Resumability, Start,
};
use async_trait::async_trait;

/// Keeps no state of its own: everything it needs is in `Start`, so it replays on any runtime.
struct Notes;

impl Notes {
    /// The model asked for when the host sets no default for the turn.
    const MODEL: &str = "echo";
}

#[async_trait]
impl Harness for Notes {
    async fn describe(&self) -> Result<Descriptor> {
        Ok(Descriptor {
            id: "notes".into(),
            // Bump it whenever a change would make a recorded turn send different requests.
            version: "1".into(),
            models: vec![Self::MODEL.into()],
            tools: Vec::new(),
            capabilities: Capabilities {
                resumability: Resumability::StatelessReplay,
                fork_safe: true,
                ..Capabilities::default()
            },
        })
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> Result<()> {
        // Rebuild the conversation from the journal's history, never from memory.
        let earlier = start
            .history
            .iter()
            .filter(|event| matches!(event.kind, EventKind::Input | EventKind::Output))
            .filter_map(|event| event.message().cloned());
        let messages = std::iter::once(Message::text_message(
            "system",
            "You keep short notes of what the user tells you.",
        ))
        .chain(earlier)
        .chain(start.inputs.iter().cloned())
        .collect();
        let model = if start.model.is_empty() {
            Self::MODEL.to_owned()
        } else {
            start.model.clone()
        };
        // The host calls the model (or, on replay, serves the recorded answer) and records the
        // completion as this turn's output: nothing more to emit.
        sink.model(ModelRequest {
            model,
            messages,
            ..ModelRequest::default()
        })
        .await
        .map(drop)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "unix:/tmp/notes.sock".to_owned());
    // Serves with gRPC health until SIGINT or SIGTERM, then drains running turns.
    match agentsessions_harnesswire::serve(&address, Arc::new(Notes)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "notes harness: {err}");
            ExitCode::FAILURE
        }
    }
}
