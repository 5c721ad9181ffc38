//! gRPC server reflection for one listener: both protocol versions (`grpc.reflection.v1` and
//! the `v1alpha` that `grpcio-reflection` and older `grpcurl` speak), each listing only the
//! services that listener serves.

use agentsessions_wire::pb;
use tonic_reflection::server::{v1, v1alpha};

/// The Sessions service's fully qualified name.
pub const SESSIONS: &str = "agentsessions.v1.Sessions";
/// The HarnessRegistry service's fully qualified name.
pub const HARNESS_REGISTRY: &str = "agentsessions.v1.HarnessRegistry";
/// The standard health service's fully qualified name.
pub const HEALTH: &str = "grpc.health.v1.Health";
const REFLECTION_V1: &str = "grpc.reflection.v1.ServerReflection";
const REFLECTION_V1ALPHA: &str = "grpc.reflection.v1alpha.ServerReflection";
/// The well-known files the contract imports (timestamp, struct), encoded by `build.rs`: a
/// client resolving `agentsessions.v1` messages asks for them by name.
const WELL_KNOWN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/well_known_descriptor.bin"));

/// Both reflection services of a listener that serves `services` (fully qualified names)
/// besides reflection itself. The contract's descriptors (and the well-known files they import)
/// are all registered, so any type a served method uses resolves; only the names listed are
/// advertised.
///
/// # Errors
/// A descriptor set that does not decode.
pub fn reflection_services(
    services: &[&str],
) -> Result<
    (
        v1::ServerReflectionServer<impl v1::ServerReflection>,
        v1alpha::ServerReflectionServer<impl v1alpha::ServerReflection>,
    ),
    tonic_reflection::server::Error,
> {
    let builder = || {
        let mut builder = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(WELL_KNOWN)
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
        for name in services
            .iter()
            .copied()
            .chain([REFLECTION_V1, REFLECTION_V1ALPHA])
        {
            builder = builder.with_service_name(name);
        }
        builder
    };
    Ok((builder().build_v1()?, builder().build_v1alpha()?))
}
