//! What the tests of every journal backend share: the behavioral suite each backend runs
//! ([`conformance`], instantiated with [`journal_conformance!`]), the events and steps its cases
//! and the backends' own tests and benchmarks build on ([`fixtures`]), and [`Instrumented`], a
//! journal wrapper that counts the reads made of it.
//!
//! A dev-dependency of the crates that test against a journal: the backends (memory in
//! `agentsessions-journal`, `agentsessions-sqlite`, `agentsessions-postgres`) and the crates
//! above them. It depends only on `agentsessions-journal` and the SPI types.
#![warn(missing_docs)]

pub mod conformance;
pub mod fixtures;
mod instrumented;

pub use instrumented::Instrumented;
