//! [`Launch`]: what decides a VM's command line. A snapshot stores it (`store`), and a VM is
//! started from it (`vm`).

use std::path::PathBuf;

use crate::config::{AccelKind, Accelerator, MicrovmConfig, host_cpu_khz};

/// Everything that decides a VM's command line; a snapshot records it, since a restore must use
/// the command line the snapshot was taken under.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Launch {
    pub(crate) qemu: PathBuf,
    pub(crate) kernel: PathBuf,
    pub(crate) initrd: PathBuf,
    pub(crate) memory_mib: u32,
    pub(crate) vcpus: u32,
    pub(crate) machine: String,
    pub(crate) accelerator: AccelKind,
    pub(crate) harness: String,
    pub(crate) cpu_khz: Option<u64>,
    #[serde(default)]
    pub(crate) answer_delay_ms: u64,
}

impl Launch {
    pub(crate) fn new(config: &MicrovmConfig, accelerator: &Accelerator, harness: &str) -> Self {
        Self {
            qemu: config.qemu.clone(),
            kernel: config.kernel.clone(),
            initrd: config.initrd.clone(),
            memory_mib: config.memory_mib,
            vcpus: config.vcpus,
            machine: config.machine.clone(),
            accelerator: accelerator.kind,
            harness: harness.to_owned(),
            cpu_khz: host_cpu_khz(),
            answer_delay_ms: config.answer_delay_ms,
        }
    }
}
