//! Sessions: the resource, its state axes, compute refs, snapshots, origin and owner.
//!
//! The choices where the two sides differ are described in the [`convert`](super#sessions)
//! module documentation.

use agentsessions_api::{
    CallerIdentity, ComputeRef, ComputeState, DeletionState, ExecState, Origin,
    RuntimeCapabilities, Session, SnapshotRef,
};

use super::content::identity_to_pb;
use super::enum_from_pb;
use crate::error::{Result, WireError};
use crate::pb;

/// Prefix of the [`DeletionState::Unrecognized`] name given to a wire number this build does not
/// define, so the number survives a round trip.
const UNKNOWN_DELETION_PREFIX: &str = "DELETION_STATE_";

/// `metadata` holds `project`, `name` and `uid` (its `version` and times are left for the server to
/// fill), `pending_approval` and `usage` are left unset, `identity` and `owner` are omitted when empty.
impl From<Session> for pb::Session {
    fn from(s: Session) -> Self {
        let owner =
            (!s.owner.issuer.is_empty() || !s.owner.subject.is_empty()).then(|| s.owner.into());
        Self {
            metadata: Some(pb::ResourceMetadata {
                project: s.project,
                name: s.name,
                uid: s.uid,
                version: 0,
                create_time: None,
                update_time: None,
            }),
            harness: s.harness,
            model: s.model,
            exec_state: pb::ExecState::from(s.exec).into(),
            compute_state: pb::ComputeState::from(s.compute_state).into(),
            pending_approval: None,
            last_seq: s.last_seq,
            parent_uid: s.parent_uid,
            fork_seq: s.fork_seq,
            identity: identity_to_pb(s.identity),
            compute: s.compute.map(Into::into),
            origin: s.origin.map(Into::into),
            labels: s.labels,
            annotations: s.annotations,
            owner,
            deletion_state: deletion_state_to_pb(&s.deletion),
            // The journal's totals, not part of the domain session: the server fills them in.
            usage: None,
        }
    }
}

/// Ignores `metadata.version`, `metadata.create_time`, `metadata.update_time` and
/// `pending_approval`, which the domain session does not hold.
///
/// # Errors
///
/// [`WireError::UnknownEnumValue`] for an unknown `exec_state` or `compute_state`. An unknown
/// `deletion_state` is not an error: it reads as [`DeletionState::Unrecognized`] (fail closed).
impl TryFrom<pb::Session> for Session {
    type Error = WireError;

    fn try_from(s: pb::Session) -> Result<Self> {
        let metadata = s.metadata.unwrap_or_default();
        Ok(Self {
            uid: metadata.uid,
            project: metadata.project,
            name: metadata.name,
            harness: s.harness,
            model: s.model,
            exec: enum_from_pb::<pb::ExecState>(
                s.exec_state,
                "exec_state",
                "agentsessions.v1.ExecState",
            )?
            .into(),
            compute_state: enum_from_pb::<pb::ComputeState>(
                s.compute_state,
                "compute_state",
                "agentsessions.v1.ComputeState",
            )?
            .into(),
            last_seq: s.last_seq,
            parent_uid: s.parent_uid,
            fork_seq: s.fork_seq,
            identity: s.identity.map(Into::into).unwrap_or_default(),
            compute: s.compute.map(Into::into),
            origin: s.origin.map(Into::into),
            labels: s.labels,
            annotations: s.annotations,
            owner: s.owner.map(Into::into).unwrap_or_default(),
            deletion: deletion_state_from_pb(s.deletion_state),
        })
    }
}

// ---- State axes ----

impl From<ExecState> for pb::ExecState {
    fn from(s: ExecState) -> Self {
        match s {
            ExecState::Unspecified => Self::Unspecified,
            ExecState::Pending => Self::ExecPending,
            ExecState::Running => Self::ExecRunning,
            ExecState::Awaiting => Self::ExecAwaiting,
            ExecState::Completed => Self::ExecCompleted,
            ExecState::Failed => Self::ExecFailed,
            ExecState::Canceled => Self::ExecCanceled,
            ExecState::Interrupted => Self::ExecInterrupted,
        }
    }
}

impl From<pb::ExecState> for ExecState {
    fn from(s: pb::ExecState) -> Self {
        match s {
            pb::ExecState::Unspecified => Self::Unspecified,
            pb::ExecState::ExecPending => Self::Pending,
            pb::ExecState::ExecRunning => Self::Running,
            pb::ExecState::ExecAwaiting => Self::Awaiting,
            pb::ExecState::ExecCompleted => Self::Completed,
            pb::ExecState::ExecFailed => Self::Failed,
            pb::ExecState::ExecCanceled => Self::Canceled,
            pb::ExecState::ExecInterrupted => Self::Interrupted,
        }
    }
}

impl From<ComputeState> for pb::ComputeState {
    fn from(s: ComputeState) -> Self {
        match s {
            ComputeState::Unspecified => Self::Unspecified,
            ComputeState::None => Self::ComputeNone,
            ComputeState::Live => Self::ComputeLive,
            ComputeState::Warm => Self::ComputeWarm,
            ComputeState::Cold => Self::ComputeCold,
            ComputeState::Terminated => Self::ComputeTerminated,
        }
    }
}

impl From<pb::ComputeState> for ComputeState {
    fn from(s: pb::ComputeState) -> Self {
        match s {
            pb::ComputeState::Unspecified => Self::Unspecified,
            pb::ComputeState::ComputeNone => Self::None,
            pb::ComputeState::ComputeLive => Self::Live,
            pb::ComputeState::ComputeWarm => Self::Warm,
            pb::ComputeState::ComputeCold => Self::Cold,
            pb::ComputeState::ComputeTerminated => Self::Terminated,
        }
    }
}

/// The wire number for a deletion state. Never `UNSPECIFIED`, which a peer reads as active: an
/// unrecognized state goes out as the number it came in as (`DELETION_STATE_<n>`), or else as
/// `DELETION_PENDING`.
fn deletion_state_to_pb(state: &DeletionState) -> i32 {
    match state {
        DeletionState::Active => pb::DeletionState::DeletionActive.into(),
        DeletionState::Pending => pb::DeletionState::DeletionPending.into(),
        DeletionState::Unrecognized(name) => name
            .strip_prefix(UNKNOWN_DELETION_PREFIX)
            .and_then(|n| n.parse::<i32>().ok())
            .filter(|n| pb::DeletionState::try_from(*n).is_err())
            .unwrap_or_else(|| pb::DeletionState::DeletionPending.into()),
    }
}

/// The domain deletion state for a wire number. `UNSPECIFIED` is what a server that predates
/// deletion sends, and such a server cannot delete, so it reads as active; an unknown number fails
/// closed as [`DeletionState::Unrecognized`].
fn deletion_state_from_pb(value: i32) -> DeletionState {
    match pb::DeletionState::try_from(value) {
        Ok(pb::DeletionState::Unspecified | pb::DeletionState::DeletionActive) => {
            DeletionState::Active
        }
        Ok(pb::DeletionState::DeletionPending) => DeletionState::Pending,
        Err(_) => DeletionState::Unrecognized(format!("{UNKNOWN_DELETION_PREFIX}{value}")),
    }
}

// ---- Compute ----

impl From<SnapshotRef> for pb::SnapshotRef {
    fn from(s: SnapshotRef) -> Self {
        Self {
            local: s.local,
            external_uri: s.external_uri,
            memory: s.memory,
            sealed: s.sealed,
        }
    }
}

impl From<pb::SnapshotRef> for SnapshotRef {
    fn from(s: pb::SnapshotRef) -> Self {
        Self {
            local: s.local,
            external_uri: s.external_uri,
            memory: s.memory,
            sealed: s.sealed,
        }
    }
}

impl From<RuntimeCapabilities> for pb::RuntimeCapabilities {
    fn from(c: RuntimeCapabilities) -> Self {
        Self {
            memory_snapshot: c.memory_snapshot,
            cow_fork: c.cow_fork,
            attest: c.attest,
            gpu_state: c.gpu_state,
        }
    }
}

impl From<pb::RuntimeCapabilities> for RuntimeCapabilities {
    fn from(c: pb::RuntimeCapabilities) -> Self {
        Self {
            memory_snapshot: c.memory_snapshot,
            cow_fork: c.cow_fork,
            attest: c.attest,
            gpu_state: c.gpu_state,
        }
    }
}

/// `capabilities` is always sent (the domain value has no absent state).
impl From<ComputeRef> for pb::ComputeRef {
    fn from(c: ComputeRef) -> Self {
        Self {
            runtime: c.runtime,
            worker: c.worker,
            snapshot: c.snapshot.map(Into::into),
            capabilities: Some(c.capabilities.into()),
            attributes: c.attributes,
            fence_token: c.fence_token,
        }
    }
}

/// Unset `capabilities` read as all `false`.
impl From<pb::ComputeRef> for ComputeRef {
    fn from(c: pb::ComputeRef) -> Self {
        Self {
            runtime: c.runtime,
            worker: c.worker,
            snapshot: c.snapshot.map(Into::into),
            capabilities: c.capabilities.map(Into::into).unwrap_or_default(),
            attributes: c.attributes,
            fence_token: c.fence_token,
        }
    }
}

// ---- Origin and owner ----

impl From<Origin> for pb::Origin {
    fn from(o: Origin) -> Self {
        Self {
            source: o.source,
            subject: o.subject,
            uri: o.uri,
            attributes: o.attributes,
        }
    }
}

impl From<pb::Origin> for Origin {
    fn from(o: pb::Origin) -> Self {
        Self {
            source: o.source,
            subject: o.subject,
            uri: o.uri,
            attributes: o.attributes,
        }
    }
}

impl From<CallerIdentity> for pb::CallerIdentity {
    fn from(c: CallerIdentity) -> Self {
        Self {
            issuer: c.issuer,
            subject: c.subject,
        }
    }
}

impl From<pb::CallerIdentity> for CallerIdentity {
    fn from(c: pb::CallerIdentity) -> Self {
        Self {
            issuer: c.issuer,
            subject: c.subject,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentsessions_api::{ApprovalRef, IdentityRef};
    use prost::Message as _;

    use super::*;

    fn full_session() -> Session {
        Session {
            uid: "uid-1".into(),
            project: "proj".into(),
            name: "my-session".into(),
            harness: "echo".into(),
            model: "gpt-x".into(),
            exec: ExecState::Awaiting,
            compute_state: ComputeState::Cold,
            last_seq: 42,
            parent_uid: "uid-0".into(),
            fork_seq: 7,
            identity: IdentityRef {
                principal: "agent://a".into(),
                issuer: "entra".into(),
                subject: "sub-1".into(),
            },
            compute: Some(ComputeRef {
                runtime: "kata".into(),
                worker: "w-1".into(),
                snapshot: Some(SnapshotRef {
                    local: "/snap".into(),
                    external_uri: "s3://snap".into(),
                    memory: true,
                    sealed: false,
                }),
                capabilities: RuntimeCapabilities {
                    memory_snapshot: true,
                    cow_fork: false,
                    attest: true,
                    gpu_state: true,
                },
                attributes: BTreeMap::from([("zone".to_owned(), "a".to_owned())]),
                fence_token: 3,
            }),
            origin: Some(Origin {
                source: "github.com/acme/repo".into(),
                subject: "issues/42".into(),
                uri: "https://github.com/acme/repo/issues/42".into(),
                attributes: BTreeMap::from([("k".to_owned(), "v".to_owned())]),
            }),
            labels: BTreeMap::from([("team".to_owned(), "x".to_owned())]),
            annotations: BTreeMap::from([("note".to_owned(), "y".to_owned())]),
            owner: CallerIdentity::new("ca", "alice"),
            deletion: DeletionState::Pending,
        }
    }

    #[test]
    fn full_session_round_trips() {
        // STYLE rule 2: api -> pb -> api is the identity
        let session = full_session();
        let wire = pb::Session::from(session.clone());
        assert_eq!(Session::try_from(wire.clone()).unwrap(), session);
        let decoded = pb::Session::decode(wire.encode_to_vec().as_slice()).unwrap();
        assert_eq!(Session::try_from(decoded).unwrap(), session);
    }

    #[test]
    fn every_state_round_trips() {
        let execs = [
            ExecState::Unspecified,
            ExecState::Pending,
            ExecState::Running,
            ExecState::Awaiting,
            ExecState::Completed,
            ExecState::Failed,
            ExecState::Canceled,
            ExecState::Interrupted,
        ];
        let computes = [
            ComputeState::Unspecified,
            ComputeState::None,
            ComputeState::Live,
            ComputeState::Warm,
            ComputeState::Cold,
            ComputeState::Terminated,
        ];
        let deletions = [
            DeletionState::Active,
            DeletionState::Pending,
            DeletionState::Unrecognized("DELETION_STATE_9".into()),
        ];
        for (i, exec) in execs.into_iter().enumerate() {
            let session = Session {
                exec,
                compute_state: computes[i % computes.len()],
                deletion: deletions[i % deletions.len()].clone(),
                ..Session::default()
            };
            assert_eq!(
                Session::try_from(pb::Session::from(session.clone())).unwrap(),
                session
            );
        }
    }

    #[test]
    fn empty_session_omits_optional_messages() {
        let wire = pb::Session::from(Session::default());
        assert_eq!(wire.identity, None);
        assert_eq!(wire.owner, None);
        assert_eq!(wire.compute, None);
        assert_eq!(wire.origin, None);
        assert_eq!(wire.pending_approval, None);
        assert_eq!(
            wire.deletion_state,
            i32::from(pb::DeletionState::DeletionActive)
        );
        assert_eq!(Session::try_from(wire).unwrap(), Session::default());
        // an owner with only one part set is still sent
        let half = pb::Session::from(Session {
            owner: CallerIdentity::new("", "alice"),
            ..Session::default()
        });
        assert_eq!(half.owner.map(|o| o.subject), Some("alice".to_owned()));
    }

    #[test]
    fn server_only_fields_are_ignored() {
        let mut wire = pb::Session::from(full_session());
        let metadata = wire.metadata.as_mut().unwrap();
        metadata.version = 5;
        metadata.create_time = Some(prost_types::Timestamp {
            seconds: 1,
            nanos: 2,
        });
        metadata.update_time = Some(prost_types::Timestamp {
            seconds: -1,
            nanos: -5,
        });
        wire.pending_approval = Some(ApprovalRef::default().into());
        assert_eq!(Session::try_from(wire).unwrap(), full_session());
        assert_eq!(
            Session::try_from(pb::Session::default()).unwrap(),
            Session::default()
        );
    }

    #[test]
    fn deletion_state_fails_closed() {
        // extensions §3: an unrecognized state is treated as deleted, never as active
        let unspecified = i32::from(pb::DeletionState::Unspecified);
        assert_eq!(deletion_state_from_pb(unspecified), DeletionState::Active);
        let unknown = deletion_state_from_pb(9);
        assert_eq!(
            unknown,
            DeletionState::Unrecognized("DELETION_STATE_9".into())
        );
        assert!(unknown.is_deleted());
        assert_eq!(deletion_state_to_pb(&unknown), 9);
        for name in [
            "PURGED_V9",
            "DELETION_STATE_0",
            "DELETION_STATE_1",
            "DELETION_STATE_x",
        ] {
            let state = DeletionState::Unrecognized(name.into());
            let wire = deletion_state_to_pb(&state);
            assert_eq!(
                wire,
                i32::from(pb::DeletionState::DeletionPending),
                "{name}"
            );
            assert!(deletion_state_from_pb(wire).is_deleted(), "{name}");
        }
    }

    #[test]
    fn unknown_exec_and_compute_states_name_the_field() {
        // 7 is EXEC_INTERRUPTED, this project's addition; 99 is nobody's.
        let err = Session::try_from(pb::Session {
            exec_state: 99,
            ..pb::Session::default()
        })
        .unwrap_err();
        assert_eq!(
            err,
            WireError::UnknownEnumValue {
                field: "exec_state".into(),
                enum_name: "agentsessions.v1.ExecState",
                value: 99,
            }
        );
        let err = Session::try_from(pb::Session {
            compute_state: 6,
            ..pb::Session::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            WireError::UnknownEnumValue { ref field, value: 6, .. } if field == "compute_state"
        ));
    }

    #[test]
    fn compute_without_capabilities_reads_as_none_capable() {
        let compute = ComputeRef::from(pb::ComputeRef {
            runtime: "pod".into(),
            ..pb::ComputeRef::default()
        });
        assert_eq!(compute.capabilities, RuntimeCapabilities::default());
    }
}
