//! Generated protobuf messages and gRPC services of the `agentsessions.v1` package.
//!
//! Everything here is produced by `build.rs` from `proto/*.proto`: the message structs and enums
//! (oneofs become enums in a submodule named after the message, for example `event::Body`), and
//! for each of the `Sessions`, `Harness` and `HarnessRegistry` services a `*_client` module and a
//! `*_server` module. Map fields are `BTreeMap`s. [`FILE_DESCRIPTOR_SET`] is the encoded
//! descriptor set of the four contract files, for gRPC reflection.
#![allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    unused_qualifications,
    unused_results,
    clippy::all,
    clippy::pedantic,
    clippy::nursery,
    clippy::restriction,
    rustdoc::all
)]

include!(concat!(env!("OUT_DIR"), "/agentsessions.v1.rs"));

/// Encoded `google.protobuf.FileDescriptorSet` of `common.proto`, `harness.proto`,
/// `harness_registry.proto` and `session.proto` (bare descriptor names, no source info).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/agentsessions_descriptor.bin"));
