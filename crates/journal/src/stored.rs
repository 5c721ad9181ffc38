//! The `sessions` and `harnesses` rows as the durable backends store them (semantics §1.5):
//! every column in its stored form (text encodings from [`columns`](crate::columns), times as
//! unix nanoseconds, `0` for none), and the one conversion each way to the journal's types. A
//! backend only moves these values between its rows and these structs, so a stored row reads
//! alike on SQLite and Postgres.

use agentsessions_api::{CallerIdentity, ComputeState, DeletionState, Timestamp};

use crate::columns::{
    decode_identity, decode_map, decode_origin, encode_identity, encode_map, encode_origin,
};
use crate::error::Result;
use crate::rows::{HarnessRow, HarnessState, SessionInfo, SessionRow};
use crate::usage::UsageTotals;

/// A `sessions` row with every column as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredSession {
    /// `session`: the uid.
    pub session: String,
    /// `fence`.
    pub fence: i64,
    /// `project`; empty in a row written before the project was known.
    pub project: String,
    /// `name`.
    pub name: String,
    /// `harness`.
    pub harness: String,
    /// `model`.
    pub model: String,
    /// `parent_uid`.
    pub parent_uid: String,
    /// `fork_seq`.
    pub fork_seq: i64,
    /// `compute_state` as its name; empty or unknown reads as NONE.
    pub compute_state: String,
    /// `created_at`, unix nanoseconds; 0 when not yet known.
    pub created_at: i64,
    /// `updated_at`, unix nanoseconds.
    pub updated_at: i64,
    /// `labels`, encoded.
    pub labels: String,
    /// `annotations`, encoded.
    pub annotations: String,
    /// `origin`, encoded.
    pub origin: String,
    /// `identity`, encoded.
    pub identity: String,
    /// `owner_issuer`.
    pub owner_issuer: String,
    /// `owner_subject`.
    pub owner_subject: String,
    /// `deletion_state` as its name; empty means active.
    pub deletion_state: String,
    /// `reclaimed_at`, unix nanoseconds; 0 when not reclaimed.
    pub reclaimed_at: i64,
    /// `usage_input_tokens`, `usage_output_tokens`, `usage_reasoning_tokens`,
    /// `usage_cached_input_tokens`: the session's USAGE records summed.
    pub usage: UsageTotals,
}

impl StoredSession {
    /// The stored compute state; an unknown string reads as NONE rather than failing the read.
    pub fn compute(&self) -> ComputeState {
        ComputeState::parse(&self.compute_state).unwrap_or(ComputeState::None)
    }

    /// The metadata and derived state, given the session's last seq.
    ///
    /// # Errors
    /// A metadata column that does not decode.
    pub fn into_info(self, last_seq: i64) -> Result<SessionInfo> {
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
            usage: self.usage,
        })
    }
}

/// A [`SessionRow`] with its metadata encoded for its columns.
#[derive(Debug, Clone)]
pub struct EncodedRow {
    /// Session uid.
    pub uid: String,
    /// Project; empty means the default project.
    pub project: String,
    /// Display name.
    pub name: String,
    /// Harness name.
    pub harness: String,
    /// Model id.
    pub model: String,
    /// Parent uid for a fork child.
    pub parent_uid: String,
    /// Parent seq the child was forked at.
    pub fork_seq: i64,
    /// Labels, encoded.
    pub labels: String,
    /// Annotations, encoded.
    pub annotations: String,
    /// Origin, encoded.
    pub origin: String,
    /// Identity, encoded.
    pub identity: String,
    /// Creation time in unix nanoseconds; `None` means now on insert and unchanged on update.
    pub created_at: Option<i64>,
    /// The owner the write names (empty keeps the stored one).
    pub owner: CallerIdentity,
}

impl EncodedRow {
    /// Encodes `row`.
    ///
    /// # Errors
    /// An origin or identity without a canonical form.
    pub fn new(row: SessionRow) -> Result<Self> {
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

/// The `harnesses` columns, in [`StoredHarness`] order.
pub const HARNESS_COLUMNS: &str =
    "name, uid, spec, spec_digest, state, retire_reason, retired_at, created_at, updated_at";

/// A `harnesses` row with every column as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredHarness {
    /// `name`.
    pub name: String,
    /// `uid`.
    pub uid: String,
    /// `spec`.
    pub spec: String,
    /// `spec_digest`.
    pub spec_digest: String,
    /// `state`: `active` or `retired`.
    pub state: String,
    /// `retire_reason`.
    pub retire_reason: String,
    /// `retired_at`, unix nanoseconds; 0 when never retired.
    pub retired_at: i64,
    /// `created_at`, unix nanoseconds.
    pub created_at: i64,
    /// `updated_at`, unix nanoseconds.
    pub updated_at: i64,
}

impl StoredHarness {
    /// The registration this row stores.
    pub fn into_row(self) -> HarnessRow {
        HarnessRow {
            name: self.name,
            uid: self.uid,
            spec: self.spec,
            spec_digest: self.spec_digest,
            // Fail closed: a state this build does not know is not selectable.
            state: if self.state == "active" {
                HarnessState::Active
            } else {
                HarnessState::Retired
            },
            retire_reason: self.retire_reason,
            retired_at: (self.retired_at != 0).then(|| Timestamp::from_unix_nanos(self.retired_at)),
            created_at: Timestamp::from_unix_nanos(self.created_at),
            updated_at: Timestamp::from_unix_nanos(self.updated_at),
        }
    }

    /// The row that stores `row`.
    pub fn of(row: &HarnessRow) -> Self {
        Self {
            name: row.name.clone(),
            uid: row.uid.clone(),
            spec: row.spec.clone(),
            spec_digest: row.spec_digest.clone(),
            state: match row.state {
                HarnessState::Active => "active",
                HarnessState::Retired => "retired",
            }
            .to_owned(),
            retire_reason: row.retire_reason.clone(),
            retired_at: row.retired_at.map_or(0, Timestamp::unix_nanos),
            created_at: row.created_at.unix_nanos(),
            updated_at: row.updated_at.unix_nanos(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentsessions_api::{IdentityRef, Origin};

    use super::*;

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

    #[test]
    fn harness_rows_round_trip_and_unknown_states_fail_closed() {
        let row = HarnessRow {
            name: "h".into(),
            uid: "harness-1".into(),
            spec: "{}".into(),
            spec_digest: "sha256:x".into(),
            state: HarnessState::Retired,
            retire_reason: "old".into(),
            retired_at: Some(Timestamp::from_unix_nanos(5)),
            created_at: Timestamp::from_unix_nanos(1),
            updated_at: Timestamp::from_unix_nanos(5),
        };
        let stored = StoredHarness::of(&row);
        assert_eq!(stored.state, "retired");
        assert_eq!(stored.clone().into_row(), row);
        let unknown = StoredHarness {
            state: "paused".into(),
            ..stored
        };
        assert_eq!(unknown.into_row().state, HarnessState::Retired);
    }
}
