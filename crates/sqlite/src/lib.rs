//! The agentsessions journal in one SQLite file, the default backend: bundled SQLite, WAL, the
//! reference table layout (semantics §1.5), one writer thread with group commit, and a small
//! pool of read connections.
//!
//! [`SqliteJournal`] implements [`agentsessions_journal::Journal`] with the memory backend's
//! semantics (semantics §1). Writes go to the `journal-writer` thread; reads of a bounded size
//! run on the calling tokio worker, larger ones on `spawn_blocking` (`readers`). An append
//! returns only once its batch is durable; [`Durability`] says how.
//!
//! Module map:
//! - `journal`: [`SqliteJournal`], opening the file, the trait implementation, raw reads and
//!   verification while reading.
//! - `options`: [`SqliteOptions`] and [`Durability`].
//! - `writer`: the `journal-writer` thread: the batch loop, the fsync pipeline (`sync`), the
//!   acks (`outcome`) and the SQL it runs (`statements`).
//! - `readers`: the pool of read connections and the wait for durability.
//! - `schema`: the tables, the version stamp ([`SCHEMA_VERSION`]) and the fail-closed migration.
//! - `prefix`: shared-prefix fork children in the file (`session_prefix` links).
//! - `codec`: reading rows into the stored forms the journal crate decodes for every durable
//!   backend (`agentsessions_journal::stored`).
//!
//! What is not SQLite (the journal rules, row encodings, the writer request and its ack) comes
//! from `agentsessions_journal` (`rules`, `stored`, `writer_queue`), as for the Postgres
//! backend; this crate holds the SQL dialect and the I/O.

mod codec;
mod journal;
mod options;
mod prefix;
mod readers;
mod schema;
mod writer;

pub use journal::SqliteJournal;
pub use options::{Durability, SqliteOptions};
pub use schema::{SCHEMA_VERSION, schema_version_of};
