//! The behavioral suite every [`Journal`] backend must pass. Each case takes a fresh, empty
//! journal; [`journal_conformance!`](crate::journal_conformance) instantiates every case for a
//! backend with one line.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use agentsessions_api::{
    ApprovalRequest, CallerIdentity, ComputeState, DeletionState, Event, EventBody, EventKind,
    IdentityRef, Lifecycle, LifecycleKind, Origin, SnapshotRef, Timestamp,
};
use agentsessions_journal::export::load_records;
use agentsessions_journal::{
    AppendRequest, FenceUse, HarnessRow, HarnessState, Journal, JournalError, ListQuery,
    LogExt as _, LogRecord, RegisterOutcome, SessionRow, Wait, verify_records,
};
use agentsessions_wire::{content_hash, pb};

use crate::fixtures::{fill, fork_marker, fork_with_marker, input};

mod compute;
mod follow;
mod operator_views;
pub use compute::{
    appends_after_a_settle_project_from_the_settled_state,
    settled_compute_state_holds_at_its_head_until_the_log_moves,
    settling_refuses_unknown_sessions_and_unspecified_states,
};
pub use follow::{
    a_fork_child_is_followed_from_its_parents_records,
    a_slow_follower_reads_what_it_missed_in_pages, follow_wakes_on_its_sessions_commits_only,
    record_follower_reads_from_a_seq_then_follows_and_ends_on_delete,
};
pub use operator_views::{
    pending_approvals_follow_requests_and_decisions,
    pending_approvals_leave_with_delete_and_stay_with_the_parent, records_carry_their_commit_time,
    usage_totals_sum_in_the_append_commit,
};

/// Instantiates every conformance case as a `#[tokio::test]` for a backend. `$make` is an
/// expression yielding a fresh `Arc<dyn Journal>` (it may use `tempfile`, held in the closure).
#[macro_export]
macro_rules! journal_conformance {
    ($make:expr) => {
        $crate::journal_conformance!(@cases $make;
            append_chains_hashes_from_genesis,
            cas_conflict_is_refused_and_nothing_written,
            stale_fence_is_refused_and_only_new_fence_raises_it,
            read_windows_and_head,
            parked_events_are_never_journaled,
            invalid_timestamp_is_a_clear_error_and_nothing_appended,
            metadata_row_round_trips_and_append_creates_missing_rows,
            compute_state_follows_the_log,
            settled_compute_state_holds_at_its_head_until_the_log_moves,
            appends_after_a_settle_project_from_the_settled_state,
            settling_refuses_unknown_sessions_and_unspecified_states,
            listing_pages_exactly_by_project,
            listing_refuses_bad_tokens_and_clamps_sizes,
            harness_registry_outcomes,
            concurrent_writers_one_session_no_gap_no_duplicate,
            many_sessions_append_concurrently,
            fork_shares_the_parent_prefix_and_links_the_first_own_record,
            fork_refuses_bad_points_unknown_parents_and_taken_children,
            parent_growth_and_later_forks_never_change_a_child,
            forks_of_forks_read_the_whole_chain,
            fork_children_keep_cas_and_fences,
            fork_carries_the_projection_at_the_fork_point,
            put_session_cannot_repoint_a_shared_prefix,
            copied_prefix_children_read_as_plain_sessions,
            concurrent_forks_and_parent_appends,
            owner_is_recorded_once_and_never_changes,
            listing_by_owner_pages_exactly_and_never_mixes_owners,
            delete_marker_sets_pending_in_its_commit_and_feeds_the_reclaimer,
            fencing_append_mints_and_appends_in_one_commit,
            a_stale_fencing_append_never_supersedes_the_writer,
            queued_appends_commit_in_order_and_a_refusal_refuses_what_follows,
            pending_approvals_follow_requests_and_decisions,
            pending_approvals_leave_with_delete_and_stay_with_the_parent,
            usage_totals_sum_in_the_append_commit,
            records_carry_their_commit_time,
            follow_wakes_on_its_sessions_commits_only,
            record_follower_reads_from_a_seq_then_follows_and_ends_on_delete,
            a_slow_follower_reads_what_it_missed_in_pages,
            a_fork_child_is_followed_from_its_parents_records,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let (journal, _guard) = $make;
                $crate::conformance::$case(journal).await;
            }
        )*
    };
}

fn lifecycle(kind: LifecycleKind) -> Event {
    Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind,
            snapshot: (kind == LifecycleKind::Suspend).then(|| SnapshotRef {
                local: "snap-1".into(),
                ..SnapshotRef::default()
            }),
            ..Lifecycle::default()
        }),
    )
}

// semantics §1.3, §1.4 step 3: seq = head + 1, genesis prev "", hash = content_hash
pub async fn append_chains_hashes_from_genesis(j: Arc<dyn Journal>) {
    let mut prev = String::new();
    for i in 1..=5 {
        let ev = input(&format!("m{i}"));
        let rec = j.append_one("s", i - 1, 0, ev.clone()).await.unwrap();
        assert_eq!(rec.seq, i);
        assert_eq!(rec.prev_hash, prev);
        assert_eq!(
            rec.hash,
            content_hash(&prev, i, &pb::Event::from(&ev)).unwrap()
        );
        assert_eq!(rec.event, ev);
        prev = rec.hash;
    }
    let records = j.read("s", 1, 0).await.unwrap();
    assert_eq!(records.len(), 5);
    assert_eq!(verify_records(&records).unwrap().head_hash, prev);
}

// semantics §1.4 step 1: expected_last_seq must equal the head
pub async fn cas_conflict_is_refused_and_nothing_written(j: Arc<dyn Journal>) {
    j.append_one("s", 0, 0, input("a")).await.unwrap();
    for expected in [0, 2, -1] {
        match j.append_one("s", expected, 0, input("b")).await {
            Err(JournalError::Conflict {
                expected: e,
                actual: 1,
                ..
            }) => assert_eq!(e, expected),
            other => panic!("expected conflict, got {other:?}"),
        }
    }
    assert_eq!(j.head("s").await.unwrap(), 1);
}

// semantics §1.4 step 2 and NewFence
pub async fn stale_fence_is_refused_and_only_new_fence_raises_it(j: Arc<dyn Journal>) {
    assert_eq!(j.new_fence("s").await.unwrap(), 1);
    assert_eq!(j.new_fence("s").await.unwrap(), 2);
    match j.append_one("s", 0, 1, input("a")).await {
        Err(JournalError::Fenced {
            fence: 1,
            current: 2,
            ..
        }) => {}
        other => panic!("expected fenced, got {other:?}"),
    }
    assert_eq!(j.head("s").await.unwrap(), 0);
    // A higher fence is accepted but does not raise the stored fence.
    j.append_one("s", 0, 7, input("a")).await.unwrap();
    j.append_one("s", 1, 2, input("b")).await.unwrap();
    assert_eq!(j.session_info("s").await.unwrap().fence, 2);
    assert_eq!(j.new_fence("s").await.unwrap(), 3);
    assert!(matches!(
        j.append_one("s", 2, 2, input("c")).await,
        Err(JournalError::Fenced { .. })
    ));
    let recs = j.read("s", 0, 0).await.unwrap();
    assert_eq!(recs.iter().map(|r| r.fence).collect::<Vec<_>>(), vec![7, 2]);
}

pub async fn read_windows_and_head(j: Arc<dyn Journal>) {
    assert_eq!(j.head("nobody").await.unwrap(), 0);
    assert!(j.read("nobody", 1, 0).await.unwrap().is_empty());
    for i in 0..6 {
        j.append_one("s", i, 0, input(&i.to_string()))
            .await
            .unwrap();
    }
    assert_eq!(j.head("s").await.unwrap(), 6);
    let seqs = |v: Vec<LogRecord>| v.into_iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(seqs(j.read("s", 2, 4).await.unwrap()), vec![2, 3, 4]);
    assert_eq!(seqs(j.read("s", 5, 0).await.unwrap()), vec![5, 6]);
    assert_eq!(seqs(j.read("s", 0, 2).await.unwrap()), vec![1, 2]);
    assert!(j.read("s", 7, 0).await.unwrap().is_empty());
    assert!(matches!(
        j.read("s", -1, 0).await,
        Err(JournalError::InvalidArgument(_))
    ));
}

// semantics §1.1: EVENT_PARKED is transport-only and must never be journaled
pub async fn parked_events_are_never_journaled(j: Arc<dyn Journal>) {
    let parked = Event::new(
        EventKind::Parked,
        EventBody::Parked(agentsessions_api::ApprovalRef::default()),
    );
    assert!(matches!(
        j.append_one("s", 0, 0, parked).await,
        Err(JournalError::NotJournalable(_))
    ));
    assert_eq!(j.head("s").await.unwrap(), 0);
}

pub async fn invalid_timestamp_is_a_clear_error_and_nothing_appended(j: Arc<dyn Journal>) {
    let mut ev = input("x");
    ev.timestamp = Some(Timestamp {
        seconds: 0,
        nanos: 2_000_000_000,
    });
    assert!(matches!(
        j.append_one("s", 0, 0, ev).await,
        Err(JournalError::InvalidEvent(_))
    ));
    assert_eq!(j.head("s").await.unwrap(), 0);
    assert!(matches!(
        j.session_info("s").await,
        Err(JournalError::SessionNotFound(_))
    ));
}

// semantics §1.6
pub async fn metadata_row_round_trips_and_append_creates_missing_rows(j: Arc<dyn Journal>) {
    assert!(matches!(
        j.session_info("missing").await,
        Err(JournalError::SessionNotFound(_))
    ));
    let row = SessionRow {
        owner: CallerIdentity::new("https://idp.test", "alice"),
        uid: "sess-1".into(),
        project: String::new(),
        name: "n".into(),
        harness: "echo".into(),
        model: "m".into(),
        parent_uid: "sess-0".into(),
        fork_seq: 3,
        labels: BTreeMap::from([("k".into(), "v".into())]),
        annotations: BTreeMap::from([("note".into(), "ü \"quoted\"".into())]),
        origin: Some(Origin {
            source: "github.com/acme/repo".into(),
            subject: "issues/42".into(),
            uri: "https://x".into(),
            attributes: BTreeMap::from([("a".into(), "b".into())]),
        }),
        identity: IdentityRef {
            principal: "agent://a".into(),
            issuer: "i".into(),
            subject: "s".into(),
        },
        created_at: None,
    };
    j.put_session(row.clone()).await.unwrap();
    let info = j.session_info("sess-1").await.unwrap();
    assert_eq!(
        info.row.project, "default",
        "empty project takes the default"
    );
    let created = info.row.created_at.unwrap();
    assert_eq!(
        SessionRow {
            created_at: None,
            project: String::new(),
            ..info.row.clone()
        },
        row
    );
    assert_eq!(info.compute_state, ComputeState::None);
    assert_eq!((info.last_seq, info.fence), (0, 0));
    // An update keeps created_at and never touches fence or compute state.
    j.new_fence("sess-1").await.unwrap();
    j.put_session(SessionRow {
        name: "renamed".into(),
        ..row.clone()
    })
    .await
    .unwrap();
    let info = j.session_info("sess-1").await.unwrap();
    assert_eq!(info.row.name, "renamed");
    assert_eq!(info.row.created_at, Some(created));
    assert_eq!(info.fence, 1);
    // An explicit created_at is honored.
    let t = Timestamp::from_unix_nanos(1_600_000_000_123_456_789);
    j.put_session(SessionRow {
        created_at: Some(t),
        ..row
    })
    .await
    .unwrap();
    assert_eq!(
        j.session_info("sess-1").await.unwrap().row.created_at,
        Some(t)
    );
    // Append creates a missing row in the default project.
    j.append_one("log-only", 0, 0, input("x")).await.unwrap();
    let info = j.session_info("log-only").await.unwrap();
    assert_eq!(info.row.project, "default");
    assert_eq!(info.last_seq, 1);
    assert!(info.row.created_at.unwrap().unix_nanos() > 0);
}

// semantics §1.7
pub async fn compute_state_follows_the_log(j: Arc<dyn Journal>) {
    let state =
        |j: Arc<dyn Journal>| async move { j.session_info("s").await.unwrap().compute_state };
    j.put_session(SessionRow {
        uid: "s".into(),
        ..SessionRow::default()
    })
    .await
    .unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::None);
    j.append_one("s", 0, 0, input("a")).await.unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Live);
    j.append_one("s", 1, 0, lifecycle(LifecycleKind::Suspend))
        .await
        .unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Cold);
    let req = Event::new(
        EventKind::ApprovalRequest,
        EventBody::Approval(ApprovalRequest {
            tool_call_id: "c".into(),
            reason: "r".into(),
        }),
    );
    j.append_one("s", 2, 0, req).await.unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Cold);
    j.append_one("s", 3, 0, lifecycle(LifecycleKind::Baseline))
        .await
        .unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Cold);
    j.append_one("s", 4, 0, lifecycle(LifecycleKind::Resume))
        .await
        .unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Live);
    j.append_one("s", 5, 0, lifecycle(LifecycleKind::Fork))
        .await
        .unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Cold);
}

async fn put_at(j: &Arc<dyn Journal>, uid: &str, project: &str, created_ns: i64) {
    j.put_session(SessionRow {
        uid: uid.into(),
        project: project.into(),
        created_at: Some(Timestamp::from_unix_nanos(created_ns)),
        ..SessionRow::default()
    })
    .await
    .unwrap();
}

// semantics §1.8: exact project, (created_at desc, uid asc), size+1 lookahead, exact tokens
pub async fn listing_pages_exactly_by_project(j: Arc<dyn Journal>) {
    // Ties on created_at are ordered by uid.
    for (uid, t) in [
        ("a", 5),
        ("b", 5),
        ("c", 9),
        ("d", 1),
        ("e", 5),
        ("f", 7),
        ("g", 3),
    ] {
        put_at(&j, uid, "p1", t).await;
    }
    put_at(&j, "other", "p10", 8).await;
    put_at(&j, "dflt", "", 8).await;
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = j
            .list_sessions(ListQuery {
                project: "p1".into(),
                page_size: 3,
                page_token: token.clone(),
                ..ListQuery::default()
            })
            .await
            .unwrap();
        pages += 1;
        assert!(page.sessions.len() <= 3);
        seen.extend(page.sessions.iter().map(|s| s.row.uid.clone()));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen, vec!["c", "f", "a", "b", "e", "g", "d"]);
    assert_eq!(pages, 3);
    // A page that ends exactly at the last row has an empty token.
    let page = j
        .list_sessions(ListQuery {
            project: "p1".into(),
            page_size: 7,
            page_token: String::new(),
            ..ListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.sessions.len(), 7);
    assert!(page.next_page_token.is_empty());
    // Empty project means the default project.
    let page = j.list_sessions(ListQuery::default()).await.unwrap();
    assert_eq!(
        page.sessions
            .iter()
            .map(|s| s.row.uid.as_str())
            .collect::<Vec<_>>(),
        vec!["dflt"]
    );
}

pub async fn listing_refuses_bad_tokens_and_clamps_sizes(j: Arc<dyn Journal>) {
    for i in 0..520 {
        put_at(&j, &format!("s{i:04}"), "big", 1_000 + i).await;
    }
    let page = |size: i64| ListQuery {
        project: "big".into(),
        page_size: size,
        page_token: String::new(),
        ..ListQuery::default()
    };
    assert_eq!(j.list_sessions(page(0)).await.unwrap().sessions.len(), 50);
    assert_eq!(j.list_sessions(page(-3)).await.unwrap().sessions.len(), 50);
    assert_eq!(
        j.list_sessions(page(10_000)).await.unwrap().sessions.len(),
        500
    );
    let bad = ListQuery {
        page_token: "not a token!".into(),
        ..page(5)
    };
    assert!(matches!(
        j.list_sessions(bad).await,
        Err(JournalError::InvalidPageToken(_))
    ));
}

// semantics §7.2 registry storage rules
pub async fn harness_registry_outcomes(j: Arc<dyn Journal>) {
    let (row, outcome) = j
        .register_harness("alpha", "{\"a\":1}", "sha256:a")
        .await
        .unwrap();
    assert_eq!(outcome, RegisterOutcome::Created);
    assert!(row.uid.starts_with("harness-"));
    let (again, outcome) = j
        .register_harness("alpha", "{\"a\":1}", "sha256:a")
        .await
        .unwrap();
    assert_eq!(outcome, RegisterOutcome::Unchanged);
    assert_eq!(again.uid, row.uid);
    assert!(matches!(
        j.register_harness("alpha", "{\"a\":2}", "sha256:b").await,
        Err(JournalError::HarnessExists(_))
    ));
    let retired = j.retire_harness("alpha", "old").await.unwrap();
    assert_eq!(retired.state, HarnessState::Retired);
    assert_eq!(retired.retire_reason, "old");
    let twice = j.retire_harness("alpha", "other reason").await.unwrap();
    assert_eq!(
        twice.retire_reason, "old",
        "reason kept from the first retire"
    );
    assert_eq!(twice.retired_at, retired.retired_at);
    let (back, outcome) = j
        .register_harness("alpha", "{\"a\":1}", "sha256:a")
        .await
        .unwrap();
    assert_eq!(outcome, RegisterOutcome::Reactivated);
    assert_eq!(back.uid, row.uid);
    assert_eq!(back.state, HarnessState::Active);
    assert!(matches!(
        j.retire_harness("nope", "x").await,
        Err(JournalError::HarnessNotFound(_))
    ));
    j.reserve_harness_names(&["echo".into(), "chat".into(), String::new()])
        .await
        .unwrap();
    assert!(j.is_harness_name_reserved("echo").await.unwrap());
    assert!(!j.is_harness_name_reserved("alpha").await.unwrap());
    assert!(matches!(
        j.register_harness("echo", "{}", "sha256:e").await,
        Err(JournalError::HarnessNameReserved(_))
    ));
    j.register_harness("beta", "{}", "sha256:b").await.unwrap();
    j.register_harness("gamma", "{}", "sha256:g").await.unwrap();
    j.retire_harness("beta", "").await.unwrap();
    let names = |v: Vec<HarnessRow>| v.into_iter().map(|h| h.name).collect::<Vec<_>>();
    assert_eq!(
        names(j.list_harnesses("", 10, false).await.unwrap()),
        vec!["alpha", "gamma"]
    );
    assert_eq!(
        names(j.list_harnesses("", 10, true).await.unwrap()),
        vec!["alpha", "beta", "gamma"]
    );
    assert_eq!(
        names(j.list_harnesses("alpha", 1, true).await.unwrap()),
        vec!["beta"]
    );
    assert_eq!(j.get_harness("gamma").await.unwrap().unwrap().spec, "{}");
    assert!(j.get_harness("zeta").await.unwrap().is_none());
}

// semantics §1.4: racing writers on one session — exactly one wins each seq, no gap
pub async fn concurrent_writers_one_session_no_gap_no_duplicate(j: Arc<dyn Journal>) {
    let writers = 8;
    let per_writer = 25;
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..writers {
        let j = Arc::clone(&j);
        tasks.spawn(async move {
            let mut won = Vec::new();
            while won.len() < per_writer {
                let head = j.head("race").await.unwrap();
                match j
                    .append_one("race", head, 0, input(&format!("w{w}-{}", won.len())))
                    .await
                {
                    Ok(rec) => won.push(rec.seq),
                    Err(JournalError::Conflict { .. }) => tokio::task::yield_now().await,
                    Err(e) => panic!("unexpected {e}"),
                }
            }
            won
        });
    }
    let mut all = Vec::new();
    while let Some(res) = tasks.join_next().await {
        all.extend(res.unwrap());
    }
    let total = writers * per_writer;
    assert_eq!(all.len(), total);
    let unique: BTreeSet<i64> = all.into_iter().collect();
    assert_eq!(unique.len(), total, "a seq was won twice");
    assert_eq!(unique.first(), Some(&1));
    assert_eq!(unique.last(), Some(&i64::try_from(total).unwrap()));
    let records = j.read("race", 1, 0).await.unwrap();
    verify_records(&records).unwrap();
}

pub async fn many_sessions_append_concurrently(j: Arc<dyn Journal>) {
    let mut tasks = tokio::task::JoinSet::new();
    for s in 0..32 {
        let j = Arc::clone(&j);
        tasks.spawn(async move {
            let session = format!("many-{s}");
            for i in 0..20 {
                j.append_one(&session, i, 0, input(&format!("{s}/{i}")))
                    .await
                    .unwrap();
            }
            session
        });
    }
    while let Some(res) = tasks.join_next().await {
        let session = res.unwrap();
        let records = j.read(&session, 1, 0).await.unwrap();
        assert_eq!(records.len(), 20);
        verify_records(&records).unwrap();
    }
}

fn envelopes(records: &[LogRecord]) -> Vec<(i64, String, String)> {
    records
        .iter()
        .map(|r| (r.seq, r.prev_hash.clone(), r.hash.clone()))
        .collect()
}

// semantics §1.3, §4.4: a child's prefix is the parent's chain verbatim; its first own record
// links to parent@fork_seq
pub async fn fork_shares_the_parent_prefix_and_links_the_first_own_record(j: Arc<dyn Journal>) {
    j.put_session(SessionRow {
        uid: "p".into(),
        project: "proj".into(),
        harness: "echo".into(),
        model: "m".into(),
        name: "parent".into(),
        ..SessionRow::default()
    })
    .await
    .unwrap();
    let parent = fill(&*j, "p", 5).await;
    let fence = j.fork_session("p", 3, "c").await.unwrap();
    assert!(fence >= 1);
    assert_eq!(j.head("c").await.unwrap(), 3);
    assert_eq!(j.read("c", 1, 0).await.unwrap(), parent[..3].to_vec());
    let info = j.session_info("c").await.unwrap();
    assert_eq!((info.last_seq, info.fence), (3, fence));
    assert_eq!((info.row.parent_uid.as_str(), info.row.fork_seq), ("p", 3));
    assert_eq!(
        (info.row.project.as_str(), info.row.harness.as_str()),
        ("proj", "echo")
    );
    assert_eq!(info.row.model, "m");
    assert!(info.row.name.is_empty(), "the name is never inherited");
    assert_eq!(info.compute_state, ComputeState::Live);
    let marker = j
        .append_one("c", 3, fence, fork_marker("p", 3))
        .await
        .unwrap();
    assert_eq!(marker.seq, 4);
    assert_eq!(marker.prev_hash, parent[2].hash);
    assert_eq!(
        marker.hash,
        content_hash(&parent[2].hash, 4, &pb::Event::from(&fork_marker("p", 3))).unwrap()
    );
    let chain = j.read("c", 0, 0).await.unwrap();
    assert_eq!(chain.len(), 4);
    assert_eq!(verify_records(&chain).unwrap().head_hash, marker.hash);
    assert_eq!(
        j.session_info("c").await.unwrap().compute_state,
        ComputeState::Cold
    );
    // Windows across the fork point.
    let seqs = |v: Vec<LogRecord>| v.into_iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(seqs(j.read("c", 2, 4).await.unwrap()), vec![2, 3, 4]);
    assert_eq!(seqs(j.read("c", 4, 0).await.unwrap()), vec![4]);
    assert_eq!(seqs(j.read("c", 0, 2).await.unwrap()), vec![1, 2]);
    assert!(j.read("c", 5, 0).await.unwrap().is_empty());
    // The parent is untouched and a fork at its head works too.
    assert_eq!(j.read("p", 1, 0).await.unwrap(), parent);
    j.fork_session("p", 5, "c-head").await.unwrap();
    assert_eq!(j.read("c-head", 0, 0).await.unwrap(), parent);
}

// semantics §4.4: the fork point is a committed record, the parent exists, the child is new;
// a refusal writes nothing
pub async fn fork_refuses_bad_points_unknown_parents_and_taken_children(j: Arc<dyn Journal>) {
    fill(&*j, "p", 3).await;
    for at in [0, -1, 4] {
        assert!(
            matches!(
                j.fork_session("p", at, "c").await,
                Err(JournalError::InvalidArgument(_))
            ),
            "at {at}"
        );
    }
    assert!(matches!(
        j.fork_session("ghost", 1, "c").await,
        Err(JournalError::SessionNotFound(_))
    ));
    // A parent with a row but no records has no fork point.
    j.put_session(SessionRow {
        uid: "empty".into(),
        ..SessionRow::default()
    })
    .await
    .unwrap();
    assert!(matches!(
        j.fork_session("empty", 1, "c").await,
        Err(JournalError::InvalidArgument(_))
    ));
    assert!(matches!(
        j.session_info("c").await,
        Err(JournalError::SessionNotFound(_))
    ));
    assert_eq!(j.head("c").await.unwrap(), 0);
    // A child that has a row, records, or is already a child is taken.
    j.put_session(SessionRow {
        uid: "has-row".into(),
        ..SessionRow::default()
    })
    .await
    .unwrap();
    fill(&*j, "has-log", 1).await;
    j.fork_session("p", 1, "done").await.unwrap();
    for child in ["has-row", "has-log", "done", "p"] {
        assert!(
            matches!(
                j.fork_session("p", 2, child).await,
                Err(JournalError::SessionExists(_))
            ),
            "{child}"
        );
    }
    assert_eq!(j.head("has-log").await.unwrap(), 1);
    assert_eq!(j.head("done").await.unwrap(), 1);
    assert_eq!(j.head("p").await.unwrap(), 3);
    assert!(matches!(
        j.fork_session("", 1, "x").await,
        Err(JournalError::InvalidArgument(_))
    ));
    assert!(matches!(
        j.fork_session("p", 1, "").await,
        Err(JournalError::InvalidArgument(_))
    ));
}

// semantics §4.4: appending to or forking the parent afterwards never changes what a child reads
pub async fn parent_growth_and_later_forks_never_change_a_child(j: Arc<dyn Journal>) {
    fill(&*j, "p", 6).await;
    fork_with_marker(&*j, "p", 2, "early").await;
    let early_fence = j.session_info("early").await.unwrap().fence;
    fill(&*j, "early", 2).await;
    let before = j.read("early", 0, 0).await.unwrap();
    let info_before = j.session_info("early").await.unwrap();
    assert_eq!(before.len(), 5);
    // The parent grows, is forked again (at, before and after the first fork point) and its
    // new children grow.
    fill(&*j, "p", 10).await;
    fork_with_marker(&*j, "p", 2, "same-point").await;
    fork_with_marker(&*j, "p", 1, "before").await;
    fork_with_marker(&*j, "p", 16, "after").await;
    fill(&*j, "same-point", 3).await;
    fill(&*j, "p", 1).await;
    assert_eq!(j.read("early", 0, 0).await.unwrap(), before);
    let info = j.session_info("early").await.unwrap();
    assert_eq!(
        (info.last_seq, info.fence, info.compute_state),
        (5, early_fence, info_before.compute_state)
    );
    // Siblings at the same point share the prefix and diverge after it.
    let sibling = j.read("same-point", 0, 0).await.unwrap();
    assert_eq!(sibling[..2], before[..2]);
    assert_ne!(sibling[3].hash, before[3].hash);
    for child in ["early", "same-point", "before", "after", "p"] {
        verify_records(&j.read(child, 0, 0).await.unwrap()).unwrap();
    }
    assert_eq!(j.head("after").await.unwrap(), 17);
    assert_eq!(j.head("p").await.unwrap(), 17);
}

// semantics §4.4: a fork of a fork reads parent ≤ its fork point, then the child's own records
pub async fn forks_of_forks_read_the_whole_chain(j: Arc<dyn Journal>) {
    let p = fill(&*j, "p", 5).await;
    let c_marker = fork_with_marker(&*j, "p", 5, "c").await;
    let c_own = fill(&*j, "c", 2).await; // c: p1..p5, marker 6, 7, 8
    // Grandchild inside the child's own records.
    let g_marker = fork_with_marker(&*j, "c", 7, "g").await;
    assert_eq!(g_marker.prev_hash, c_own[0].hash);
    fill(&*j, "g", 1).await;
    let g = j.read("g", 0, 0).await.unwrap();
    assert_eq!(envelopes(&g[..5]), envelopes(&p));
    assert_eq!(g[5], c_marker);
    assert_eq!(g[6], c_own[0]);
    assert_eq!(g[7], g_marker);
    assert_eq!(g.len(), 9);
    verify_records(&g).unwrap();
    // Grandchild inside the child's shared prefix: its records are the grandparent's.
    let h_marker = fork_with_marker(&*j, "c", 3, "h").await;
    assert_eq!(h_marker.prev_hash, p[2].hash);
    let h = j.read("h", 0, 0).await.unwrap();
    assert_eq!(h[..3], p[..3]);
    verify_records(&h).unwrap();
    // A great-grandchild, before its first own record, then after.
    j.fork_session("g", 8, "gg").await.unwrap();
    assert_eq!(j.read("gg", 0, 0).await.unwrap(), g[..8].to_vec());
    let gg_first = fill(&*j, "gg", 1).await;
    assert_eq!(gg_first[0].prev_hash, g[7].hash);
    let gg = j.read("gg", 0, 0).await.unwrap();
    assert_eq!(gg.len(), 9);
    verify_records(&gg).unwrap();
    assert_eq!(j.session_info("gg").await.unwrap().last_seq, 9);
    // The intermediate generations did not move.
    assert_eq!(j.head("c").await.unwrap(), 8);
    assert_eq!(j.head("g").await.unwrap(), 9);
}

// semantics §1.4 on children: CAS on the child's head, the fence minted by the fork
pub async fn fork_children_keep_cas_and_fences(j: Arc<dyn Journal>) {
    fill(&*j, "p", 4).await;
    let fence = j.fork_session("p", 2, "c").await.unwrap();
    // Not at the fork point: the child's head is 2, not the parent's 4 nor 0.
    for expected in [0, 1, 4] {
        assert!(matches!(
            j.append_one("c", expected, fence, input("x")).await,
            Err(JournalError::Conflict { actual: 2, .. })
        ));
    }
    // Below the minted fence.
    assert!(matches!(
        j.append_one("c", 2, fence - 1, input("x")).await,
        Err(JournalError::Fenced { .. })
    ));
    let newer = j.new_fence("c").await.unwrap();
    assert_eq!(newer, fence + 1);
    assert!(matches!(
        j.append_one("c", 2, fence, input("x")).await,
        Err(JournalError::Fenced { .. })
    ));
    let rec = j.append_one("c", 2, newer, input("x")).await.unwrap();
    assert_eq!(rec.seq, 3);
    // The parent's fence is the parent's own.
    assert_eq!(j.session_info("p").await.unwrap().fence, 0);
    j.append_one("p", 4, 0, input("p5")).await.unwrap();
    assert_eq!(j.head("c").await.unwrap(), 3);
    assert_eq!(j.session_info("c").await.unwrap().fence, newer);
}

// semantics §1.7: the child starts from the projection the parent had at the fork point
pub async fn fork_carries_the_projection_at_the_fork_point(j: Arc<dyn Journal>) {
    let req = Event::new(
        EventKind::ApprovalRequest,
        EventBody::Approval(ApprovalRequest {
            tool_call_id: "c".into(),
            reason: "r".into(),
        }),
    );
    j.append_one("p", 0, 0, input("a")).await.unwrap(); // 1 LIVE
    j.append_one("p", 1, 0, lifecycle(LifecycleKind::Suspend)) // 2 COLD
        .await
        .unwrap();
    j.append_one("p", 2, 0, req.clone()).await.unwrap(); // 3 COLD (unchanged)
    j.append_one("p", 3, 0, lifecycle(LifecycleKind::Baseline)) // 4 COLD (unchanged)
        .await
        .unwrap();
    j.append_one("p", 4, 0, lifecycle(LifecycleKind::Resume)) // 5 LIVE
        .await
        .unwrap();
    let state = |j: Arc<dyn Journal>, s: &'static str| async move {
        j.session_info(s).await.unwrap().compute_state
    };
    for (at, child, want) in [
        (1, "c1", ComputeState::Live),
        (2, "c2", ComputeState::Cold),
        (4, "c4", ComputeState::Cold),
        (5, "c5", ComputeState::Live),
    ] {
        j.fork_session("p", at, child).await.unwrap();
        assert_eq!(state(j.clone(), child).await, want, "fork at {at}");
    }
    // Through a grandchild whose own records fix nothing.
    j.append_one("c2", 2, 1, req).await.unwrap();
    j.fork_session("c2", 3, "g").await.unwrap();
    assert_eq!(state(j.clone(), "g").await, ComputeState::Cold);
    // A log that never fixed a state is NONE.
    j.append_one("q", 0, 0, lifecycle(LifecycleKind::Baseline))
        .await
        .unwrap();
    j.fork_session("q", 1, "cq").await.unwrap();
    assert_eq!(state(j.clone(), "cq").await, ComputeState::None);
}

// A shared-prefix child's lineage is where its records are read from: metadata writes may
// restate it, never change it
pub async fn put_session_cannot_repoint_a_shared_prefix(j: Arc<dyn Journal>) {
    fill(&*j, "p", 3).await;
    fill(&*j, "other", 3).await;
    fork_with_marker(&*j, "p", 2, "c").await;
    let chain = j.read("c", 0, 0).await.unwrap();
    let row = SessionRow {
        uid: "c".into(),
        name: "renamed".into(),
        parent_uid: "p".into(),
        fork_seq: 2,
        ..SessionRow::default()
    };
    j.put_session(row.clone()).await.unwrap();
    assert_eq!(j.session_info("c").await.unwrap().row.name, "renamed");
    for (parent_uid, fork_seq) in [("other", 2), ("p", 3), ("p", 1), ("", 0)] {
        let changed = SessionRow {
            parent_uid: parent_uid.into(),
            fork_seq,
            name: "moved".into(),
            ..row.clone()
        };
        assert!(
            matches!(
                j.put_session(changed).await,
                Err(JournalError::InvalidArgument(_))
            ),
            "{parent_uid}@{fork_seq}"
        );
    }
    let info = j.session_info("c").await.unwrap();
    assert_eq!(
        (
            info.row.name.as_str(),
            info.row.parent_uid.as_str(),
            info.row.fork_seq
        ),
        ("renamed", "p", 2)
    );
    assert_eq!(j.read("c", 0, 0).await.unwrap(), chain);
}

// Reference journals copy the prefix into the child and only record the lineage in metadata;
// such a child reads, appends and forks as a plain session
pub async fn copied_prefix_children_read_as_plain_sessions(j: Arc<dyn Journal>) {
    let parent = fill(&*j, "p", 4).await;
    load_records(j.as_ref(), "copy", &parent[..3])
        .await
        .unwrap();
    let fence = j.new_fence("copy").await.unwrap();
    let marker = j
        .append_one("copy", 3, fence, fork_marker("p", 3))
        .await
        .unwrap();
    assert_eq!(marker.prev_hash, parent[2].hash);
    j.put_session(SessionRow {
        uid: "copy".into(),
        parent_uid: "p".into(),
        fork_seq: 3,
        ..SessionRow::default()
    })
    .await
    .unwrap();
    let chain = j.read("copy", 0, 0).await.unwrap();
    assert_eq!(chain[..3], parent[..3]);
    verify_records(&chain).unwrap();
    let info = j.session_info("copy").await.unwrap();
    assert_eq!((info.last_seq, info.row.fork_seq), (4, 3));
    // Only the metadata says it is a child, so the metadata may say otherwise.
    j.put_session(SessionRow {
        uid: "copy".into(),
        ..SessionRow::default()
    })
    .await
    .unwrap();
    assert_eq!(j.read("copy", 0, 0).await.unwrap(), chain);
    // A shared-prefix fork of it reads its copied rows.
    fork_with_marker(&*j, "copy", 4, "grand").await;
    let grand = j.read("grand", 0, 0).await.unwrap();
    assert_eq!(grand[..4], chain[..]);
    verify_records(&grand).unwrap();
    // The copy of a shared-prefix child reproduces every hash.
    load_records(j.as_ref(), "copy-of-grand", &grand)
        .await
        .unwrap();
    assert_eq!(j.read("copy-of-grand", 0, 0).await.unwrap(), grand);
}

// Forks racing appends to their parent and to each other land whole, each child at its point
pub async fn concurrent_forks_and_parent_appends(j: Arc<dyn Journal>) {
    fill(&*j, "p", 10).await;
    let appender = {
        let j = Arc::clone(&j);
        tokio::spawn(async move {
            for i in 10..60 {
                j.append_one("p", i, 0, input(&format!("late {i}")))
                    .await
                    .unwrap();
            }
        })
    };
    let mut forks = tokio::task::JoinSet::new();
    for k in 0..24_i64 {
        let j = Arc::clone(&j);
        forks.spawn(async move {
            let at = 1 + k % 10;
            let child = format!("child-{k}");
            let fence = j.fork_session("p", at, &child).await.unwrap();
            j.append_one(&child, at, fence, fork_marker("p", at))
                .await
                .unwrap();
            (child, at)
        });
    }
    // Two forks racing for one child uid: exactly one wins.
    let racers: Vec<_> = (0..2)
        .map(|_| {
            let j = Arc::clone(&j);
            tokio::spawn(async move { j.fork_session("p", 3, "contested").await })
        })
        .collect();
    let mut wins = 0;
    for racer in racers {
        match racer.await.unwrap() {
            Ok(_) => wins += 1,
            Err(JournalError::SessionExists(_)) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(wins, 1);
    appender.await.unwrap();
    let parent = j.read("p", 0, 0).await.unwrap();
    assert_eq!(parent.len(), 60);
    while let Some(res) = forks.join_next().await {
        let (child, at) = res.unwrap();
        let chain = j.read(&child, 0, 0).await.unwrap();
        let at_len = usize::try_from(at).unwrap();
        assert_eq!(chain.len(), at_len + 1);
        assert_eq!(chain[..at_len], parent[..at_len]);
        verify_records(&chain).unwrap();
    }
}

fn caller(subject: &str) -> CallerIdentity {
    CallerIdentity::new("https://idp.test", subject)
}

async fn put_owned(j: &Arc<dyn Journal>, uid: &str, project: &str, created_ns: i64, owner: &str) {
    j.put_session(SessionRow {
        uid: uid.into(),
        project: project.into(),
        created_at: Some(Timestamp::from_unix_nanos(created_ns)),
        owner: if owner.is_empty() {
            CallerIdentity::default()
        } else {
            caller(owner)
        },
        ..SessionRow::default()
    })
    .await
    .unwrap();
}

// extensions §1: the owner is set at creation from the verified caller and is fixed after.
pub async fn owner_is_recorded_once_and_never_changes(j: Arc<dyn Journal>) {
    put_owned(&j, "s", "", 1, "alice").await;
    assert_eq!(
        j.session_info("s").await.unwrap().row.owner,
        caller("alice")
    );
    // A metadata write that does not name the owner keeps it; restating it is fine.
    put_at(&j, "s", "", 1).await;
    assert_eq!(
        j.session_info("s").await.unwrap().row.owner,
        caller("alice")
    );
    put_owned(&j, "s", "", 1, "alice").await;
    // Changing it is refused and changes nothing.
    let refused = j
        .put_session(SessionRow {
            uid: "s".into(),
            name: "renamed".into(),
            owner: caller("bob"),
            ..SessionRow::default()
        })
        .await;
    assert!(
        matches!(refused, Err(JournalError::InvalidArgument(_))),
        "{refused:?}"
    );
    let info = j.session_info("s").await.unwrap();
    assert_eq!(
        (info.row.owner, info.row.name.as_str()),
        (caller("alice"), "")
    );
    // An incomplete owner is never stored.
    let incomplete = j
        .put_session(SessionRow {
            uid: "u".into(),
            owner: CallerIdentity::new("https://idp.test", ""),
            ..SessionRow::default()
        })
        .await;
    assert!(
        matches!(incomplete, Err(JournalError::InvalidArgument(_))),
        "{incomplete:?}"
    );
    // Appends and fences never touch it; a fork child starts with its parent's owner, an
    // unbound parent's child is unbound.
    j.append_one("s", 0, 0, input("a")).await.unwrap();
    j.new_fence("s").await.unwrap();
    assert_eq!(
        j.session_info("s").await.unwrap().row.owner,
        caller("alice")
    );
    j.fork_session("s", 1, "child").await.unwrap();
    assert_eq!(
        j.session_info("child").await.unwrap().row.owner,
        caller("alice")
    );
    j.append_one("free", 0, 0, input("a")).await.unwrap();
    j.fork_session("free", 1, "free-child").await.unwrap();
    assert_eq!(
        j.session_info("free-child").await.unwrap().row.owner,
        CallerIdentity::default()
    );
}

async fn list_all(
    j: &Arc<dyn Journal>,
    project: &str,
    owner: Option<CallerIdentity>,
) -> (Vec<String>, usize) {
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = j
            .list_sessions(ListQuery {
                project: project.into(),
                page_size: 2,
                page_token: token.clone(),
                owner: owner.clone(),
            })
            .await
            .unwrap();
        pages += 1;
        assert!(
            page.sessions.len() <= 2,
            "a page is never larger than asked"
        );
        if let Some(owner) = &owner {
            assert!(page.sessions.iter().all(|s| s.row.owner == *owner));
        }
        seen.extend(page.sessions.iter().map(|s| s.row.uid.clone()));
        if page.next_page_token.is_empty() {
            return (seen, pages);
        }
        token = page.next_page_token;
    }
}

// extensions §2: owner-filtered listing is a storage query, so pages stay full and tokens exact.
pub async fn listing_by_owner_pages_exactly_and_never_mixes_owners(j: Arc<dyn Journal>) {
    // Interleaved creation times, ties broken by uid, an unbound session and another project.
    for (uid, t, owner) in [
        ("a1", 9, "alice"),
        ("b1", 9, "bob"),
        ("a2", 8, "alice"),
        ("n1", 8, ""),
        ("b2", 7, "bob"),
        ("a3", 7, "alice"),
        ("b3", 6, "bob"),
        ("a4", 5, "alice"),
        ("a5", 5, "alice"),
        ("b4", 4, "bob"),
    ] {
        put_owned(&j, uid, "p", t, owner).await;
    }
    put_owned(&j, "a-elsewhere", "q", 9, "alice").await;
    let (alice, pages) = list_all(&j, "p", Some(caller("alice"))).await;
    assert_eq!(alice, ["a1", "a2", "a3", "a4", "a5"]);
    assert_eq!(pages, 3, "five rows in pages of two: 2, 2, 1");
    let (bob, pages) = list_all(&j, "p", Some(caller("bob"))).await;
    assert_eq!(bob, ["b1", "b2", "b3", "b4"]);
    assert_eq!(pages, 2, "a page ending at the last row has no token");
    let (everyone, _) = list_all(&j, "p", None).await;
    assert_eq!(everyone.len(), 10);
    let (nobody, pages) = list_all(&j, "p", Some(caller("carol"))).await;
    assert!(nobody.is_empty());
    assert_eq!(pages, 1);
    let (elsewhere, _) = list_all(&j, "q", Some(caller("alice"))).await;
    assert_eq!(elsewhere, ["a-elsewhere"]);
    // The same issuer with another subject, or another issuer with the same subject, is
    // another owner.
    let (other_issuer, _) = list_all(
        &j,
        "p",
        Some(CallerIdentity::new("https://other.test", "alice")),
    )
    .await;
    assert!(other_issuer.is_empty());
    // An incomplete filter is refused, not read as "everyone".
    for bad in [CallerIdentity::default(), CallerIdentity::new("", "alice")] {
        let refused = j
            .list_sessions(ListQuery {
                project: "p".into(),
                owner: Some(bad),
                ..ListQuery::default()
            })
            .await;
        assert!(
            matches!(refused, Err(JournalError::InvalidArgument(_))),
            "{refused:?}"
        );
    }
}

// extensions §3: LIFECYCLE_DELETE and DELETION_PENDING commit together; the reclaimer's queue.
pub async fn delete_marker_sets_pending_in_its_commit_and_feeds_the_reclaimer(j: Arc<dyn Journal>) {
    put_at(&j, "s", "", 1).await;
    j.append_one("s", 0, 0, input("a")).await.unwrap();
    assert_eq!(
        j.session_info("s").await.unwrap().deletion,
        DeletionState::Active
    );
    assert!(j.pending_deletions(10).await.unwrap().is_empty());
    // A refused append carrying the marker leaves the session active.
    let refused = j
        .append_records(AppendRequest::new(
            "s",
            0,
            FenceUse::Hold(0),
            vec![lifecycle(LifecycleKind::Delete)],
        ))
        .await;
    assert!(
        matches!(refused, Err(JournalError::Conflict { .. })),
        "{refused:?}"
    );
    assert_eq!(
        j.session_info("s").await.unwrap().deletion,
        DeletionState::Active
    );
    // Reclaiming an active session is refused.
    let early = j.mark_reclaimed("s").await;
    assert!(
        matches!(early, Err(JournalError::InvalidArgument(_))),
        "{early:?}"
    );
    let record = j
        .append_one("s", 1, 0, lifecycle(LifecycleKind::Delete))
        .await
        .unwrap();
    assert_eq!(record.seq, 2);
    let info = j.session_info("s").await.unwrap();
    assert_eq!(info.deletion, DeletionState::Pending);
    assert!(info.deletion.is_deleted());
    assert_eq!(info.reclaimed_at, None);
    // Still readable, records intact.
    verify_records(&j.read("s", 0, 0).await.unwrap()).unwrap();
    // Other sessions are untouched; a fork of a session taken before its deletion is active.
    j.append_one("t", 0, 0, input("b")).await.unwrap();
    j.fork_session("s", 1, "s-child").await.unwrap();
    assert_eq!(
        j.session_info("t").await.unwrap().deletion,
        DeletionState::Active
    );
    assert_eq!(
        j.session_info("s-child").await.unwrap().deletion,
        DeletionState::Active
    );
    assert_eq!(j.pending_deletions(10).await.unwrap(), ["s"]);
    assert!(j.pending_deletions(0).await.unwrap().is_empty());
    j.mark_reclaimed("s").await.unwrap();
    let first = j.session_info("s").await.unwrap().reclaimed_at;
    assert!(first.is_some());
    // Reclaiming twice keeps the first time; the session leaves the queue but stays pending.
    j.mark_reclaimed("s").await.unwrap();
    let info = j.session_info("s").await.unwrap();
    assert_eq!(info.reclaimed_at, first);
    assert_eq!(info.deletion, DeletionState::Pending);
    assert!(j.pending_deletions(10).await.unwrap().is_empty());
    let missing = j.mark_reclaimed("nope").await;
    assert!(
        matches!(missing, Err(JournalError::SessionNotFound(_))),
        "{missing:?}"
    );
}

// An incarnation opens with its fence minted in the commit of its first records.
pub async fn fencing_append_mints_and_appends_in_one_commit(j: Arc<dyn Journal>) {
    // A session with no row yet: fence 1, records from seq 1.
    let opened = j
        .append_records(AppendRequest::new(
            "s",
            0,
            FenceUse::Mint,
            vec![input("a"), input("b")],
        ))
        .await
        .unwrap();
    assert_eq!(
        opened.iter().map(|r| (r.seq, r.fence)).collect::<Vec<_>>(),
        [(1, 1), (2, 1)]
    );
    assert_eq!(j.session_info("s").await.unwrap().fence, 1);
    j.append_one("s", 2, 1, input("c")).await.unwrap();
    // The next incarnation's opening supersedes the previous one's fence.
    let next = j
        .append_records(AppendRequest::new("s", 3, FenceUse::Mint, vec![input("d")]))
        .await
        .unwrap();
    assert_eq!((next[0].seq, next[0].fence), (4, 2));
    let stale = j.append_one("s", 4, 1, input("late")).await;
    assert!(
        matches!(stale, Err(JournalError::Fenced { .. })),
        "{stale:?}"
    );
    // It mints after a plain new_fence as well, and counts like one.
    assert_eq!(j.new_fence("s").await.unwrap(), 3);
    let after = j
        .append_records(AppendRequest::new("s", 4, FenceUse::Mint, vec![input("e")]))
        .await
        .unwrap();
    assert_eq!(after[0].fence, 4);
    verify_records(&j.read("s", 0, 0).await.unwrap()).unwrap();
    // An empty opening is refused and changes nothing.
    let empty = j
        .append_records(AppendRequest::new("s", 5, FenceUse::Mint, Vec::new()))
        .await;
    assert!(
        matches!(empty, Err(JournalError::InvalidArgument(_))),
        "{empty:?}"
    );
    assert_eq!(j.session_info("s").await.unwrap().fence, 4);
}

// A racer whose cursor is stale is refused and leaves the fence alone, so the writer that won
// the head goes on (the weakness of minting before the CAS check).
pub async fn a_stale_fencing_append_never_supersedes_the_writer(j: Arc<dyn Journal>) {
    let won = j
        .append_records(AppendRequest::new("s", 0, FenceUse::Mint, vec![input("a")]))
        .await
        .unwrap();
    let fence = won[0].fence;
    let lost = j
        .append_records(AppendRequest::new(
            "s",
            0,
            FenceUse::Mint,
            vec![input("racer")],
        ))
        .await;
    assert!(
        matches!(lost, Err(JournalError::Conflict { .. })),
        "{lost:?}"
    );
    assert_eq!(j.session_info("s").await.unwrap().fence, fence);
    j.append_one("s", 1, fence, input("the winner goes on"))
        .await
        .unwrap();
    // Many racers at once on one cursor: exactly one opens, the others change nothing.
    let head = j.head("s").await.unwrap();
    let mut racers = Vec::new();
    for i in 0..8 {
        let j = Arc::clone(&j);
        racers.push(tokio::spawn(async move {
            j.append_records(AppendRequest::new(
                "s",
                head,
                FenceUse::Mint,
                vec![input(&format!("r{i}"))],
            ))
            .await
        }));
    }
    let mut winners = Vec::new();
    for racer in racers {
        match racer.await.unwrap() {
            Ok(records) => winners.push(records[0].fence),
            Err(JournalError::Conflict { .. }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    assert_eq!(j.session_info("s").await.unwrap().fence, winners[0]);
    assert_eq!(j.head("s").await.unwrap(), head + 1);
    verify_records(&j.read("s", 0, 0).await.unwrap()).unwrap();
}

// Log::append with Wait::Queued: appends queued one after another, and a durable append right behind
// them, commit in that order and chain like any others; a queued append the journal refuses
// is refused through its records, and what was appended behind it (its cursor past the head)
// is refused too, leaving the head where it was.
pub async fn queued_appends_commit_in_order_and_a_refusal_refuses_what_follows(
    j: Arc<dyn Journal>,
) {
    let fence = j.new_fence("s").await.unwrap();
    let first = j
        .append(
            AppendRequest::new("s", 0, FenceUse::Hold(fence), vec![input("q1")]).wait(Wait::Queued),
        )
        .await
        .unwrap();
    let second = j
        .append(
            AppendRequest::new(
                "s",
                1,
                FenceUse::Hold(fence),
                vec![input("q2"), input("q3")],
            )
            .wait(Wait::Queued),
        )
        .await
        .unwrap();
    let durable = j.append_one("s", 3, fence, input("d")).await.unwrap();
    assert_eq!(durable.seq, 4);
    let mut queued = first.records().await.unwrap();
    queued.extend(second.records().await.unwrap());
    assert_eq!(
        queued.iter().map(|r| (r.seq, r.fence)).collect::<Vec<_>>(),
        [(1, fence), (2, fence), (3, fence)]
    );
    let all = j.read("s", 0, 0).await.unwrap();
    assert_eq!(all[..3], queued[..]);
    assert_eq!(all[3], durable);
    verify_records(&all).unwrap();

    let stale = j
        .append(
            AppendRequest::new("s", 2, FenceUse::Hold(fence), vec![input("stale")])
                .wait(Wait::Queued),
        )
        .await
        .unwrap();
    let behind = j.append_one("s", 5, fence, input("behind")).await;
    let refused = stale.records().await;
    assert!(
        matches!(refused, Err(JournalError::Conflict { .. })),
        "{refused:?}"
    );
    assert!(
        matches!(behind, Err(JournalError::Conflict { .. })),
        "{behind:?}"
    );
    assert_eq!(j.head("s").await.unwrap(), 4);
}
