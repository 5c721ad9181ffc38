//! Ownership and deletion columns on Postgres (extensions §1–§3): the v2 → v3 migration and the
//! fail-closed reading of a deletion state this build does not know. The behavior shared with
//! every backend is in the journal conformance suite (`tests/conformance.rs`).
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use agentsessions_api::{
    CallerIdentity, DeletionState, Event, EventBody, EventKind, Lifecycle, LifecycleKind,
};
use agentsessions_journal::LogExt as _;
use agentsessions_journal::{Catalog as _, Log as _};
use agentsessions_journal::{ListQuery, SessionRow};
use agentsessions_postgres::SCHEMA_VERSION;
use agentsessions_testkit::fixtures::input;
use common::{TestSchema, admin};

fn alice() -> CallerIdentity {
    CallerIdentity::new("https://idp.test", "alice")
}

// A schema stamped 2 gets the ownership and deletion columns (and every later rung) in one
// migration; its rows read as unbound and active.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_schema_migrates_to_owner_and_deletion_columns() {
    let schema = TestSchema::new().await;
    {
        let j = schema.journal().await;
        j.append_one("old", 0, 0, input("a")).await.unwrap();
        j.close().await;
    }
    let db = admin().await;
    let sessions = schema.table("sessions");
    db.batch_execute(&format!(
        "ALTER TABLE {sessions} DROP COLUMN owner_issuer, DROP COLUMN owner_subject,
             DROP COLUMN deletion_state, DROP COLUMN reclaimed_at,
             DROP COLUMN usage_input_tokens, DROP COLUMN usage_output_tokens,
             DROP COLUMN usage_reasoning_tokens, DROP COLUMN usage_cached_input_tokens;
         ALTER TABLE {} DROP COLUMN committed_at;
         DROP TABLE {};
         UPDATE {} SET version = 2",
        schema.table("events"),
        schema.table("pending_approvals"),
        schema.table("schema_version")
    ))
    .await
    .unwrap();
    let j = schema.journal().await;
    let version: i64 = db
        .query_one(
            &format!("SELECT version FROM {}", schema.table("schema_version")),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION);
    let info = j.session_info("old").await.unwrap();
    assert_eq!(info.row.owner, CallerIdentity::default());
    assert_eq!(info.deletion, DeletionState::Active);
    j.put_session(SessionRow {
        uid: "new".into(),
        owner: alice(),
        ..SessionRow::default()
    })
    .await
    .unwrap();
    let page = j
        .list_sessions(ListQuery {
            owner: Some(alice()),
            ..ListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.sessions.len(), 1);
    assert_eq!(page.sessions[0].row.uid, "new");
    j.close().await;
}

// extensions §3: an unknown stored state reads as deleted, is reclaimable, and a later delete
// marker leaves it as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_deletion_state_fails_closed() {
    let schema = TestSchema::new().await;
    let j = schema.journal().await;
    j.append_one("s", 0, 0, input("a")).await.unwrap();
    admin()
        .await
        .execute(
            &format!(
                "UPDATE {} SET deletion_state = 'SHREDDED' WHERE session = 's'",
                schema.table("sessions")
            ),
            &[],
        )
        .await
        .unwrap();
    let info = j.session_info("s").await.unwrap();
    assert_eq!(
        info.deletion,
        DeletionState::Unrecognized("SHREDDED".into())
    );
    assert!(info.deletion.is_deleted());
    assert_eq!(j.pending_deletions(10).await.unwrap(), ["s"]);
    let marker = Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind: LifecycleKind::Delete,
            ..Lifecycle::default()
        }),
    );
    j.append_one("s", 1, 0, marker).await.unwrap();
    assert_eq!(
        j.session_info("s").await.unwrap().deletion,
        DeletionState::Unrecognized("SHREDDED".into())
    );
    j.mark_reclaimed("s").await.unwrap();
    assert!(j.pending_deletions(10).await.unwrap().is_empty());
    j.close().await;
}

// extensions §2: an owner-filtered listing is a range scan of the owner index in the listing's
// order, not a scan of every session filtered afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_listing_reads_the_owner_index() {
    let schema = TestSchema::new().await;
    let j = schema.journal().await;
    j.close().await;
    let db = admin().await;
    let sessions = schema.table("sessions");
    db.batch_execute(&format!(
        "INSERT INTO {sessions} (session, project, created_at, owner_issuer, owner_subject)
         SELECT 's' || i, 'p', i, 'https://idp.test', 'user' || (i % 50)
         FROM generate_series(1, 5000) AS i;
         ANALYZE {sessions};"
    ))
    .await
    .unwrap();
    let plan: Vec<String> = db
        .query(
            &format!(
                "EXPLAIN SELECT session FROM {sessions} s
                 WHERE s.owner_issuer = 'https://idp.test' AND s.owner_subject = 'user7'
                   AND s.project = 'p'
                   AND s.created_at <= 9223372036854775807
                   AND (s.created_at < 9223372036854775807 OR s.session > '')
                 ORDER BY s.created_at DESC, s.session ASC LIMIT 51"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<_, String>(0))
        .collect();
    let plan = plan.join("\n");
    assert!(plan.contains("sessions_owner_created"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}

// A schema stamped 3 gets commit times, usage totals and the pending-approvals table in one
// migration; records written before it read with no time, and new ones carry theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v3_schema_migrates_to_commit_times_usage_and_pending_approvals() {
    assert_eq!(SCHEMA_VERSION, 4);
    let schema = TestSchema::new().await;
    {
        let j = schema.journal().await;
        j.append_one("old", 0, 0, input("a")).await.unwrap();
        j.close().await;
    }
    let db = admin().await;
    db.batch_execute(&format!(
        "ALTER TABLE {} DROP COLUMN usage_input_tokens, DROP COLUMN usage_output_tokens,
             DROP COLUMN usage_reasoning_tokens, DROP COLUMN usage_cached_input_tokens;
         ALTER TABLE {} DROP COLUMN committed_at;
         DROP TABLE {};
         UPDATE {} SET version = 3",
        schema.table("sessions"),
        schema.table("events"),
        schema.table("pending_approvals"),
        schema.table("schema_version")
    ))
    .await
    .unwrap();
    let j = schema.journal().await;
    let old = j.read("old", 1, 0).await.unwrap();
    assert_eq!(old[0].committed_at, None);
    let new = j.append_one("old", 1, 0, input("b")).await.unwrap();
    assert!(new.committed_at.is_some());
    assert_eq!(
        j.read("old", 2, 2).await.unwrap()[0].committed_at,
        new.committed_at
    );
    assert!(j.session_info("old").await.unwrap().usage.is_empty());
    j.close().await;
}
