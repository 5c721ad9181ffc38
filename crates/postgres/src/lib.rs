//! The agentsessions journal on PostgreSQL, for hosts that share one journal.
//!
//! [`PostgresJournal`] implements [`agentsessions_journal::Journal`] with the memory backend's
//! semantics (semantics §1): CAS append plus fence, the hash chain, the metadata row, the
//! compute-state projection moved in the append's transaction, keyset listing and the harness
//! registry. Any number of instances may share one database; the database, not a process,
//! serializes the writers of a session, so two hosts appending to one session get exactly one
//! winner per seq and a fence minted on one host refuses stale writers on all of them.
//!
//! ```text
//!  host A ─┐ appends ─▶ writer tasks ─▶ BEGIN · lock rows · CAS/fence/chain · insert · COMMIT ─┐
//!  host B ─┘ (channel, group commit)                                                         ├▶ Postgres
//!            reads ─▶ pool of read connections ──────────────────────────────────────────────┘
//! ```
//!
//! Module map:
//! - `journal`: [`PostgresJournal`], the trait implementation and the registry transactions.
//! - `approvals`: the pending-approvals projection written in each batch, and its listing.
//! - `writer`: the writer tasks, batching appends from many sessions into one transaction.
//! - `schema`: the tables (the SQLite layout of semantics §1.5 in a configurable Postgres
//!   schema), the version stamp and the fail-closed migration.
//! - `connection`: connecting, prepared statements, the read pool and reconnection.
//! - `codec`: reading rows into the stored forms the journal crate decodes for every durable
//!   backend (`agentsessions_journal::stored`).
//! - `failure`: how Postgres errors map onto [`JournalError`](agentsessions_journal::JournalError).
//! - `options`: [`PostgresOptions`].
//! - `listener`: commits of other hosts, heard through `LISTEN`/`NOTIFY` and published to the
//!   journal's followers ([`Log::follow`](agentsessions_journal::Log::follow)).
//! - `tasks`: the writer tasks and connection drivers each journal owns and awaits on close.
//!
//! What is not Postgres (the journal rules, row encodings, the writer request and its ack)
//! comes from `agentsessions_journal` (`rules`, `stored`, `writer_queue`); this crate holds the
//! SQL dialect and the I/O.
//!
//! Connections are plain TCP (`NoTls`); TLS to a remote database is a follow-up.

mod approvals;
mod codec;
mod connection;
mod failure;
mod journal;
mod listener;
mod options;
mod schema;
mod tasks;
mod writer;

pub use journal::PostgresJournal;
pub use options::PostgresOptions;
pub use schema::SCHEMA_VERSION;
