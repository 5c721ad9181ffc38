//! Runtime backends for harnesses reached over `Harness.Connect` (semantics §10.1–10.3), and the
//! dialer that reaches them.
//!
//! - [`LocalRuntime`]: harnesses on unix sockets on this machine, either one harness object
//!   served from this process ([`LocalRuntime::in_process`]) or one `harnessnode` process per
//!   session ([`LocalRuntime::processes`]).
//! - [`RemoteRuntime`]: a harness already running at an address; nothing is provisioned.
//! - [`WireDialer`]: turns an [`agentsessions_api::Incarnation`]'s address into an
//!   [`agentsessions_api::Harness`] over gRPC, one cached channel per address.
//!
//! Every backend here is filesystem-only: no memory snapshots, so the host replays the journal
//! on resume and fork, and refuses `REQUIRES_MEMORY_SNAPSHOT` harnesses up front.
//!
//! Module map:
//! - [`address`][]: [`HarnessAddress`], the one address parser (semantics §10.7).
//! - [`local`][]: [`LocalRuntime`].
//! - [`process`][]: [`HarnessnodeConfig`] and the supervised harness processes.
//! - [`remote`][]: [`RemoteRuntime`].
//! - [`dialer`][]: [`WireDialer`].
//! - [`error`][]: [`RuntimeError`].
//! - `conformance` (feature `test-util`): the runtime contract suite.
//! - `memory_conformance` (feature `test-util`): the contract suite for memory-snapshot backends
//!   (run by `agentsessions-microvm` on real QEMU VMs).
//! - `incarnation` (private): argument checks and shapes shared by the backends.

pub mod address;
#[cfg(any(test, feature = "test-util"))]
pub mod conformance;
pub mod dialer;
pub mod error;
mod incarnation;
pub mod local;
#[cfg(any(test, feature = "test-util"))]
pub mod memory_conformance;
pub mod process;
pub mod remote;

pub use address::{AddressTarget, HarnessAddress};
pub use dialer::WireDialer;
pub use error::{Result, RuntimeError};
pub use local::LocalRuntime;
pub use process::{HARNESSNODE_ENV, HarnessnodeConfig};
pub use remote::RemoteRuntime;
