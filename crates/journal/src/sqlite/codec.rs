//! Column encodings of the `sessions` and `harnesses` rows: maps as a JSON object of strings,
//! origin and identity as the proto3-JSON of their message, `""` when empty.

use agentsessions_api::{CallerIdentity, ComputeState, DeletionState, Timestamp};
use rusqlite::Row;

use crate::columns::{decode_identity, decode_map, decode_origin};
pub(crate) use crate::columns::{encode_identity, encode_map, encode_origin};
use crate::error::Result;
use crate::journal::{HarnessRow, HarnessState, SessionInfo, SessionRow};

/// The column list [`session_info_from_row`] reads, in order.
pub(crate) const SESSION_COLUMNS: &str = "s.session, s.project, s.name, s.harness, s.model, \
     s.parent_uid, s.fork_seq, s.labels, s.annotations, s.origin, s.identity, s.created_at, \
     s.updated_at, s.compute_state, s.fence, \
     COALESCE((SELECT MAX(e.seq) FROM events e WHERE e.session = s.session), \
              (SELECT p.fork_seq FROM session_prefix p WHERE p.session = s.session), 0), \
     s.owner_issuer, s.owner_subject, s.deletion_state, s.reclaimed_at";

pub(crate) fn session_info_from_row(row: &Row<'_>) -> Result<SessionInfo> {
    let labels: String = row.get(7)?;
    let annotations: String = row.get(8)?;
    let origin: String = row.get(9)?;
    let identity: String = row.get(10)?;
    let compute: String = row.get(13)?;
    Ok(SessionInfo {
        row: SessionRow {
            uid: row.get(0)?,
            project: row.get(1)?,
            name: row.get(2)?,
            harness: row.get(3)?,
            model: row.get(4)?,
            parent_uid: row.get(5)?,
            fork_seq: row.get(6)?,
            labels: decode_map("labels", &labels)?,
            annotations: decode_map("annotations", &annotations)?,
            origin: decode_origin(&origin)?,
            identity: decode_identity(&identity)?,
            created_at: Some(Timestamp::from_unix_nanos(row.get(11)?)),
            owner: CallerIdentity::new(row.get::<_, String>(16)?, row.get::<_, String>(17)?),
        },
        updated_at: Timestamp::from_unix_nanos(row.get(12)?),
        // An unknown stored state reads as NONE rather than failing the whole read.
        compute_state: ComputeState::parse(&compute).unwrap_or(ComputeState::None),
        fence: row.get(14)?,
        last_seq: row.get(15)?,
        deletion: DeletionState::parse(&row.get::<_, String>(18)?),
        reclaimed_at: match row.get::<_, i64>(19)? {
            0 => None,
            ns => Some(Timestamp::from_unix_nanos(ns)),
        },
    })
}

/// The column list [`harness_from_row`] reads, in order.
pub(crate) const HARNESS_COLUMNS: &str =
    "name, uid, spec, spec_digest, state, retire_reason, retired_at, created_at, updated_at";

pub(crate) fn harness_state_str(state: HarnessState) -> &'static str {
    match state {
        HarnessState::Active => "active",
        HarnessState::Retired => "retired",
    }
}

pub(crate) fn harness_from_row(row: &Row<'_>) -> rusqlite::Result<HarnessRow> {
    let state: String = row.get(4)?;
    let retired_at: i64 = row.get(6)?;
    Ok(HarnessRow {
        name: row.get(0)?,
        uid: row.get(1)?,
        spec: row.get(2)?,
        spec_digest: row.get(3)?,
        // Fail closed: a state this build does not know is not selectable.
        state: if state == "active" {
            HarnessState::Active
        } else {
            HarnessState::Retired
        },
        retire_reason: row.get(5)?,
        retired_at: (retired_at != 0).then(|| Timestamp::from_unix_nanos(retired_at)),
        created_at: Timestamp::from_unix_nanos(row.get(7)?),
        updated_at: Timestamp::from_unix_nanos(row.get(8)?),
    })
}
