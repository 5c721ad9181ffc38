//! The neutral agentsessions conformance suite (hashing-and-conformance (d)).
//!
//! Each check in [`checks`] takes a [`Transport`] that decides where the harness under test
//! runs; [`conformance_suite!`] instantiates every check as a test for one transport, so the same
//! checks run in process and over `Harness.Connect`. Checks use the real persistent SQLite journal,
//! the controller, the reference harnesses and the offline and HTTP model providers; their
//! fixtures are in [`fixtures`].
//!
//! Module map:
//! - [`checks`] — the checks and the [`conformance_suite!`] macro.
//! - [`fixtures`] — store, truncation, tool harnesses, idempotent executor, counting endpoint.
//! - [`transport`] — [`Transport`]: [`InProcess`], [`Wire`] and [`WireTls`] (mutual TLS).
//! - [`tasks`] — [`tasks::FixtureTasks`], the owner of every task a fixture starts.
#![warn(missing_docs)]

pub mod checks;
pub mod fixtures;
pub mod tasks;
pub mod transport;

pub use transport::{InProcess, MtlsLink, Transport, Wire, WireTls};
