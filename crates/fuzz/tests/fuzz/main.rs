//! Every fuzz target, one module each, in one test binary (one link instead of ten). See the
//! crate documentation for the rule they check and how to run them long.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr,
    unreachable_pub
)]

mod auth_inputs;
mod canonical_json;
mod config_toml;
mod http_bodies;
mod journal_inputs;
mod mcp_answers;
mod mcp_http_answers;
mod protobuf_rpcs;
mod provider_answers;
