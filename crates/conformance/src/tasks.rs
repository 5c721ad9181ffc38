//! [`FixtureTasks`]: the owner of every task a fixture starts (a harness server, an endpoint's
//! accept loop and its connections), so that no fixture task outlives the fixture that started
//! it: dropping the owner stops them all.

use std::future::Future;

use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

/// Where a fixture's tasks are spawned: a tracker and the stop signal they all watch. Cheap to
/// clone into a task that spawns more (an accept loop spawning one task per connection).
#[derive(Debug, Clone)]
pub struct TaskScope {
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl TaskScope {
    /// Runs `task` until it finishes or the scope's owner is dropped, whichever comes first.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = task => {}
            }
        });
    }

    /// Completes when the owner is dropped: the shutdown future for a server that drains
    /// gracefully instead of being cut off.
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        self.stop.clone().cancelled_owned()
    }
}

/// Owns a [`TaskScope`]: dropping it signals every task in the scope to stop.
#[derive(Debug)]
pub struct FixtureTasks {
    scope: TaskScope,
    _stop_on_drop: DropGuard,
}

impl Default for FixtureTasks {
    fn default() -> Self {
        let stop = CancellationToken::new();
        Self {
            scope: TaskScope {
                tracker: TaskTracker::new(),
                stop: stop.clone(),
            },
            _stop_on_drop: stop.drop_guard(),
        }
    }
}

impl FixtureTasks {
    /// The scope to spawn into.
    pub fn scope(&self) -> &TaskScope {
        &self.scope
    }

    /// Stops every task and waits until each has ended.
    pub async fn shutdown(self) {
        let scope = self.scope.clone();
        drop(self);
        scope.tracker.close();
        scope.tracker.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    // STYLE rule 8: every task has an owner; dropping the owner stops what it started.
    #[tokio::test]
    async fn dropping_the_owner_stops_its_tasks() {
        let tasks = FixtureTasks::default();
        let finished = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&finished);
        tasks.scope().spawn(async move {
            std::future::pending::<()>().await;
            seen.store(true, Ordering::SeqCst);
        });
        let drained = tasks.scope().stopped();
        let scope = tasks.scope().clone();
        tasks.shutdown().await;
        drained.await;
        assert!(scope.tracker.is_empty());
        assert!(!finished.load(Ordering::SeqCst));
    }
}
