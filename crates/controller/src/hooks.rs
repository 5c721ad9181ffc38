//! What a host plugs into the controller: a tool executor, an observer of committed records and
//! deltas, a source of ids, the registry that cancels running executions, and the binder of
//! delegated-token minters.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};

use agentsessions_api::{CallerIdentity, Delta, IdentityRef, TokenMinter, ToolCall, ToolResult};
use agentsessions_journal::LogRecord;
use async_trait::async_trait;
use tokio::sync::oneshot;

/// Runs controller-mediated (and approved) tool calls on the host.
///
/// The controller records the call (with its idempotency key) before calling `execute`, and
/// re-drives a recorded call whose result was lost, with the same key, at most once per resume:
/// an executor must therefore deduplicate durably on `(session_uid, idempotency_key)`. Keys are
/// unique per session only; a fork child is a new namespace.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    /// Executes `call` for `session_uid` and returns its result. The controller overwrites the
    /// result's `id` with the call id.
    ///
    /// # Errors
    /// Any error means "no result": nothing is journaled, the harness sees the error, and a
    /// later resume re-drives the recorded call.
    async fn execute(
        &self,
        session_uid: &str,
        call: &ToolCall,
    ) -> agentsessions_api::Result<ToolResult>;

    /// [`ToolExecutor::execute`], knowing the execution the call belongs to as well (an executor
    /// that acts for the turn, such as one attaching delegated tokens, needs it). The controller
    /// always calls this; the default ignores the execution.
    ///
    /// # Errors
    /// As [`ToolExecutor::execute`].
    async fn execute_for(
        &self,
        call_context: &ToolCallContext<'_>,
        call: &ToolCall,
    ) -> agentsessions_api::Result<ToolResult> {
        self.execute(call_context.session_uid, call).await
    }

    /// Whether this executor runs calls to `tool` at all (a configured source offers it, even
    /// if it is down right now), so an approval is refused up front on a host that could not
    /// carry it out (extensions §9). The default, for an executor that
    /// cannot tell, is yes.
    fn runs(&self, tool: &str) -> bool {
        let _ = tool;
        true
    }
}

/// Where a tool call comes from: the session and the execution (turn) that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolCallContext<'a> {
    /// The session.
    pub session_uid: &'a str,
    /// The execution, as its harness sees it (the id a harness's minter is bound to).
    pub execution_id: &'a str,
}

impl<'a> ToolCallContext<'a> {
    /// The context of a call made by `execution_id` of `session_uid`.
    pub fn new(session_uid: &'a str, execution_id: &'a str) -> Self {
        Self {
            session_uid,
            execution_id,
        }
    }
}

/// A running tool call's progress, as its source reports it (an MCP server's
/// `notifications/progress`): transport only, never journaled or replayed (extensions §11).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolProgress {
    /// The session the call belongs to.
    pub session_uid: String,
    /// The execution that made the call, as its harness sees it.
    pub execution_id: String,
    /// The call's id.
    pub tool_call_id: String,
    /// The tool as the model sees it.
    pub tool: String,
    /// Progress so far.
    pub progress: f64,
    /// What the progress counts towards, when known.
    pub total: Option<f64>,
    /// What the tool says it is doing (may be empty).
    pub message: String,
}

/// Where a tool executor reports the progress of the calls it runs. Called inline from the
/// executor's connection, so implementations must be quick and must not block; a report with
/// nobody listening is dropped.
pub trait ProgressSink: Send + Sync {
    /// Reports `progress`.
    fn progress(&self, progress: ToolProgress);
}

/// Binds a delegated-token minter to each live execution (a host with identity configured).
///
/// The controller asks once per live turn (Exec, and a Resume that re-drives one) and hands the
/// minter to the harness in [`agentsessions_api::IdentityContext::mint_token`]; a read-only
/// replay gets none. The minter must mint for this session, execution and principal only, and
/// never hand out a credential the caller presented to the host.
pub trait TokenMinting: Send + Sync {
    /// The minter for `execution_id` of `session_uid`, acting for `owner` (the session's verified
    /// owner, empty for an unbound session) through `agent` (its bound agent principal).
    fn minter(
        &self,
        session_uid: &str,
        execution_id: &str,
        owner: &CallerIdentity,
        agent: &IdentityRef,
    ) -> TokenMinter;
}

/// Watches a turn as it happens: every committed record, in seq order, and every streaming
/// delta. Calls are made inline from the turn, so implementations must be quick (forward to a
/// channel) and must not block.
pub trait Observer: Send + Sync {
    /// A record the journal committed for this turn.
    fn record(&self, record: &LogRecord);
    /// A transport-only streaming chunk (never journaled).
    fn delta(&self, delta: &Delta);
    /// The turn `execution_id` has committed its opening (EXECUTION_START and its INPUTs), so
    /// it is running and can be cancelled. Its records are shown later, through
    /// [`Observer::record`], once durable. Default: nothing.
    fn opened(&self, execution_id: &str) {
        let _ = execution_id;
    }
}

/// Where execution and model-call ids come from. Ids are inputs to the controller (STYLE rule
/// 3), so tests can make them deterministic.
pub trait IdSource: Send + Sync + Debug {
    /// A fresh execution id (16 lowercase hex).
    fn execution_id(&self) -> String;
    /// A fresh model-call id (16 lowercase hex).
    fn model_call_id(&self) -> String;
    /// A fresh session uid, for a session the host creates itself (a fork child). Random by
    /// default, so sources written before it existed keep working.
    fn session_uid(&self) -> String {
        agentsessions_journal::rules::new_session_uid()
    }
}

/// Random ids, as semantics §1.6 specifies.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn execution_id(&self) -> String {
        agentsessions_journal::rules::new_execution_id()
    }

    fn model_call_id(&self) -> String {
        agentsessions_journal::rules::new_execution_id()
    }
}

/// What stops a running execution before its harness returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Interruption {
    /// A Cancel, with its reason: the turn ends CANCELED.
    Cancelled(String),
    /// The host is shutting down: the turn stops where it is, an ERROR note says why, and a
    /// Resume continues it.
    HostStopping,
}

/// The running executions of this host, by execution id, so a `Cancel` can reach the turn that
/// owns one, and a host that shuts down can stop them all ([`Cancellations::interrupt_all`]).
/// Cheap to clone; share one per host.
#[derive(Debug, Clone, Default)]
pub struct Cancellations {
    running: Arc<Mutex<Running>>,
}

#[derive(Debug, Default)]
struct Running {
    executions: HashMap<String, oneshot::Sender<Interruption>>,
    /// Set by [`Cancellations::interrupt_all`]: an execution registered later is interrupted
    /// at once.
    stopping: bool,
}

/// Held by a running execution; unregisters it when dropped.
#[derive(Debug)]
pub(crate) struct CancelGuard {
    registry: Cancellations,
    execution_id: String,
    pub(crate) cancelled: oneshot::Receiver<Interruption>,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        self.registry.lock().executions.remove(&self.execution_id);
    }
}

impl Cancellations {
    fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        // The map holds plain senders; a panic elsewhere cannot leave it inconsistent.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn register(&self, execution_id: &str) -> CancelGuard {
        let (tx, rx) = oneshot::channel();
        let mut running = self.lock();
        if running.stopping {
            let _receiver_is_ours = tx.send(Interruption::HostStopping);
        } else {
            running.executions.insert(execution_id.to_owned(), tx);
        }
        drop(running);
        CancelGuard {
            registry: self.clone(),
            execution_id: execution_id.to_owned(),
            cancelled: rx,
        }
    }

    /// Asks the running execution `execution_id` to stop with `reason`. Returns false when no
    /// execution with that id is running on this host.
    pub fn cancel(&self, execution_id: &str, reason: &str) -> bool {
        match self.lock().executions.remove(execution_id) {
            Some(tx) => tx.send(Interruption::Cancelled(reason.to_owned())).is_ok(),
            None => false,
        }
    }

    /// Stops every running execution because the host is shutting down, and every execution
    /// that starts from now on as soon as it starts. Each stops where it is, writes an ERROR
    /// note ([`crate::ControllerError::HostShuttingDown`]) instead of an END, and stays
    /// resumable. Returns how many were running.
    pub fn interrupt_all(&self) -> usize {
        let running = {
            let mut running = self.lock();
            running.stopping = true;
            std::mem::take(&mut running.executions)
        };
        running
            .into_values()
            .map(|tx| tx.send(Interruption::HostStopping))
            .filter(Result::is_ok)
            .count()
    }

    /// Whether `execution_id` is running on this host.
    pub fn is_running(&self, execution_id: &str) -> bool {
        self.lock().executions.contains_key(execution_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cancel_reaches_the_registered_execution_once() {
        let registry = Cancellations::default();
        let mut guard = registry.register("x");
        assert!(registry.is_running("x"));
        assert!(registry.cancel("x", "stop"));
        assert!(!registry.cancel("x", "again"));
        assert_eq!(
            (&mut guard.cancelled).await.unwrap(),
            Interruption::Cancelled("stop".into())
        );
    }

    // A host that shuts down stops what runs and what starts after; a Cancel finds nothing.
    #[tokio::test]
    async fn interrupt_all_reaches_running_and_later_executions() {
        let registry = Cancellations::default();
        let mut running = registry.register("a");
        assert_eq!(registry.interrupt_all(), 1);
        assert_eq!(
            (&mut running.cancelled).await.unwrap(),
            Interruption::HostStopping
        );
        let mut late = registry.register("b");
        assert!(!registry.is_running("b"));
        assert!(!registry.cancel("b", "stop"));
        assert_eq!(
            (&mut late.cancelled).await.unwrap(),
            Interruption::HostStopping
        );
    }

    #[test]
    fn dropping_the_guard_unregisters() {
        let registry = Cancellations::default();
        drop(registry.register("y"));
        assert!(!registry.is_running("y"));
        assert!(!registry.cancel("y", "late"));
    }
}
