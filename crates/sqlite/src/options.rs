//! [`SqliteOptions`] and the [`Durability`] modes a journal file can be opened with.

use agentsessions_journal::rows::DEFAULT_PROJECT;

/// How a committed batch is made durable before its callers are acknowledged. Both modes give
/// an acknowledged write the same guarantee: its WAL frames have been fsync'd, so it survives
/// a process kill, an OS crash and a power loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL` on the write connection: `COMMIT` itself writes and fsyncs the WAL,
    /// and the writer starts the next batch only after that.
    Full,
    /// `COMMIT` writes the WAL frames without syncing (`synchronous=NORMAL` on the write
    /// connection), and the WAL file is then `fdatasync`'d before the batch is acknowledged — by
    /// the `journal-sync` thread while the writer already applies the next batch, or by the
    /// writer itself when no other command is waiting. One sync covers every batch committed
    /// before it. Checkpoints still sync the WAL before copying it into the database, and the
    /// database before the WAL is reused, as under `FULL`.
    ///
    /// A committed batch is visible to other connections between its `COMMIT` and its sync.
    /// Reads through this journal wait for that sync before they return, so they never hand
    /// out a record that an OS crash could still take back; a reader in another process may see
    /// it early (only an OS crash or power loss in that window loses it, and its writer was not
    /// acknowledged).
    #[default]
    Pipelined,
}

/// Options for [`SqliteJournal::open_with`](crate::SqliteJournal::open_with).
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Project for sessions created without one.
    pub default_project: String,
    /// Queue depth of the writer channel (back-pressure on appenders).
    pub queue_depth: usize,
    /// How batches are made durable.
    pub durability: Durability,
    /// Open an existing file only to read it: nothing is created, migrated or written, and
    /// every write fails (for tools that read a file they may not write). A missing file is
    /// refused, never created.
    pub read_only: bool,
    /// In [`Durability::Pipelined`], how long a committed batch of deferred appends
    /// ([`Wait::Committed`](agentsessions_journal::Wait::Committed)) may wait for a durable
    /// append to share its WAL sync before it is synced alone. Readers of those records wait up
    /// to this long more. Default 2 ms.
    pub deferred_sync_delay: std::time::Duration,
    /// How long the writer, having just committed, watches its queue for the next command
    /// (yielding its CPU between looks) before it goes to sleep. A turn's appends come tens of microseconds apart, and waking a
    /// sleeping thread costs about as much again on a virtual machine, so this is a turn's
    /// latency bought with some CPU after each commit (none on an idle journal). Zero never
    /// spins. Default 300 µs (BENCHMARKS.md, "The writer watches its queue").
    pub writer_spin: std::time::Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            default_project: DEFAULT_PROJECT.to_owned(),
            queue_depth: 4096,
            durability: Durability::default(),
            read_only: false,
            deferred_sync_delay: std::time::Duration::from_millis(2),
            writer_spin: std::time::Duration::from_micros(300),
        }
    }
}
