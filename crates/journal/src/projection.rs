//! The compute-state projection moved inside each append (semantics §1.7): what the log
//! implies about the incarnation, not a probe of the runtime. A host that learns what the
//! runtime holds once an operation ended settles it with
//! [`Catalog::settle_compute_state`](crate::Catalog::settle_compute_state); the next append
//! moves it on from there.

use agentsessions_api::{ComputeState, Event, EventBody, EventKind, LifecycleKind};

/// The compute state after committing `event` on a session whose state was `current`.
pub fn project_compute_state(current: ComputeState, event: &Event) -> ComputeState {
    fixed_state(event).unwrap_or(current)
}

/// The state `event` sets whatever came before, or `None` when it leaves the state as it was.
/// The projection at a seq is therefore the fixed state of the last record at or before it that
/// has one, which a fork finds by walking back from its fork point instead of folding the prefix.
pub fn fixed_state(event: &Event) -> Option<ComputeState> {
    match event.kind {
        EventKind::Lifecycle => match &event.body {
            Some(EventBody::Lifecycle(l)) => match l.kind {
                LifecycleKind::Suspend | LifecycleKind::Fork => Some(ComputeState::Cold),
                LifecycleKind::Resume => Some(ComputeState::Live),
                _ => None,
            },
            _ => None,
        },
        // Host-only writes that can happen while the session is cold.
        EventKind::ApprovalRequest | EventKind::ApprovalResult => None,
        _ => Some(ComputeState::Live),
    }
}

/// Whether committing `event` records the durable intent to delete its session, which sets the
/// session's deletion state to pending in the same transaction (extensions §3).
pub fn marks_deletion(event: &Event) -> bool {
    matches!(
        &event.body,
        Some(EventBody::Lifecycle(l)) if l.kind == LifecycleKind::Delete
    )
}

/// The projection after the last of `events`, given newest first: the first fixed state met,
/// else `NONE` (a log that never fixed a state is a never-run session).
///
/// # Errors
/// The first error the iterator yields.
pub fn state_walking_back<E>(
    events_newest_first: impl IntoIterator<Item = Result<Event, E>>,
) -> Result<ComputeState, E> {
    for event in events_newest_first {
        if let Some(state) = fixed_state(&event?) {
            return Ok(state);
        }
    }
    Ok(ComputeState::None)
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{ApprovalRequest, Lifecycle, Message};

    use super::*;

    fn lifecycle(kind: LifecycleKind) -> Event {
        Event::new(
            EventKind::Lifecycle,
            EventBody::Lifecycle(Lifecycle {
                kind,
                ..Lifecycle::default()
            }),
        )
    }

    #[test]
    fn suspend_and_fork_go_cold_resume_goes_live() {
        // semantics §1.7
        let live = ComputeState::Live;
        assert_eq!(
            project_compute_state(live, &lifecycle(LifecycleKind::Suspend)),
            ComputeState::Cold
        );
        assert_eq!(
            project_compute_state(live, &lifecycle(LifecycleKind::Fork)),
            ComputeState::Cold
        );
        assert_eq!(
            project_compute_state(ComputeState::Cold, &lifecycle(LifecycleKind::Resume)),
            ComputeState::Live
        );
    }

    #[test]
    fn other_lifecycle_kinds_and_bodiless_lifecycle_leave_state() {
        // semantics §1.7: BASELINE, CANCEL and a lifecycle event without a body are unchanged
        for k in [
            LifecycleKind::Baseline,
            LifecycleKind::Cancel,
            LifecycleKind::Delete,
        ] {
            assert_eq!(
                project_compute_state(ComputeState::Cold, &lifecycle(k)),
                ComputeState::Cold
            );
        }
        let bodiless = Event {
            kind: EventKind::Lifecycle,
            ..Event::default()
        };
        assert_eq!(
            project_compute_state(ComputeState::None, &bodiless),
            ComputeState::None
        );
    }

    #[test]
    fn approvals_leave_state_other_events_go_live() {
        // semantics §1.7
        let req = Event::new(
            EventKind::ApprovalRequest,
            EventBody::Approval(ApprovalRequest::default()),
        );
        assert_eq!(
            project_compute_state(ComputeState::Cold, &req),
            ComputeState::Cold
        );
        let input = Event::new(
            EventKind::Input,
            EventBody::Message(Message::text_message("user", "x")),
        );
        assert_eq!(
            project_compute_state(ComputeState::Cold, &input),
            ComputeState::Live
        );
    }
}
