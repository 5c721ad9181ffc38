//! Closing a turn (semantics §2.4 steps 9–11, §3.4 step 8): what the end of a run writes — END
//! COMPLETED, a CANCEL marker with END CANCELED, or an ERROR note — and which error the caller
//! sees.

use agentsessions_api::{
    ApiError, ErrorInfo, Event, EventBody, EventKind, HarnessEnd, Lifecycle, LifecycleKind,
    StatusCode,
};
use agentsessions_journal::LogRecord;

use super::{Controller, TurnOutcome};
use crate::error::{ControllerError, Result};
use crate::sink::{Mode, SinkState};
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _};

/// How a run ended.
pub(super) enum RunEnd {
    /// The harness returned.
    Finished(agentsessions_api::Result<()>),
    /// A Cancel reached the execution, with its reason.
    Cancelled(String),
    /// The turn's deadline passed first.
    DeadlineExceeded,
    /// The host began shutting down ([`crate::Cancellations::interrupt_all`]): an ERROR note,
    /// no END, so a Resume continues the turn.
    HostStopping,
}

impl Controller {
    /// Writes what the end of a run calls for and picks the error the caller sees: END
    /// COMPLETED for a clean finish, CANCEL and END CANCELED for a cancel, an ERROR note for
    /// every other failure, nothing for a park.
    pub(super) async fn close_turn(
        &self,
        end: RunEnd,
        mut state: SinkState,
        mode: Mode,
        journal_execution_id: &str,
        wire_execution_id: &str,
    ) -> Result<TurnOutcome> {
        let completes =
            matches!(&end, RunEnd::Finished(Ok(()))) && state.stop.is_none() && mode == Mode::Live;
        if !completes {
            // What follows reads or writes at the head: the run's queued appends come first.
            state.collect_queued().await?;
        }
        let mut outcome = TurnOutcome {
            execution_id: wire_execution_id.to_owned(),
            outputs: std::mem::take(&mut state.outputs),
            records: std::mem::take(&mut state.appended),
            model_calls: state.live_model_calls,
        };
        // Committed but not yet durable: shown once a closing append made them durable.
        let unshown = std::mem::take(&mut state.unshown);
        let failure = match end {
            RunEnd::Cancelled(reason) => {
                let closing = cancel_events(journal_execution_id, &reason);
                outcome
                    .records
                    .extend(self.append_closing(closing, &unshown).await?);
                return Err(ControllerError::Cancelled { reason });
            }
            RunEnd::DeadlineExceeded => ControllerError::DeadlineExceeded,
            RunEnd::HostStopping => ControllerError::HostShuttingDown,
            RunEnd::Finished(result) => {
                if let Some(stop) = state.stop.take() {
                    if stop.silent {
                        return Err(stop.error);
                    }
                    stop.error
                } else if mode != Mode::Live
                    && let Some(divergence) = state.recorded.unconsumed("the harness")
                {
                    ControllerError::ReplayDiverged(divergence)
                } else {
                    match result {
                        Ok(()) => {
                            let done = end_event(journal_execution_id, "COMPLETED", None);
                            let appended = self
                                .journal
                                .append_one(&self.session, state.head, self.fence(), done)
                                .await;
                            // The run's queued appends were committed ahead of the END; a
                            // refusal of one of them explains the END's.
                            state.collect_queued().await?;
                            let record = appended?;
                            outcome.records.append(&mut state.appended);
                            self.notify(&unshown);
                            self.notify(&state.unshown);
                            self.notify(std::slice::from_ref(&record));
                            outcome.records.push(record);
                            return Ok(outcome);
                        }
                        Err(e) => harness_failure(e, state.rejection.take()),
                    }
                }
            }
        };
        // Best effort: the ERROR is an audit note, and the failure is what the caller needs.
        if let Ok(mut written) = self
            .append_closing(vec![error_event(journal_execution_id, &failure)], &unshown)
            .await
        {
            outcome.records.append(&mut written);
        }
        Err(failure)
    }

    /// Appends `events` durably at whatever the head is now (the run's own appends moved it),
    /// then shows `unshown`, the run's records that this append made durable, and its own.
    async fn append_closing(
        &self,
        events: Vec<Event>,
        unshown: &[LogRecord],
    ) -> Result<Vec<LogRecord>> {
        let head = self.journal.head(&self.session).await?;
        let events = events
            .into_iter()
            .map(|event| self.settings.scrubbed(event))
            .collect();
        let records = self
            .journal
            .append_records(AppendRequest::new(
                &self.session,
                head,
                FenceUse::Hold(self.fence()),
                events,
            ))
            .await?;
        self.notify(unshown);
        self.notify(&records);
        Ok(records)
    }
}

/// The error the caller sees when the harness failed with `error`: the typed refusal the sink
/// last handed the harness (`rejection`) when `error` still carries it, else the harness's own.
pub(super) fn harness_failure(
    error: ApiError,
    rejection: Option<ControllerError>,
) -> ControllerError {
    match rejection {
        Some(rejection) if carries(&error, &rejection.to_api()) => rejection,
        _ => ControllerError::Harness(error),
    }
}

/// Whether `error` is, wraps or joins `target`.
fn carries(error: &ApiError, target: &ApiError) -> bool {
    if error == target {
        return true;
    }
    match error {
        ApiError::Wrapped { source, .. } => carries(source, target),
        ApiError::Joined(errors) => errors.iter().any(|e| carries(e, target)),
        _ => false,
    }
}

/// The terminal END of an execution in `state` (`COMPLETED`, `CANCELED`).
fn end_event(journal_execution_id: &str, state: &str, error: Option<ErrorInfo>) -> Event {
    Event::new(
        EventKind::End,
        EventBody::End(HarnessEnd {
            state: state.to_owned(),
            error,
        }),
    )
    .with_execution(journal_execution_id.to_owned())
}

/// A cancelled run's closing records: the session-level CANCEL marker, then END CANCELED.
pub(super) fn cancel_events(journal_execution_id: &str, reason: &str) -> Vec<Event> {
    let marker = Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind: LifecycleKind::Cancel,
            detail: reason.to_owned(),
            ..Lifecycle::default()
        }),
    );
    let canceled = end_event(
        journal_execution_id,
        "CANCELED",
        Some(ErrorInfo {
            code: StatusCode::Cancelled.number(),
            description: reason.to_owned(),
        }),
    );
    vec![marker, canceled]
}

/// The ERROR note of a failed run.
fn error_event(journal_execution_id: &str, error: &ControllerError) -> Event {
    Event::new(
        EventKind::Error,
        EventBody::Error(ErrorInfo {
            code: error.status_code().number(),
            description: error.to_string(),
        }),
    )
    .with_execution(journal_execution_id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    // semantics §2.4 step 10: a refusal the harness passed on (as is, wrapped or joined) is the
    // error the caller sees; anything else is the harness's own failure.
    #[test]
    fn refusal_carried_by_the_harness_wins() {
        let refusal = ControllerError::DeadlineExceeded;
        let api = refusal.to_api();
        let wrapped = api.clone().wrap("tool");
        let joined = ApiError::Joined(vec![ApiError::status(StatusCode::Internal, "x"), wrapped]);
        assert!(matches!(
            harness_failure(joined, Some(ControllerError::DeadlineExceeded)),
            ControllerError::DeadlineExceeded
        ));
        let own = ApiError::status(StatusCode::Internal, "boom");
        assert!(matches!(
            harness_failure(own, Some(ControllerError::DeadlineExceeded)),
            ControllerError::Harness(_)
        ));
        assert!(matches!(
            harness_failure(api, None),
            ControllerError::Harness(_)
        ));
    }

    // semantics §2.4 step 9: a cancel writes the CANCEL marker (no execution id) before its END.
    #[test]
    fn cancel_closes_with_marker_then_end() {
        let events = cancel_events("e1", "stop");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].kind, EventKind::Lifecycle);
        assert!(events[0].execution_id.is_empty());
        assert_eq!(events[1].kind, EventKind::End);
        assert_eq!(events[1].execution_id, "e1");
        match &events[1].body {
            Some(EventBody::End(end)) => {
                assert_eq!(end.state, "CANCELED");
                assert_eq!(
                    end.error.as_ref().map(|e| e.code),
                    Some(StatusCode::Cancelled.number())
                );
            }
            other => panic!("expected an END body, got {other:?}"),
        }
    }
}
