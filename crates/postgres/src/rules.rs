//! The journal rules this backend applies. They restate `agentsessions_journal::rules`, which
//! the journal crate keeps `pub(crate)`; the shared conformance suite holds the two to the same
//! behavior, and once that module is exported these become plain re-uses.

use agentsessions_api::Timestamp;
use agentsessions_journal::page_token::PageCursor;
use agentsessions_journal::rules::new_harness_uid;
use agentsessions_journal::{
    HarnessRow, HarnessState, JournalError, RegisterOutcome, Result, SessionInfo, SessionPage,
};

/// Refuses an empty session uid.
pub(crate) fn check_session_uid(session: &str) -> Result<()> {
    if session.is_empty() {
        return Err(JournalError::InvalidArgument(
            "session uid is empty".to_owned(),
        ));
    }
    Ok(())
}

/// Semantics §1.4 steps 1 and 2, in that order: the CAS cursor must be the head, then the
/// writer's fence must not be below the session's.
pub(crate) fn check_append(
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

/// A fork point must be a committed record of the parent: `1..=head`.
pub(crate) fn check_fork_seq(parent: &str, at_seq: i64, head: i64) -> Result<()> {
    if at_seq < 1 || at_seq > head {
        return Err(JournalError::InvalidArgument(format!(
            "fork of session {parent} at seq {at_seq}: the fork point must be within 1..={head}"
        )));
    }
    Ok(())
}

/// A shared-prefix child's lineage is where its records come from, so a metadata write may
/// restate it but never change it.
pub(crate) fn check_lineage_kept(
    uid: &str,
    parent_uid: &str,
    fork_seq: i64,
    link: &(String, i64),
) -> Result<()> {
    if parent_uid != link.0 || fork_seq != link.1 {
        return Err(JournalError::InvalidArgument(format!(
            "session {uid} shares its first {} records with {}; its parent_uid and fork_seq \
             cannot change (got {parent_uid:?} at {fork_seq})",
            link.1, link.0
        )));
    }
    Ok(())
}

/// Normalizes a read window: `to == 0` means up to the head.
pub(crate) fn read_window(from: i64, to: i64) -> Result<(i64, i64)> {
    if from < 0 || to < 0 {
        return Err(JournalError::InvalidArgument(format!(
            "read window [{from}, {to}] has a negative bound"
        )));
    }
    Ok((from, if to == 0 { i64::MAX } else { to }))
}

/// A page from rows already cut to the page size; `more` says a further row exists, and the
/// token then names the last row returned (semantics §1.8).
pub(crate) fn page_of(sessions: Vec<SessionInfo>, more: bool) -> SessionPage {
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

/// Decides a registration against what is stored under the name (semantics §7.2).
pub(crate) fn register_decision(
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
pub(crate) fn retire(row: &mut HarnessRow, reason: &str, now: Timestamp) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
