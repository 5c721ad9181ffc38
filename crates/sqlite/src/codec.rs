//! Reading the `sessions` and `harnesses` rows into their stored form ([`agentsessions_journal::stored`]), which
//! decodes them the same way for every durable backend.

pub(crate) use agentsessions_journal::stored::HARNESS_COLUMNS;
use agentsessions_journal::stored::{StoredHarness, StoredSession};
use agentsessions_journal::{HarnessRow, Result, SessionInfo, UsageTotals};
use rusqlite::Row;

/// The column list [`session_info_from_row`] reads, in order.
pub(crate) const SESSION_COLUMNS: &str = "s.session, s.project, s.name, s.harness, s.model, \
     s.parent_uid, s.fork_seq, s.labels, s.annotations, s.origin, s.identity, s.created_at, \
     s.updated_at, s.compute_state, s.fence, \
     COALESCE((SELECT MAX(e.seq) FROM events e WHERE e.session = s.session), \
              (SELECT p.fork_seq FROM session_prefix p WHERE p.session = s.session), 0), \
     s.owner_issuer, s.owner_subject, s.deletion_state, s.reclaimed_at, \
     s.usage_input_tokens, s.usage_output_tokens, s.usage_reasoning_tokens, \
     s.usage_cached_input_tokens";

pub(crate) fn session_info_from_row(row: &Row<'_>) -> Result<SessionInfo> {
    let stored = StoredSession {
        session: row.get(0)?,
        project: row.get(1)?,
        name: row.get(2)?,
        harness: row.get(3)?,
        model: row.get(4)?,
        parent_uid: row.get(5)?,
        fork_seq: row.get(6)?,
        labels: row.get(7)?,
        annotations: row.get(8)?,
        origin: row.get(9)?,
        identity: row.get(10)?,
        created_at: row.get(11)?,
        updated_at: row.get(12)?,
        compute_state: row.get(13)?,
        fence: row.get(14)?,
        owner_issuer: row.get(16)?,
        owner_subject: row.get(17)?,
        deletion_state: row.get(18)?,
        reclaimed_at: row.get(19)?,
        usage: UsageTotals {
            input_tokens: row.get(20)?,
            output_tokens: row.get(21)?,
            reasoning_tokens: row.get(22)?,
            cached_input_tokens: row.get(23)?,
        },
    };
    stored.into_info(row.get(15)?)
}

pub(crate) fn harness_from_row(row: &Row<'_>) -> rusqlite::Result<HarnessRow> {
    Ok(StoredHarness {
        name: row.get(0)?,
        uid: row.get(1)?,
        spec: row.get(2)?,
        spec_digest: row.get(3)?,
        state: row.get(4)?,
        retire_reason: row.get(5)?,
        retired_at: row.get(6)?,
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
    }
    .into_row())
}
