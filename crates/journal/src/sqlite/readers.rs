//! The pool of read connections: all kept open, leased one per read on the blocking pool, and
//! (in [`Durability::Pipelined`]) held back until what they read is durable.

use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;

use super::{Durability, SqliteJournal, schema};
use crate::error::{JournalError, Result};

/// Read connections, all kept open; a read waits for a free one rather than opening another
/// (opening one parses the schema and prepares every statement again, which under many
/// concurrent sessions cost more than the reads themselves).
pub(super) const READ_POOL: usize = 4;

impl SqliteJournal {
    /// Runs `f` on a pooled read connection on the blocking pool. In
    /// [`Durability::Pipelined`] the result is returned only once everything `f` could have
    /// seen is durable.
    pub(super) async fn with_reader<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let pool = Arc::clone(&self.readers);
        let path = self.path.clone();
        let read_only = self.read_only;
        let watermark =
            (self.durability == Durability::Pipelined).then(|| Arc::clone(&self.watermark));
        let permit = Arc::clone(&self.read_permits)
            .acquire_owned()
            .await
            .map_err(|_| JournalError::Closed)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let pooled = pool
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop();
            // Holding a permit, a connection is free unless one was lost with a panicking
            // read; that one is replaced.
            let conn = match pooled {
                Some(c) => c,
                None => open_reader(&path, read_only)?,
            };
            let out = f(&conn);
            pool.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(conn);
            let out = out?;
            if let Some(watermark) = watermark {
                watermark.wait_durable()?;
            }
            Ok(out)
        })
        .await
        .map_err(|e| JournalError::InvalidArgument(format!("reader task failed: {e}")))?
    }
}

pub(super) fn open_reader(path: &Path, read_only: bool) -> Result<Connection> {
    let conn = schema::open_connection(path, !read_only)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}
