//! [`PromptedChat`]: the chat harness with an operator default system prompt
//! (`--system-prompt`), used when an execution's own config sets none.
//!
//! The prompt changes what the model is asked, so it is part of the harness's replay identity:
//! the advertised version becomes `1+prompt.<12 hex of its SHA-256>`. A host replaying a turn
//! recorded under another prompt then sees another version instead of a model-input mismatch.

use agentsessions_api::{Descriptor, EventSink, Harness, Result, Start};
use agentsessions_harnesses::ChatHarness;
use async_trait::async_trait;
use sha2::{Digest as _, Sha256};

/// The chat harness plus a default system prompt.
#[derive(Debug, Clone)]
pub(crate) struct PromptedChat {
    chat: ChatHarness,
    /// The config sent when an execution has none: `{"system_prompt": …}`.
    default_config: Vec<u8>,
    version: String,
}

impl PromptedChat {
    pub(crate) fn new(chat: ChatHarness, prompt: &str) -> Self {
        let default_config = serde_json::json!({ "system_prompt": prompt })
            .to_string()
            .into_bytes();
        let digest = hex::encode(Sha256::digest(prompt.as_bytes()));
        let short = digest.get(..12).unwrap_or(&digest);
        Self {
            chat,
            default_config,
            version: format!("{}+prompt.{short}", ChatHarness::VERSION),
        }
    }
}

#[async_trait]
impl Harness for PromptedChat {
    async fn describe(&self) -> Result<Descriptor> {
        let mut descriptor = self.chat.describe().await?;
        descriptor.version.clone_from(&self.version);
        Ok(descriptor)
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> Result<()> {
        if !start.config.is_empty() {
            return self.chat.run(start, sink).await;
        }
        let start = Start {
            config: self.default_config.clone(),
            ..start.clone()
        };
        self.chat.run(&start, sink).await
    }
}
