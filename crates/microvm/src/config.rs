//! [`MicrovmConfig`] (the daemon's `[runtime.microvm]`), and the accelerator chosen from it at
//! startup ([`Accelerator`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{MicrovmError, Result};

/// How the VMs of a [`crate::MicrovmRuntime`] are run. The TOML keys are the field names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MicrovmConfig {
    /// The QEMU executable (default `qemu-system-x86_64`, looked up on `PATH`).
    pub qemu: PathBuf,
    /// The guest kernel (`scripts/build-guest.sh` prints it).
    pub kernel: PathBuf,
    /// The guest initramfs with `harnessnode` (`scripts/build-guest.sh` prints it).
    pub initrd: PathBuf,
    /// Guest memory in MiB (default 128).
    pub memory_mib: u32,
    /// Guest vCPUs (default 1).
    pub vcpus: u32,
    /// Where memory snapshots are kept, one directory per session (created when missing).
    pub snapshot_dir: PathBuf,
    /// `auto` (the default: KVM when `/dev/kvm` opens and the CPU has VMX/SVM, else TCG), `kvm`
    /// or `tcg`.
    pub accelerator: String,
    /// QEMU machine: `microvm` (the default) or `pc`.
    pub machine: String,
    /// Reference harnesses (harnessnode `--harness` kinds) the daemon serves on VMs, each as a
    /// route of the same name (default `["counter"]`).
    pub harnesses: Vec<String>,
    /// Seconds a VM may take to boot until its harness listens (default 60: TCG on a busy host
    /// is slow).
    pub boot_timeout_secs: u64,
    /// Test hook: the guest's harness holds each answer this many milliseconds (harnessnode
    /// `--answer-delay-ms`), so a test can kill a VM while its turn is in progress. Default 0.
    pub answer_delay_ms: u64,
}

impl Default for MicrovmConfig {
    fn default() -> Self {
        Self {
            qemu: PathBuf::from("qemu-system-x86_64"),
            kernel: PathBuf::new(),
            initrd: PathBuf::new(),
            memory_mib: 128,
            vcpus: 1,
            snapshot_dir: PathBuf::new(),
            accelerator: "auto".to_owned(),
            machine: "microvm".to_owned(),
            harnesses: vec!["counter".to_owned()],
            boot_timeout_secs: 60,
            answer_delay_ms: 0,
        }
    }
}

impl MicrovmConfig {
    /// Checks what can be checked without starting a VM.
    ///
    /// # Errors
    /// [`MicrovmError::Config`] naming the key to fix.
    pub fn check(&self) -> Result<()> {
        let bad = |reason: String| Err(MicrovmError::Config(reason));
        for (key, path) in [("kernel", &self.kernel), ("initrd", &self.initrd)] {
            if path.as_os_str().is_empty() {
                return bad(format!("{key} is required (see scripts/build-guest.sh)"));
            }
            if !path.is_file() {
                return bad(format!("{key} {} is not a file", path.display()));
            }
        }
        if self.snapshot_dir.as_os_str().is_empty() {
            return bad("snapshot_dir is required".into());
        }
        if self.snapshot_dir.to_string_lossy().contains('\'') {
            return bad("snapshot_dir must not contain a single quote".into());
        }
        if !(16..=65536).contains(&self.memory_mib) {
            return bad(format!(
                "memory_mib {} is outside 16..=65536",
                self.memory_mib
            ));
        }
        if !(1..=64).contains(&self.vcpus) {
            return bad(format!("vcpus {} is outside 1..=64", self.vcpus));
        }
        if !matches!(self.machine.as_str(), "microvm" | "pc") {
            return bad(format!("machine {:?}: use microvm or pc", self.machine));
        }
        if let Some(kind) = self
            .harnesses
            .iter()
            .find(|kind| !matches!(kind.as_str(), "counter" | "echo"))
        {
            return bad(format!(
                "harnesses: {kind:?} is not a harness a guest serves without a model (counter, echo)"
            ));
        }
        if self.boot_timeout_secs == 0 {
            return bad("boot_timeout_secs must be positive".into());
        }
        Accelerator::choose(&self.accelerator)?;
        Ok(())
    }

    /// Makes the kernel, initrd and snapshot paths relative to `dir` (the config file's).
    pub fn resolve_paths(&mut self, dir: &Path) {
        for path in [&mut self.kernel, &mut self.initrd, &mut self.snapshot_dir] {
            if !path.as_os_str().is_empty() && path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }

    /// [`MicrovmConfig::boot_timeout_secs`] as a duration.
    pub fn boot_timeout(&self) -> Duration {
        Duration::from_secs(self.boot_timeout_secs)
    }
}

/// The accelerator the VMs run on, chosen once at startup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accelerator {
    /// `kvm` or `tcg`.
    pub kind: AccelKind,
    /// Why it was chosen, for the startup report.
    pub reason: String,
}

/// Hardware virtualization or QEMU's binary translator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccelKind {
    /// `/dev/kvm`.
    Kvm,
    /// The Tiny Code Generator (no hardware virtualization).
    Tcg,
}

impl AccelKind {
    /// `kvm` or `tcg`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kvm => "kvm",
            Self::Tcg => "tcg",
        }
    }
}

impl Accelerator {
    /// Resolves `setting` (`auto`, `kvm`, `tcg`; empty is `auto`).
    ///
    /// # Errors
    /// [`MicrovmError::Config`] for an unknown setting, or `kvm` where KVM cannot be used.
    pub fn choose(setting: &str) -> Result<Self> {
        let kvm = kvm_usable();
        match (setting, kvm) {
            ("tcg", _) => Ok(Self {
                kind: AccelKind::Tcg,
                reason: "configured".into(),
            }),
            ("kvm", Ok(())) => Ok(Self {
                kind: AccelKind::Kvm,
                reason: "configured".into(),
            }),
            ("kvm", Err(why)) => Err(MicrovmError::Config(format!("accelerator kvm: {why}"))),
            ("auto" | "", Ok(())) => Ok(Self {
                kind: AccelKind::Kvm,
                reason: "/dev/kvm is usable".into(),
            }),
            ("auto" | "", Err(why)) => Ok(Self {
                kind: AccelKind::Tcg,
                reason: format!("KVM unusable: {why}"),
            }),
            (other, _) => Err(MicrovmError::Config(format!(
                "accelerator {other:?}: use auto, kvm or tcg"
            ))),
        }
    }
}

/// Whether KVM can run guests here: the CPU must expose VMX or SVM (a nested guest without them
/// opens `/dev/kvm` and then fails on the first emulation error) and `/dev/kvm` must open.
fn kvm_usable() -> std::result::Result<(), String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo")
        .map_err(|e| format!("cannot read /proc/cpuinfo: {e}"))?;
    let flags = cpuinfo
        .lines()
        .find(|line| line.starts_with("flags"))
        .unwrap_or_default();
    if !flags
        .split_whitespace()
        .any(|flag| flag == "vmx" || flag == "svm")
    {
        return Err("the CPU has no vmx/svm flag".into());
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(Path::new("/dev/kvm"))
        .map(drop)
        .map_err(|e| format!("cannot open /dev/kvm: {e}"))
}

/// The host CPU's clock in kHz, for the guest's `tsc_early_khz=` (a microvm guest under TCG has
/// no timer to calibrate the TSC against and can hang at boot without it).
pub(crate) fn host_cpu_khz() -> Option<u64> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mhz = cpuinfo
        .lines()
        .find(|line| line.starts_with("cpu MHz"))?
        .split(':')
        .nth(1)?
        .trim();
    let (whole, fraction) = mhz.split_once('.').unwrap_or((mhz, "0"));
    let whole: u64 = whole.parse().ok()?;
    let thousandths: u64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    Some(whole * 1000 + thousandths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcg_is_always_available_and_unknown_settings_are_refused() {
        assert_eq!(Accelerator::choose("tcg").unwrap().kind, AccelKind::Tcg);
        Accelerator::choose("auto").unwrap();
        assert!(matches!(
            Accelerator::choose("xen"),
            Err(MicrovmError::Config(_))
        ));
    }

    #[test]
    fn check_names_the_key_to_fix() {
        let config = MicrovmConfig::default();
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("kernel is required"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let config = MicrovmConfig {
            kernel: file.clone(),
            initrd: file,
            snapshot_dir: dir.path().to_path_buf(),
            harnesses: vec!["chat".into()],
            ..MicrovmConfig::default()
        };
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("\"chat\""), "{err}");
    }

    #[test]
    fn cpu_khz_is_read_when_the_kernel_reports_it() {
        if let Some(khz) = host_cpu_khz() {
            assert!(khz > 100_000, "{khz}");
        }
    }
}
