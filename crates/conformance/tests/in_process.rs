//! The conformance suite with the harness in the host's process.
#![allow(clippy::tests_outside_test_module)]

agentsessions_conformance::conformance_suite!(agentsessions_conformance::InProcess);
