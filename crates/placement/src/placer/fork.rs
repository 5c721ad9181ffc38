//! Fork (semantics §4.4): a stateless harness forks at any seq from the journal alone; a memory
//! harness forks at the head from exactly one parent checkpoint shared by every child.

use std::collections::BTreeMap;

use agentsessions_api::{
    EventBody, ForkOpts, IdentityRef, Incarnation, LifecycleKind, SnapshotKind, SnapshotRef,
};
use agentsessions_journal::{JournalError, SessionRow};

use super::{Placer, lifecycle, runtime_err};
use crate::error::{PlacementError, Result, RuntimeOp};
use crate::registry::Route;
use crate::states::SessionState;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _, Wait};

/// Most children one Fork may create (semantics §4.4).
pub const MAX_FORK_COUNT: usize = 128;

/// One Fork (semantics §4.4). The caller has validated `identity` (it must be unset).
#[derive(Debug, Clone, Default)]
pub struct ForkCall {
    /// The parent session.
    pub parent: String,
    /// Fork point; 0 or less = the parent's head.
    pub at_seq: i64,
    /// Children to create, 1..=[`MAX_FORK_COUNT`].
    pub count: usize,
    /// Empty, or exactly `count` names.
    pub child_names: Vec<String>,
    /// The children's labels (never merged with the parent's).
    pub labels: BTreeMap<String, String>,
}

/// What a Fork created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForkOutcome {
    /// The fork point actually used.
    pub at_seq: i64,
    /// Child uids in order.
    pub children: Vec<String>,
    /// The checkpoint every child was created from (`{local: parent}` for a stateless fork).
    pub source: SnapshotRef,
}

impl Placer {
    /// Forks the session into `count` children (semantics §4.4). A stateless harness forks at any
    /// seq from the journal alone; a memory harness forks at the head only, from exactly one
    /// parent checkpoint (a SUSPEND at `at_seq + 1` on the parent) shared by every child. Fork
    /// does not take the session guard.
    ///
    /// # Errors
    /// `ForkCount`, `ChildNames`, `Journal(SessionNotFound)`, `DeletionPending`,
    /// `ForkOutOfRange`, admission refusals, `ForkNotAtHead` (no side effects),
    /// `Journal(Conflict)` when the head moved, `Unplaceable` for a checkpoint without a durable
    /// copy (the SUSPEND stays), runtime fork failures (provisioned children are stopped).
    pub async fn fork(&self, call: ForkCall) -> Result<ForkOutcome> {
        let parent = call.parent.as_str();
        if !(1..=MAX_FORK_COUNT).contains(&call.count) {
            return Err(PlacementError::ForkCount { count: call.count });
        }
        if !call.child_names.is_empty() && call.child_names.len() != call.count {
            return Err(PlacementError::ChildNames {
                count: call.count,
                names: call.child_names.len(),
            });
        }
        let info = self.info(parent).await?;
        let state = self.live_state(&info).await?;
        let route = self.registry.resolve(&info.row.harness)?;
        let descriptor = self.admit(&route, None).await?;
        let head = state.head();
        let at = if call.at_seq <= 0 { head } else { call.at_seq };
        if at < 1 || at > head {
            return Err(PlacementError::ForkOutOfRange { at, head });
        }
        let memory = descriptor
            .capabilities
            .resumability
            .requires_memory_snapshot();
        let source = if memory {
            self.checkpoint_for_fork(&route, parent, at, head, &state)
                .await?
        } else {
            SnapshotRef {
                local: parent.to_owned(),
                ..SnapshotRef::default()
            }
        };
        let mut provisioned: Vec<Incarnation> = Vec::with_capacity(call.count);
        let mut children = Vec::with_capacity(call.count);
        for _ in 0..call.count {
            let child = self.settings.ids.session_uid();
            match self.fork_child(&route, &source, parent, at, &child).await {
                Ok(incarnation) => {
                    provisioned.push(incarnation);
                    children.push(child);
                }
                Err(e) => {
                    self.stop_all(&route, &provisioned).await;
                    return Err(e);
                }
            }
        }
        for (i, child) in children.iter().enumerate() {
            self.journal
                .put_session(SessionRow {
                    uid: child.clone(),
                    project: info.row.project.clone(),
                    name: call.child_names.get(i).cloned().unwrap_or_default(),
                    harness: info.row.harness.clone(),
                    model: info.row.model.clone(),
                    parent_uid: parent.to_owned(),
                    fork_seq: at,
                    labels: call.labels.clone(),
                    annotations: info.row.annotations.clone(),
                    origin: info.row.origin.clone(),
                    identity: IdentityRef::default(),
                    created_at: None,
                    // Owned children: the parent's owner, in the same row that publishes them.
                    owner: info.row.owner.clone(),
                })
                .await?;
        }
        Ok(ForkOutcome {
            at_seq: at,
            children,
            source,
        })
    }

    /// The one parent checkpoint of a memory fork: fence, head re-check, Snapshot(EXTERNAL), and
    /// SUSPEND{ref} appended at `at` on the parent.
    async fn checkpoint_for_fork(
        &self,
        route: &Route,
        parent: &str,
        at: i64,
        head: i64,
        state: &SessionState,
    ) -> Result<SnapshotRef> {
        if at != head {
            return Err(PlacementError::ForkNotAtHead {
                harness: route.name.clone(),
                at,
                head,
            });
        }
        let fence = self.journal.new_fence(parent).await?;
        let now = self.journal.head(parent).await?;
        if now != at {
            return Err(JournalError::Conflict {
                session: parent.to_owned(),
                expected: at,
                actual: now,
            }
            .into());
        }
        let target = Incarnation {
            id: parent.to_owned(),
            compute_instance: state.facts().recorded_instance(&route.name),
            recorded_checkpoint: state.facts().recorded_checkpoint(),
            fence_token: fence,
            ..Incarnation::default()
        };
        let snapshot = route
            .backend
            .runtime
            .snapshot(&target, SnapshotKind::External)
            .await
            .map_err(runtime_err(RuntimeOp::Snapshot, parent))?;
        self.journal
            .append_one(
                parent,
                at,
                fence,
                lifecycle(
                    LifecycleKind::Suspend,
                    String::new(),
                    Some(snapshot.clone()),
                ),
            )
            .await?;
        if snapshot.external_uri.is_empty() {
            return Err(PlacementError::Unplaceable {
                harness: route.name.clone(),
                reason: "its checkpoint has no durable copy to fork from; the parent is suspended \
                         and can be resumed, and a retry must fork at the new head"
                    .into(),
            });
        }
        Ok(snapshot)
    }

    /// One child: runtime fork, then the journal prefix and the FORK marker.
    async fn fork_child(
        &self,
        route: &Route,
        source: &SnapshotRef,
        parent: &str,
        at: i64,
        child: &str,
    ) -> Result<Incarnation> {
        let incarnation = route
            .backend
            .runtime
            .fork(
                source,
                &ForkOpts {
                    child_session_uid: child.to_owned(),
                },
            )
            .await
            .map_err(runtime_err(RuntimeOp::Fork, child))?;
        let journaled = async {
            let fence = self.fork_journal(parent, at, child).await?;
            let mut marker = lifecycle(LifecycleKind::Fork, format!("{parent}@{at}"), None);
            if let Some(EventBody::Lifecycle(l)) = &mut marker.body {
                l.compute_instance.clone_from(&incarnation.compute_instance);
            }
            // Not waited for durably: no effect follows it, and the child row that publishes
            // the child is written durably after it, so that sync covers it.
            self.journal
                .append_records(
                    AppendRequest::new(child, at, FenceUse::from_option(Some(fence)), vec![marker])
                        .wait(Wait::Committed),
                )
                .await?;
            Ok::<_, PlacementError>(())
        };
        if let Err(e) = journaled.await {
            self.stop_all(route, std::slice::from_ref(&incarnation))
                .await;
            return Err(e);
        }
        Ok(incarnation)
    }

    /// The journal part of a fork, in one place: the child shares the parent's records up to
    /// `at` (no copy) and gets its first fence.
    async fn fork_journal(&self, parent: &str, at: i64, child: &str) -> Result<i64> {
        Ok(self.journal.fork_session(parent, at, child).await?)
    }

    /// Whether forking `parent` checkpoints the parent's memory (a SUSPEND on the parent), which
    /// authorization treats as a suspend too (extensions §2). Reads the route's declared
    /// descriptor; nothing is provisioned or written.
    ///
    /// # Errors
    /// `Journal(SessionNotFound)`, routing and admission refusals.
    pub async fn fork_is_stateful(&self, parent: &str) -> Result<bool> {
        let info = self.info(parent).await?;
        let route = self.registry.resolve(&info.row.harness)?;
        let descriptor = self.admit(&route, None).await?;
        Ok(descriptor
            .capabilities
            .resumability
            .requires_memory_snapshot())
    }
}
