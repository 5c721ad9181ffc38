//! The record envelope the journal assigns around each event.

use agentsessions_api::{Event, Timestamp};

/// One committed journal record: the host-assigned envelope (`seq`, `prev_hash`, `hash`,
/// `fence`) around the event. Hashes are returned verbatim from storage; reads never re-hash.
///
/// ```text
///  seq:        1        2        3
///  prev_hash:  ""  <--  h1  <--  h2        (genesis links to the empty string)
///  hash:       h1       h2       h3        h_n = content_hash(prev_hash_n, seq_n, event_n)
/// ```
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// Position in the session, starting at 1, no gaps.
    pub seq: i64,
    /// `hash` of the record at `seq - 1`, or `""` for the first record.
    pub prev_hash: String,
    /// The canonical content hash of (`prev_hash`, `seq`, `event`).
    pub hash: String,
    /// The fence of the writer that appended it (not hashed).
    pub fence: i64,
    /// The event.
    pub event: Event,
    /// When the journal committed the record, stored beside it and never hashed (so replay
    /// stays byte-identical); `None` for a record written by a build that did not store it, or
    /// one that was never committed (an import's input, a test's fixture).
    pub committed_at: Option<Timestamp>,
}

/// Two records are the same record when they chain the same: same position, links, fence and
/// event. The commit time says when a copy was written, not what it is, so a copied prefix, an
/// import and the original compare equal.
impl PartialEq for LogRecord {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
            && self.prev_hash == other.prev_hash
            && self.hash == other.hash
            && self.fence == other.fence
            && self.event == other.event
    }
}
