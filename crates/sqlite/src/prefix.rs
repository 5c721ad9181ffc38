//! Shared-prefix fork children in the SQLite file: following `session_prefix` links, and what a
//! fork needs to know about its parent at the fork point. Used by the readers and the writer
//! alike (they differ only in the connection).

use agentsessions_api::ComputeState;
use agentsessions_journal::chain::decode_event;
use agentsessions_journal::lineage::{self, PrefixLink, Segment};
use agentsessions_journal::projection::state_walking_back;
use agentsessions_journal::{JournalError, Result};
use rusqlite::{Connection, OptionalExtension as _, params};

/// A run of one session's rows in seq order, as [`raw_record`](crate::journal::raw_record) reads them.
pub(crate) const RAW_RANGE: &str = "SELECT seq, prev_hash, hash, event FROM events
     WHERE session = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq";

/// A session's prefix link, if it is a shared-prefix child.
pub(crate) fn link(conn: &Connection, session: &str) -> Result<Option<PrefixLink>> {
    Ok(conn
        .prepare_cached("SELECT parent_uid, fork_seq FROM session_prefix WHERE session = ?1")?
        .query_row([session], |r| {
            Ok(PrefixLink {
                parent: r.get(0)?,
                fork_seq: r.get(1)?,
            })
        })
        .optional()?)
}

/// The head `(fork_seq, fork_hash)` a shared-prefix child has before its first own record.
pub(crate) fn link_head(conn: &Connection, session: &str) -> Result<Option<(i64, String)>> {
    Ok(conn
        .prepare_cached("SELECT fork_seq, fork_hash FROM session_prefix WHERE session = ?1")?
        .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// The stored runs of `session`'s chain, oldest first.
pub(crate) fn segments(conn: &Connection, session: &str) -> Result<Vec<Segment>> {
    lineage::segments(session, |s| link(conn, s))
}

/// The stored hash of the chain's record at `seq`, if there is one.
pub(crate) fn hash_at(conn: &Connection, segments: &[Segment], seq: i64) -> Result<Option<String>> {
    let Some(segment) = lineage::segment_of(segments, seq) else {
        return Ok(None);
    };
    Ok(conn
        .prepare_cached("SELECT hash FROM events WHERE session = ?1 AND seq = ?2")?
        .query_row(params![segment.session, seq], |r| r.get(0))
        .optional()?)
}

/// The compute projection after the chain's record at `seq`, found by reading back from it to
/// the last record that fixes a state (usually the record itself).
pub(crate) fn state_at(conn: &Connection, segments: &[Segment], seq: i64) -> Result<ComputeState> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, event FROM events WHERE session = ?1 AND seq >= ?2 AND seq <= ?3
         ORDER BY seq DESC",
    )?;
    for segment in segments.iter().rev() {
        let Some(run) = segment.clip(1, seq) else {
            continue;
        };
        let mut rows = stmt.query(params![run.session, run.lo, run.hi])?;
        let events = std::iter::from_fn(|| match rows.next() {
            Ok(Some(row)) => Some((|| {
                let seq: i64 = row.get(0)?;
                let blob: Vec<u8> = row.get(1)?;
                decode_event(&run.session, seq, &blob)
            })()),
            Ok(None) => None,
            Err(e) => Some(Err(JournalError::from(e))),
        });
        let state = state_walking_back(events)?;
        if state != ComputeState::None {
            return Ok(state);
        }
    }
    Ok(ComputeState::None)
}
