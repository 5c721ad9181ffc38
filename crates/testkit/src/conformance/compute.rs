//! Conformance cases for the compute projection a host settles with what its runtime reports
//! (`Catalog::settle_compute_state`), beside the one each append moves (semantics §1.7).

use std::sync::Arc;

use agentsessions_api::{
    ApprovalRequest, ComputeState, Event, EventBody, EventKind, LifecycleKind,
};
use agentsessions_journal::{
    AppendRequest, FenceUse, Journal, JournalError, ListQuery, LogExt as _, SessionRow,
};

use super::lifecycle;
use crate::fixtures::{fork_with_marker, input};

async fn state_of(j: &Arc<dyn Journal>, uid: &str) -> ComputeState {
    j.session_info(uid).await.unwrap().compute_state
}

async fn listed_state(j: &Arc<dyn Journal>, uid: &str) -> ComputeState {
    let page = j
        .list_sessions(ListQuery {
            page_size: 500,
            ..ListQuery::default()
        })
        .await
        .unwrap();
    page.sessions
        .into_iter()
        .find(|s| s.row.uid == uid)
        .map(|s| s.compute_state)
        .unwrap()
}

// The host settles the projection at the head it saw: a reading of an older head changes
// nothing, and the next append moves the projection on from the settled state.
pub async fn settled_compute_state_holds_at_its_head_until_the_log_moves(j: Arc<dyn Journal>) {
    j.put_session(SessionRow {
        uid: "s".into(),
        ..SessionRow::default()
    })
    .await
    .unwrap();
    j.append_one("s", 0, 0, input("a")).await.unwrap();
    j.append_one("s", 1, 0, input("b")).await.unwrap();
    let before = j.session_info("s").await.unwrap();
    assert_eq!(before.compute_state, ComputeState::Live);

    // A turn's incarnation went away when it ended.
    assert!(
        j.settle_compute_state("s", 2, ComputeState::None)
            .await
            .unwrap()
    );
    let settled = j.session_info("s").await.unwrap();
    assert_eq!(settled.compute_state, ComputeState::None);
    assert_eq!(listed_state(&j, "s").await, ComputeState::None);
    assert_eq!(
        (settled.last_seq, settled.fence, settled.updated_at),
        (before.last_seq, before.fence, before.updated_at),
        "settling writes no record and changes nothing else"
    );
    assert_eq!(j.read("s", 1, 0).await.unwrap().len(), 2);

    // A reading of an older head is refused and leaves the projection alone.
    assert!(
        !j.settle_compute_state("s", 1, ComputeState::Live)
            .await
            .unwrap()
    );
    assert_eq!(state_of(&j, "s").await, ComputeState::None);

    // Host-only writes leave the settled state; the next turn's records set it live again.
    let request = Event::new(
        EventKind::ApprovalRequest,
        EventBody::Approval(ApprovalRequest {
            tool_call_id: "c".into(),
            reason: "r".into(),
        }),
    );
    j.append_one("s", 2, 0, request).await.unwrap();
    assert_eq!(state_of(&j, "s").await, ComputeState::None);
    j.append_one("s", 3, 0, input("c")).await.unwrap();
    assert_eq!(state_of(&j, "s").await, ComputeState::Live);
    assert_eq!(listed_state(&j, "s").await, ComputeState::Live);

    // Suspend still goes cold, and a settled state at that head replaces it.
    j.append_one("s", 4, 0, lifecycle(LifecycleKind::Suspend))
        .await
        .unwrap();
    assert_eq!(state_of(&j, "s").await, ComputeState::Cold);
    assert!(
        j.settle_compute_state("s", 5, ComputeState::Terminated)
            .await
            .unwrap()
    );
    assert_eq!(state_of(&j, "s").await, ComputeState::Terminated);
}

// Appends after a settle project from the settled state: a writer that keeps its sessions'
// heads between commits keeps their compute state in step too.
pub async fn appends_after_a_settle_project_from_the_settled_state(j: Arc<dyn Journal>) {
    let request = |call: &str| {
        Event::new(
            EventKind::ApprovalRequest,
            EventBody::Approval(ApprovalRequest {
                tool_call_id: call.into(),
                reason: "r".into(),
            }),
        )
    };
    j.append_one("s", 0, 0, input("a")).await.unwrap();
    assert!(
        j.settle_compute_state("s", 1, ComputeState::None)
            .await
            .unwrap()
    );
    j.append_records(AppendRequest::new(
        "s",
        1,
        FenceUse::Hold(0),
        vec![request("c1"), request("c2")],
    ))
    .await
    .unwrap();
    assert_eq!(state_of(&j, "s").await, ComputeState::None);
    assert!(
        j.settle_compute_state("s", 3, ComputeState::Warm)
            .await
            .unwrap()
    );
    j.append_one("s", 3, 0, request("c3")).await.unwrap();
    assert_eq!(state_of(&j, "s").await, ComputeState::Warm);
    assert_eq!(listed_state(&j, "s").await, ComputeState::Warm);
    j.append_one("s", 4, 0, input("b")).await.unwrap();
    assert_eq!(state_of(&j, "s").await, ComputeState::Live);
}

// A fork child starts from the projection its FORK marker sets, whatever its parent settled;
// an unknown session and an unspecified state are refused.
pub async fn settling_refuses_unknown_sessions_and_unspecified_states(j: Arc<dyn Journal>) {
    let missing = j.settle_compute_state("nope", 0, ComputeState::None).await;
    assert!(
        matches!(missing, Err(JournalError::SessionNotFound(_))),
        "{missing:?}"
    );
    j.append_one("p", 0, 0, input("a")).await.unwrap();
    let unspecified = j
        .settle_compute_state("p", 1, ComputeState::Unspecified)
        .await;
    assert!(
        matches!(unspecified, Err(JournalError::InvalidArgument(_))),
        "{unspecified:?}"
    );
    assert_eq!(state_of(&j, "p").await, ComputeState::Live);
    assert!(
        j.settle_compute_state("p", 1, ComputeState::None)
            .await
            .unwrap()
    );
    fork_with_marker(j.as_ref(), "p", 1, "c").await;
    assert_eq!(state_of(&j, "c").await, ComputeState::Cold);
    assert_eq!(state_of(&j, "p").await, ComputeState::None);
    // A child settles on its own head.
    assert!(
        j.settle_compute_state("c", 2, ComputeState::None)
            .await
            .unwrap()
    );
    assert_eq!(state_of(&j, "c").await, ComputeState::None);
    assert_eq!(state_of(&j, "p").await, ComputeState::None);
}
