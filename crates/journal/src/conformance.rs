//! The behavioral suite every [`Journal`] backend must pass. Each case takes a fresh, empty
//! journal; [`journal_conformance!`](crate::journal_conformance) instantiates every case for a
//! backend with one line.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use agentsessions_api::{
    ApprovalRequest, ComputeState, Event, EventBody, EventKind, IdentityRef, Lifecycle,
    LifecycleKind, Message, Origin, SnapshotRef, Timestamp,
};
use agentsessions_wire::{content_hash, pb};

use crate::chain::verify_records;
use crate::error::JournalError;
use crate::journal::{HarnessState, Journal, ListQuery, RegisterOutcome, SessionRow};

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
            listing_pages_exactly_by_project,
            listing_refuses_bad_tokens_and_clamps_sizes,
            harness_registry_outcomes,
            concurrent_writers_one_session_no_gap_no_duplicate,
            many_sessions_append_concurrently,
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

fn input(text: &str) -> Event {
    Event::new(
        EventKind::Input,
        EventBody::Message(Message::text_message("user", text)),
    )
    .with_execution("e1")
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
        let rec = j.append("s", i - 1, 0, ev.clone()).await.unwrap();
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
    j.append("s", 0, 0, input("a")).await.unwrap();
    for expected in [0, 2, -1] {
        match j.append("s", expected, 0, input("b")).await {
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
    match j.append("s", 0, 1, input("a")).await {
        Err(JournalError::Fenced {
            fence: 1,
            current: 2,
            ..
        }) => {}
        other => panic!("expected fenced, got {other:?}"),
    }
    assert_eq!(j.head("s").await.unwrap(), 0);
    // A higher fence is accepted but does not raise the stored fence.
    j.append("s", 0, 7, input("a")).await.unwrap();
    j.append("s", 1, 2, input("b")).await.unwrap();
    assert_eq!(j.session_info("s").await.unwrap().fence, 2);
    assert_eq!(j.new_fence("s").await.unwrap(), 3);
    assert!(matches!(
        j.append("s", 2, 2, input("c")).await,
        Err(JournalError::Fenced { .. })
    ));
    let recs = j.read("s", 0, 0).await.unwrap();
    assert_eq!(recs.iter().map(|r| r.fence).collect::<Vec<_>>(), vec![7, 2]);
}

pub async fn read_windows_and_head(j: Arc<dyn Journal>) {
    assert_eq!(j.head("nobody").await.unwrap(), 0);
    assert!(j.read("nobody", 1, 0).await.unwrap().is_empty());
    for i in 0..6 {
        j.append("s", i, 0, input(&i.to_string())).await.unwrap();
    }
    assert_eq!(j.head("s").await.unwrap(), 6);
    let seqs = |v: Vec<crate::LogRecord>| v.into_iter().map(|r| r.seq).collect::<Vec<_>>();
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
        j.append("s", 0, 0, parked).await,
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
        j.append("s", 0, 0, ev).await,
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
    j.append("log-only", 0, 0, input("x")).await.unwrap();
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
    j.append("s", 0, 0, input("a")).await.unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Live);
    j.append("s", 1, 0, lifecycle(LifecycleKind::Suspend))
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
    j.append("s", 2, 0, req).await.unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Cold);
    j.append("s", 3, 0, lifecycle(LifecycleKind::Baseline))
        .await
        .unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Cold);
    j.append("s", 4, 0, lifecycle(LifecycleKind::Resume))
        .await
        .unwrap();
    assert_eq!(state(j.clone()).await, ComputeState::Live);
    j.append("s", 5, 0, lifecycle(LifecycleKind::Fork))
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
    let names = |v: Vec<crate::HarnessRow>| v.into_iter().map(|h| h.name).collect::<Vec<_>>();
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
                    .append("race", head, 0, input(&format!("w{w}-{}", won.len())))
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
                j.append(&session, i, 0, input(&format!("{s}/{i}")))
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
