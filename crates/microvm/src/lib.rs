//! The microVM runtime: each session incarnation is a small QEMU VM (KVM when `/dev/kvm` works,
//! TCG otherwise, chosen at startup) booting a guest that runs `harnessnode` and serves
//! `Harness.Connect` on a port forwarded to the host by user-mode networking. Driven over QMP.
//! Harnesses that keep their state in memory (`REQUIRES_MEMORY_SNAPSHOT`) are placed on it: a
//! snapshot saves the VM's whole state to disk, a restore or fork runs new VMs from it.
//!
//! ```text
//! host ── Harness.Connect ──► 127.0.0.1:<port> ══ hostfwd ══► guest :7000 harnessnode
//!   └──── QMP (unix socket) ──► qemu ── migrate exec:cat > <store>/<uid>/<id>.vmstate
//! ```
//!
//! The guest image is built from Debian packages and the built harnessnode by
//! `scripts/build-guest.sh`.
//!
//! Module map:
//! - [`config`][]: [`MicrovmConfig`] and the [`Accelerator`] chosen from it.
//! - [`runtime`][]: [`MicrovmRuntime`], the `Runtime` and `InstanceRestorer`.
//! - `vm` (private): one QEMU process.
//! - `qmp` (private): the QMP client.
//! - `store` (private): the snapshot store on disk.
//! - [`error`][]: [`MicrovmError`].

pub mod config;
pub mod error;
mod launch;
mod qmp;
pub mod runtime;
mod store;
mod vm;

pub use config::{AccelKind, Accelerator, MicrovmConfig};
pub use error::{MicrovmError, Result};
pub use runtime::{MicrovmRuntime, NAME};
