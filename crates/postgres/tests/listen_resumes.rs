//! A second host keeps hearing commits after its `LISTEN` connection is killed (Watch across hosts
//! survives a lost connection): host A follows a session that only host B (another journal on the
//! same schema) appends to; the server terminates A's listening backend (`pg_terminate_backend`),
//! and B's next commit must still reach A's follower, through a notification on the listener's new
//! connection.
//!
//! What this proves, and why it cannot pass without notifications: a `HeadFollow`'s head hint
//! is raised only by `CommitFeed::publish`, which on host A is called by A's own appends (A
//! never appends here) and by the listener for each notification it hears. A reconnection only
//! calls `wake_all`, which wakes followers without changing the hint, and nothing polls. So A's
//! hint reaching the new head means a `NOTIFY` from B's commit was delivered on the *new*
//! listening connection: the old one was terminated (checked: `pg_terminate_backend` returned
//! true and its pid left `pg_stat_activity`) before B appended.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agentsessions_journal::LogExt as _;
use agentsessions_journal::{HeadFollow, Journal, LogRecord, RecordFollower};
use agentsessions_testkit::fixtures::input;
use common::{TestSchema, admin};

/// Bound on every wait: the listener retries after 100 ms at first, and the follower needs one
/// round trip.
const PATIENCE: Duration = Duration::from_secs(15);

/// Every log line of the process, for checking what the listener reported.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The pid of `application`'s listening backend once exactly one has finished running `LISTEN`
/// (state `idle`), other than `not`.
async fn listening_pid(db: &tokio_postgres::Client, application: &str, not: i32) -> i32 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let rows = db
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1 \
                 AND query ILIKE 'LISTEN%' AND state = 'idle' AND pid <> $2",
                &[&format!("{application}-listener"), &not],
            )
            .await
            .unwrap();
        if let [row] = rows.as_slice() {
            return row.get(0);
        }
        assert!(
            Instant::now() < deadline,
            "no listening backend of {application} (other than {not}) within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `pid` has left `pg_stat_activity`.
async fn gone(db: &tokio_postgres::Client, pid: i32) {
    let deadline = Instant::now() + PATIENCE;
    while db
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        > 0
    {
        assert!(Instant::now() < deadline, "backend {pid} never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `follow`'s head hint reaches `head`.
async fn hint_reaches(follow: &mut HeadFollow, head: i64) {
    let deadline = Instant::now() + PATIENCE;
    while follow.head_hint() < head {
        let left = deadline.saturating_duration_since(Instant::now());
        let woken = tokio::time::timeout(left, follow.changed()).await;
        assert!(
            woken.is_ok(),
            "host A never heard head {head} (hint {})",
            follow.head_hint()
        );
        woken.unwrap().unwrap();
    }
}

async fn next_page(follower: &mut RecordFollower) -> Vec<LogRecord> {
    tokio::time::timeout(PATIENCE, follower.next_records())
        .await
        .expect("the follower got no record within the bound")
        .unwrap()
        .unwrap()
}

/// Host A following session `s`, which only host B (another journal on the same schema)
/// appends to, once A has read B's first record and heard its notification.
struct Hosts {
    /// Dropped with the hosts.
    _schema: TestSchema,
    /// A's `application_name`; its listener's is this with `-listener`.
    app: String,
    host_b: Arc<dyn Journal>,
    head: HeadFollow,
    follower: RecordFollower,
}

impl Hosts {
    async fn following() -> Self {
        let schema = TestSchema::new().await;
        let app = format!("lr_{}", schema.name);
        let host_a: Arc<dyn Journal> = Arc::new(schema.journal_at(&common::url_named(&app)).await);
        let host_b: Arc<dyn Journal> = Arc::new(schema.journal().await);
        // Subscribed before B's first commit, so that commit's notification raises the hint too.
        let mut head = host_a.follow("s");
        let mut follower = RecordFollower::new(Arc::clone(&host_a), "s", 1);
        host_b.append_one("s", 0, 0, input("one")).await.unwrap();
        assert_eq!(next_page(&mut follower).await.len(), 1);
        // The notification of the first commit may still be on its way: let it land first, so a
        // later hint can only come from a later commit.
        hint_reaches(&mut head, 1).await;
        Self {
            _schema: schema,
            app,
            host_b,
            head,
            follower,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_hears_another_hosts_commits_after_its_listen_connection_is_killed() {
    let logs = Captured::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .init();

    let mut hosts = Hosts::following().await;

    let db = admin().await;
    let mut pid = listening_pid(&db, &hosts.app, 0).await;
    for round in 1..=3i64 {
        let terminated: bool = db
            .query_one("SELECT pg_terminate_backend($1)", &[&pid])
            .await
            .unwrap()
            .get(0);
        assert!(
            terminated,
            "round {round}: backend {pid} was not terminated"
        );
        gone(&db, pid).await;
        // The listener's new connection has run LISTEN (and is idle): from here on, B's
        // commit is announced to it.
        pid = listening_pid(&db, &hosts.app, pid).await;
        let before = hosts.head.head_hint();
        assert_eq!(before, round, "only notifications raise the hint");
        let started = Instant::now();
        let committed = hosts
            .host_b
            .append_one("s", round, 0, input(&format!("after kill {round}")))
            .await
            .unwrap();
        hint_reaches(&mut hosts.head, round + 1).await;
        let page = next_page(&mut hosts.follower).await;
        assert_eq!(
            page.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [committed.seq],
            "round {round}"
        );
        assert_eq!(
            page,
            hosts.host_b.read("s", round + 1, round + 1).await.unwrap()
        );
        eprintln!(
            "round {round}: B's commit heard {:?} after it was made",
            started.elapsed()
        );
    }
    assert_eq!(hosts.follower.next_seq(), 5);
    let reconnected = logs
        .text()
        .matches("journal commit listener reconnected")
        .count();
    assert!(
        reconnected >= 3,
        "the listener's recoveries are logged, once per kill: {}",
        logs.text()
    );
}

/// Restarts the local PostgreSQL cluster (`pg_ctlcluster`, as root) and waits until it accepts
/// connections again.
async fn restart_server() {
    let restarted = tokio::task::spawn_blocking(|| {
        std::process::Command::new("sh")
            .args([
                "-c",
                "pg_ctlcluster --skip-systemctl-redirect \"$(ls /etc/postgresql | head -n1)\" main restart",
            ])
            .status()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(restarted.success(), "pg_ctlcluster restart failed");
    let deadline = Instant::now() + PATIENCE;
    while tokio_postgres::connect(&common::url(), tokio_postgres::NoTls)
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the server did not come back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// The same as above across a whole restart of the server (Watch survives it): host A's listener
// loses its connection with every other client, reconnects on its own once the server is back, and
// hears host B's next commit. Host B's own pooled connections are dead too, so its first append
// after the restart may fail; it is retried until it commits (the CAS makes a retry of a commit
// that did land show up as a conflict at the head already reached).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "restarts the local PostgreSQL server, cutting every other client of it: run alone, \
            as root, with `cargo test -p agentsessions-postgres --test listen_resumes -- --ignored`"]
async fn a_follower_hears_another_hosts_commits_after_the_server_restarts() {
    let mut hosts = Hosts::following().await;

    for round in 1..=3i64 {
        let before = listening_pid(&admin().await, &hosts.app, 0).await;
        restart_server().await;
        // A's listener is back: a new backend has run LISTEN.
        let after = listening_pid(&admin().await, &hosts.app, before).await;
        let started = Instant::now();
        let deadline = started + PATIENCE;
        let committed = loop {
            match hosts
                .host_b
                .append_one("s", round, 0, input(&format!("after restart {round}")))
                .await
            {
                Ok(record) => break record.seq,
                Err(_) if hosts.host_b.head("s").await.ok() == Some(round + 1) => break round + 1,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "host B never committed again: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        hint_reaches(&mut hosts.head, round + 1).await;
        let page = next_page(&mut hosts.follower).await;
        assert_eq!(
            page.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [committed],
            "round {round}"
        );
        eprintln!(
            "round {round}: listener {before} -> {after}; B's commit heard {:?} after B began it",
            started.elapsed()
        );
    }
    assert_eq!(hosts.follower.next_seq(), 5);
}
