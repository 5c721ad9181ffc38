//! [`Tasks`]: every task a journal starts — its writer tasks and each connection's driver — is
//! spawned here, so that [`PostgresJournal::close`](crate::PostgresJournal::close) can wait for
//! all of them. A task ends on its own signal: a writer when the journal's queue closes, a driver
//! when its client is dropped; the set only aborts what is left when it is dropped itself (with
//! the last writer), or when the journal fails to start.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::task::JoinSet;

/// The tasks one journal owns.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    set: Mutex<JoinSet<()>>,
}

impl Tasks {
    /// Runs `task` on the runtime, owned by this set.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut set = self.lock();
        // A journal that reconnects often would otherwise keep every ended driver's entry.
        while set.try_join_next().is_some() {}
        set.spawn(task);
    }

    /// Waits until every task has ended by itself, including tasks spawned while it waits (a
    /// writer reconnecting as it drains its queue).
    pub(crate) async fn join_all(&self) {
        loop {
            let mut running = std::mem::take(&mut *self.lock());
            if running.is_empty() {
                return;
            }
            // A task that panicked has dropped what it held, so its callers already see `Closed`.
            while running.join_next().await.is_some() {}
        }
    }

    /// Stops every task at its next await point.
    pub(crate) fn abort_all(&self) {
        self.lock().abort_all();
    }

    fn lock(&self) -> MutexGuard<'_, JoinSet<()>> {
        self.set.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    #[tokio::test]
    async fn join_all_waits_for_tasks_spawned_meanwhile() {
        let tasks = Arc::new(Tasks::default());
        let (done, finished) = oneshot::channel();
        {
            let inner = Arc::clone(&tasks);
            tasks.spawn(async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                inner.spawn(async move {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let _ = done.send(());
                });
            });
        }
        tasks.join_all().await;
        assert!(
            finished.await.is_ok(),
            "the task spawned while joining was not awaited"
        );
    }

    // A writer holds the set (through its target) until it ends; when it holds the last
    // reference, the set is dropped from inside one of its own tasks, which must be clean.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_may_drop_the_last_reference_to_its_set() {
        let tasks = Arc::new(Tasks::default());
        let (done, finished) = oneshot::channel::<()>();
        let held = Arc::clone(&tasks);
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(held);
            let _ = done.send(());
        });
        drop(tasks);
        finished.await.unwrap();
    }

    #[tokio::test]
    async fn abort_all_stops_what_runs() {
        let tasks = Tasks::default();
        let (keep, dropped) = oneshot::channel::<()>();
        tasks.spawn(async move {
            let _keep = keep;
            std::future::pending::<()>().await;
        });
        tasks.abort_all();
        assert!(
            dropped.await.is_err(),
            "the aborted task still holds its sender"
        );
        tasks.join_all().await;
    }
}
