//! The Bring-Your-Own-Harness SPI: [`Harness`], the [`EventSink`] it emits through, and what
//! it is started with ([`Start`]) and described by ([`Descriptor`]).
//!
//! An agent framework plugs in by implementing [`Harness`] (usually through a thin adapter). The
//! host drives one execution (turn) per [`Harness::run`]; the harness runs inside the sandbox a
//! [`crate::Runtime`] provides. Over gRPC the same contract is `Harness.Connect` /
//! `Harness.Describe`, adapted by the `harnesswire` crate, which hides sequence numbers and the
//! tool-mediation round-trip.
//!
//! Cancellation: the v0.3.0 API passes a `context.Context`; here a cancelled or timed-out execution
//! is a dropped future. Every await point in [`Harness::run`] and in the [`EventSink`] methods is a
//! place where the host may drop the work, so implementations must leave nothing half-done that a
//! drop could corrupt (the journal, not the harness, is the record of what happened).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;

use crate::content::{Message, ModelRequest, ModelResponse, ToolCall, ToolResult, ToolSpec, Usage};
use crate::error::Result;
use crate::event::Event;
use crate::session::IdentityRef;
use crate::session::RuntimeCapabilities;

/// How a harness survives suspend, resume and fork.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Resumability {
    /// Not declared (the wire's zero value). Placement treats it as
    /// [`Resumability::StatelessReplay`], the documented default; the harness registry refuses a
    /// registration that leaves it unspecified.
    #[default]
    Unspecified,
    /// The harness keeps no durable in-memory state beyond the event log: on resume or fork the
    /// host replays history through [`Start::history`]. Runs on any runtime, including a plain pod.
    StatelessReplay,
    /// The harness keeps in-process state (a REPL, a browser, a long-running process). The host
    /// only places it on a runtime whose [`RuntimeCapabilities::memory_snapshot`] is true.
    RequiresMemorySnapshot,
}

impl Resumability {
    /// The v0.3.0 API's name (`STATELESS_REPLAY`, `REQUIRES_MEMORY_SNAPSHOT`); empty for
    /// unspecified.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::StatelessReplay => "STATELESS_REPLAY",
            Self::RequiresMemorySnapshot => "REQUIRES_MEMORY_SNAPSHOT",
        }
    }

    /// Parses a v0.3.0 API name; empty is unspecified, an unknown name is `None`.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "" => Self::Unspecified,
            "STATELESS_REPLAY" => Self::StatelessReplay,
            "REQUIRES_MEMORY_SNAPSHOT" => Self::RequiresMemorySnapshot,
            _ => return None,
        })
    }

    /// Whether the harness needs a memory-snapshot runtime. Anything but
    /// [`Resumability::RequiresMemorySnapshot`] is stateless (semantics §4.1).
    pub fn requires_memory_snapshot(self) -> bool {
        self == Self::RequiresMemorySnapshot
    }
}

/// What a harness needs from the runtime and how it may be moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// How the harness survives suspend, resume and fork.
    pub resumability: Resumability,
    /// No un-replayable side effects mid-turn, so a fork via replay is safe. Declared, not gated.
    pub fork_safe: bool,
    /// Needs an accelerator. Declared, not gated.
    pub requires_gpu: bool,
    /// Streams output deltas. Declared, not gated.
    pub streaming: bool,
    /// The harness persists and replays opaque provider reasoning parts verbatim through the
    /// provider's stateless path, so a reasoning harness stays
    /// [`Resumability::StatelessReplay`]: this adds no snapshot requirement.
    pub reasoning_replay: bool,
}

impl Capabilities {
    /// Whether a harness with these capabilities may be placed on a runtime with `runtime`'s
    /// (the v0.3.0 API's `CanPlace`): false only when the harness requires memory snapshots and the
    /// runtime cannot take them. Nothing else is gated (semantics §4.1).
    pub fn can_place_on(self, runtime: RuntimeCapabilities) -> bool {
        !self.resumability.requires_memory_snapshot() || runtime.memory_snapshot
    }
}

/// A harness's static contract, returned by [`Harness::describe`] and used to match it to a
/// runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Descriptor {
    /// Harness id (checked against a registration's expected descriptor id, when one is set).
    pub id: String,
    /// Stable, author-owned replay version; empty is supported and means unknown.
    pub version: String,
    /// Supported or required model ids. Under a host [`crate::ModelPolicy`] every one must be
    /// allowed; they never widen the policy or supply its default.
    pub models: Vec<String>,
    /// Tools the harness can call, with their default mediation.
    pub tools: Vec<ToolSpec>,
    /// What the harness needs from the runtime.
    pub capabilities: Capabilities,
}

type MintFn =
    dyn Fn(Vec<String>) -> Pin<Box<dyn Future<Output = Result<String>> + Send>> + Send + Sync;

/// Mints a scoped token for a downstream audience, so a harness can present delegated
/// credentials (Transaction Tokens) to tools instead of the raw session principal.
///
/// Cloning is cheap and yields the same minter. Two minters are equal when one is a clone of the
/// other. `Debug` never shows what the minter holds.
#[derive(Clone)]
pub struct TokenMinter(Arc<MintFn>);

impl TokenMinter {
    /// A minter that calls `mint` with the requested audiences.
    ///
    /// ```
    /// use agentsessions_api::TokenMinter;
    ///
    /// let minter = TokenMinter::new(|audience: Vec<String>| async move {
    ///     Ok(format!("token-for-{}", audience.join(",")))
    /// });
    /// assert_eq!(format!("{minter:?}"), "TokenMinter(..)");
    /// ```
    pub fn new<F, Fut>(mint: F) -> Self
    where
        F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String>> + Send + 'static,
    {
        Self(Arc::new(move |audience| Box::pin(mint(audience))))
    }

    /// Mints a token valid for `audience`.
    ///
    /// # Errors
    ///
    /// Whatever the minting function reports; [`crate::ApiError::PermissionDenied`] when the
    /// session principal may not obtain a token for that audience.
    pub async fn mint(&self, audience: Vec<String>) -> Result<String> {
        (self.0)(audience).await
    }
}

impl fmt::Debug for TokenMinter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenMinter(..)")
    }
}

impl PartialEq for TokenMinter {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for TokenMinter {}

/// The session principal and, optionally, a token minter for the harness.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityContext {
    /// The bound agent principal (provenance; not an authorization credential).
    pub principal: IdentityRef,
    /// `None` when identity is not configured (development); the wire then says
    /// `can_mint_tokens = false`.
    pub mint_token: Option<TokenMinter>,
}

/// The per-execution invocation the host hands to the harness.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Start {
    /// Identifies this run on the wire. Modern runs share it with their journal events; legacy
    /// runs use a session-scoped compatibility token that is never journaled.
    pub execution_id: String,
    /// The host-resolved default model of a policy-enabled execution; empty keeps the harness's
    /// own default. Replay and resume restore the recorded value, not today's policy.
    pub model: String,
    /// The session envelope for tool and approval correlation; model-only callers that do not use
    /// that envelope may leave it empty.
    pub session_uid: String,
    /// Opaque per-execution config, journaled verbatim and restored on replay and resume.
    pub config: Vec<u8>,
    /// Every event before this execution's start, also after a memory restore.
    pub history: History,
    /// The invocation's inputs; the originals are restored on replay and resume.
    pub inputs: Vec<Message>,
    /// The session principal and token minter.
    pub identity: IdentityContext,
    /// The harness's own opaque cursor, journaled with `config`; distinct from the journal's
    /// append (CAS) cursor.
    pub resume_from_seq: i64,
}

/// Where a [`History`] reads its events: one copy of a session's log, shared by every history
/// cut from it. A host that keeps a session's records between turns implements it over its own
/// storage, so a turn hands its harness the log without copying it.
pub trait HistorySource: Send + Sync {
    /// How many events the source holds.
    fn len(&self) -> usize;
    /// Whether the source holds no event.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The event at `index` (journal order, from 0), `None` past the end.
    fn event(&self, index: usize) -> Option<&Event>;
}

impl HistorySource for Vec<Event> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn event(&self, index: usize) -> Option<&Event> {
        self.get(index)
    }
}

/// An execution's history: the session's events before it, in journal order.
///
/// It is a shared, read-only prefix of one copy of the log ([`HistorySource`]), so handing every
/// execution of a replay its history costs one copy, not one per execution, and a host that
/// keeps the log between turns hands it over without any copy.
#[derive(Clone)]
pub struct History {
    source: Arc<dyn HistorySource>,
    len: usize,
}

impl Default for History {
    fn default() -> Self {
        Self::from(Vec::new())
    }
}

impl History {
    /// The whole of `source`.
    pub fn new(source: Arc<dyn HistorySource>) -> Self {
        let len = source.len();
        Self { source, len }
    }

    /// The first `len` events of this history (all of them when `len` is larger), sharing the
    /// same storage.
    #[must_use]
    pub fn prefix(&self, len: usize) -> Self {
        Self {
            source: Arc::clone(&self.source),
            len: len.min(self.len),
        }
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no event.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The event at `index`, `None` past the end.
    pub fn get(&self, index: usize) -> Option<&Event> {
        if index < self.len {
            self.source.event(index)
        } else {
            None
        }
    }

    /// The events in journal order.
    pub fn iter(&self) -> HistoryIter<'_> {
        HistoryIter {
            history: self,
            front: 0,
            back: self.len,
        }
    }

    /// The events, copied.
    pub fn to_vec(&self) -> Vec<Event> {
        self.iter().cloned().collect()
    }
}

impl<'a> IntoIterator for &'a History {
    type Item = &'a Event;
    type IntoIter = HistoryIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The events of a [`History`] in journal order.
#[derive(Debug, Clone)]
pub struct HistoryIter<'a> {
    history: &'a History,
    front: usize,
    back: usize,
}

impl<'a> Iterator for HistoryIter<'a> {
    type Item = &'a Event;

    fn next(&mut self) -> Option<&'a Event> {
        while self.front < self.back {
            let index = self.front;
            self.front += 1;
            if let Some(event) = self.history.get(index) {
                return Some(event);
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.back - self.front;
        (left, Some(left))
    }
}

impl DoubleEndedIterator for HistoryIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        while self.front < self.back {
            self.back -= 1;
            if let Some(event) = self.history.get(self.back) {
                return Some(event);
            }
        }
        None
    }
}

impl ExactSizeIterator for HistoryIter<'_> {}

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl From<Vec<Event>> for History {
    fn from(events: Vec<Event>) -> Self {
        Self::new(Arc::new(events))
    }
}

impl FromIterator<Event> for History {
    fn from_iter<I: IntoIterator<Item = Event>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

/// The Bring-Your-Own-Harness SPI.
///
/// The host calls [`Harness::run`] once per execution; a harness may be asked to run many
/// executions, one after another or (for different sessions) concurrently, so per-execution state
/// belongs in the future `run` returns, not in `self`.
#[async_trait]
pub trait Harness: Send + Sync {
    /// Returns the harness's static contract, used to match it to a runtime (and, under a model
    /// policy, checked with [`crate::ModelPolicy::validate_descriptor`]). The host may call it
    /// before every placement, so it should be cheap and must not change between calls for the
    /// same [`Descriptor::version`].
    ///
    /// # Errors
    ///
    /// A harness that cannot describe itself (a remote harness that is unreachable, say) returns
    /// an error, typically [`crate::ApiError::Status`]; the host does not place it.
    async fn describe(&self) -> Result<Descriptor>;

    /// Drives exactly one execution: reads `start`, emits through `sink`, and returns `Ok(())` when
    /// the execution completed. Every model call goes through [`EventSink::model`] and every
    /// mediated tool through [`EventSink::tool_call`], so that replay can serve recorded results
    /// without invoking anything.
    ///
    /// Cancellation is dropping the returned future (see the module docs).
    ///
    /// # Errors
    ///
    /// Any error fails the execution, except a park: when a sink call returns
    /// [`crate::ApiError::ApprovalParked`], the harness must unwind and return that error
    /// (wrapped or joined as it likes, but with no independent failure) so the host recognizes it
    /// with [`crate::is_park_unwind`]. Errors the sink returns, [`crate::ApiError::Cancelled`] and
    /// [`crate::ApiError::ModelNotAllowed`] among them, should be returned rather than swallowed:
    /// the host treats a mediated model rejection as fatal even if the harness handles it.
    async fn run(&self, start: &Start, sink: &dyn EventSink) -> Result<()>;
}

/// The harness author's handle for emitting events during one [`Harness::run`]. The host (or the
/// SDK adapting the gRPC stream) assigns sequence numbers and performs the emit and
/// wait-for-host round-trips.
///
/// Each method completes once the host has taken responsibility for what was emitted. Dropping a
/// call's future abandons the wait, not the emission, which may already be recorded.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Performs a model call and returns the completion. Live, the host invokes the model and
    /// records the result; on replay it serves the recorded result from the journal and does not
    /// invoke the model. The harness therefore never touches a provider SDK directly. Reasoning
    /// parts ride in [`ModelResponse::message`] and are recorded verbatim (I2). The host records
    /// the completion as the turn's output: do not emit the same content again via
    /// [`EventSink::output`].
    ///
    /// # Errors
    ///
    /// [`crate::ApiError::ModelNotAllowed`] when `request.model` is outside the host's policy
    /// (fatal for the execution); [`crate::ApiError::Cancelled`] when the execution was cancelled;
    /// [`crate::ApiError::Status`] for provider and transport failures.
    async fn model(&self, request: ModelRequest) -> Result<ModelResponse>;

    /// Streams assistant output: a delta or a full message.
    ///
    /// # Errors
    ///
    /// [`crate::ApiError::Cancelled`] when the execution was cancelled; [`crate::ApiError::Status`]
    /// when the host could not record it.
    async fn output(&self, text: String) -> Result<()>;

    /// Emits a tool call and returns its result. For controller-mediated and approval-requiring
    /// tools it waits until the host returns a result (or a decision in
    /// [`ToolResult::approval`]); for in-harness-reported tools the author executes the tool and
    /// calls [`EventSink::report`] instead. Do not mutate a [`ToolCall`] taken from a recorded
    /// model message in place: copy it, set mediation and idempotency key on the copy, and pass
    /// the copy.
    ///
    /// # Errors
    ///
    /// [`crate::ApiError::ApprovalParked`] when the host parks the execution for an approval
    /// decision (the harness must unwind, see [`Harness::run`]); [`crate::ApiError::Cancelled`]
    /// when the execution was cancelled; [`crate::ApiError::Status`] for a call the host refuses
    /// (unmediated, missing idempotency key) or a transport failure.
    async fn tool_call(&self, call: ToolCall) -> Result<ToolResult>;

    /// Records the result of a tool the harness executed itself.
    ///
    /// # Errors
    ///
    /// [`crate::ApiError::Cancelled`] when the execution was cancelled; [`crate::ApiError::Status`]
    /// when the host refuses or cannot record the result.
    async fn report(&self, result: ToolResult) -> Result<()>;

    /// Records token and cost accounting. For a model call's usage, pass the
    /// [`ModelResponse::usage`] that [`EventSink::model`] returned: replay and resume serve the
    /// recorded usage with the recorded completion, so the same call matches the record.
    ///
    /// # Errors
    ///
    /// [`crate::ApiError::Cancelled`] when the execution was cancelled; [`crate::ApiError::Status`]
    /// when the host cannot record it.
    async fn usage(&self, usage: Usage) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiError;
    use crate::testutil::block_on;

    #[test]
    fn resumability_names_round_trip() {
        for r in [
            Resumability::Unspecified,
            Resumability::StatelessReplay,
            Resumability::RequiresMemorySnapshot,
        ] {
            assert_eq!(Resumability::parse(r.as_str()), Some(r));
        }
        assert_eq!(Resumability::parse("SOMETIMES"), None);
    }

    // semantics §4.1: CanPlace is false only for a memory harness on a runtime without memory
    // snapshots; unspecified resumability is stateless.
    #[test]
    fn only_a_memory_harness_needs_a_memory_snapshot_runtime() {
        let pod = RuntimeCapabilities::default();
        let vm = RuntimeCapabilities {
            memory_snapshot: true,
            ..RuntimeCapabilities::default()
        };
        let caps = |resumability| Capabilities {
            resumability,
            requires_gpu: true,
            ..Capabilities::default()
        };
        assert!(caps(Resumability::Unspecified).can_place_on(pod));
        assert!(caps(Resumability::StatelessReplay).can_place_on(pod));
        assert!(!caps(Resumability::RequiresMemorySnapshot).can_place_on(pod));
        assert!(caps(Resumability::RequiresMemorySnapshot).can_place_on(vm));
    }

    #[test]
    fn token_minter_mints_and_hides_its_internals() {
        let secret = String::from("s3cret");
        let minter = TokenMinter::new(move |audience: Vec<String>| {
            let secret = secret.clone();
            async move {
                if audience.is_empty() {
                    return Err(ApiError::PermissionDenied);
                }
                Ok(format!("{secret}:{}", audience.join(",")))
            }
        });
        fn assert_send<T: Send>(_: &T) {}
        assert_send(&minter.mint(Vec::new()));
        assert_eq!(
            block_on(minter.mint(vec!["a".into(), "b".into()])),
            Ok("s3cret:a,b".to_owned())
        );
        assert_eq!(
            block_on(minter.mint(Vec::new())),
            Err(ApiError::PermissionDenied)
        );
        let identity = IdentityContext {
            principal: IdentityRef::default(),
            mint_token: Some(minter.clone()),
        };
        assert!(!format!("{identity:?}").contains("s3cret"));
        assert_eq!(identity.mint_token, Some(minter));
        assert_ne!(
            identity.mint_token,
            Some(TokenMinter::new(|_| async { Ok(String::new()) }))
        );
    }
}
