//! Events and steps the tests and benchmarks of every backend build on, so that the conformance
//! suite and each backend's own tests write their fixtures once.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::fmt::Display;
use std::time::Duration;

use agentsessions_api::{Event, EventBody, EventKind, Lifecycle, LifecycleKind, Message};
use agentsessions_journal::{AppendRequest, FenceUse, Journal, LogExt as _, LogRecord};

/// A user INPUT message carrying `text`, in execution `exec-1`.
pub fn input(text: &str) -> Event {
    Event::new(
        EventKind::Input,
        EventBody::Message(Message::text_message("user", text)),
    )
    .with_execution("exec-1")
}

/// A model OUTPUT about the size of a typical turn, numbered `i`: what the benchmarks append.
pub fn turn_event(i: impl Display) -> Event {
    Event::new(
        EventKind::Output,
        EventBody::Message(Message::text_message(
            "assistant",
            format!("response {i}: the quick brown fox jumps over the lazy dog, twice over."),
        )),
    )
    .with_execution("a1b2c3d4e5f60718")
}

/// The value at `per_mille`/1000 of a sorted sample (nearest rank).
pub fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() - 1) * per_mille / 1000]
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
    j.append_records(AppendRequest::new(
        session,
        head,
        FenceUse::Hold(fence),
        events,
    ))
    .await
    .unwrap()
}

/// Forks `child` off `parent` at `at` and appends the FORK marker with the minted fence.
pub async fn fork_with_marker(j: &dyn Journal, parent: &str, at: i64, child: &str) -> LogRecord {
    let fence = j.fork_session(parent, at, child).await.unwrap();
    j.append_one(child, at, fence, fork_marker(parent, at))
        .await
        .unwrap()
}
