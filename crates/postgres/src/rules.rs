//! The journal rules this backend applies: the shared ones come from
//! `agentsessions_journal::rules` (the conformance suite holds every backend to them); only the
//! check that needs this backend's own link shape lives here.

use agentsessions_journal::{JournalError, Result};

pub(crate) use agentsessions_journal::rules::{
    check_append, check_fork_seq, check_owner_filter, check_reclaimable, check_session_uid,
    owner_after, page_of, prepare_batch, read_window, register_decision, retire,
};

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
