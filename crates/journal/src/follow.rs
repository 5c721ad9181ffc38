//! Following a session's commits as they happen: [`CommitFeed`], which a backend tells about
//! every commit, and [`HeadFollow`], a subscription to one session's head, which
//! [`Log::follow`](crate::Log::follow) hands out. [`RecordFollower`](crate::RecordFollower)
//! (in `record_follower`) turns such a subscription into the session's records, read from the
//! journal page by page.
//!
//! ```text
//!  append ─ commit ─▶ CommitFeed::publish(session, head) ──▶ watch::Sender(session) ──▶ HeadFollow
//!  (Postgres: another host's commit ─ NOTIFY ─▶ the backend's listener ─▶ publish)        │ changed()
//!                                                                                          ▼
//!                                          RecordFollower: journal.read(next ..) page by page
//! ```
//!
//! A subscription carries only the newest head, never a queue of records: a subscriber that
//! does not keep up simply finds a higher head when it looks next and reads what it missed from
//! the journal, which holds every committed record anyway. Nothing grows with a slow subscriber.
//! The head a subscription reports is a hint: the records come from the journal, so a hint
//! that is early, late or repeated never makes a follower skip or duplicate a record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::sync::watch;

use crate::error::{JournalError, Result};
use crate::record::LogRecord;

/// Where a backend announces its commits, per session, to whoever follows that session.
///
/// Only followed sessions have an entry, so a commit to a session nobody follows costs one map
/// lookup. The entry goes away with the session's last [`HeadFollow`].
#[derive(Debug, Default)]
pub struct CommitFeed {
    sessions: Mutex<HashMap<String, watch::Sender<i64>>>,
}

impl CommitFeed {
    /// An empty feed, shared by the backend and its subscriptions.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<i64>>> {
        // Every critical section is a single map operation, so a poisoned map is consistent.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A subscription to `session`'s head, starting at the highest head announced so far (0
    /// when none was). Subscribe before reading the records already committed: a commit made
    /// between the read and the subscription would otherwise go unnoticed.
    pub fn follow(self: &Arc<Self>, session: &str) -> HeadFollow {
        let rx = self
            .lock()
            .entry(session.to_owned())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        HeadFollow {
            session: session.to_owned(),
            rx,
            feed: Arc::downgrade(self),
        }
    }

    /// Announces that `session`'s committed head is at least `head`. Wakes its subscriptions
    /// when that is higher than what they were told.
    pub fn publish(&self, session: &str, head: i64) {
        if let Some(sender) = self.lock().get(session) {
            sender.send_if_modified(|known| {
                let higher = head > *known;
                if higher {
                    *known = head;
                }
                higher
            });
        }
    }

    /// Announces the commit of `records` (one append's, in order) to `session`; nothing for an
    /// empty append.
    pub fn publish_records(&self, session: &str, records: &[LogRecord]) {
        if let Some(last) = records.last() {
            self.publish(session, last.seq);
        }
    }

    /// Wakes every subscription as if its session had committed: for when commits may have
    /// been missed (a listener that lost its connection), so that each follower reads the
    /// journal again.
    pub fn wake_all(&self) {
        for sender in self.lock().values() {
            sender.send_modify(|_| {});
        }
    }

    /// Sessions with at least one subscription.
    pub fn followed(&self) -> usize {
        self.lock().len()
    }
}

/// A subscription to one session's committed head, from
/// [`Log::follow`](crate::Log::follow). Dropping it unsubscribes.
#[derive(Debug)]
pub struct HeadFollow {
    session: String,
    rx: watch::Receiver<i64>,
    feed: Weak<CommitFeed>,
}

impl HeadFollow {
    /// The followed session.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The highest head announced so far (0 when none was); a hint, see the module docs.
    pub fn head_hint(&self) -> i64 {
        *self.rx.borrow()
    }

    /// Waits until the session may have committed since the last call (or since the
    /// subscription when there was none) and returns the head hint. Returns at once when that
    /// already happened.
    ///
    /// # Errors
    /// [`JournalError::Closed`] once the journal is gone.
    pub async fn changed(&mut self) -> Result<i64> {
        self.rx.changed().await.map_err(|_| JournalError::Closed)?;
        Ok(*self.rx.borrow_and_update())
    }
}

impl Drop for HeadFollow {
    fn drop(&mut self) {
        let Some(feed) = self.feed.upgrade() else {
            return;
        };
        let mut sessions = feed.lock();
        // This subscription still counts, so 1 means it was the last one. The entry is this
        // subscription's channel: subscribing and removing both happen under the lock, and an
        // entry is only removed by its last subscription.
        if sessions
            .get(&self.session)
            .is_some_and(|s| s.receiver_count() <= 1)
        {
            sessions.remove(&self.session);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn woken(follow: &mut HeadFollow) -> Option<i64> {
        tokio::time::timeout(Duration::from_millis(200), follow.changed())
            .await
            .ok()
            .map(Result::unwrap)
    }

    #[tokio::test]
    async fn only_followed_sessions_have_an_entry_and_the_last_drop_removes_it() {
        let feed = CommitFeed::new();
        feed.publish("nobody-follows", 7);
        assert_eq!(feed.followed(), 0);
        let first = feed.follow("s");
        let second = feed.follow("s");
        assert_eq!(feed.followed(), 1);
        drop(first);
        assert_eq!(feed.followed(), 1, "removed while a subscription remains");
        drop(second);
        assert_eq!(feed.followed(), 0);
    }

    #[tokio::test]
    async fn a_follower_sees_the_highest_head_however_many_commits_it_missed() {
        let feed = CommitFeed::new();
        let mut follow = feed.follow("s");
        for head in 1..=10_000 {
            feed.publish("s", head);
        }
        assert_eq!(woken(&mut follow).await, Some(10_000));
        assert_eq!(woken(&mut follow).await, None, "one wake per look");
        // A lower or equal head (an echo of a commit already announced) wakes nobody.
        feed.publish("s", 9_000);
        feed.publish("s", 10_000);
        assert_eq!(woken(&mut follow).await, None);
        // A later subscription starts at the highest head announced.
        assert_eq!(feed.follow("s").head_hint(), 10_000);
    }

    #[tokio::test]
    async fn wake_all_wakes_every_follower_without_a_new_head() {
        let feed = CommitFeed::new();
        let mut a = feed.follow("a");
        let mut b = feed.follow("b");
        feed.publish("a", 3);
        assert_eq!(woken(&mut a).await, Some(3));
        feed.wake_all();
        assert_eq!(woken(&mut a).await, Some(3));
        assert_eq!(woken(&mut b).await, Some(0));
    }

    #[tokio::test]
    async fn a_follower_of_a_dropped_feed_is_told_the_journal_closed() {
        let feed = CommitFeed::new();
        let mut follow = feed.follow("s");
        drop(feed);
        assert!(matches!(follow.changed().await, Err(JournalError::Closed)));
    }
}
