//! Compiles the `agentsessions.v1` protobuf contract in `proto/`.
//!
//! The `.proto` files are parsed with `protox` (pure Rust, no system `protoc`), using `proto/` as
//! the only include root so descriptor file names are the bare names (`common.proto`, ...).
//! `tonic-prost-build` then generates the messages plus gRPC client and server code for every
//! service into `OUT_DIR/agentsessions.v1.rs`, and the encoded `FileDescriptorSet` of the four
//! contract files is written to `OUT_DIR/agentsessions_descriptor.bin` for gRPC reflection.
#![allow(clippy::print_stdout)]

use std::error::Error;
use std::path::PathBuf;

/// The contract files, in dependency order.
const PROTO_FILES: [&str; 4] = [
    "common.proto",
    "harness.proto",
    "harness_registry.proto",
    "session.proto",
];

/// Name of the encoded descriptor set written into `OUT_DIR`.
const DESCRIPTOR_FILE: &str = "agentsessions_descriptor.bin";

fn main() -> Result<(), Box<dyn Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let proto_dir = manifest_dir.join("proto");

    println!("cargo:rerun-if-changed={}", proto_dir.display());
    for file in PROTO_FILES {
        println!("cargo:rerun-if-changed={}", proto_dir.join(file).display());
    }

    let mut compiler = protox::Compiler::new([&proto_dir])?;
    compiler.open_files(PROTO_FILES.iter().map(|file| proto_dir.join(file)))?;

    // Code generation sees the imported well-known files too (they map to `prost_types`) and the
    // source info, so the proto comments become rustdoc.
    compiler.include_imports(true).include_source_info(true);
    let codegen_set = compiler.file_descriptor_set();

    // The published descriptor set holds exactly the four contract files, without source info.
    compiler.include_imports(false).include_source_info(false);
    std::fs::write(
        out_dir.join(DESCRIPTOR_FILE),
        compiler.encode_file_descriptor_set(),
    )?;

    // `build_transport(false)`: the `Harness` service has an RPC named `Connect`, whose client
    // method `connect` would collide with the generated `HarnessClient::connect(endpoint)`
    // constructor. Clients are built with `XxxClient::new(channel)` instead.
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .btree_map(".")
        .out_dir(&out_dir)
        .compile_fds(codegen_set)?;

    Ok(())
}
