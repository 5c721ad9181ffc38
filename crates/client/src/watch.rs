//! [`Watch`], a live follow of one session ([`Client::watch`](crate::Client::watch)).

use agentsessions_journal::projection::marks_deletion;
use agentsessions_wire::pb;

use crate::error::{ClientError, Result};

/// A session's records as they commit, from the seq the watch started at. It ends (`None`)
/// after the session's delete record; any other end is an error that says where to resume
/// ([`Watch::next_seq`]).
#[derive(Debug)]
pub struct Watch {
    stream: tonic::Streaming<pb::LogRecord>,
    session: String,
    next_seq: i64,
    deleted: bool,
}

impl Watch {
    pub(crate) fn new(stream: tonic::Streaming<pb::LogRecord>, session: &str, from: i64) -> Self {
        Self {
            stream,
            session: session.to_owned(),
            next_seq: from.max(1),
            deleted: false,
        }
    }

    /// The watched session.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The seq a new watch would resume from: the one after the last record received.
    pub fn next_seq(&self) -> i64 {
        self.next_seq
    }

    /// The next record, waiting for it to commit; `None` once the session's delete record was
    /// returned.
    ///
    /// # Errors
    /// The server's status (UNAVAILABLE when it shuts down), or [`ClientError::WatchCut`] when
    /// the stream ended before the session was deleted: watch again from [`Watch::next_seq`].
    pub async fn next(&mut self) -> Result<Option<pb::LogRecord>> {
        if self.deleted {
            return Ok(None);
        }
        match self.stream.message().await? {
            Some(record) => {
                self.next_seq = record.seq + 1;
                self.deleted = record
                    .event
                    .clone()
                    .and_then(|e| agentsessions_api::Event::try_from(e).ok())
                    .is_some_and(|e| marks_deletion(&e));
                Ok(Some(record))
            }
            None => Err(ClientError::WatchCut {
                session: self.session.clone(),
                next_seq: self.next_seq,
            }),
        }
    }
}
