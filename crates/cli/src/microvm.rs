//! The `[runtime.microvm]` table: harnesses served on QEMU microVMs (one VM per session
//! incarnation, memory snapshots), so that harnesses declaring `REQUIRES_MEMORY_SNAPSHOT` (the
//! counter harness) can be placed. Without the table no memory-capable runtime exists and the
//! admission gate refuses them.
//!
//! Registered harnesses reach the VMs through the spec's memory placement, `substrate {atespace:
//! "microvm", template: <kind>}`: [`VmSubstrate`] builds their routes on the same runtime. A
//! registration placed `remote` runs on compute this host cannot snapshot, so one declaring
//! `REQUIRES_MEMORY_SNAPSHOT` is refused by the admission gate.

use std::sync::Arc;

use agentsessions_api::Harness;
use agentsessions_harnesses::{CounterHarness, EchoHarness};
use agentsessions_microvm::{MicrovmConfig, MicrovmRuntime};
use agentsessions_runtime::WireDialer;
use agentsessions_server::placement::{Backend, DescriptorSource};
use agentsessions_server::{ServerBuilder, SubstrateBackends};
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

/// The atespace a registration names to be placed on this host's microVMs.
pub const ATESPACE: &str = "microvm";

/// The kinds a guest's harnessnode serves without a model.
const GUEST_KINDS: [&str; 2] = ["counter", "echo"];

/// Registered `substrate {atespace: "microvm", template: <kind>}` harnesses on the daemon's
/// microVM runtime: each template is a kind the guest's harnessnode serves.
#[derive(Clone)]
pub struct VmSubstrate {
    runtime: MicrovmRuntime,
    dialer: Arc<dyn agentsessions_api::HarnessDialer>,
}

impl std::fmt::Debug for VmSubstrate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmSubstrate")
            .field("runtime", &self.runtime)
            .finish_non_exhaustive()
    }
}

impl SubstrateBackends for VmSubstrate {
    fn backend(&self, atespace: &str, template: &str) -> Result<Backend, String> {
        if atespace != ATESPACE {
            return Err(format!(
                "this host's substrate is the microVM runtime: use atespace {ATESPACE:?}"
            ));
        }
        if !GUEST_KINDS.contains(&template) {
            return Err(format!(
                "the guest serves the templates {GUEST_KINDS:?} (harnessnode kinds without a model)"
            ));
        }
        Ok(Backend::new(
            Arc::new(self.runtime.serving(template)),
            Arc::clone(&self.dialer),
            DescriptorSource::Probe(descriptor_probe(template)),
        ))
    }
}

/// Adds one route per `[runtime.microvm] harnesses` entry, each on the one microVM runtime and
/// reached through one cleartext dialer (a guest's port is forwarded to 127.0.0.1 only; the
/// `[harness_tls]` of remote harnesses does not apply). Returns the builder and the substrate
/// that places registered harnesses on the same runtime.
///
/// # Errors
/// The configuration's refusal, naming the key to fix; a harness name already served.
pub fn add_routes(
    mut builder: ServerBuilder,
    config: &MicrovmConfig,
) -> Result<(ServerBuilder, VmSubstrate), agentsessions_microvm::MicrovmError> {
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
    Ok((builder, VmSubstrate { runtime, dialer }))
}
