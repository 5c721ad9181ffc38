//! The agentsessions v0.3.0 SPI in Rust: the domain types that the journal stores and the wire
//! carries, the traits hosts and backends implement, the errors they share, and the two built-in
//! authorizers.
//!
//! This crate does no I/O and knows nothing of protobuf or tokio. Asynchronous trait methods are
//! plain futures; cancellation is dropping the future (the seed's `context.Context`).
//!
//! Module map:
//! - [`content`]: messages, parts, tool calls/results, model requests and responses, approvals.
//! - [`event`]: [`Event`], [`EventKind`], the typed [`EventBody`], lifecycle and execution start.
//! - [`session`]: [`Session`] and its state axes, snapshots, compute refs, caller identity.
#![warn(missing_docs)]

pub mod content;
pub mod event;
pub mod session;

pub use content::*;
pub use event::*;
pub use session::*;
