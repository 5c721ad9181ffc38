//! Encodes the descriptors of the well-known protobuf files the contract imports
//! (`google/protobuf/timestamp.proto` and `struct.proto`), so gRPC reflection can serve every
//! file a client needs to resolve the contract's messages. `protox` carries these files itself.

use std::error::Error;
use std::path::PathBuf;

const WELL_KNOWN: [&str; 2] = [
    "google/protobuf/timestamp.proto",
    "google/protobuf/struct.proto",
];

fn main() -> Result<(), Box<dyn Error>> {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut compiler = protox::Compiler::new(Vec::<PathBuf>::new())?;
    compiler.open_files(WELL_KNOWN)?;
    std::fs::write(
        out_dir.join("well_known_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    println!("cargo:rerun-if-changed=build.rs");
    Ok(())
}
