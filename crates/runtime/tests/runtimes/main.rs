//! The local (in-process mode) and remote runtimes against their contract, and the dialer
//! driving turns through them. Process mode needs the `harnessnode` binary, so its tests live in
//! that crate. One test binary, so it links once.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod local;
mod remote;
mod support;
