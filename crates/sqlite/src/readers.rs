//! The pool of read connections ([`Readers`]): all kept open, leased one per read, and (in
//! [`Durability::Pipelined`](crate::Durability::Pipelined)) held back until what they read is
//! durable.
//!
//! Reads of a bounded size (a session row, a head, a window of at most [`QUICK_ROWS`] records)
//! run on the calling tokio worker and wait for durability asynchronously: such a read takes
//! tens of microseconds, less than handing it to the blocking pool and back (two thread
//! wake-ups, the largest cost of a turn on a small machine). Anything larger runs on the
//! blocking pool, so a worker is never held for long.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentsessions_journal::{JournalError, Result};
use rusqlite::Connection;

use crate::schema;
use crate::writer::Watermark;

/// Read connections, all kept open; a read waits for a free one rather than opening another
/// (opening one parses the schema and prepares every statement again, which under many
/// concurrent sessions cost more than the reads themselves).
pub(crate) const READ_POOL: usize = 4;

/// The most records a read decodes on the calling worker before it hands the rest of its range
/// to the blocking pool: enough for an operation's tail read (the records of the last turn or
/// two), few enough to stay well under a millisecond.
pub(crate) const QUICK_ROWS: usize = 64;

/// A journal file's read connections, [`READ_POOL`] of them, leased one per read.
#[derive(Debug)]
pub(crate) struct Readers {
    path: PathBuf,
    read_only: bool,
    connections: Arc<Mutex<Vec<Connection>>>,
    /// One permit per connection in `connections`.
    permits: Arc<tokio::sync::Semaphore>,
    /// What a read waits on until what it saw is durable: the writer's, in
    /// [`Durability::Pipelined`]; `None` in [`Durability::Full`], where the COMMIT synced.
    ///
    /// [`Durability::Pipelined`]: crate::Durability::Pipelined
    /// [`Durability::Full`]: crate::Durability::Full
    watermark: Option<Arc<Watermark>>,
}

impl Readers {
    /// Opens the pool's connections to the file at `path`.
    pub(crate) fn open(
        path: &Path,
        read_only: bool,
        watermark: Option<Arc<Watermark>>,
    ) -> Result<Self> {
        let connections = (0..READ_POOL)
            .map(|_| open_reader(path, read_only))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            path: path.to_path_buf(),
            read_only,
            connections: Arc::new(Mutex::new(connections)),
            permits: Arc::new(tokio::sync::Semaphore::new(READ_POOL)),
            watermark,
        })
    }

    /// Runs `f` on a pooled read connection on the blocking pool. In
    /// [`Durability::Pipelined`](crate::Durability::Pipelined) the result is returned only once
    /// everything `f` could have seen is durable.
    pub(crate) async fn with_reader<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let pool = Arc::clone(&self.connections);
        let path = self.path.clone();
        let read_only = self.read_only;
        let watermark = self.watermark.clone();
        let permit = Arc::clone(&self.permits)
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

    /// Runs `f`, which must be quick (bounded work; see the module doc), on a pooled read
    /// connection on this task's thread, and returns once everything it could have seen is
    /// durable. When every connection is leased it waits for one on the blocking pool instead,
    /// as [`Readers::with_reader`] does.
    pub(crate) async fn with_quick_reader<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            return self.with_reader(f).await;
        };
        let pooled = self
            .connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        let conn = match pooled {
            Some(c) => c,
            None => open_reader(&self.path, self.read_only)?,
        };
        let out = f(&conn);
        // The durability target is what had begun committing by the end of the query.
        let durable = self.watermark.as_ref().map(|watermark| watermark.durable());
        self.connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(conn);
        drop(permit);
        let out = out?;
        if let Some(durable) = durable {
            durable.await?;
        }
        Ok(out)
    }

    /// The connections in the pool and the permits free: both [`READ_POOL`] when no read is
    /// running.
    #[cfg(test)]
    pub(crate) fn idle(&self) -> (usize, usize) {
        let pooled = self
            .connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        (pooled, self.permits.available_permits())
    }
}

fn open_reader(path: &Path, read_only: bool) -> Result<Connection> {
    let conn = schema::open_connection(path, !read_only)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}
