//! The agentsessions v0.3.0 SPI in Rust: the domain types that the journal stores and the wire
//! carries, the traits hosts and backends implement, the errors they share, the model policy and
//! the two built-in authorizers.
//!
//! This crate does no I/O and knows nothing of protobuf or tokio. Asynchronous trait methods are
//! plain futures (`async_trait`, so the traits stay usable as `dyn`); cancellation is dropping the
//! future (the v0.3.0 API's `context.Context`).
//!
//! Module map:
//! - [`catalog`]: [`ToolCatalog`] and [`OfferedTool`], the tools a host offers its harnesses.
//! - [`content`]: messages, parts, tool calls/results, model requests and responses, approvals.
//! - [`event`]: [`Event`], [`EventKind`], the typed [`EventBody`], lifecycle and execution start.
//! - [`session`]: [`Session`] and its state axes, snapshots, compute refs, caller identity.
//! - [`harness`]: the Bring-Your-Own-Harness SPI: [`Harness`], [`EventSink`], [`Start`],
//!   [`Descriptor`], [`Capabilities`], [`IdentityContext`] and [`TokenMinter`].
//! - [`runtime`]: the compute SPI: [`Runtime`], [`InstanceRestorer`], [`Incarnation`],
//!   [`SessionSpec`], [`SnapshotKind`], [`ForkOpts`].
//! - [`authz`]: [`Action`], [`AuthorizationRequest`], the [`Authorizer`] trait,
//!   [`OwnerAuthorizer`] and [`OwnerAllowlistAuthorizer`].
//! - [`policy`]: [`ModelPolicy`], host-owned model admission.
//! - [`child_env`]: [`ChildEnv`], the cleared environment a host's child process starts with.
//! - [`redaction`]: [`Redactor`], known secrets and patterns taken out of records before they
//!   are journaled.
//! - [`provider`]: [`ModelProvider`] and [`DeltaSink`], the seam the host calls models through.
//! - [`error`]: [`ApiError`] (the v0.3.0 API's error values and error trees), [`StatusCode`] and
//!   [`is_park_unwind`].
#![warn(missing_docs)]

pub mod authz;
pub mod catalog;
pub mod child_env;
pub mod content;
pub mod error;
pub mod event;
pub mod harness;
pub mod policy;
pub mod provider;
pub mod redaction;
pub mod runtime;
pub mod session;

#[cfg(test)]
mod testutil;

pub use authz::*;
pub use catalog::*;
pub use child_env::{ChildEnv, ChildEnvSpec, DEFAULT_ENV_ALLOWLIST};
pub use content::*;
pub use error::*;
pub use event::*;
pub use harness::*;
pub use policy::*;
pub use provider::*;
pub use redaction::{Redactor, Scrubbed};
pub use runtime::*;
pub use session::*;
