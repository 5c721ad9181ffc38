//! The real `harnessnode` binary: served on a unix socket and on a picked TCP port, refusing bad
//! configuration before it listens, and supervised by the local runtime's process mode. One test
//! binary, so it links once.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod binary;
mod process_runtime;
mod support;
