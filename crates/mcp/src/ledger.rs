//! [`ToolLedger`]: the durable record of which tool calls were sent and what they returned,
//! keyed by `(session_uid, idempotency_key)`, so a re-driven call never runs twice
//! (semantics §3.7).
//!
//! A call is claimed ("sent", committed with a full fsync) before `tools/call` goes out, and its
//! outcome is stored after. A re-drive finds one of three things: nothing (run it), an outcome
//! (return it without calling), or a claim without an outcome: the host stopped between sending
//! and storing, so the call may have run and must not be sent again.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use agentsessions_api::Redactor;
use rmcp::model::CallToolResult;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::error::{McpError, Result};

/// What a finished call produced, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredOutcome {
    /// The server's answer, verbatim.
    Answered(CallToolResult),
    /// The call was sent but no answer came (timeout, the server died): the text says so.
    Unanswered(String),
}

/// What the ledger knows about a call before it is sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// First time: the claim is now durable, send the call.
    Fresh,
    /// Already finished: return this, do not call.
    Finished(StoredOutcome),
    /// Sent before an interruption, outcome unknown: do not call again.
    Interrupted,
}

/// The SQLite ledger. Cheap to clone; every statement runs on the blocking pool.
#[derive(Debug, Clone)]
pub struct ToolLedger {
    path: String,
    connection: Arc<Mutex<Connection>>,
    /// Takes the host's secrets out of an outcome before it is stored: a re-drive returns the
    /// outcome as the journal has it, and the file holds no secret (`docs/security.md`).
    redactor: Option<Arc<Redactor>>,
}

impl ToolLedger {
    /// Opens (creating when missing) the ledger at `path`; `:memory:` keeps it in memory.
    ///
    /// # Errors
    /// [`McpError::Ledger`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path_text = path.as_ref().display().to_string();
        let failed = |e: rusqlite::Error| McpError::Ledger {
            path: path_text.clone(),
            reason: e.to_string(),
        };
        let connection = if path_text == ":memory:" {
            Connection::open_in_memory().map_err(failed)?
        } else {
            Connection::open(path.as_ref()).map_err(failed)?
        };
        // FULL: a claim must be on disk before the call it guards leaves the host.
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 CREATE TABLE IF NOT EXISTS tool_calls (
                     session_uid TEXT NOT NULL,
                     idempotency_key TEXT NOT NULL,
                     tool TEXT NOT NULL,
                     outcome TEXT,
                     PRIMARY KEY (session_uid, idempotency_key)
                 );",
            )
            .map_err(failed)?;
        Ok(Self {
            path: path_text,
            connection: Arc::new(Mutex::new(connection)),
            redactor: None,
        })
    }

    /// An in-memory ledger (for a host whose journal is in memory).
    ///
    /// # Errors
    /// [`McpError::Ledger`].
    pub fn in_memory() -> Result<Self> {
        Self::open(":memory:")
    }

    /// Claims the call `(session_uid, key)` to `tool`, or reports what an earlier claim left.
    ///
    /// # Errors
    /// [`McpError::Ledger`].
    pub async fn claim(&self, session_uid: &str, key: &str, tool: &str) -> Result<Claim> {
        let (session_uid, key, tool) = (session_uid.to_owned(), key.to_owned(), tool.to_owned());
        self.run(move |connection| {
            let transaction = connection.transaction()?;
            let inserted = transaction.execute(
                "INSERT INTO tool_calls (session_uid, idempotency_key, tool) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
                params![session_uid, key, tool],
            )?;
            let claim = if inserted == 1 {
                Claim::Fresh
            } else {
                let outcome: Option<String> = transaction
                    .query_row(
                        "SELECT outcome FROM tool_calls
                         WHERE session_uid = ?1 AND idempotency_key = ?2",
                        params![session_uid, key],
                        |row| row.get(0),
                    )
                    .optional()?
                    .flatten();
                match outcome.map(|text| serde_json::from_str::<StoredOutcome>(&text)) {
                    Some(Ok(outcome)) => Claim::Finished(outcome),
                    // An unreadable outcome is treated as unknown: never re-send.
                    Some(Err(_)) | None => Claim::Interrupted,
                }
            };
            transaction.commit()?;
            Ok(claim)
        })
        .await
    }

    /// Stores every outcome without the secrets `redactor` knows.
    #[must_use]
    pub fn with_redactor(mut self, redactor: Arc<Redactor>) -> Self {
        self.redactor = Some(redactor);
        self
    }

    /// Stores the outcome of a claimed call.
    ///
    /// # Errors
    /// [`McpError::Ledger`].
    pub async fn finish(
        &self,
        session_uid: &str,
        key: &str,
        outcome: &StoredOutcome,
    ) -> Result<()> {
        let mut value = serde_json::to_value(outcome).map_err(|e| McpError::Ledger {
            path: self.path.clone(),
            reason: format!("cannot encode the outcome: {e}"),
        })?;
        if let Some(redactor) = &self.redactor {
            redactor.scrub_json(&mut value);
        }
        let text = value.to_string();
        let (session_uid, key) = (session_uid.to_owned(), key.to_owned());
        self.run(move |connection| {
            connection.execute(
                "UPDATE tool_calls SET outcome = ?3 WHERE session_uid = ?1 AND idempotency_key = ?2",
                params![session_uid, key, text],
            )?;
            Ok(())
        })
        .await
    }

    /// Withdraws a claim whose call was never sent (its server was down).
    ///
    /// # Errors
    /// [`McpError::Ledger`].
    pub async fn release(&self, session_uid: &str, key: &str) -> Result<()> {
        let (session_uid, key) = (session_uid.to_owned(), key.to_owned());
        self.run(move |connection| {
            connection.execute(
                "DELETE FROM tool_calls
                 WHERE session_uid = ?1 AND idempotency_key = ?2 AND outcome IS NULL",
                params![session_uid, key],
            )?;
            Ok(())
        })
        .await
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let connection = Arc::clone(&self.connection);
        let path = self.path.clone();
        let joined = tokio::task::spawn_blocking(move || {
            // Statements leave the connection consistent even if a holder panicked.
            let mut guard = connection.lock().unwrap_or_else(PoisonError::into_inner);
            work(&mut guard)
        })
        .await;
        match joined {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(McpError::Ledger {
                path,
                reason: e.to_string(),
            }),
            // The runtime refuses blocking work once the host is shutting down.
            Err(e) if e.is_cancelled() => Err(McpError::Ledger {
                path,
                reason: "host shutting down; resume to continue".to_owned(),
            }),
            Err(e) => Err(McpError::Ledger {
                path,
                reason: format!("ledger task failed: {e}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_claim_is_fresh_once_then_reports_what_it_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tools.db");
        let ledger = ToolLedger::open(&path).unwrap();
        assert_eq!(ledger.claim("s", "k", "t").await.unwrap(), Claim::Fresh);
        // semantics §3.7: sent without an outcome is never sent again, even after a restart
        drop(ledger);
        let reopened = ToolLedger::open(&path).unwrap();
        assert_eq!(
            reopened.claim("s", "k", "t").await.unwrap(),
            Claim::Interrupted
        );
        let outcome = StoredOutcome::Unanswered("timed out".into());
        reopened.finish("s", "k", &outcome).await.unwrap();
        assert_eq!(
            reopened.claim("s", "k", "t").await.unwrap(),
            Claim::Finished(outcome)
        );
        // Keys are per session.
        assert_eq!(
            reopened.claim("other", "k", "t").await.unwrap(),
            Claim::Fresh
        );
    }
}
