//! Reading this backend's rows into their stored form (`agentsessions_journal::stored`, shared
//! with the SQLite layout, which decodes them); times are unix nanoseconds.

pub(crate) use agentsessions_journal::stored::{
    EncodedRow, HARNESS_COLUMNS, StoredHarness, StoredSession,
};
use agentsessions_journal::{HarnessRow, UsageTotals};
use tokio_postgres::Row;

/// The `sessions` columns in [`StoredSession`] order.
pub(crate) const STORED_COLUMNS: &str = "session, fence, project, name, harness, model, \
     parent_uid, fork_seq, compute_state, created_at, updated_at, labels, annotations, origin, \
     identity, owner_issuer, owner_subject, deletion_state, reclaimed_at, usage_input_tokens, \
     usage_output_tokens, usage_reasoning_tokens, usage_cached_input_tokens";

/// How many columns [`STORED_COLUMNS`] names; a session read's derived columns follow them.
pub(crate) const STORED_COLUMN_COUNT: usize = 23;

/// Reads a row selected with [`STORED_COLUMNS`] first.
pub(crate) fn stored_session(row: &Row) -> Result<StoredSession, tokio_postgres::Error> {
    Ok(StoredSession {
        session: row.try_get(0)?,
        fence: row.try_get(1)?,
        project: row.try_get(2)?,
        name: row.try_get(3)?,
        harness: row.try_get(4)?,
        model: row.try_get(5)?,
        parent_uid: row.try_get(6)?,
        fork_seq: row.try_get(7)?,
        compute_state: row.try_get(8)?,
        created_at: row.try_get(9)?,
        updated_at: row.try_get(10)?,
        labels: row.try_get(11)?,
        annotations: row.try_get(12)?,
        origin: row.try_get(13)?,
        identity: row.try_get(14)?,
        owner_issuer: row.try_get(15)?,
        owner_subject: row.try_get(16)?,
        deletion_state: row.try_get(17)?,
        reclaimed_at: row.try_get(18)?,
        usage: UsageTotals {
            input_tokens: row.try_get(19)?,
            output_tokens: row.try_get(20)?,
            reasoning_tokens: row.try_get(21)?,
            cached_input_tokens: row.try_get(22)?,
        },
    })
}

/// Reads a row selected with [`HARNESS_COLUMNS`].
pub(crate) fn harness_from_row(row: &Row) -> Result<HarnessRow, tokio_postgres::Error> {
    Ok(StoredHarness {
        name: row.try_get(0)?,
        uid: row.try_get(1)?,
        spec: row.try_get(2)?,
        spec_digest: row.try_get(3)?,
        state: row.try_get(4)?,
        retire_reason: row.try_get(5)?,
        retired_at: row.try_get(6)?,
        created_at: row.try_get(7)?,
        updated_at: row.try_get(8)?,
    }
    .into_row())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_column_count_matches_the_list() {
        assert_eq!(STORED_COLUMNS.split(", ").count(), STORED_COLUMN_COUNT);
    }
}
