//! Closing an unfinished turn without running it on (extensions §9):
//! the results that settle its open calls ([`crate::settlement`]), then the CANCEL marker and END
//! CANCELED a cancel writes. A Cancel of a turn that is not running appends them on their own;
//! an Exec that abandons the turn puts them first in its opening commit.

use agentsessions_api::{EventBody, EventKind, History};
use agentsessions_journal::LogRecord;

use super::closing::cancel_events;
use super::{Controller, TurnOutcome};
use crate::error::Result;
use crate::settlement::{Unfinished, unfinished_in};
use crate::view::LogView;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _};

/// The reason an abandoned turn's END and CANCEL marker carry.
pub(super) const ABANDONED: &str =
    "abandoned: new input was sent with abandon_unfinished, so this turn was closed unfinished";

/// The history of a turn whose opening commit also closed the turn it abandoned: the view's
/// events, then the `closing` records (none: the view's history, shared, not copied).
pub(super) fn with_closing(view: &LogView, closing: &[LogRecord]) -> History {
    if closing.is_empty() {
        return view.history();
    }
    view.records()
        .iter()
        .chain(closing)
        .map(|record| record.event.clone())
        .collect()
}

impl Controller {
    /// The events that close `left` for `reason`, as journaled: a settling result for each open
    /// call, the session's CANCEL marker, and END CANCELED.
    pub(super) fn closing_events(
        &self,
        left: &Unfinished<'_>,
        records: &[LogRecord],
        reason: &str,
    ) -> Vec<agentsessions_api::Event> {
        let execution_id = &left.execution.id;
        let settled = left.settlements(records).into_iter().map(|result| {
            self.settings
                .journaled(EventKind::ToolResult, EventBody::Result(result))
                .with_execution(execution_id.clone())
        });
        let closed = cancel_events(execution_id, reason)
            .into_iter()
            .map(|event| self.settings.scrubbed(event));
        settled.chain(closed).collect()
    }

    /// Closes the session's unfinished last turn without running it on, for `reason` (a Cancel
    /// of a turn parked at an approval or interrupted): its open calls are settled (outcome
    /// unknown, or not run for an undecided approval), then CANCEL and END CANCELED, in one
    /// durable commit at the view's head that mints a fresh fence, so a writer still holding
    /// the turn is refused from then on. `None` when the last turn has ended (or was inherited
    /// through a fork).
    ///
    /// # Errors
    /// [`crate::ControllerError::InvalidExecutionLog`]; journal failures, a conflict among them
    /// when the view is older than the head (nothing written).
    pub async fn close_unfinished(
        &self,
        reason: &str,
        view: &LogView,
    ) -> Result<Option<TurnOutcome>> {
        self.require_session()?;
        let Some(left) = unfinished_in(view)? else {
            return Ok(None);
        };
        let events = self.closing_events(&left, view.records(), reason);
        // The fence is minted in the same commit, after its cursor check: a view that lost the
        // race to the head changes nothing.
        let records = self
            .journal
            .append_records(AppendRequest::new(
                &self.session,
                view.head(),
                FenceUse::Mint,
                events,
            ))
            .await?;
        self.notify(&records);
        Ok(Some(TurnOutcome {
            execution_id: left.execution.id.clone(),
            records,
            ..TurnOutcome::default()
        }))
    }
}
