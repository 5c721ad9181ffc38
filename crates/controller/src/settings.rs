//! [`TurnSettings`]: what every turn a host drives shares, held once by whoever builds
//! controllers (the placer, a test) and handed to each controller and its sink whole, so a new
//! setting is added in one place instead of threaded through three builders.

use std::sync::Arc;

use agentsessions_api::{Event, EventBody, EventKind, ModelPolicy, Redactor};

use crate::hooks::{Cancellations, IdSource, RandomIds, TokenMinting, ToolExecutor};

/// The host-wide settings of a turn.
#[derive(Clone)]
pub struct TurnSettings {
    /// Runs controller-mediated and approved tool calls; `None` refuses them.
    pub tools: Option<Arc<dyn ToolExecutor>>,
    /// Where execution, model-call and session ids come from (random unless a test fixes them).
    pub ids: Arc<dyn IdSource>,
    /// The running executions Cancel can reach; shared by every controller of a host.
    pub cancellations: Cancellations,
    /// Whether providers are asked to stream, with chunks relayed as deltas (transport only).
    pub stream_deltas: bool,
    /// The models a turn may use; its default is journaled per turn (extensions §4).
    pub policy: Option<ModelPolicy>,
    /// Binds a delegated-token minter to each live execution; `None` (identity not configured)
    /// gives harnesses no minter.
    pub minting: Option<Arc<dyn TokenMinting>>,
    /// Takes the host's secrets out of every record a turn journals (`docs/security.md`,
    /// "Redaction"); empty by default.
    pub redactor: Arc<Redactor>,
}

impl TurnSettings {
    /// An event of `kind` as it is journaled: `body` without the secrets the redactor knows,
    /// and the names it was redacted for (extensions §1).
    pub(crate) fn journaled(&self, kind: EventKind, body: EventBody) -> Event {
        self.scrubbed(Event::new(kind, body))
    }

    /// `event` as it is journaled (see [`TurnSettings::journaled`]).
    pub(crate) fn scrubbed(&self, mut event: Event) -> Event {
        if let Some(body) = event.body.as_mut() {
            let scrubbed = self.redactor.scrub(body);
            if !scrubbed.is_empty() {
                agentsessions_telemetry::metrics().redacted(scrubbed.occurrences);
                event.redacted.extend(scrubbed.names);
                event.redacted.sort();
                event.redacted.dedup();
            }
        }
        event
    }
}

impl Default for TurnSettings {
    fn default() -> Self {
        Self {
            tools: None,
            ids: Arc::new(RandomIds),
            cancellations: Cancellations::default(),
            stream_deltas: false,
            policy: None,
            minting: None,
            redactor: Arc::new(Redactor::new()),
        }
    }
}

impl std::fmt::Debug for TurnSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnSettings")
            .field("tools", &self.tools.is_some())
            .field("ids", &self.ids)
            .field("stream_deltas", &self.stream_deltas)
            .field("policy", &self.policy)
            .field("minting", &self.minting.is_some())
            .field("redacts", &self.redactor.secret_names())
            .finish_non_exhaustive()
    }
}
