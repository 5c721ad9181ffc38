//! Fuzzing on stable Rust (outside bytes never crash the host): property-based targets, one test
//! file per decoder that takes outside bytes, in `tests/`. The rule every target checks: an error,
//! never a panic; bounded memory; and where a value can be written back, an exact round-trip.
//!
//! Inputs come from two generators: arbitrary bytes or text, and mutations (byte flips,
//! insertions, deletions, truncations, splices) of the seeds in `corpus/<target>/`, which hold
//! valid inputs and every input that once found a bug. A short run is the default (`cargo test
//! -p agentsessions-fuzz`, about a minute and a half on two cores, most of it the HTTP MCP
//! target waiting out the hub's timeouts); a long run sets
//! [`CASES_VARIABLE`]:
//!
//! ```text
//! AGENTSESSIONS_FUZZ_CASES=50000 cargo test --release -p agentsessions-fuzz
//! ```
//!
//! Module map:
//! - [`cases`]: how many cases a run tries, and the proptest configuration.
//! - [`corpus`]: the seeds of a target.
//! - [`mutate`]: the mutation strategy over seeds.
//! - [`oracle`]: the independent RFC 8785 implementation, run as a process.
//! - [`run`]: running a target, and the tally of inputs tried that RELIABILITY.md quotes.
#![warn(missing_docs)]

pub mod cases;
pub mod corpus;
pub mod mutate;
pub mod oracle;
pub mod run;

pub use cases::{CASES_VARIABLE, config, config_scaled};
pub use corpus::Corpus;
pub use mutate::{bytes_or_mutation, text_or_mutation};
pub use run::run;
