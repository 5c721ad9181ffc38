//! The conformance suite with the harness behind `Harness.Connect` on a loopback gRPC server.
#![allow(clippy::tests_outside_test_module)]

agentsessions_conformance::conformance_suite!(agentsessions_conformance::Wire);
