//! The host's tool progress on its way to whoever watches a session (its Exec stream, its Watch
//! streams): one bounded broadcast per watched session. Progress is transport only (extensions
//! §10): never journaled, dropped when nobody watches, and a watcher that falls behind misses
//! the oldest reports, never the records.
//!
//! ```text
//!  tool executor ──ProgressSink::progress──► ProgressBus ──[ PROGRESS_CAPACITY ]──► ProgressWatch (per stream)
//!                                               └─ nobody watches the session: dropped
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agentsessions_controller::{ProgressSink, ToolProgress};
use tokio::sync::broadcast;

/// Progress reports a watcher may be behind by before it misses the oldest.
pub const PROGRESS_CAPACITY: usize = 32;

/// The sessions being watched, each with its broadcast. Share it as `Arc<ProgressBus>`.
#[derive(Debug, Default)]
pub struct ProgressBus {
    sessions: Mutex<HashMap<String, broadcast::Sender<ToolProgress>>>,
}

impl ProgressBus {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, broadcast::Sender<ToolProgress>>> {
        // Inserts and removals only: a panic elsewhere cannot leave the map inconsistent.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The progress of `session`'s tools from now on, until the returned watch is dropped.
    pub fn watch(self: &Arc<Self>, session: &str) -> ProgressWatch {
        let receiver = self
            .lock()
            .entry(session.to_owned())
            .or_insert_with(|| broadcast::channel(PROGRESS_CAPACITY).0)
            .subscribe();
        ProgressWatch {
            bus: Arc::clone(self),
            session: session.to_owned(),
            receiver,
        }
    }

    /// Sessions with at least one watcher.
    pub fn watched(&self) -> usize {
        self.lock().len()
    }
}

impl ProgressSink for ProgressBus {
    fn progress(&self, progress: ToolProgress) {
        if let Some(sender) = self.lock().get(&progress.session_uid) {
            // No receiver left between a watch's drop and its removal: nothing to tell.
            let _told = sender.send(progress);
        }
    }
}

/// One stream's view of a session's tool progress ([`ProgressBus::watch`]).
#[derive(Debug)]
pub struct ProgressWatch {
    bus: Arc<ProgressBus>,
    session: String,
    receiver: broadcast::Receiver<ToolProgress>,
}

impl ProgressWatch {
    /// The next report; reports this watch fell behind on are skipped. Never returns while the
    /// bus lives, so it is meant for a `select!` beside the stream's other sources.
    pub async fn next(&mut self) -> ToolProgress {
        loop {
            match self.receiver.recv().await {
                Ok(progress) => return progress,
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                // The bus holds the sender for as long as this watch exists.
                Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    }
}

impl Drop for ProgressWatch {
    fn drop(&mut self) {
        let mut sessions = self.bus.lock();
        // This watch's receiver still counts until the end of this call.
        if sessions
            .get(&self.session)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            sessions.remove(&self.session);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn report(session: &str, progress: f64) -> ToolProgress {
        ToolProgress {
            session_uid: session.to_owned(),
            execution_id: "e".into(),
            tool_call_id: "c".into(),
            tool: "time__slow".into(),
            progress,
            total: Some(4.0),
            message: String::new(),
        }
    }

    // extensions §11: every watcher of the session gets its reports; other sessions' stay away.
    #[tokio::test]
    async fn watchers_of_a_session_get_its_reports_only() {
        let bus = Arc::new(ProgressBus::default());
        let mut first = bus.watch("s");
        let mut second = bus.watch("s");
        let mut other = bus.watch("t");
        bus.progress(report("s", 1.0));
        assert!((first.next().await.progress - 1.0).abs() < f64::EPSILON);
        assert!((second.next().await.progress - 1.0).abs() < f64::EPSILON);
        other.receiver.try_recv().unwrap_err();
    }

    // STYLE rule 8: a watcher that lags misses the oldest reports, holding at most the capacity.
    #[tokio::test]
    async fn a_lagging_watcher_skips_to_what_is_held() {
        let bus = Arc::new(ProgressBus::default());
        let mut watch = bus.watch("s");
        for step in 0..PROGRESS_CAPACITY * 2 {
            bus.progress(report("s", f64::from(u32::try_from(step).unwrap())));
        }
        let first = watch.next().await.progress;
        assert!(first >= f64::from(u32::try_from(PROGRESS_CAPACITY).unwrap()));
    }

    // Nothing is kept for a session nobody watches any more.
    #[test]
    fn the_last_watch_dropped_forgets_the_session() {
        let bus = Arc::new(ProgressBus::default());
        let first = bus.watch("s");
        let second = bus.watch("s");
        drop(first);
        assert_eq!(bus.watched(), 1);
        drop(second);
        assert_eq!(bus.watched(), 0);
        bus.progress(report("s", 1.0));
        assert_eq!(bus.watched(), 0);
    }
}
