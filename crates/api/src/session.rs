//! The session resource and its state axes.

use std::collections::BTreeMap;

/// The agent principal bound to an event: provenance, never an authorization credential.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct IdentityRef {
    /// Principal, e.g. `agent://a`.
    pub principal: String,
    /// Issuer, e.g. an OIDC issuer.
    pub issuer: String,
    /// Session-scoped subject.
    pub subject: String,
}

impl IdentityRef {
    /// True when every field is empty (the wire then omits it).
    pub fn is_empty(&self) -> bool {
        self.principal.is_empty() && self.issuer.is_empty() && self.subject.is_empty()
    }
}

/// The execution (turn) axis of a session, derived from the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ExecState {
    /// Not set.
    #[default]
    Unspecified,
    /// No events yet.
    Pending,
    /// A turn is running.
    Running,
    /// Blocked on an approval decision.
    Awaiting,
    /// The last turn completed.
    Completed,
    /// The last turn failed.
    Failed,
    /// The last turn was cancelled.
    Canceled,
    /// The last turn stopped before it ended (its host went away, it recorded an error without
    /// an end, or its approval was decided): Resume, or an Exec without input, continues it.
    Interrupted,
}

/// The incarnation (compute) axis of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ComputeState {
    /// Not set.
    #[default]
    Unspecified,
    /// No incarnation.
    None,
    /// Running.
    Live,
    /// Paused with its worker held.
    Warm,
    /// Suspended: snapshot stored, worker freed.
    Cold,
    /// Torn down.
    Terminated,
}

impl ComputeState {
    /// The stored name (`NONE`, `LIVE` …); empty for unspecified.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::None => "NONE",
            Self::Live => "LIVE",
            Self::Warm => "WARM",
            Self::Cold => "COLD",
            Self::Terminated => "TERMINATED",
        }
    }

    /// Parses a stored name; empty reads back as [`ComputeState::None`], unknown as `None`.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "" | "NONE" => Self::None,
            "LIVE" => Self::Live,
            "WARM" => Self::Warm,
            "COLD" => Self::Cold,
            "TERMINATED" => Self::Terminated,
            _ => return None,
        })
    }
}

/// The permanent-deletion axis. A stored value this build does not recognize is
/// [`DeletionState::Unrecognized`], which fails closed: it counts as deleted, never as active.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum DeletionState {
    /// Not being deleted.
    #[default]
    Active,
    /// Durable intent to delete recorded; resources not yet reclaimed.
    Pending,
    /// A value this build does not know; treated as deleted.
    Unrecognized(String),
}

impl DeletionState {
    /// The stored name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Active => "ACTIVE",
            Self::Pending => "PENDING",
            Self::Unrecognized(s) => s,
        }
    }

    /// Parses a stored name; empty is active (legacy rows), anything unknown is kept as
    /// [`DeletionState::Unrecognized`].
    pub fn parse(name: &str) -> Self {
        match name {
            "" | "ACTIVE" => Self::Active,
            "PENDING" => Self::Pending,
            other => Self::Unrecognized(other.to_owned()),
        }
    }

    /// True unless the state is exactly [`DeletionState::Active`] (fail closed).
    pub fn is_deleted(&self) -> bool {
        !matches!(self, Self::Active)
    }
}

/// Points at a captured incarnation state. Both `local` and `external_uri` may be set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SnapshotRef {
    /// Node-local handle, or (filesystem-only backends) the session handle to replay.
    pub local: String,
    /// External blob.
    pub external_uri: String,
    /// Whether RAM/process state was captured.
    pub memory: bool,
    /// Encrypted and attested.
    pub sealed: bool,
}

impl SnapshotRef {
    /// True when no field is set (the zero ref means "none").
    pub fn is_empty(&self) -> bool {
        self.local.is_empty() && self.external_uri.is_empty() && !self.memory && !self.sealed
    }
}

/// What a compute backend can do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RuntimeCapabilities {
    /// Can capture and restore RAM and processes.
    pub memory_snapshot: bool,
    /// Copy-on-write fork.
    pub cow_fork: bool,
    /// Attestation on restore.
    pub attest: bool,
    /// Accelerator state capture.
    pub gpu_state: bool,
}

/// The session's current incarnation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComputeRef {
    /// Backend name.
    pub runtime: String,
    /// Worker id while live or warm; empty when cold.
    pub worker: String,
    /// Captured state.
    pub snapshot: Option<SnapshotRef>,
    /// Backend capabilities.
    pub capabilities: RuntimeCapabilities,
    /// Backend-specific extras.
    pub attributes: BTreeMap<String, String>,
    /// The incarnation's fence.
    pub fence_token: i64,
}

/// The neutral external context a session is tied to, filled by producer adapters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// Where it came from, e.g. `github.com/acme/repo`.
    pub source: String,
    /// What it is about, e.g. `issues/42`.
    pub subject: String,
    /// Optional link.
    pub uri: String,
    /// Adapter-specific extras.
    pub attributes: BTreeMap<String, String>,
}

impl Origin {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self.source.is_empty()
            && self.subject.is_empty()
            && self.uri.is_empty()
            && self.attributes.is_empty()
    }
}

/// The exact issuer/subject pair of a caller verified by a trusted host. Never populated from
/// caller-supplied fields; constructing one verifies nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallerIdentity {
    /// Who vouched for the caller (a CA or token issuer).
    pub issuer: String,
    /// The caller within that issuer.
    pub subject: String,
}

impl CallerIdentity {
    /// A caller identity from its two parts.
    pub fn new(issuer: impl Into<String>, subject: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            subject: subject.into(),
        }
    }

    /// Whether both parts are present. No trimming or case folding.
    pub fn valid(&self) -> bool {
        !self.issuer.is_empty() && !self.subject.is_empty()
    }
}

/// The durable unit: an event log plus zero or one live incarnation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Session {
    /// Server-assigned id.
    pub uid: String,
    /// Tenant / namespace (a filter, not a boundary).
    pub project: String,
    /// Display name.
    pub name: String,
    /// Harness name.
    pub harness: String,
    /// Model id (stored metadata).
    pub model: String,
    /// Turn axis.
    pub exec: ExecState,
    /// Incarnation axis.
    pub compute_state: ComputeState,
    /// The log cursor.
    pub last_seq: i64,
    /// Set iff this session was forked.
    pub parent_uid: String,
    /// Parent seq forked at.
    pub fork_seq: i64,
    /// Recorded provenance.
    pub identity: IdentityRef,
    /// Current incarnation; `None` when suspended or terminated.
    pub compute: Option<ComputeRef>,
    /// External context.
    pub origin: Option<Origin>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Free-form adapter metadata.
    pub annotations: BTreeMap<String, String>,
    /// The verified caller that created it, when ownership is enforced.
    pub owner: CallerIdentity,
    /// Deletion axis.
    pub deletion: DeletionState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_deletion_state_fails_closed() {
        assert!(!DeletionState::parse("").is_deleted());
        assert!(!DeletionState::parse("ACTIVE").is_deleted());
        assert!(DeletionState::parse("PENDING").is_deleted());
        let odd = DeletionState::parse("PURGED_V9");
        assert!(odd.is_deleted());
        assert_eq!(odd.as_str(), "PURGED_V9");
    }

    #[test]
    fn caller_identity_needs_both_parts() {
        assert!(CallerIdentity::new("ca", "alice").valid());
        assert!(!CallerIdentity::new("", "alice").valid());
        assert!(!CallerIdentity::new("ca", "").valid());
    }

    #[test]
    fn compute_state_empty_reads_as_none() {
        assert_eq!(ComputeState::parse(""), Some(ComputeState::None));
        assert_eq!(ComputeState::parse("COLD"), Some(ComputeState::Cold));
        assert_eq!(ComputeState::parse("??"), None);
    }
}
