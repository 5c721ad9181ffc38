//! The harness routes of a host by registry name (semantics §7.1, §7.3): static routes from
//! configuration, registered ones added at run time and never replaced; an empty name means the
//! default; unknown names list what is served.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, PoisonError, RwLock};

use crate::backend::Backend;
use crate::error::{PlacementError, Result};

/// Where a route came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Configured at startup.
    Static,
    /// Added through the HarnessRegistry service.
    Registered,
}

/// One route of the registry.
#[derive(Debug, Clone)]
pub struct Route {
    /// Registry name.
    pub name: String,
    /// The backend.
    pub backend: Backend,
    /// Static or registered.
    pub source: Source,
}

#[derive(Debug, Default)]
struct Table {
    routes: BTreeMap<String, Route>,
    reserved: BTreeSet<String>,
    default: String,
}

/// The routes of a host and its default; cheap to clone, shared by every operation.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    table: Arc<RwLock<Table>>,
}

impl Registry {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        // Routes are only ever inserted whole; a panic elsewhere cannot leave a torn table.
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds (or replaces, at configuration time) a static route. The first route added is the
    /// default until [`Registry::set_default`].
    ///
    /// # Errors
    /// [`PlacementError::NameTaken`] for an empty name.
    pub fn add_static(&self, name: impl Into<String>, backend: Backend) -> Result<()> {
        let name = name.into();
        if name.is_empty() {
            return Err(PlacementError::NameTaken {
                name,
                reason: "a harness route needs a name".into(),
            });
        }
        let mut table = self.write();
        if table.default.is_empty() {
            table.default.clone_from(&name);
        }
        table.routes.insert(
            name.clone(),
            Route {
                name,
                backend,
                source: Source::Static,
            },
        );
        Ok(())
    }

    /// Names a registration may never take besides the static ones.
    pub fn reserve(&self, names: impl IntoIterator<Item = String>) {
        self.write().reserved.extend(names);
    }

    /// Adds a registered route. Entries are never replaced: an existing name or a reserved one is
    /// refused.
    ///
    /// # Errors
    /// [`PlacementError::NameTaken`].
    pub fn register(&self, name: impl Into<String>, backend: Backend) -> Result<()> {
        let name = name.into();
        let mut table = self.write();
        let reason = if name.is_empty() {
            Some("a harness route needs a name")
        } else if table.reserved.contains(&name) {
            Some("the name is reserved")
        } else if table.routes.contains_key(&name) {
            Some("a route with this name is already served")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(PlacementError::NameTaken {
                name,
                reason: reason.into(),
            });
        }
        table.routes.insert(
            name.clone(),
            Route {
                name,
                backend,
                source: Source::Registered,
            },
        );
        Ok(())
    }

    /// Makes `name` the default.
    ///
    /// # Errors
    /// [`PlacementError::UnknownHarness`].
    pub fn set_default(&self, name: &str) -> Result<()> {
        self.resolve(name)?;
        name.clone_into(&mut self.write().default);
        Ok(())
    }

    /// The default name (empty when nothing is served).
    pub fn default_name(&self) -> String {
        self.read().default.clone()
    }

    /// Served names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().routes.keys().cloned().collect()
    }

    /// Static names, sorted.
    pub fn static_names(&self) -> Vec<String> {
        self.read()
            .routes
            .values()
            .filter(|r| r.source == Source::Static)
            .map(|r| r.name.clone())
            .collect()
    }

    /// Whether `name` is served here.
    pub fn contains(&self, name: &str) -> bool {
        self.read().routes.contains_key(name)
    }

    /// The source of the route `name` (empty = default), when served.
    pub fn source(&self, name: &str) -> Option<Source> {
        let table = self.read();
        let key = if name.is_empty() {
            &table.default
        } else {
            name
        };
        table.routes.get(key).map(|r| r.source)
    }

    /// The route for `name`; empty means the default.
    ///
    /// # Errors
    /// [`PlacementError::UnknownHarness`] listing the served names.
    pub fn resolve(&self, name: &str) -> Result<Route> {
        let table = self.read();
        let key = if name.is_empty() {
            table.default.as_str()
        } else {
            name
        };
        table
            .routes
            .get(key)
            .cloned()
            .ok_or_else(|| PlacementError::UnknownHarness {
                name: key.to_owned(),
                served: table.routes.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// The pin rule of semantics §7.3: a session stored on `stored` (empty = default) may run a
    /// turn on `requested` only when both are static or they are the same route.
    ///
    /// # Errors
    /// [`PlacementError::Pinned`].
    pub fn check_route(&self, session: &str, stored: &str, requested: &str) -> Result<()> {
        let stored_name = if stored.is_empty() {
            self.default_name()
        } else {
            stored.to_owned()
        };
        if requested.is_empty() || requested == stored_name {
            return Ok(());
        }
        let registered = |name: &str| self.source(name) == Some(Source::Registered);
        if registered(&stored_name) || registered(requested) {
            return Err(PlacementError::Pinned {
                session: session.to_owned(),
                pinned: stored_name,
                requested: requested.to_owned(),
            });
        }
        Ok(())
    }
}
