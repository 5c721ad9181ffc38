//! The agentsessions journal: an append-only, hash-chained event log per session with the
//! session metadata and harness registry stored beside it.
//!
//! One writer per session is enforced by the journal itself (CAS on the head plus a fence the
//! journal mints), not by the callers' good behavior; see [`Journal`].
//!
//! Module map:
//! - [`journal`]: the [`Log`] and [`Catalog`] traits, which [`Journal`] is both of.
//! - [`append`]: [`AppendRequest`] and [`Appended`], the one way to append ([`Log::append`]).
//! - [`rows`]: what it stores and answers besides records (session and harness rows, the
//!   listing's query and page) and the defaults they share.
//! - [`record`]: [`LogRecord`], the envelope around each event.
//! - [`chain`]: preparing events for the chain, the chain verifier ([`verify_records`],
//!   [`verify_raw`]) that tells tampering apart from undecodable records.
//! - [`lineage`]: shared-prefix fork children, and how their chains are found in their
//!   ancestors' rows.
//! - [`extension`]: [`extend`], the one append rule every backend runs before it stores.
//! - [`memory`]: [`MemoryJournal`], the reference semantics.
//! - [`approvals`]: the pending-approvals projection every backend keeps in its append commit.
//! - [`usage`]: token usage summed per session, kept the same way.
//! - [`follow`], [`record_follower`]: following a session's commits as they happen
//!   ([`Log::follow`]), and its records with them ([`RecordFollower`]).
//! - [`export`]: import and export of journals in the reference JSON format.
//! - [`audit`]: the language-neutral audit bundle an outside verifier checks.
//! - [`page_token`], [`projection`], [`rules`]: listing tokens, the compute-state projection and
//!   the id formats and checks every backend shares.
//! - [`columns`], [`stored`]: the durable backends' column encodings and rows as stored.
//! - [`writer_queue`]: how callers hand commands to a backend's writer and wait for its ack.
//!
//! The durable backends are crates of their own that build on what this one shares:
//! `agentsessions-sqlite` (the default, one file) and `agentsessions-postgres` (one database
//! shared by many hosts). The behavioral suite every backend runs, and the fixtures backend tests
//! share, are in `agentsessions-testkit`.
#![warn(missing_docs)]

pub mod append;
pub mod approvals;
pub mod audit;
pub mod chain;
pub mod columns;
pub mod error;
pub mod export;
pub mod extension;
pub mod follow;
pub mod journal;
pub mod lineage;
pub mod memory;
pub mod page_token;
pub mod projection;
pub mod record;
pub mod record_follower;
pub mod rows;
pub mod rules;
pub mod stored;
pub mod usage;
pub mod writer_queue;

pub use append::{AppendRequest, Appended, Wait};
pub use approvals::{ApprovalPage, ApprovalsQuery, PendingApproval};
pub use chain::{
    ChainFault, ChainSummary, ChainVerifier, TamperReason, verify_raw, verify_records,
};
pub use error::{JournalError, Result};
pub use extension::{Extension, FenceUse, LogHead, extend};
pub use follow::{CommitFeed, HeadFollow};
pub use journal::{Catalog, Journal, Log, LogExt};
pub use memory::MemoryJournal;
pub use record::LogRecord;
pub use record_follower::RecordFollower;
pub use rows::{
    HarnessRow, HarnessState, ListQuery, RegisterOutcome, SessionInfo, SessionPage, SessionRow,
};
pub use usage::UsageTotals;
