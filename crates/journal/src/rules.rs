//! The journal rules every backend shares, so the semantics cannot drift between them.

use agentsessions_api::{CallerIdentity, DeletionState, Event, Timestamp};
use rand::RngCore as _;

use crate::chain::PreparedEvent;
use crate::error::{JournalError, Result};
use crate::journal::{
    HarnessRow, HarnessState, RegisterOutcome, SessionInfo, SessionPage, SessionRow,
};
use crate::page_token::PageCursor;

/// Refuses an empty session uid.
pub fn check_session_uid(session: &str) -> Result<()> {
    if session.is_empty() {
        return Err(JournalError::InvalidArgument(
            "session uid is empty".to_owned(),
        ));
    }
    Ok(())
}

/// Semantics §1.4 steps 1 and 2: the CAS cursor must be the head, and the writer's fence must
/// not be below the session's fence.
pub fn check_append(
    session: &str,
    expected_last_seq: i64,
    head: i64,
    fence: i64,
    current_fence: i64,
) -> Result<()> {
    if expected_last_seq != head {
        return Err(JournalError::Conflict {
            session: session.to_owned(),
            expected: expected_last_seq,
            actual: head,
        });
    }
    if fence < current_fence {
        return Err(JournalError::Fenced {
            session: session.to_owned(),
            fence,
            current: current_fence,
        });
    }
    Ok(())
}

/// Checks an append's session uid (and, for a fencing append, that it opens with at least one
/// record) and canonicalizes its events, before anything reaches a backend's writer.
///
/// # Errors
/// [`JournalError::InvalidArgument`] for an empty uid or an empty fencing batch; the first
/// event's [`PreparedEvent::new`] error.
pub fn prepare_batch(
    session: &str,
    events: Vec<Event>,
    fencing: bool,
) -> Result<Vec<PreparedEvent>> {
    check_session_uid(session)?;
    if fencing && events.is_empty() {
        return Err(JournalError::InvalidArgument(format!(
            "a fencing append on session {session} needs at least one event"
        )));
    }
    events.into_iter().map(PreparedEvent::new).collect()
}

/// A fork point must be a committed record of the parent: `1..=head`.
pub fn check_fork_seq(parent: &str, at_seq: i64, head: i64) -> Result<()> {
    if at_seq < 1 || at_seq > head {
        return Err(JournalError::InvalidArgument(format!(
            "fork of session {parent} at seq {at_seq}: the fork point must be within 1..={head}"
        )));
    }
    Ok(())
}

/// A shared-prefix child's lineage is where its records come from, so a metadata write may
/// restate it but never change it.
pub(crate) fn check_lineage_kept(row: &SessionRow, parent: &str, fork_seq: i64) -> Result<()> {
    if row.parent_uid != parent || row.fork_seq != fork_seq {
        return Err(JournalError::InvalidArgument(format!(
            "session {} shares its first {fork_seq} records with {parent}; its parent_uid and \
             fork_seq cannot change (got {:?} at {})",
            row.uid, row.parent_uid, row.fork_seq
        )));
    }
    Ok(())
}

/// The owner a metadata write leaves on `uid`: the stored one when the write names none or the
/// same one, the written one when none is stored. Changing a stored owner is refused: ownership
/// is fixed at creation (extensions §1).
pub fn owner_after(
    uid: &str,
    stored: &CallerIdentity,
    written: &CallerIdentity,
) -> Result<CallerIdentity> {
    if *written == CallerIdentity::default() || written == stored {
        return Ok(stored.clone());
    }
    if !written.valid() {
        return Err(JournalError::InvalidArgument(format!(
            "session {uid}: owner needs both issuer and subject"
        )));
    }
    if *stored != CallerIdentity::default() {
        return Err(JournalError::InvalidArgument(format!(
            "session {uid} is owned by another caller; its owner cannot change"
        )));
    }
    Ok(written.clone())
}

/// Refuses an incomplete owner filter on a listing.
pub fn check_owner_filter(owner: Option<&CallerIdentity>) -> Result<()> {
    match owner {
        Some(owner) if !owner.valid() => Err(JournalError::InvalidArgument(
            "owner filter needs both issuer and subject".to_owned(),
        )),
        _ => Ok(()),
    }
}

/// Only a session whose deletion state is not active may be marked reclaimed.
pub fn check_reclaimable(uid: &str, deletion: &DeletionState) -> Result<()> {
    if !deletion.is_deleted() {
        return Err(JournalError::InvalidArgument(format!(
            "session {uid} is not being deleted; only a deleted session is reclaimed"
        )));
    }
    Ok(())
}

/// Normalizes a read window: `to == 0` means up to the head.
pub fn read_window(from: i64, to: i64) -> Result<(i64, i64)> {
    if from < 0 || to < 0 {
        return Err(JournalError::InvalidArgument(format!(
            "read window [{from}, {to}] has a negative bound"
        )));
    }
    Ok((from, if to == 0 { i64::MAX } else { to }))
}

/// Builds a page from rows already truncated to the page size; `more` says a further row exists.
pub fn page_of(sessions: Vec<SessionInfo>, more: bool) -> SessionPage {
    let next_page_token = match sessions.last() {
        Some(last) if more => PageCursor {
            created_at_ns: last.row.created_at.unwrap_or_default().unix_nanos(),
            uid: last.row.uid.clone(),
        }
        .encode(),
        _ => String::new(),
    };
    SessionPage {
        sessions,
        next_page_token,
    }
}

/// Decides a registration against what is stored under the name (semantics §7.2): identical spec
/// → unchanged or reactivated, another spec → exists, a free but reserved name → reserved.
pub fn register_decision(
    existing: Option<HarnessRow>,
    reserved: bool,
    name: &str,
    spec: &str,
    spec_digest: &str,
    now: Timestamp,
) -> Result<(HarnessRow, RegisterOutcome)> {
    match existing {
        Some(row) if row.spec_digest != spec_digest => {
            Err(JournalError::HarnessExists(name.to_owned()))
        }
        Some(row) if row.state == HarnessState::Active => Ok((row, RegisterOutcome::Unchanged)),
        Some(mut row) => {
            row.state = HarnessState::Active;
            row.updated_at = now;
            Ok((row, RegisterOutcome::Reactivated))
        }
        None if reserved => Err(JournalError::HarnessNameReserved(name.to_owned())),
        None => Ok((
            HarnessRow {
                name: name.to_owned(),
                uid: new_harness_uid(),
                spec: spec.to_owned(),
                spec_digest: spec_digest.to_owned(),
                state: HarnessState::Active,
                retire_reason: String::new(),
                retired_at: None,
                created_at: now,
                updated_at: now,
            },
            RegisterOutcome::Created,
        )),
    }
}

/// Retires a registration; the reason and time of the first retirement are kept.
pub fn retire(row: &mut HarnessRow, reason: &str, now: Timestamp) {
    if row.state == HarnessState::Retired {
        return;
    }
    row.state = HarnessState::Retired;
    if row.retired_at.is_none() {
        row.retired_at = Some(now);
        reason.clone_into(&mut row.retire_reason);
    }
    row.updated_at = now;
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new session uid: `sess-` and 24 lowercase hex digits (semantics §1.6).
pub fn new_session_uid() -> String {
    format!("sess-{}", random_hex(12))
}

/// A new harness registration uid: `harness-` and 24 lowercase hex digits.
pub fn new_harness_uid() -> String {
    format!("harness-{}", random_hex(12))
}

/// A new execution or model-call id: 16 lowercase hex digits.
pub fn new_execution_id() -> String {
    random_hex(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_documented_shape() {
        // semantics §1.6
        let s = new_session_uid();
        assert!(s.starts_with("sess-") && s.len() == 29, "{s}");
        assert_eq!(new_execution_id().len(), 16);
        assert!(new_harness_uid().starts_with("harness-"));
        assert_ne!(new_session_uid(), new_session_uid());
    }

    #[test]
    fn cas_is_checked_before_fence() {
        // semantics §1.4: step 1 (CAS) precedes step 2 (fence)
        assert!(matches!(
            check_append("s", 1, 2, 0, 5),
            Err(JournalError::Conflict { .. })
        ));
        assert!(matches!(
            check_append("s", 2, 2, 4, 5),
            Err(JournalError::Fenced { .. })
        ));
        check_append("s", 2, 2, 5, 5).unwrap();
        check_append("s", 2, 2, 9, 5).unwrap();
    }
}
