#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
//! Session states kept between operations (flat cost per turn) never go stale: another host's
//! appends, a fork, a delete and eviction under a tiny byte budget, on both journals. Each test
//! runs turns whose opening commit is made at the kept head, so a stale state would be refused with
//! a conflict (or hand the harness the wrong history).

mod support;

use std::sync::Arc;

use agentsessions_api::Message;
use agentsessions_controller::ExecRequest;
use agentsessions_placement::{ExecCall, ForkCall, PlacementError};
use support::{InMemoryTestRuntime, journals, placer, session};

fn turn(uid: &str) -> ExecCall {
    ExecCall {
        session: uid.to_owned(),
        request: ExecRequest {
            inputs: vec![Message::text_message("user", "hi")],
            ..ExecRequest::default()
        },
        ..ExecCall::default()
    }
}

// Two hosts over one journal: each keeps its own state of the session; what one appends the
// other sees through the head check, and its harness gets the whole log as history.
#[tokio::test]
async fn another_hosts_appends_are_seen_through_the_head_check() {
    for (journal, _dir) in journals().await {
        let runtime_a = Arc::new(InMemoryTestRuntime::new(false, false));
        let runtime_b = Arc::new(InMemoryTestRuntime::new(false, false));
        let host_a = placer(Arc::clone(&journal), &runtime_a);
        let host_b = placer(Arc::clone(&journal), &runtime_b);
        session(&journal, "s").await;
        host_a.exec(turn("s")).await.unwrap();
        assert_eq!(host_a.states().len(), 1, "host A keeps the session's state");
        for _ in 0..2 {
            host_b.exec(turn("s")).await.unwrap();
        }
        let before = journal.head("s").await.unwrap();
        host_a.exec(turn("s")).await.unwrap();
        assert_eq!(
            runtime_a.probe("s").unwrap().last_history(),
            Some(before as usize),
            "host A's turn saw host B's records"
        );
        let kept = host_a
            .states()
            .current(journal.as_ref(), "s")
            .await
            .unwrap();
        assert_eq!(kept.records(), &journal.read("s", 1, 0).await.unwrap()[..]);
    }
}

// A fork child has its own state (the parent's prefix and its FORK marker); the parent's kept
// state is unaffected by the child's turns.
#[tokio::test]
async fn fork_children_and_parent_keep_their_own_logs() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let host = placer(Arc::clone(&journal), &runtime);
        session(&journal, "p").await;
        host.exec(turn("p")).await.unwrap();
        let at = journal.head("p").await.unwrap();
        host.exec(turn("p")).await.unwrap();
        let out = host
            .fork(ForkCall {
                parent: "p".into(),
                at_seq: at,
                count: 1,
                ..ForkCall::default()
            })
            .await
            .unwrap();
        let child = &out.children[0];
        host.exec(turn(child)).await.unwrap();
        assert_eq!(
            runtime.probe(child).unwrap().last_history(),
            Some(at as usize + 1),
            "the child's history is the prefix and its FORK marker"
        );
        let parent_head = journal.head("p").await.unwrap();
        host.exec(turn("p")).await.unwrap();
        assert_eq!(
            runtime.probe("p").unwrap().last_history(),
            Some(parent_head as usize)
        );
        host.exec(turn(child)).await.unwrap();
        let child_state = host
            .states()
            .current(journal.as_ref(), child)
            .await
            .unwrap();
        assert_eq!(
            child_state.records(),
            &journal.read(child, 1, 0).await.unwrap()[..]
        );
    }
}

// A delete recorded by another host is seen by the host that kept the session's state.
#[tokio::test]
async fn a_delete_by_another_host_refuses_effects_here() {
    for (journal, _dir) in journals().await {
        let runtime_a = Arc::new(InMemoryTestRuntime::new(false, false));
        let runtime_b = Arc::new(InMemoryTestRuntime::new(false, false));
        let host_a = placer(Arc::clone(&journal), &runtime_a);
        let host_b = placer(Arc::clone(&journal), &runtime_b);
        session(&journal, "s").await;
        host_a.exec(turn("s")).await.unwrap();
        assert!(host_b.delete("s").await.unwrap());
        assert!(!host_a.delete("s").await.unwrap(), "already deleted");
        let refused = host_a.exec(turn("s")).await.unwrap_err();
        assert!(
            matches!(refused, PlacementError::DeletionPending(_)),
            "{refused:?}"
        );
        let state = host_a
            .states()
            .current(journal.as_ref(), "s")
            .await
            .unwrap();
        assert!(state.facts().deleted());
    }
}

// Under a budget smaller than one session nothing is kept and every operation reads the whole
// log; under a budget for about one session, the least recently used goes first. Either way the
// turns see exactly the journal's log.
#[tokio::test]
async fn eviction_under_a_tiny_byte_budget_stays_exact() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let tiny = placer(Arc::clone(&journal), &runtime).with_state_budget(64);
        for uid in ["a", "b"] {
            session(&journal, uid).await;
        }
        for _ in 0..3 {
            for uid in ["a", "b"] {
                let head = journal.head(uid).await.unwrap();
                tiny.exec(turn(uid)).await.unwrap();
                assert_eq!(
                    runtime.probe(uid).unwrap().last_history(),
                    Some(head as usize)
                );
            }
        }
        assert!(tiny.states().is_empty(), "nothing fits in 64 bytes");

        let one = journal.read("a", 1, 0).await.unwrap();
        let budget = tiny
            .states()
            .current(journal.as_ref(), "a")
            .await
            .unwrap()
            .bytes()
            * 3
            / 2;
        assert_eq!(one.len(), journal.head("a").await.unwrap() as usize);
        let small = placer(Arc::clone(&journal), &runtime).with_state_budget(budget);
        small.exec(turn("a")).await.unwrap();
        small.exec(turn("b")).await.unwrap();
        assert_eq!(
            small.states().len(),
            1,
            "one session fits, the older one went"
        );
        assert!(small.states().bytes() <= budget);
        for uid in ["a", "b", "a"] {
            let head = journal.head(uid).await.unwrap();
            small.exec(turn(uid)).await.unwrap();
            assert_eq!(
                runtime.probe(uid).unwrap().last_history(),
                Some(head as usize)
            );
        }
    }
}

// A fork child costs two WAL syncs on SQLite, its shared prefix and its published row, not
// three: its FORK marker is committed without a sync of its own, and the row's sync covers it
// before the fork answers. The child reads back whole.
#[tokio::test]
async fn a_fork_childs_marker_rides_the_sync_of_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite =
        Arc::new(agentsessions_sqlite::SqliteJournal::open(dir.path().join("j.db")).unwrap());
    let journal: Arc<dyn agentsessions_journal::Journal> = sqlite.clone();
    let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
    let host = placer(Arc::clone(&journal), &runtime);
    session(&journal, "p").await;
    host.exec(turn("p")).await.unwrap();
    let at = journal.head("p").await.unwrap();
    let syncs = sqlite.wal_syncs();
    let out = host
        .fork(ForkCall {
            parent: "p".into(),
            at_seq: at,
            count: 1,
            ..ForkCall::default()
        })
        .await
        .unwrap();
    assert_eq!(sqlite.wal_syncs() - syncs, 2, "prefix and row only");
    let child = journal.read(&out.children[0], 1, 0).await.unwrap();
    assert_eq!(i64::try_from(child.len()).unwrap(), at + 1);
    assert_eq!(
        child.last().unwrap().event.kind,
        agentsessions_api::EventKind::Lifecycle
    );
    agentsessions_journal::verify_records(&child).unwrap();
}
