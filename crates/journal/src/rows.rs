//! What the [`Journal`](crate::Journal) trait stores and answers besides records: the session
//! and harness rows, the session listing's query and page, and the defaults they share.

use std::collections::BTreeMap;

use agentsessions_api::{
    CallerIdentity, ComputeState, DeletionState, IdentityRef, Origin, Timestamp,
};

use crate::usage::UsageTotals;
/// The project a session lands in when none is given.
pub const DEFAULT_PROJECT: &str = "default";
/// List page size when the caller asks for 0 or less.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// Largest list page; larger requests are clamped, not refused.
pub const MAX_PAGE_SIZE: usize = 500;

/// What a session *is*: the metadata row that exists from creation on, before any event
/// (semantics §1.6). Fence, compute state and last seq are owned by the journal and are not
/// part of what a caller writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRow {
    /// Session uid.
    pub uid: String,
    /// Project; empty means the journal's default project.
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
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// External context.
    pub origin: Option<Origin>,
    /// Recorded provenance.
    pub identity: IdentityRef,
    /// Creation time; `None` means now on insert and unchanged on update.
    pub created_at: Option<Timestamp>,
    /// The verified caller that created the session (extensions §1, §2); empty for an unbound
    /// session. Fixed once set: a write may restate it or leave it empty (keeping it), never
    /// change it. A fork child starts with its parent's owner.
    pub owner: CallerIdentity,
}

/// A session's metadata joined with what the journal derives for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// The stored row (`created_at` always set).
    pub row: SessionRow,
    /// Highest committed seq, 0 when the log is empty.
    pub last_seq: i64,
    /// The compute projection of semantics §1.7.
    pub compute_state: ComputeState,
    /// The current fence, 0 when none was minted.
    pub fence: i64,
    /// Last metadata or log change.
    pub updated_at: Timestamp,
    /// The deletion axis (extensions §3), set to pending in the transaction that commits the
    /// session's `LIFECYCLE_DELETE`. A stored value this build does not know fails closed.
    pub deletion: DeletionState,
    /// When the reclaimer released the session's compute and snapshots; `None` until then.
    pub reclaimed_at: Option<Timestamp>,
    /// The session's USAGE records summed, kept in each append's commit.
    pub usage: UsageTotals,
}

/// One page request of [`Catalog::list_sessions`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Exact project; empty means the default project.
    pub project: String,
    /// Page size; 0 or less is [`DEFAULT_PAGE_SIZE`], more than [`MAX_PAGE_SIZE`] is clamped.
    pub page_size: i64,
    /// Opaque token from a previous page; empty for the first page.
    pub page_token: String,
    /// Only sessions owned by exactly this caller (an indexed query, so page sizes and tokens
    /// stay exact); `None` lists every owner. An incomplete owner is refused.
    pub owner: Option<CallerIdentity>,
}

impl ListQuery {
    /// The effective page size after defaulting and clamping.
    pub fn effective_size(&self) -> usize {
        match usize::try_from(self.page_size) {
            Ok(0) | Err(_) => DEFAULT_PAGE_SIZE,
            Ok(n) => n.min(MAX_PAGE_SIZE),
        }
    }
}

/// One page of sessions, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPage {
    /// The sessions on this page.
    pub sessions: Vec<SessionInfo>,
    /// Token for the next page; empty on the last page.
    pub next_page_token: String,
}

/// Lifecycle state of a registered harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HarnessState {
    /// Selectable by new sessions.
    Active,
    /// Refused for new sessions; existing sessions keep working.
    Retired,
}

/// A stored harness registration (semantics §1.5 v2, §7.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessRow {
    /// Registry name (an RFC 1123 label).
    pub name: String,
    /// Server-assigned id, stable across unchanged and reactivating registrations.
    pub uid: String,
    /// Canonical proto3-JSON of the spec.
    pub spec: String,
    /// `sha256:` digest of `spec`.
    pub spec_digest: String,
    /// Active or retired.
    pub state: HarnessState,
    /// Reason given on the first retirement.
    pub retire_reason: String,
    /// Time of the first retirement.
    pub retired_at: Option<Timestamp>,
    /// Registration time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

/// What a registration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegisterOutcome {
    /// A new registration.
    Created,
    /// The identical spec was already active under the name.
    Unchanged,
    /// The identical spec was retired and is active again.
    Reactivated,
}
