//! [`Watch`], a live follow of one session ([`Client::watch`](crate::Client::watch)).

use agentsessions_journal::projection::marks_deletion;
use agentsessions_wire::pb;

use crate::error::{ClientError, Result};

/// A session's records as they commit, from the seq the watch started at. It ends (`None`)
/// after the session's delete record; any other end is an error that says where to resume
/// ([`Watch::next_seq`]).
#[derive(Debug)]
pub struct Watch {
    stream: Frames,
    session: String,
    next_seq: i64,
    deleted: bool,
}

/// What a watch reads: Watch's records, or WatchUpdates' records and progress.
#[derive(Debug)]
enum Frames {
    Records(tonic::Streaming<pb::LogRecord>),
    Updates(tonic::Streaming<pb::WatchUpdate>),
}

/// One item of a watch with progress ([`Watch::next_item`]).
#[derive(Debug, Clone, PartialEq)]
pub enum WatchItem {
    /// A committed record.
    Record(Box<pb::LogRecord>),
    /// A running tool's progress (transport only; never journaled).
    Progress(pb::ToolProgress),
}

impl Watch {
    pub(crate) fn new(stream: tonic::Streaming<pb::LogRecord>, session: &str, from: i64) -> Self {
        Self::of(Frames::Records(stream), session, from)
    }

    pub(crate) fn with_progress(
        stream: tonic::Streaming<pb::WatchUpdate>,
        session: &str,
        from: i64,
    ) -> Self {
        Self::of(Frames::Updates(stream), session, from)
    }

    fn of(stream: Frames, session: &str, from: i64) -> Self {
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
        loop {
            match self.next_item().await? {
                Some(WatchItem::Record(record)) => return Ok(Some(*record)),
                Some(WatchItem::Progress(_)) => {}
                None => return Ok(None),
            }
        }
    }

    /// [`Watch::next`], with the progress of the session's running tools between the records
    /// when the watch asked for it ([`Client::watch_updates`](crate::Client::watch_updates)).
    ///
    /// # Errors
    /// As [`Watch::next`].
    pub async fn next_item(&mut self) -> Result<Option<WatchItem>> {
        if self.deleted {
            return Ok(None);
        }
        let record = match &mut self.stream {
            Frames::Records(stream) => stream.message().await?,
            Frames::Updates(stream) => loop {
                match stream.message().await? {
                    Some(pb::WatchUpdate {
                        update: Some(pb::watch_update::Update::Progress(progress)),
                    }) => return Ok(Some(WatchItem::Progress(progress))),
                    Some(pb::WatchUpdate {
                        update: Some(pb::watch_update::Update::Record(record)),
                    }) => break Some(record),
                    // A frame this client does not know: skipped.
                    Some(_) => {}
                    None => break None,
                }
            },
        };
        match record {
            Some(record) => {
                self.next_seq = record.seq + 1;
                self.deleted = record
                    .event
                    .clone()
                    .and_then(|e| agentsessions_api::Event::try_from(e).ok())
                    .is_some_and(|e| marks_deletion(&e));
                Ok(Some(WatchItem::Record(Box::new(record))))
            }
            None => Err(ClientError::WatchCut {
                session: self.session.clone(),
                next_seq: self.next_seq,
            }),
        }
    }
}
