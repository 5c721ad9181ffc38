//! The journal conformance suite (semantics §1, §7.2) against Postgres: every case on a fresh,
//! uniquely named schema.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

agentsessions_testkit::journal_conformance!(common::fresh().await);
