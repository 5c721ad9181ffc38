//! Row encodings of this backend. The metadata columns use the journal's shared encodings
//! (`agentsessions_journal::columns`, the same as the SQLite layout's); times are unix
//! nanoseconds.

use agentsessions_api::{CallerIdentity, ComputeState, DeletionState, Timestamp};
use agentsessions_journal::{HarnessRow, HarnessState, Result, SessionInfo, SessionRow};
use tokio_postgres::Row;

pub(crate) use agentsessions_journal::columns::{
    decode_identity, decode_map, decode_origin, encode_identity, encode_map, encode_origin,
};

/// A `sessions` row with every column as stored. The writer reads it under the row lock,
/// changes it in memory as the batch's commands say, and writes it back whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredSession {
    pub(crate) session: String,
    pub(crate) fence: i64,
    pub(crate) project: String,
    pub(crate) name: String,
    pub(crate) harness: String,
    pub(crate) model: String,
    pub(crate) parent_uid: String,
    pub(crate) fork_seq: i64,
    pub(crate) compute_state: String,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) labels: String,
    pub(crate) annotations: String,
    pub(crate) origin: String,
    pub(crate) identity: String,
    pub(crate) owner_issuer: String,
    pub(crate) owner_subject: String,
    pub(crate) deletion_state: String,
    pub(crate) reclaimed_at: i64,
}

/// The `sessions` columns in [`StoredSession`] order.
pub(crate) const STORED_COLUMNS: &str = "session, fence, project, name, harness, model, \
     parent_uid, fork_seq, compute_state, created_at, updated_at, labels, annotations, origin, \
     identity, owner_issuer, owner_subject, deletion_state, reclaimed_at";

/// How many columns [`STORED_COLUMNS`] names; a session read's derived columns follow them.
pub(crate) const STORED_COLUMN_COUNT: usize = 19;

impl StoredSession {
    /// Reads a row selected with [`STORED_COLUMNS`] first.
    pub(crate) fn from_row(row: &Row) -> std::result::Result<Self, tokio_postgres::Error> {
        Ok(Self {
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
        })
    }

    /// The stored compute state; an unknown string reads as NONE rather than failing.
    pub(crate) fn compute(&self) -> ComputeState {
        ComputeState::parse(&self.compute_state).unwrap_or(ComputeState::None)
    }

    /// The metadata and derived state, given the session's last seq.
    pub(crate) fn into_info(self, last_seq: i64) -> Result<SessionInfo> {
        let compute_state = self.compute();
        Ok(SessionInfo {
            row: SessionRow {
                labels: decode_map("labels", &self.labels)?,
                annotations: decode_map("annotations", &self.annotations)?,
                origin: decode_origin(&self.origin)?,
                identity: decode_identity(&self.identity)?,
                created_at: Some(Timestamp::from_unix_nanos(self.created_at)),
                uid: self.session,
                project: self.project,
                name: self.name,
                harness: self.harness,
                model: self.model,
                parent_uid: self.parent_uid,
                fork_seq: self.fork_seq,
                owner: CallerIdentity::new(self.owner_issuer, self.owner_subject),
            },
            last_seq,
            compute_state,
            fence: self.fence,
            updated_at: Timestamp::from_unix_nanos(self.updated_at),
            deletion: DeletionState::parse(&self.deletion_state),
            reclaimed_at: (self.reclaimed_at != 0)
                .then(|| Timestamp::from_unix_nanos(self.reclaimed_at)),
        })
    }
}

/// A [`SessionRow`] encoded for its columns before it reaches the writer, so that an
/// unencodable row is refused on the caller's task and never fails a batch.
#[derive(Debug, Clone)]
pub(crate) struct EncodedRow {
    pub(crate) uid: String,
    /// Empty means the default project.
    pub(crate) project: String,
    pub(crate) name: String,
    pub(crate) harness: String,
    pub(crate) model: String,
    pub(crate) parent_uid: String,
    pub(crate) fork_seq: i64,
    pub(crate) labels: String,
    pub(crate) annotations: String,
    pub(crate) origin: String,
    pub(crate) identity: String,
    pub(crate) created_at: Option<i64>,
    pub(crate) owner: CallerIdentity,
}

impl EncodedRow {
    pub(crate) fn new(row: SessionRow) -> Result<Self> {
        Ok(Self {
            labels: encode_map(&row.labels),
            annotations: encode_map(&row.annotations),
            origin: encode_origin(row.origin.as_ref())?,
            identity: encode_identity(&row.identity)?,
            created_at: row.created_at.map(Timestamp::unix_nanos),
            uid: row.uid,
            project: row.project,
            name: row.name,
            harness: row.harness,
            model: row.model,
            parent_uid: row.parent_uid,
            fork_seq: row.fork_seq,
            owner: row.owner,
        })
    }
}

/// The `harnesses` columns [`harness_from_row`] reads, in order.
pub(crate) const HARNESS_COLUMNS: &str =
    "name, uid, spec, spec_digest, state, retire_reason, retired_at, created_at, updated_at";

pub(crate) fn harness_state_str(state: HarnessState) -> &'static str {
    match state {
        HarnessState::Active => "active",
        HarnessState::Retired => "retired",
    }
}

pub(crate) fn harness_from_row(
    row: &Row,
) -> std::result::Result<HarnessRow, tokio_postgres::Error> {
    let state: String = row.try_get(4)?;
    let retired_at: i64 = row.try_get(6)?;
    Ok(HarnessRow {
        name: row.try_get(0)?,
        uid: row.try_get(1)?,
        spec: row.try_get(2)?,
        spec_digest: row.try_get(3)?,
        // Fail closed: a state this build does not know is not selectable.
        state: if state == "active" {
            HarnessState::Active
        } else {
            HarnessState::Retired
        },
        retire_reason: row.try_get(5)?,
        retired_at: (retired_at != 0).then(|| Timestamp::from_unix_nanos(retired_at)),
        created_at: Timestamp::from_unix_nanos(row.try_get(7)?),
        updated_at: Timestamp::from_unix_nanos(row.try_get(8)?),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentsessions_api::{IdentityRef, Origin};

    use super::*;

    #[test]
    fn stored_column_count_matches_the_list() {
        assert_eq!(STORED_COLUMNS.split(", ").count(), STORED_COLUMN_COUNT);
    }

    #[test]
    fn metadata_columns_round_trip() {
        // semantics §1.6: maps as a JSON object of strings, messages as proto3-JSON, "" when empty
        let row = SessionRow {
            uid: "sess-1".into(),
            labels: BTreeMap::from([("k".into(), "v".into())]),
            origin: Some(Origin {
                source: "src".into(),
                attributes: BTreeMap::from([("a".into(), "b".into())]),
                ..Origin::default()
            }),
            identity: IdentityRef {
                principal: "agent://a".into(),
                ..IdentityRef::default()
            },
            ..SessionRow::default()
        };
        let enc = EncodedRow::new(row.clone()).unwrap();
        assert_eq!(enc.labels, r#"{"k":"v"}"#);
        assert_eq!(enc.annotations, "");
        let stored = StoredSession {
            session: enc.uid,
            labels: enc.labels,
            annotations: enc.annotations,
            origin: enc.origin,
            identity: enc.identity,
            ..StoredSession::default()
        };
        let info = stored.into_info(0).unwrap();
        assert_eq!(info.row.labels, row.labels);
        assert_eq!(info.row.origin, row.origin);
        assert_eq!(info.row.identity, row.identity);
        assert_eq!(info.compute_state, ComputeState::None);
    }
}
