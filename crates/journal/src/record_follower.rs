//! [`RecordFollower`]: a session's records as they commit, read from the journal page by page
//! whenever its [`HeadFollow`] says the head moved (the picture is in [`crate::follow`]).

use std::sync::Arc;

use crate::error::Result;
use crate::follow::HeadFollow;
use crate::journal::Journal;
use crate::projection::marks_deletion;
use crate::record::LogRecord;

/// Records a [`RecordFollower`] reads per journal read.
pub const FOLLOW_PAGE: usize = 1_000;

/// A session's records from a given seq on, then each new one as it commits, read from the
/// journal at most [`FOLLOW_PAGE`] at a time. It ends after the record that deletes the session
/// (`LIFECYCLE_DELETE`).
#[derive(Debug)]
pub struct RecordFollower {
    journal: Arc<dyn Journal>,
    follow: HeadFollow,
    next: i64,
    ended: bool,
}

impl RecordFollower {
    /// Follows `session` from record `from` on (1 for its whole log); `from` below 1 counts as 1.
    pub fn new(journal: Arc<dyn Journal>, session: &str, from: i64) -> Self {
        // Subscribed before the first read, so no commit falls between the two.
        let follow = journal.follow(session);
        Self {
            journal,
            follow,
            next: from.max(1),
            ended: false,
        }
    }

    /// The seq of the next record this follower returns.
    pub fn next_seq(&self) -> i64 {
        self.next
    }

    /// The next records, waiting for a commit when the follower is at the session's head: at
    /// least one and at most [`FOLLOW_PAGE`], in order. `None` after the session's delete record
    /// was returned.
    ///
    /// # Errors
    /// The journal's read errors; [`JournalError::Closed`] once the journal is gone.
    pub async fn next_records(&mut self) -> Result<Option<Vec<LogRecord>>> {
        loop {
            if self.ended {
                return Ok(None);
            }
            let page = i64::try_from(FOLLOW_PAGE).unwrap_or(i64::MAX);
            let mut records = self
                .journal
                .read(self.follow.session(), self.next, self.next + page - 1)
                .await?;
            if let Some(end) = records.iter().position(|r| marks_deletion(&r.event)) {
                // Nothing is committed after a delete intent; should anything be, it is not
                // part of what is followed.
                records.truncate(end + 1);
                self.ended = true;
            }
            if let Some(last) = records.last() {
                self.next = last.seq + 1;
                return Ok(Some(records));
            }
            self.follow.changed().await?;
        }
    }
}
