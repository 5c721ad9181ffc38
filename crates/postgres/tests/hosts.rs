//! Postgres-specific behavior: the fail-closed schema stamp, several hosts (independent
//! `PostgresJournal` instances) sharing one schema, batches mixing refused and accepted writes,
//! and reconnection after the server drops the journal's connections.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use agentsessions_api::Timestamp;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _};
use agentsessions_journal::{Catalog as _, Log as _};
use agentsessions_journal::{JournalError, ListQuery, SessionRow, verify_records};
use agentsessions_postgres::{PostgresJournal, PostgresOptions, SCHEMA_VERSION};
use agentsessions_testkit::fixtures::input;
use common::{TestSchema, admin, count};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_schema_stamp_is_refused_and_nothing_is_written() {
    // semantics §1.5: a database stamped newer than the build (or negative) is refused, fail
    // closed, nothing written
    let schema = TestSchema::new().await;
    let j = schema.journal().await;
    j.append_one("s", 0, 0, input("a")).await.unwrap();
    j.close().await;
    let db = admin().await;
    let stamp = schema.table("schema_version");
    for bad in [SCHEMA_VERSION + 1, -1] {
        db.execute(&format!("UPDATE {stamp} SET version = $1"), &[&bad])
            .await
            .unwrap();
        match PostgresJournal::connect(&common::url(), schema.options()).await {
            Err(JournalError::UnsupportedSchema { found, supported }) => {
                assert_eq!((found, supported), (bad, SCHEMA_VERSION));
            }
            other => panic!("expected UnsupportedSchema, got {other:?}"),
        }
        let version: i64 = db
            .query_one(&format!("SELECT version FROM {stamp}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(version, bad, "the refused stamp is left as it was");
    }
    let events = schema.table("events");
    assert_eq!(
        count(&db, &format!("SELECT count(*) FROM {events}")).await,
        1
    );

    // A schema holding nothing but a future stamp gets no tables.
    let bare = TestSchema::new().await;
    db.batch_execute(&format!(
        "CREATE SCHEMA \"{0}\";
         CREATE TABLE \"{0}\".schema_version (id SMALLINT PRIMARY KEY, version BIGINT NOT NULL,
                                              migrated_at BIGINT NOT NULL);
         INSERT INTO \"{0}\".schema_version VALUES (1, 99, 0);",
        bare.name
    ))
    .await
    .unwrap();
    assert!(matches!(
        PostgresJournal::connect(&common::url(), bare.options()).await,
        Err(JournalError::UnsupportedSchema { found: 99, .. })
    ));
    let sessions_table: Option<String> = db
        .query_one("SELECT to_regclass($1)::TEXT", &[&bare.table("sessions")])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sessions_table, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_host_stops_writing_once_a_newer_build_stamps_the_schema() {
    // semantics §1.5 fail closed, applied to a host already running: every write batch re-reads
    // the stamp inside its transaction
    let schema = TestSchema::new().await;
    let j = schema.journal().await;
    j.append_one("s", 0, 0, input("a")).await.unwrap();
    let db = admin().await;
    let stamp = schema.table("schema_version");
    db.execute(
        &format!("UPDATE {stamp} SET version = $1"),
        &[&(SCHEMA_VERSION + 1)],
    )
    .await
    .unwrap();
    assert!(matches!(
        j.append_one("s", 1, 0, input("b")).await,
        Err(JournalError::UnsupportedSchema { .. })
    ));
    assert!(matches!(
        j.new_fence("fresh").await,
        Err(JournalError::UnsupportedSchema { .. })
    ));
    let sessions = schema.table("sessions");
    assert_eq!(
        count(&db, &format!("SELECT count(*) FROM {sessions}")).await,
        1,
        "the refused fence created no row"
    );
    assert_eq!(j.head("s").await.unwrap(), 1);
    db.execute(
        &format!("UPDATE {stamp} SET version = $1"),
        &[&SCHEMA_VERSION],
    )
    .await
    .unwrap();
    j.append_one("s", 1, 0, input("b")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_starting_together_migrate_once() {
    let schema = TestSchema::new().await;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let options = schema.options();
        tasks.spawn(async move { PostgresJournal::connect(&common::url(), options).await });
    }
    let mut hosts = Vec::new();
    while let Some(host) = tasks.join_next().await {
        hosts.push(host.unwrap().unwrap());
    }
    hosts[0].append_one("s", 0, 0, input("a")).await.unwrap();
    assert_eq!(hosts[3].head("s").await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hosts_racing_one_session_get_one_winner_per_seq_and_no_gap() {
    // semantics §1.4 across hosts: CAS under the session's row lock, (session, seq) key as the
    // last word
    let schema = TestSchema::new().await;
    let hosts = [
        Arc::new(schema.journal().await),
        Arc::new(schema.journal().await),
    ];
    let per_task = 15;
    let mut tasks = tokio::task::JoinSet::new();
    for (h, host) in hosts.iter().enumerate() {
        for t in 0..4 {
            let j = Arc::clone(host);
            tasks.spawn(async move {
                let mut won = Vec::new();
                while won.len() < per_task {
                    let head = j.head("race").await.unwrap();
                    match j
                        .append_one("race", head, 0, input(&format!("h{h}t{t}-{}", won.len())))
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
    }
    let mut all = Vec::new();
    while let Some(res) = tasks.join_next().await {
        all.extend(res.unwrap());
    }
    let total = 2 * 4 * per_task;
    let unique: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), total);
    assert_eq!(unique.len(), total, "a seq was won twice");
    assert_eq!(
        unique.into_iter().collect::<Vec<_>>(),
        (1..=i64::try_from(total).unwrap()).collect::<Vec<_>>(),
        "a gap in the seqs"
    );
    let from_a = hosts[0].read("race", 1, 0).await.unwrap();
    let from_b = hosts[1].read("race", 1, 0).await.unwrap();
    assert_eq!(from_a, from_b);
    verify_records(&from_a).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_host_is_fenced_after_another_host_mints() {
    // semantics §1.4 step 2 across hosts: minting is the only way to supersede a writer
    let schema = TestSchema::new().await;
    let a = schema.journal().await;
    let b = schema.journal().await;
    let fa = a.new_fence("s").await.unwrap();
    assert_eq!(fa, 1);
    a.append_one("s", 0, fa, input("from a")).await.unwrap();
    let fb = b.new_fence("s").await.unwrap();
    assert_eq!(fb, 2);
    match a.append_one("s", 1, fa, input("stale")).await {
        Err(JournalError::Fenced { fence, current, .. }) => assert_eq!((fence, current), (1, 2)),
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert_eq!(a.head("s").await.unwrap(), 1);
    b.append_one("s", 1, fb, input("from b")).await.unwrap();
    assert_eq!(a.session_info("s").await.unwrap().fence, 2);

    // Mints racing from both hosts are each unique and leave no hole.
    let (a, b) = (Arc::new(a), Arc::new(b));
    let mut tasks = tokio::task::JoinSet::new();
    for host in [&a, &b] {
        for _ in 0..10 {
            let j = Arc::clone(host);
            tasks.spawn(async move { j.new_fence("minted").await.unwrap() });
        }
    }
    let mut fences = BTreeSet::new();
    while let Some(f) = tasks.join_next().await {
        assert!(fences.insert(f.unwrap()), "a fence was minted twice");
    }
    assert_eq!(fences, (1..=20).collect());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_from_either_host_sees_every_session_exactly_once() {
    // semantics §1.8 with rows written by two hosts, ties on created_at included
    let schema = TestSchema::new().await;
    let a = schema.journal().await;
    let b = schema.journal().await;
    let mut expected = Vec::new();
    for i in 0..40i64 {
        let host = if i % 2 == 0 { &a } else { &b };
        let uid = format!("sess-{i:03}");
        host.put_session(SessionRow {
            uid: uid.clone(),
            project: "shared".into(),
            created_at: Some(Timestamp::from_unix_nanos(1_000 + i / 3)),
            ..SessionRow::default()
        })
        .await
        .unwrap();
        expected.push((1_000 + i / 3, uid));
    }
    // Sessions that exist only through their log land in the default project, not this one.
    b.append_one("log-only", 0, 0, input("x")).await.unwrap();
    expected.sort_by(|x, y| y.0.cmp(&x.0).then_with(|| x.1.cmp(&y.1)));
    let expected: Vec<String> = expected.into_iter().map(|(_, uid)| uid).collect();
    for host in [&a, &b] {
        let mut seen = Vec::new();
        let mut token = String::new();
        loop {
            let page = host
                .list_sessions(ListQuery {
                    project: "shared".into(),
                    page_size: 7,
                    page_token: token,
                    ..ListQuery::default()
                })
                .await
                .unwrap();
            seen.extend(page.sessions.into_iter().map(|s| s.row.uid));
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        assert_eq!(seen, expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refused_writes_sharing_a_batch_leave_no_trace() {
    // semantics §1.4/§1.6: a refused append creates no row, even when it shares a transaction
    // with accepted writes to other sessions
    let schema = TestSchema::new().await;
    let options = PostgresOptions {
        writers: 1,
        ..schema.options()
    };
    let j = Arc::new(
        PostgresJournal::connect(&common::url(), options)
            .await
            .unwrap(),
    );
    let mut tasks = tokio::task::JoinSet::new();
    for s in 0..64 {
        let j = Arc::clone(&j);
        tasks.spawn(async move {
            let session = format!("mixed-{s:02}");
            let result = match s % 4 {
                0 => j.append_one(&session, 0, 0, input("ok")).await.map(|_| ()),
                1 => j.append_one(&session, 3, 0, input("cas")).await.map(|_| ()),
                2 => j.new_fence(&session).await.map(|_| ()),
                _ => j
                    .append_records(AppendRequest::new(
                        &session,
                        0,
                        FenceUse::Hold(0),
                        Vec::new(),
                    ))
                    .await
                    .map(|_| ()),
            };
            (s, result)
        });
    }
    while let Some(res) = tasks.join_next().await {
        let (s, result) = res.unwrap();
        let session = format!("mixed-{s:02}");
        let info = j.session_info(&session).await;
        match s % 4 {
            0 => {
                result.unwrap();
                assert_eq!(info.unwrap().last_seq, 1);
            }
            1 => {
                assert!(matches!(
                    result,
                    Err(JournalError::Conflict {
                        expected: 3,
                        actual: 0,
                        ..
                    })
                ));
                assert!(matches!(info, Err(JournalError::SessionNotFound(_))));
            }
            2 => {
                result.unwrap();
                assert_eq!(info.unwrap().fence, 1);
            }
            _ => {
                result.unwrap();
                assert!(
                    matches!(info, Err(JournalError::SessionNotFound(_))),
                    "an empty append creates no row"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_batch_is_all_or_nothing() {
    let schema = TestSchema::new().await;
    let j = schema.journal().await;
    let records = j
        .append_records(AppendRequest::new(
            "s",
            0,
            FenceUse::Hold(0),
            vec![input("a"), input("b"), input("c")],
        ))
        .await
        .unwrap();
    assert_eq!(
        records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    verify_records(&records).unwrap();
    let mut bad = input("bad");
    bad.timestamp = Some(Timestamp {
        seconds: 0,
        nanos: 2_000_000_000,
    });
    assert!(matches!(
        j.append_records(AppendRequest::new(
            "s",
            3,
            FenceUse::Hold(0),
            vec![input("d"), bad]
        ))
        .await,
        Err(JournalError::InvalidEvent(_))
    ));
    assert!(matches!(
        j.append_records(AppendRequest::new(
            "s",
            2,
            FenceUse::Hold(0),
            vec![input("d"), input("e")]
        ))
        .await,
        Err(JournalError::Conflict { .. })
    ));
    assert_eq!(j.head("s").await.unwrap(), 3);
    assert_eq!(j.read("s", 1, 0).await.unwrap(), records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_rows_use_the_reference_layout() {
    // semantics §1.5/§1.6: events hold the proto binary of the wire Event; metadata columns
    // hold the same encodings as the SQLite layout
    let schema = TestSchema::new().await;
    let j = schema.journal().await;
    let record = j.append_one("s", 0, 4, input("hello")).await.unwrap();
    j.put_session(SessionRow {
        uid: "s".into(),
        labels: [("k".to_owned(), "v".to_owned())].into(),
        ..SessionRow::default()
    })
    .await
    .unwrap();
    let db = admin().await;
    let row = db
        .query_one(
            &format!(
                "SELECT seq, prev_hash, hash, fence, event FROM {}",
                schema.table("events")
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);
    assert_eq!(row.get::<_, String>(1), "");
    assert_eq!(row.get::<_, String>(2), record.hash);
    assert_eq!(row.get::<_, i64>(3), 4);
    let blob: Vec<u8> = row.get(4);
    assert_eq!(
        agentsessions_journal::chain::decode_event("s", 1, &blob).unwrap(),
        record.event
    );
    let row = db
        .query_one(
            &format!(
                "SELECT project, labels, annotations, compute_state, fence FROM {}",
                schema.table("sessions")
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "default");
    assert_eq!(row.get::<_, String>(1), r#"{"k":"v"}"#);
    assert_eq!(row.get::<_, String>(2), "");
    assert_eq!(row.get::<_, String>(3), "LIVE");
    assert_eq!(row.get::<_, i64>(4), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_the_server_terminates_its_connections() {
    let schema = TestSchema::new().await;
    let app = format!("as_{}", schema.name);
    let j = schema.journal_at(&common::url_named(&app)).await;
    j.append_one("s", 0, 0, input("before")).await.unwrap();
    assert_eq!(j.head("s").await.unwrap(), 1);
    let db = admin().await;
    for round in 1..=3i64 {
        let killed = count(
            &db,
            &format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = '{app}'"
            ),
        )
        .await;
        assert!(
            killed >= 2,
            "expected the journal's writer and reader backends"
        );
        // Reads retry once on a fresh connection; a write whose transaction was cut before
        // COMMIT is re-run on a fresh connection.
        assert_eq!(j.head("s").await.unwrap(), round);
        j.append_one("s", round, 0, input(&format!("after {round}")))
            .await
            .unwrap();
    }
    let records = j.read("s", 1, 0).await.unwrap();
    assert_eq!(records.len(), 4);
    verify_records(&records).unwrap();

    // Cut the writer's connection in the middle of its transaction: it waits for the row lock
    // another client holds, is terminated there, and re-runs the batch on a fresh connection.
    let mut blocker = admin().await;
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        &format!(
            "SELECT 1 FROM {} WHERE session = 's' FOR UPDATE",
            schema.table("sessions")
        ),
        &[],
    )
    .await
    .unwrap();
    let j = Arc::new(j);
    let pending = tokio::spawn({
        let j = Arc::clone(&j);
        async move { j.append_one("s", 4, 0, input("cut mid-transaction")).await }
    });
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE application_name = '{app}' AND wait_event_type = 'Lock'"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while count(&db, &waiting).await == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the append never waited for the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let killed = count(
        &db,
        &format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = '{app}' AND wait_event_type = 'Lock'"
        ),
    )
    .await;
    assert_eq!(killed, 1);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(
        !pending.is_finished(),
        "the re-run waits for the lock again"
    );
    tx.rollback().await.unwrap();
    let record = pending.await.unwrap().unwrap();
    assert_eq!(record.seq, 5);
    verify_records(&j.read("s", 1, 0).await.unwrap()).unwrap();
}

#[tokio::test]
async fn unreachable_server_is_a_clear_error() {
    let err = PostgresJournal::connect(
        "host=127.0.0.1 port=1 user=postgres dbname=test connect_timeout=2",
        PostgresOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, JournalError::Io(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("cannot connect to postgres at host=127.0.0.1 port=1"),
        "{message}"
    );
    assert!(matches!(
        PostgresJournal::connect("not a = valid = string", PostgresOptions::default()).await,
        Err(JournalError::InvalidArgument(_))
    ));
}
