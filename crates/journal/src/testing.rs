//! Events and steps the tests of every backend build on (feature `test-util`), so that the
//! conformance suite and each backend's own tests write their fixtures once.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use agentsessions_api::{Event, EventBody, EventKind, Lifecycle, LifecycleKind, Message};

use crate::journal::Journal;
use crate::record::LogRecord;

/// A user INPUT message carrying `text`, in execution `exec-1`.
pub fn input(text: &str) -> Event {
    Event::new(
        EventKind::Input,
        EventBody::Message(Message::text_message("user", text)),
    )
    .with_execution("exec-1")
}

/// The FORK marker a child opens with: `parent@at`.
pub fn fork_marker(parent: &str, at: i64) -> Event {
    Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind: LifecycleKind::Fork,
            detail: format!("{parent}@{at}"),
            ..Lifecycle::default()
        }),
    )
}

/// Appends `n` inputs to `session` at its head with its current fence, in one batch.
pub async fn fill(j: &dyn Journal, session: &str, n: i64) -> Vec<LogRecord> {
    let head = j.head(session).await.unwrap();
    let fence = j.session_info(session).await.map_or(0, |i| i.fence);
    let events: Vec<Event> = (1..=n).map(|i| input(&format!("{session} {i}"))).collect();
    j.append_batch(session, head, fence, events).await.unwrap()
}

/// Forks `child` off `parent` at `at` and appends the FORK marker with the minted fence.
pub async fn fork_with_marker(j: &dyn Journal, parent: &str, at: i64, child: &str) -> LogRecord {
    let fence = j.fork_session(parent, at, child).await.unwrap();
    j.append(child, at, fence, fork_marker(parent, at))
        .await
        .unwrap()
}
