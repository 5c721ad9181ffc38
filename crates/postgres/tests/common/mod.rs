//! Test databases: every test gets its own, freshly named Postgres schema, dropped again when
//! its guard goes out of scope. The server is the one CI starts on 127.0.0.1:5432 (override with
//! `AGENTSESSIONS_TEST_POSTGRES`); when it is unreachable the tests fail, they never skip.
#![allow(dead_code, clippy::unwrap_used, clippy::missing_panics_doc)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentsessions_journal::Journal;
use agentsessions_postgres::{PostgresJournal, PostgresOptions};

/// Environment variable naming the test server's connection string.
pub(crate) const URL_ENV: &str = "AGENTSESSIONS_TEST_POSTGRES";

/// The test server's connection string.
pub(crate) fn url() -> String {
    std::env::var(URL_ENV)
        .unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=test".to_owned())
}

/// `url()` with an `application_name`, so a test can find its own backends.
pub(crate) fn url_named(application: &str) -> String {
    let base = url();
    if base.starts_with("postgres://") || base.starts_with("postgresql://") {
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}application_name={application}")
    } else {
        format!("{base} application_name={application}")
    }
}

/// Opens a plain client for inspecting and tampering with a test schema.
pub(crate) async fn admin() -> tokio_postgres::Client {
    let url = url();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not reachable at `{url}` ({e}). These tests need a running server: \
                 start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main \
                 start`, or point {URL_ENV} at one"
            )
        });
    tokio::spawn(connection);
    client
}

/// A uniquely named schema that is dropped when the guard is.
#[derive(Debug)]
pub(crate) struct TestSchema {
    pub(crate) name: String,
}

impl TestSchema {
    pub(crate) async fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "t_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        admin()
            .await
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
            .await
            .unwrap();
        Self { name }
    }

    pub(crate) fn options(&self) -> PostgresOptions {
        PostgresOptions {
            schema: self.name.clone(),
            ..PostgresOptions::default()
        }
    }

    /// A journal ("host") on this schema.
    pub(crate) async fn journal(&self) -> PostgresJournal {
        self.journal_at(&url()).await
    }

    pub(crate) async fn journal_at(&self, url: &str) -> PostgresJournal {
        PostgresJournal::connect(url, self.options())
            .await
            .unwrap_or_else(|e| panic!("connecting the journal to `{url}` failed: {e}"))
    }

    /// `schema.table`, quoted.
    pub(crate) fn table(&self, table: &str) -> String {
        format!("\"{}\".{table}", self.name)
    }
}

impl Drop for TestSchema {
    /// `Drop` cannot await, and blocking on the test's own runtime would stall it, so the
    /// schema is dropped from a short-lived thread with a runtime of its own.
    fn drop(&mut self) {
        let statement = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name);
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let url = url();
                if let Ok((client, connection)) =
                    tokio_postgres::connect(&url, tokio_postgres::NoTls).await
                {
                    let driver = tokio::spawn(connection);
                    drop(client.batch_execute(&statement).await);
                    drop(client);
                    drop(driver.await);
                }
            });
        });
        drop(cleanup.join());
    }
}

/// The single BIGINT `sql` selects.
pub(crate) async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// A fresh journal on a fresh schema, for the conformance suite.
pub(crate) async fn fresh() -> (Arc<dyn Journal>, TestSchema) {
    let schema = TestSchema::new().await;
    let journal = schema.journal().await;
    (Arc::new(journal), schema)
}
