//! The SQLite journal, the default backend: bundled SQLite, WAL, the reference table layout
//! (semantics §1.5), one writer thread with group commit, and a small pool of read connections.
//! Writes go to the `journal-writer` thread; reads of a bounded size run on the calling tokio
//! worker, larger ones on `spawn_blocking` (`readers`). An append returns only once its batch is durable; [`Durability`] says how.

mod codec;
mod journal;
mod options;
mod prefix;
mod readers;
mod schema;
mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentsessions_api::Event;
use rusqlite::{Connection, params};
use tokio::sync::mpsc;

pub use self::options::{Durability, SqliteOptions};
use self::readers::{READ_POOL, open_reader};
pub use self::schema::{SCHEMA_VERSION, schema_version_of};
use self::writer::{Command, Syncer, Watermark, Writer};
use crate::chain::{ChainFault, ChainSummary, ChainVerifier, RawRecord};
use crate::error::{JournalError, Result};
use crate::follow::{CommitFeed, HeadFollow};
use crate::record::LogRecord;
use crate::writer_queue::{self, Ack};

/// Rows [`SqliteJournal::verify_session`] reads ahead of the hashing.
const VERIFY_PART: usize = 4096;

/// WAL pages after which a commit checkpoints the WAL into the database (SQLite's default is
/// 1,000). Each checkpoint costs two fsyncs and stalls the writer; with many sessions appending,
/// the same index and `sessions` pages recur in the WAL, so a longer WAL copies fewer pages per
/// append. 10,000 pages keep the WAL under ~40 MiB; much longer made appends slower again.
const WAL_AUTOCHECKPOINT_PAGES: i64 = 10_000;

/// A journal in one SQLite file. Cheap to share behind an `Arc`; dropping the last handle stops
/// the writer thread after it has committed everything queued.
#[derive(Debug)]
pub struct SqliteJournal {
    path: PathBuf,
    writer: mpsc::Sender<Command>,
    readers: Arc<Mutex<Vec<Connection>>>,
    /// One permit per connection in `readers`.
    read_permits: Arc<tokio::sync::Semaphore>,
    default_project: String,
    durability: Durability,
    watermark: Arc<Watermark>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    read_only: bool,
    /// Where appends announce their commits to followers.
    feed: Arc<CommitFeed>,
}

impl Drop for SqliteJournal {
    /// Closes the writer channel and waits for the threads to commit and acknowledge what is
    /// queued, so a file reopened right after the drop sees every acknowledged write.
    fn drop(&mut self) {
        let (closed, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.writer, closed));
        let handle = self
            .writer_thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            // The writer only exits by draining its queue; a panic there has already failed
            // every pending caller, so there is nothing more to report here.
            let _ = handle.join();
        }
    }
}

impl SqliteJournal {
    /// Opens (creating if needed) the journal at `path` with default options.
    ///
    /// # Errors
    /// [`JournalError::UnsupportedSchema`] for a file stamped by a newer build (nothing is
    /// written), storage and I/O failures.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the journal at `path`.
    ///
    /// # Errors
    /// As [`SqliteJournal::open`].
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if path.as_os_str().is_empty() || path == Path::new(":memory:") {
            return Err(JournalError::InvalidArgument(
                "the SQLite journal needs a file path; use the memory journal for in-memory use"
                    .to_owned(),
            ));
        }
        let mut conn = schema::open_connection(&path, !options.read_only)?;
        let wal = if options.read_only {
            None
        } else {
            schema::prepare_writer(&mut conn, agentsessions_api::Timestamp::now().unix_nanos())?;
            conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)?;
            match options.durability {
                Durability::Pipelined => open_wal(&conn)?,
                Durability::Full => None,
            }
        };
        let durability = if wal.is_some() {
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            Durability::Pipelined
        } else {
            Durability::Full
        };
        let readers = (0..READ_POOL)
            .map(|_| open_reader(&path, options.read_only))
            .collect::<Result<Vec<_>>>()?;
        let watermark = Arc::new(Watermark::default());
        let syncer = match wal {
            Some(wal) => Syncer::spawn(wal, Arc::clone(&watermark), options.deferred_sync_delay)?,
            None => Syncer::InCommit,
        };
        // Bounded: when the disk falls behind, appenders wait for room (back-pressure) rather
        // than queueing without limit; the default depth is several full batches, so the writer
        // never idles while callers are waiting.
        let (tx, rx) = mpsc::channel(options.queue_depth.max(1));
        let writer = Writer::new(
            conn,
            options.default_project.clone(),
            Arc::clone(&watermark),
            syncer,
            options.writer_spin,
        );
        let handle = std::thread::Builder::new()
            .name("journal-writer".to_owned())
            .spawn(move || writer.run(rx))?;
        Ok(Self {
            path,
            writer: tx,
            readers: Arc::new(Mutex::new(readers)),
            read_permits: Arc::new(tokio::sync::Semaphore::new(READ_POOL)),
            default_project: options.default_project,
            durability,
            watermark,
            writer_thread: Mutex::new(Some(handle)),
            read_only: options.read_only,
            feed: CommitFeed::new(),
        })
    }

    /// How this journal makes appends durable: the mode asked for, or [`Durability::Full`] when
    /// the file has no WAL to sync (an in-memory URI).
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// How many times this journal has fdatasync'd its WAL ([`Durability::Pipelined`]; under
    /// [`Durability::Full`] the COMMITs sync and this stays 0): the durable waits its appends
    /// cost, for tests and benchmarks.
    pub fn wal_syncs(&self) -> u64 {
        self.watermark.syncs()
    }

    /// How many committed batches the writer has handed to its `journal-sync` thread rather than
    /// syncing them itself: the thread hand-offs durability costs, for tests and benchmarks.
    pub fn wal_sync_handoffs(&self) -> u64 {
        self.watermark.handoffs()
    }

    /// How many times the writer thread has gone to sleep on an empty queue (rather than
    /// taking a command that came within its spin), for tests and benchmarks.
    pub fn writer_sleeps(&self) -> u64 {
        self.watermark.writer_sleeps()
    }

    /// The file this journal writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An append with the writer's `fence`, or minting the next one (`None`); `durable`: wait
    /// for the batch's WAL sync, not only its commit.
    pub(super) async fn append_with(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: Option<i64>,
        events: Vec<Event>,
        durable: bool,
    ) -> Result<Vec<LogRecord>> {
        let records = writer_queue::append(
            &self.writer,
            Command::Append,
            session,
            expected_last_seq,
            fence,
            events,
            durable,
        )
        .await?;
        // Committed and visible to the read connections, which hand records out only once
        // durable; so followers may be woken now even for a deferred append.
        self.feed.publish_records(session, &records);
        Ok(records)
    }

    pub(super) fn follow_head(&self, session: &str) -> HeadFollow {
        self.feed.follow(session)
    }

    pub(super) async fn send<T>(&self, make: impl FnOnce(Ack<T>) -> Command) -> Result<T> {
        writer_queue::request(&self.writer, make).await
    }

    /// Raw stored rows of a session's chain in seq order (a fork child's prefix from its
    /// ancestors' rows), for verification without decoding to domain types.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn read_raw(&self, session: &str) -> Result<Vec<RawRecord>> {
        let session = session.to_owned();
        self.with_reader(move |conn| {
            let mut stmt = conn.prepare_cached(prefix::RAW_RANGE)?;
            let mut out = Vec::new();
            for run in prefix::segments(conn, &session)? {
                let rows = stmt.query_map(params![run.session, run.lo, run.hi], raw_record)?;
                for row in rows {
                    out.push(row?);
                }
            }
            Ok(out)
        })
        .await
    }

    /// Reads a session's stored rows and verifies its hash chain as [`verify_raw`] does, but
    /// while reading: this thread steps through the rows while the others hash the part read
    /// before, and the chain is never held in memory whole. A fork child's chain is verified
    /// whole, from its ancestors' rows through its own. The outer result is whether the rows
    /// could be read, the inner one the chain's verdict.
    ///
    /// [`verify_raw`]: crate::verify_raw
    ///
    /// # Errors
    /// Storage failures.
    pub async fn verify_session(
        &self,
        session: &str,
    ) -> Result<std::result::Result<ChainSummary, ChainFault>> {
        let session = session.to_owned();
        self.with_reader(move |conn| {
            let runs = prefix::segments(conn, &session)?;
            let mut stmt = conn.prepare_cached(prefix::RAW_RANGE)?;
            std::thread::scope(|scope| {
                // One part waits while the next is read: enough to overlap reading and hashing,
                // and the chain in memory stays at most three parts.
                let (to_verifier, parts) = std::sync::mpsc::sync_channel::<Vec<RawRecord>>(1);
                let verifier = scope.spawn(move || {
                    let mut verifier = ChainVerifier::new();
                    // At the first fault this returns, and the reader below stops.
                    for part in parts {
                        verifier.push(&part)?;
                    }
                    Ok(verifier.finish())
                });
                let read = (|| -> Result<()> {
                    let mut part = Vec::with_capacity(VERIFY_PART);
                    for run in &runs {
                        let mut rows = stmt.query(params![run.session, run.lo, run.hi])?;
                        while let Some(row) = rows.next()? {
                            part.push(raw_record(row)?);
                            if part.len() == VERIFY_PART {
                                let full =
                                    std::mem::replace(&mut part, Vec::with_capacity(VERIFY_PART));
                                if to_verifier.send(full).is_err() {
                                    return Ok(());
                                }
                            }
                        }
                    }
                    if !part.is_empty() {
                        // A verifier that already stopped has its verdict.
                        drop(to_verifier.send(part));
                    }
                    Ok(())
                })();
                drop(to_verifier);
                let verdict = verifier
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                read.map(|()| verdict)
            })
        })
        .await
    }

    /// Every session uid that has events of its own or a shared prefix, sorted.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn sessions_with_events(&self) -> Result<Vec<String>> {
        self.with_reader(|conn| {
            let mut stmt = conn.prepare(
                "SELECT session FROM events UNION SELECT session FROM session_prefix
                 ORDER BY session",
            )?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }
}

/// Opens the write connection's WAL file for `journal-sync`, or `None` when the database has no
/// WAL (an in-memory URI). The file exists from the connection's first read on, and SQLite
/// neither deletes nor replaces it while any connection (this one included) has the database
/// open, so the handle stays on the live WAL. SQLite keeps no locks on the WAL file itself (they
/// are on the database and `-shm` files), so this extra descriptor cannot disturb them.
fn open_wal(conn: &Connection) -> Result<Option<File>> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    let db = conn.path().unwrap_or_default();
    if !mode.eq_ignore_ascii_case("wal") || db.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("{db}-wal"))?,
    ))
}

fn raw_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRecord> {
    Ok(RawRecord {
        seq: row.get(0)?,
        prev_hash: row.get(1)?,
        hash: row.get(2)?,
        blob: row.get(3)?,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::{Catalog as _, Journal, Log as _};

    fn fresh() -> (Arc<dyn Journal>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let journal = super::SqliteJournal::open(dir.path().join("journal.db")).unwrap();
        (Arc::new(journal), dir)
    }

    crate::journal_conformance!(fresh());

    // Many more concurrent reads than pooled connections: they wait their turn for one, all
    // complete, and the pool is whole afterwards.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn reads_beyond_the_pool_wait_for_a_connection() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(super::SqliteJournal::open(dir.path().join("journal.db")).unwrap());
        journal.new_fence("s").await.unwrap();
        let mut reads = Vec::new();
        for _ in 0..(super::READ_POOL * 16) {
            let journal = Arc::clone(&journal);
            reads.push(tokio::spawn(async move {
                journal.session_info("s").await.map(|info| info.fence)
            }));
        }
        for read in reads {
            assert_eq!(read.await.unwrap().unwrap(), 1);
        }
        let pooled = journal
            .readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        assert_eq!(pooled, super::READ_POOL);
        assert_eq!(journal.read_permits.available_permits(), super::READ_POOL);
    }

    /// The same suite with `synchronous=FULL`.
    mod full {
        use std::sync::Arc;

        use crate::Journal;
        use crate::sqlite::{Durability, SqliteJournal, SqliteOptions};

        fn fresh() -> (Arc<dyn Journal>, tempfile::TempDir) {
            let dir = tempfile::tempdir().unwrap();
            let options = SqliteOptions {
                durability: Durability::Full,
                ..SqliteOptions::default()
            };
            let journal = SqliteJournal::open_with(dir.path().join("journal.db"), options).unwrap();
            assert_eq!(journal.durability(), Durability::Full);
            (Arc::new(journal), dir)
        }

        crate::journal_conformance!(fresh());
    }

    // A reader's open: a missing file is refused and nothing is created in its place.
    #[test]
    fn a_read_only_open_never_creates_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.db");
        let options = super::SqliteOptions {
            read_only: true,
            ..super::SqliteOptions::default()
        };
        super::SqliteJournal::open_with(&path, options).unwrap_err();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
