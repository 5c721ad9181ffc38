//! The `[runtime.microvm]` table: harnesses served on QEMU microVMs (one VM per session
//! incarnation, memory snapshots), so that harnesses declaring `REQUIRES_MEMORY_SNAPSHOT` (the
//! counter harness) can be placed. Without the table no memory-capable runtime exists and the
//! admission gate refuses them.

use std::sync::Arc;

use agentsessions_api::Harness;
use agentsessions_harnesses::{CounterHarness, EchoHarness};
use agentsessions_microvm::{MicrovmConfig, MicrovmRuntime};
use agentsessions_runtime::WireDialer;
use agentsessions_server::ServerBuilder;
use agentsessions_server::placement::DescriptorSource;
use serde::Deserialize;

/// The `[runtime]` table: runtimes besides the built-in ones.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeSettings {
    /// `[runtime.microvm]`: QEMU microVMs with memory snapshots.
    pub microvm: Option<MicrovmConfig>,
}

/// The harness object of the kind a guest runs, asked in-process for the descriptor the
/// admission gate checks before any VM exists (the same code the guest serves).
fn descriptor_probe(kind: &str) -> Arc<dyn Harness> {
    match kind {
        "echo" => Arc::new(EchoHarness::new()),
        _ => Arc::new(CounterHarness::new()),
    }
}

/// Adds one route per `[runtime.microvm] harnesses` entry, each on the one microVM runtime and
/// reached through one cleartext dialer (a guest's port is forwarded to 127.0.0.1 only; the
/// `[harness_tls]` of remote harnesses does not apply). Returns the builder and the runtime.
///
/// # Errors
/// The configuration's refusal, naming the key to fix; a harness name already served.
pub fn add_routes(
    mut builder: ServerBuilder,
    config: &MicrovmConfig,
) -> Result<(ServerBuilder, MicrovmRuntime), agentsessions_microvm::MicrovmError> {
    let first = config.harnesses.first().map_or("counter", String::as_str);
    let runtime = MicrovmRuntime::start(config.clone(), first)?;
    let dialer: Arc<dyn agentsessions_api::HarnessDialer> = Arc::new(WireDialer::new());
    for kind in &config.harnesses {
        if kind == "echo" {
            return Err(agentsessions_microvm::MicrovmError::Config(
                "harnesses: \"echo\" is the built-in echo route's name".into(),
            ));
        }
        builder = builder.runtime_harness(
            kind.clone(),
            Arc::new(runtime.serving(kind.clone())),
            Arc::clone(&dialer),
            DescriptorSource::Probe(descriptor_probe(kind)),
        );
    }
    Ok((builder, runtime))
}
