//! The record envelope the journal assigns around each event.

use agentsessions_api::Event;

/// One committed journal record: the host-assigned envelope (`seq`, `prev_hash`, `hash`,
/// `fence`) around the event. Hashes are returned verbatim from storage; reads never re-hash.
///
/// ```text
///  seq:        1        2        3
///  prev_hash:  ""  <--  h1  <--  h2        (genesis links to the empty string)
///  hash:       h1       h2       h3        h_n = content_hash(prev_hash_n, seq_n, event_n)
/// ```
#[derive(Debug, Clone, PartialEq)]
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
}
