//! The per-session guard (semantics §2.3 step 2, §4.5): one Exec/Suspend/Resume/Approve at a
//! time per session on this host, refused with [`PlacementError::SessionBusy`] rather than
//! queued, plus a note of which execution runs so Cancel can find it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{PlacementError, Result};

/// Sessions busy on this host, each with the execution it runs (empty until known). Cheap to
/// clone; every harness route of a host shares one.
#[derive(Debug, Clone, Default)]
pub struct SessionGuards {
    busy: Arc<Mutex<HashMap<String, String>>>,
}

/// Holds a session until dropped.
#[derive(Debug)]
pub struct Held {
    guards: SessionGuards,
    session: String,
}

impl SessionGuards {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        // Plain inserts and removals: a panic elsewhere cannot leave the map inconsistent.
        self.busy.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `session`.
    ///
    /// # Errors
    /// [`PlacementError::SessionBusy`] when another operation holds it.
    pub fn try_take(&self, session: &str) -> Result<Held> {
        let mut busy = self.lock();
        if busy.contains_key(session) {
            return Err(PlacementError::SessionBusy(session.to_owned()));
        }
        busy.insert(session.to_owned(), String::new());
        Ok(Held {
            guards: self.clone(),
            session: session.to_owned(),
        })
    }

    /// Whether an operation holds `session`.
    pub fn is_busy(&self, session: &str) -> bool {
        self.lock().contains_key(session)
    }

    /// The execution running on `session`, once its EXECUTION_START is committed.
    pub fn running_execution(&self, session: &str) -> Option<String> {
        self.lock()
            .get(session)
            .filter(|id| !id.is_empty())
            .cloned()
    }
}

impl Held {
    /// Notes the execution this operation runs.
    pub fn set_execution(&self, execution_id: &str) {
        if let Some(slot) = self.guards.lock().get_mut(&self.session) {
            execution_id.clone_into(slot);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.guards.lock().remove(&self.session);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    // semantics §4.5: overlapping operations are refused, not queued.
    #[test]
    fn a_held_session_refuses_a_second_operation_until_released() {
        let guards = SessionGuards::default();
        let held = guards.try_take("s").unwrap();
        assert!(matches!(
            guards.try_take("s"),
            Err(PlacementError::SessionBusy(_))
        ));
        drop(guards.try_take("other").unwrap());
        held.set_execution("e1");
        assert_eq!(guards.running_execution("s").as_deref(), Some("e1"));
        drop(held);
        assert!(!guards.is_busy("s"));
        drop(guards.try_take("s").unwrap());
    }
}
