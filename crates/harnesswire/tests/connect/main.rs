//! `Harness.Connect` and `Harness.Describe` end to end: harnesses served on `127.0.0.1:0` or a
//! temporary unix socket and driven through [`agentsessions_harnesswire::RemoteHarness`], plus
//! hand-written peers that break the protocol on purpose. One test binary, so it links once.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod minting;
mod protocol;
mod roundtrip;
mod serving;
mod support;
