//! The journal rules every backend shares, so the semantics cannot drift between them.

use agentsessions_api::{CallerIdentity, ComputeState, DeletionState, Event, Timestamp};
use rand::RngCore as _;

use crate::chain::PreparedEvent;
use crate::error::{JournalError, Result};
use crate::page_token::PageCursor;
use crate::rows::{HarnessRow, HarnessState, ListQuery, RegisterOutcome, SessionInfo, SessionPage};

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

/// [`check_append`] for an append that either brings the writer's `fence` or (`None`) mints
/// the next one: a minting append checks only the cursor, before the fence moves.
pub fn check_append_or_mint(
    session: &str,
    expected_last_seq: i64,
    head: i64,
    fence: Option<i64>,
    current_fence: i64,
) -> Result<()> {
    match fence {
        Some(fence) => check_append(session, expected_last_seq, head, fence, current_fence),
        None => check_append(session, expected_last_seq, head, current_fence, 0),
    }
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

/// A fork parent must exist (a row or records) and the fork point must be one of its committed
/// records, `1..=head`.
pub fn check_fork_parent(parent: &str, at_seq: i64, head: i64, has_row: bool) -> Result<()> {
    if head == 0 && !has_row {
        return Err(JournalError::SessionNotFound(parent.to_owned()));
    }
    check_fork_seq(parent, at_seq, head)
}

/// The refusal for a fork point whose record is not stored (the parent's chain is damaged).
pub fn no_record_to_fork(parent: &str, at_seq: i64) -> JournalError {
    JournalError::InvalidArgument(format!(
        "session {parent} has no stored record at seq {at_seq} to fork from"
    ))
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

/// A shared-prefix child's lineage is where its records come from, so a metadata write on `uid`
/// may restate its link `(parent, fork_seq)` as `written` but never change it.
pub fn check_lineage_kept(uid: &str, written: (&str, i64), link: (&str, i64)) -> Result<()> {
    let ((parent_uid, fork_seq), (parent, link_seq)) = (written, link);
    if parent_uid != parent || fork_seq != link_seq {
        return Err(JournalError::InvalidArgument(format!(
            "session {uid} shares its first {link_seq} records with {parent}; its parent_uid and \
             fork_seq cannot change (got {parent_uid:?} at {fork_seq})"
        )));
    }
    Ok(())
}

/// A schema stamp a build that writes `supported` may open: `0..=supported`. Anything else is
/// refused before the database is touched (fail closed).
pub fn check_schema_stamp(found: i64, supported: i64) -> Result<i64> {
    if !(0..=supported).contains(&found) {
        return Err(JournalError::UnsupportedSchema { found, supported });
    }
    Ok(found)
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

/// A settled compute projection must name a state (`NONE` … `TERMINATED`).
pub fn check_settled_state(session: &str, state: ComputeState) -> Result<()> {
    check_session_uid(session)?;
    if state == ComputeState::Unspecified {
        return Err(JournalError::InvalidArgument(format!(
            "session {session}'s compute state cannot be settled as unspecified"
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

/// What a listing asks a backend for, with the shared rules applied: the page token decoded,
/// the owner filter checked, the size clamped and the project defaulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPlan {
    /// Where the page starts; `None` for the first page.
    pub cursor: Option<PageCursor>,
    /// The project to list.
    pub project: String,
    /// Rows on the page.
    pub size: usize,
}

impl ListPlan {
    /// Checks `query` and fills in its defaults.
    ///
    /// # Errors
    /// [`JournalError::InvalidPageToken`] for a token this journal did not issue,
    /// [`JournalError::InvalidArgument`] for an incomplete owner filter.
    pub fn new(query: &ListQuery, default_project: &str) -> Result<Self> {
        let cursor = PageCursor::decode(&query.page_token)?;
        check_owner_filter(query.owner.as_ref())?;
        let project = if query.project.is_empty() {
            default_project
        } else {
            &query.project
        };
        Ok(Self {
            cursor,
            project: project.to_owned(),
            size: query.effective_size(),
        })
    }

    /// Rows to fetch: one past the page, to learn whether another page follows.
    pub fn fetch_limit(&self) -> i64 {
        i64::try_from(self.size + 1).unwrap_or(i64::MAX)
    }

    /// The page from up to [`ListPlan::fetch_limit`] rows in listing order.
    pub fn page(&self, mut sessions: Vec<SessionInfo>) -> SessionPage {
        let more = sessions.len() > self.size;
        sessions.truncate(self.size);
        page_of(sessions, more)
    }
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
    use crate::rows::SessionRow;

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

    #[test]
    fn a_minting_append_checks_only_the_cursor() {
        // semantics §1.4: a fencing append's fence is minted after the CAS check, so no fence
        // can be stale; the cursor still must be the head
        check_append_or_mint("s", 2, 2, None, 9).unwrap();
        assert!(matches!(
            check_append_or_mint("s", 1, 2, None, 9),
            Err(JournalError::Conflict { .. })
        ));
        assert!(matches!(
            check_append_or_mint("s", 2, 2, Some(4), 5),
            Err(JournalError::Fenced { .. })
        ));
    }

    #[test]
    fn schema_stamps_outside_the_build_are_refused() {
        // semantics §1.5: fail closed on a negative or newer stamp
        assert_eq!(check_schema_stamp(0, 3).unwrap(), 0);
        assert_eq!(check_schema_stamp(3, 3).unwrap(), 3);
        for bad in [-1, 4] {
            assert!(matches!(
                check_schema_stamp(bad, 3),
                Err(JournalError::UnsupportedSchema { found, supported: 3 }) if found == bad
            ));
        }
    }

    #[test]
    fn fork_parents_must_exist_and_hold_the_fork_point() {
        assert!(matches!(
            check_fork_parent("p", 1, 0, false),
            Err(JournalError::SessionNotFound(_))
        ));
        assert!(matches!(
            check_fork_parent("p", 1, 0, true),
            Err(JournalError::InvalidArgument(_))
        ));
        check_fork_parent("p", 2, 2, false).unwrap();
    }

    #[test]
    fn a_list_plan_defaults_the_project_and_fetches_one_past_the_page() {
        // semantics §1.8: pages are exact; the extra row only says another page follows
        let query = ListQuery {
            page_size: 2,
            ..ListQuery::default()
        };
        let plan = ListPlan::new(&query, "dflt").unwrap();
        assert_eq!(
            (plan.project.as_str(), plan.size, plan.fetch_limit()),
            ("dflt", 2, 3)
        );
        let info = |uid: &str| SessionInfo {
            row: SessionRow {
                uid: uid.to_owned(),
                ..SessionRow::default()
            },
            ..SessionInfo::default()
        };
        let page = plan.page(vec![info("a"), info("b"), info("c")]);
        assert_eq!(page.sessions.len(), 2);
        let next = PageCursor::decode(&page.next_page_token).unwrap().unwrap();
        assert_eq!(next.uid, "b");
        assert!(plan.page(vec![info("a")]).next_page_token.is_empty());
        let bad_owner = ListQuery {
            owner: Some(CallerIdentity::new("issuer", "")),
            ..ListQuery::default()
        };
        assert!(matches!(
            ListPlan::new(&bad_owner, "dflt"),
            Err(JournalError::InvalidArgument(_))
        ));
    }
}
