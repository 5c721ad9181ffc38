//! Conformance cases for following commits ([`Log::follow`], [`RecordFollower`]): every
//! backend wakes its followers on its own commits.

use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::LifecycleKind;
use agentsessions_journal::record_follower::FOLLOW_PAGE;
use agentsessions_journal::{Journal, LogExt as _, LogRecord, RecordFollower};

use super::lifecycle;
use crate::fixtures::{fill, fork_with_marker, input};

/// Long enough for any backend's commit to arrive; a follower that needs it is broken.
const PATIENCE: Duration = Duration::from_secs(20);

async fn next(follower: &mut RecordFollower) -> Option<Vec<LogRecord>> {
    tokio::time::timeout(PATIENCE, follower.next_records())
        .await
        .expect("the follower did not see a commit")
        .unwrap()
}

fn seqs(records: &[LogRecord]) -> Vec<i64> {
    records.iter().map(|r| r.seq).collect()
}

pub async fn follow_wakes_on_its_sessions_commits_only(j: Arc<dyn Journal>) {
    let mut follow = j.follow("watched");
    assert_eq!(follow.session(), "watched");
    fill(j.as_ref(), "watched", 2).await;
    let hint = tokio::time::timeout(PATIENCE, follow.changed())
        .await
        .expect("not woken by a commit")
        .unwrap();
    assert_eq!(hint, 2);
    // A commit to another session does not wake it (nor does a late echo of its own).
    fill(j.as_ref(), "other", 3).await;
    let quiet = tokio::time::timeout(Duration::from_millis(300), follow.changed()).await;
    assert!(quiet.is_err(), "woken by another session: {quiet:?}");
    // The next commit to its own session does, with a head hint that covers the commit.
    let writer = Arc::clone(&j);
    let append = tokio::spawn(async move { fill(writer.as_ref(), "watched", 2).await });
    let hint = tokio::time::timeout(PATIENCE, follow.changed())
        .await
        .expect("not woken by a commit")
        .unwrap();
    let appended = append.await.unwrap();
    assert!(hint >= appended[0].seq, "hint {hint} before the commit");
    assert!(follow.head_hint() <= 4);
}

pub async fn record_follower_reads_from_a_seq_then_follows_and_ends_on_delete(j: Arc<dyn Journal>) {
    fill(j.as_ref(), "s", 3).await;
    let mut follower = RecordFollower::new(Arc::clone(&j), "s", 2);
    assert_eq!(seqs(&next(&mut follower).await.unwrap()), [2, 3]);
    assert_eq!(follower.next_seq(), 4);
    // At the head it waits for the next commit, then returns it.
    let writer = Arc::clone(&j);
    let later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        writer.append_one("s", 3, 0, input("four")).await.unwrap();
        writer.append_one("s", 4, 0, input("five")).await.unwrap();
    });
    let mut got = seqs(&next(&mut follower).await.unwrap());
    if got == [4] {
        got.extend(seqs(&next(&mut follower).await.unwrap()));
    }
    assert_eq!(got, [4, 5]);
    later.await.unwrap();
    // The delete record is the last thing it returns.
    j.append_one("s", 5, 0, lifecycle(LifecycleKind::Delete))
        .await
        .unwrap();
    let last = next(&mut follower).await.unwrap();
    assert_eq!(seqs(&last), [6]);
    assert!(next(&mut follower).await.is_none());
    assert!(next(&mut follower).await.is_none());
}

pub async fn a_slow_follower_reads_what_it_missed_in_pages(j: Arc<dyn Journal>) {
    let mut follower = RecordFollower::new(Arc::clone(&j), "busy", 1);
    // Many commits while the follower does not look: it holds no queue of them.
    for _ in 0..25 {
        fill(j.as_ref(), "busy", 100).await;
    }
    let mut seen = Vec::new();
    while seen.len() < 2_500 {
        let page = next(&mut follower).await.unwrap();
        assert!(page.len() <= FOLLOW_PAGE, "{}", page.len());
        seen.extend(seqs(&page));
    }
    assert_eq!(seen, (1..=2_500).collect::<Vec<i64>>());
    // Then it waits again, and picks up the next commit.
    let writer = Arc::clone(&j);
    let more = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        fill(writer.as_ref(), "busy", 1).await
    });
    assert_eq!(seqs(&next(&mut follower).await.unwrap()), [2_501]);
    more.await.unwrap();
}

pub async fn a_fork_child_is_followed_from_its_parents_records(j: Arc<dyn Journal>) {
    fill(j.as_ref(), "parent", 4).await;
    let mut follower = RecordFollower::new(Arc::clone(&j), "child", 1);
    fork_with_marker(j.as_ref(), "parent", 2, "child").await;
    let mut got = Vec::new();
    while got.len() < 3 {
        got.extend(next(&mut follower).await.unwrap());
    }
    assert_eq!(seqs(&got), [1, 2, 3]);
    let parent = j.read("parent", 1, 2).await.unwrap();
    assert_eq!(got[..2], parent[..]);
    // The parent's later commits are not the child's.
    fill(j.as_ref(), "parent", 1).await;
    let quiet = tokio::time::timeout(Duration::from_millis(300), follower.next_records()).await;
    assert!(quiet.is_err(), "the child's follower returned {quiet:?}");
}
