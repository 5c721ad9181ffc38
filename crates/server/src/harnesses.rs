//! The harnesses a server serves, by registry name, and how a session's name resolves to one
//! (semantics §7.1, §7.3): an empty name means the default harness; an unknown name is
//! INVALID_ARGUMENT listing what is served. Static harnesses come from configuration; registered
//! ones are added at run time through the HarnessRegistry service and never replaced.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use agentsessions_api::{Harness, Resumability, RuntimeCapabilities};

use crate::error::{Result, ServerError};

/// Checks a static harness address (semantics §10.7): `host:port`, `dns:///host:port`,
/// `dns://resolver/host:port`, `unix:<path>` or `unix://<path>`; URLs, missing ports and empty
/// paths are refused.
///
/// # Errors
/// Why the address is refused.
pub fn check_harness_address(address: &str) -> Result<(), String> {
    if let Some(path) = address
        .strip_prefix("unix://")
        .or_else(|| address.strip_prefix("unix:"))
    {
        return if path.is_empty() {
            Err("a unix address needs a socket path".into())
        } else {
            Ok(())
        };
    }
    let target = if let Some(rest) = address.strip_prefix("dns://") {
        // dns:///host:port or dns://resolver/host:port
        match rest.split_once('/') {
            Some((_, target)) if !target.is_empty() => target,
            _ => {
                return Err("a dns address is dns:///host:port or dns://resolver/host:port".into());
            }
        }
    } else if address.contains("://") {
        return Err("give host:port, dns:///host:port or unix:<path>, not a URL".into());
    } else {
        address
    };
    let Some((host, port)) = target.rsplit_once(':') else {
        return Err("the address needs a port (host:port)".into());
    };
    if host.is_empty() || host == "dns" || host == "unix" {
        return Err(format!("{host:?} is not a host name"));
    }
    port.parse::<u16>()
        .map(|_| ())
        .map_err(|_| format!("{port:?} is not a port number"))
}

/// Where an entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Configured at startup; never stored in the registry table.
    Static,
    /// Registered through the HarnessRegistry service.
    Registered,
}

/// One served harness.
#[derive(Clone)]
pub struct HarnessEntry {
    /// Registry name.
    pub name: String,
    /// The harness the controller drives (in process, or a remote harness adapter).
    pub harness: Arc<dyn Harness>,
    /// What the compute behind it can do; gates REQUIRES_MEMORY_SNAPSHOT harnesses (§4.1).
    pub capabilities: RuntimeCapabilities,
    /// When set, the descriptor id the harness must report (a misdirection check).
    pub expected_id: String,
    /// Static or registered.
    pub source: Source,
}

impl std::fmt::Debug for HarnessEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessEntry")
            .field("name", &self.name)
            .field("capabilities", &self.capabilities)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl HarnessEntry {
    /// The admission gate (semantics §4.1): describes the harness, checks the expected
    /// descriptor id, and refuses one that needs memory snapshots on compute that cannot take
    /// them — all before anything is journaled.
    ///
    /// # Errors
    /// [`ServerError::Unplaceable`], [`ServerError::DescriptorMismatch`]; a describe failure.
    pub async fn admit(&self) -> Result<Resumability> {
        let descriptor = self.harness.describe().await?;
        if !self.expected_id.is_empty() && descriptor.id != self.expected_id {
            return Err(ServerError::DescriptorMismatch {
                harness: self.name.clone(),
                expected: self.expected_id.clone(),
                reported: descriptor.id,
            });
        }
        if !descriptor.capabilities.can_place_on(self.capabilities) {
            return Err(ServerError::Unplaceable {
                harness: self.name.clone(),
            });
        }
        Ok(descriptor.capabilities.resumability)
    }
}

#[derive(Debug, Default)]
struct Table {
    entries: BTreeMap<String, HarnessEntry>,
    default: String,
}

/// The served set and its default, shared by every RPC (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct Harnesses {
    table: Arc<RwLock<Table>>,
}

impl Harnesses {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        // Entries are only ever inserted whole; a panic elsewhere cannot leave a torn table.
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a static harness under `name` on compute with `capabilities`. The first one added
    /// is the default until [`Harnesses::set_default`].
    pub fn add(
        &self,
        name: impl Into<String>,
        harness: Arc<dyn Harness>,
        capabilities: RuntimeCapabilities,
    ) {
        let name = name.into();
        let mut table = self.write();
        if table.default.is_empty() {
            table.default.clone_from(&name);
        }
        table.entries.insert(
            name.clone(),
            HarnessEntry {
                name,
                harness,
                capabilities,
                expected_id: String::new(),
                source: Source::Static,
            },
        );
    }

    /// Adds a registered harness; an existing entry under the name is kept (registrations are
    /// immutable). Returns whether it was added.
    pub fn register(&self, entry: HarnessEntry) -> bool {
        let mut table = self.write();
        if table.entries.contains_key(&entry.name) {
            return false;
        }
        table.entries.insert(entry.name.clone(), entry);
        true
    }

    /// Makes `name` the default.
    ///
    /// # Errors
    /// [`ServerError::UnknownHarness`] when nothing is served under `name`.
    pub fn set_default(&self, name: &str) -> Result<()> {
        self.resolve(name)?;
        name.clone_into(&mut self.write().default);
        Ok(())
    }

    /// The default harness name.
    pub fn default_name(&self) -> String {
        self.read().default.clone()
    }

    /// Served names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().entries.keys().cloned().collect()
    }

    /// Names configured statically, sorted.
    pub fn static_names(&self) -> Vec<String> {
        self.read()
            .entries
            .values()
            .filter(|e| e.source == Source::Static)
            .map(|e| e.name.clone())
            .collect()
    }

    /// Whether `name` is a static harness here.
    pub fn is_static(&self, name: &str) -> bool {
        self.read()
            .entries
            .get(name)
            .is_some_and(|e| e.source == Source::Static)
    }

    /// The entry for `name` (empty = the default).
    ///
    /// # Errors
    /// [`ServerError::UnknownHarness`].
    pub fn resolve(&self, name: &str) -> Result<HarnessEntry> {
        let table = self.read();
        let key = if name.is_empty() {
            table.default.as_str()
        } else {
            name
        };
        table
            .entries
            .get(key)
            .cloned()
            .ok_or_else(|| ServerError::UnknownHarness {
                name: key.to_owned(),
                served: table.entries.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }
}

#[cfg(test)]
#[allow(clippy::assertions_on_result_states)] // the refusals are the assertions
mod tests {
    use super::*;

    // semantics §10.7: the accepted and refused static harness address forms.
    #[test]
    fn harness_addresses_are_checked_before_startup() {
        for good in [
            "127.0.0.1:9000",
            "harness.internal:443",
            "dns:///harness:9000",
            "dns://8.8.8.8/harness:9000",
            "unix:/run/h.sock",
            "unix:///run/h.sock",
            "unix:relative.sock",
        ] {
            assert_eq!(check_harness_address(good), Ok(()), "{good}");
        }
        for bad in [
            "http://127.0.0.1:9000",
            "127.0.0.1",
            "unix:",
            "unix://",
            "dns://",
            "dns:9000",
            "host:notaport",
            ":9000",
        ] {
            assert!(check_harness_address(bad).is_err(), "{bad}");
        }
    }
}
