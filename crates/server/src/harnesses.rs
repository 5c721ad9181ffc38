//! The harnesses a server serves, by registry name, and how a session's name resolves to one
//! (semantics §7.1, §7.3): an empty name means the default harness; an unknown name is
//! INVALID_ARGUMENT listing what is served.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentsessions_api::{Harness, Resumability, RuntimeCapabilities};

use crate::error::{Result, ServerError};

/// One served harness.
#[derive(Clone)]
pub struct HarnessEntry {
    /// Registry name.
    pub name: String,
    /// The harness the controller drives (in process, or a remote harness adapter).
    pub harness: Arc<dyn Harness>,
    /// What the compute behind it can do; gates REQUIRES_MEMORY_SNAPSHOT harnesses (§4.1).
    pub capabilities: RuntimeCapabilities,
}

impl std::fmt::Debug for HarnessEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessEntry")
            .field("name", &self.name)
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

impl HarnessEntry {
    /// The admission gate (semantics §4.1): describes the harness and refuses one that needs
    /// memory snapshots on compute that cannot take them, before anything is journaled.
    ///
    /// # Errors
    /// [`ServerError::Unplaceable`]; a describe failure.
    pub async fn admit(&self) -> Result<Resumability> {
        let descriptor = self.harness.describe().await?;
        let resumability = descriptor.capabilities.resumability;
        if !descriptor.capabilities.can_place_on(self.capabilities) {
            return Err(ServerError::Unplaceable {
                harness: self.name.clone(),
            });
        }
        Ok(resumability)
    }
}

/// The served set and its default.
#[derive(Debug, Clone, Default)]
pub struct Harnesses {
    entries: BTreeMap<String, HarnessEntry>,
    default: String,
}

impl Harnesses {
    /// Adds (or replaces) a harness under `name` on compute with `capabilities`. The first one
    /// added is the default until [`Harnesses::set_default`].
    pub fn add(
        &mut self,
        name: impl Into<String>,
        harness: Arc<dyn Harness>,
        capabilities: RuntimeCapabilities,
    ) {
        let name = name.into();
        if self.default.is_empty() {
            self.default.clone_from(&name);
        }
        self.entries.insert(
            name.clone(),
            HarnessEntry {
                name,
                harness,
                capabilities,
            },
        );
    }

    /// Makes `name` the default.
    ///
    /// # Errors
    /// [`ServerError::UnknownHarness`] when nothing is served under `name`.
    pub fn set_default(&mut self, name: &str) -> Result<()> {
        self.resolve(name)?;
        name.clone_into(&mut self.default);
        Ok(())
    }

    /// The default harness name.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    /// Served names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    /// The entry for `name` (empty = the default).
    ///
    /// # Errors
    /// [`ServerError::UnknownHarness`].
    pub fn resolve(&self, name: &str) -> Result<&HarnessEntry> {
        let key = if name.is_empty() { &self.default } else { name };
        self.entries
            .get(key)
            .ok_or_else(|| ServerError::UnknownHarness {
                name: key.to_owned(),
                served: self.names().join(", "),
            })
    }
}
