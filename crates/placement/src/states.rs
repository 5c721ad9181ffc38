//! Session states kept between operations (flat cost per turn): each session's decoded log
//! ([`LogView`]) and placement's [`Facts`], validated against the journal head at the start of
//! every operation and extended by the records appended since, so an operation reads the new
//! records, not the whole log.
//!
//! ```text
//!  current(uid) ── cached? ── read(uid, cached_head..) ── first record = cached head (seq, hash)?
//!                    │ no                                   │ yes: extend by the rest (often none)
//!                    └──────── read(uid, 1..) ◄─────────────┘ no: another history → load anew
//! ```
//!
//! Exact across hosts: whatever another writer (another host on a shared Postgres journal)
//! appended comes back in the tail read, and a log that is not the one cached any more (its head
//! record differs) is loaded anew. Bounded: the states together stay under a byte budget
//! (estimated per record by
//! [`agentsessions_controller::view::approx_record_bytes`]); the least recently used go first, and a
//! state larger than the whole budget is used once and not kept.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use agentsessions_controller::LogView;
use agentsessions_journal::{Journal, LogRecord, Result};

use crate::history::Facts;

/// What the states of one host may hold together unless configured otherwise: 256 MiB.
pub const DEFAULT_STATE_BUDGET: usize = 256 << 20;

/// One session's log and what placement and the controller derive from it, at one head.
#[derive(Debug, Clone)]
pub struct SessionState {
    uid: String,
    view: LogView,
    facts: Facts,
}

impl SessionState {
    /// The state of `uid`'s whole log.
    pub fn load(uid: &str, records: Vec<LogRecord>) -> Self {
        let mut state = Self {
            uid: uid.to_owned(),
            view: LogView::default(),
            facts: Facts::default(),
        };
        state.extend(records);
        state
    }

    fn extend(&mut self, tail: Vec<LogRecord>) {
        let base = self.view.records().len();
        for (offset, record) in tail.iter().enumerate() {
            self.facts.apply(&self.uid, base + offset, record);
        }
        self.view.extend(tail);
    }

    /// The decoded log and the controller's readings.
    pub fn view(&self) -> &LogView {
        &self.view
    }

    /// The records, seq 1 to the head.
    pub fn records(&self) -> &[LogRecord] {
        self.view.records()
    }

    /// Placement's readings.
    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    /// The head seq, 0 for an empty log.
    pub fn head(&self) -> i64 {
        self.view.head()
    }

    /// Estimated memory held, in bytes.
    pub fn bytes(&self) -> usize {
        self.view.bytes() + std::mem::size_of::<Self>() + self.uid.len()
    }
}

struct Entry {
    state: Arc<SessionState>,
    bytes: usize,
    used: u64,
}

#[derive(Default)]
struct Lru {
    entries: HashMap<String, Entry>,
    /// Last use → uid, oldest first.
    by_use: BTreeMap<u64, String>,
    bytes: usize,
    clock: u64,
}

impl Lru {
    fn remove(&mut self, uid: &str) -> Option<Entry> {
        let entry = self.entries.remove(uid)?;
        self.by_use.remove(&entry.used);
        self.bytes -= entry.bytes;
        Some(entry)
    }

    fn touch(&mut self, uid: &str) {
        self.clock += 1;
        let clock = self.clock;
        if let Some(entry) = self.entries.get_mut(uid) {
            self.by_use.remove(&entry.used);
            entry.used = clock;
            self.by_use.insert(clock, uid.to_owned());
        }
    }
}

/// The session states of one host, bounded by bytes with least-recently-used eviction. Cheap
/// to clone (shared).
#[derive(Clone)]
pub struct SessionStates {
    inner: Arc<Mutex<Lru>>,
    budget: usize,
}

impl Default for SessionStates {
    fn default() -> Self {
        Self::with_budget(DEFAULT_STATE_BUDGET)
    }
}

impl std::fmt::Debug for SessionStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStates")
            .field("budget", &self.budget)
            .field("bytes", &self.bytes())
            .finish_non_exhaustive()
    }
}

impl SessionStates {
    /// States that together hold at most `budget` bytes (by the records' estimate).
    pub fn with_budget(budget: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Lru::default())),
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The bytes the kept states hold together (estimated).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// How many sessions have a kept state.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no state is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every kept state.
    pub fn clear(&self) {
        let mut lru = self.lock();
        *lru = Lru::default();
    }

    /// `uid`'s state at the journal's current head: the kept one validated against the head and
    /// extended by the records appended since (one read of the tail), else the whole log.
    ///
    /// # Errors
    /// The journal's read failures.
    pub async fn current(&self, journal: &dyn Journal, uid: &str) -> Result<Arc<SessionState>> {
        let kept = self.lock().entries.get(uid).map(|e| Arc::clone(&e.state));
        let Some(kept) = kept else {
            let state = SessionState::load(uid, journal.read(uid, 1, 0).await?);
            return Ok(self.keep(uid, state));
        };
        let head = kept.head();
        if head == 0 {
            let records = journal.read(uid, 1, 0).await?;
            if records.is_empty() {
                self.lock().touch(uid);
                return Ok(kept);
            }
            return Ok(self.keep(uid, SessionState::load(uid, records)));
        }
        let mut tail = journal.read(uid, head, 0).await?;
        let same_log = tail
            .first()
            .is_some_and(|r| r.seq == head && r.hash == kept.view.head_hash());
        if !same_log {
            // Not the log this state was read from (never for an append-only log; a store that
            // was replaced or restored): read it anew.
            let state = SessionState::load(uid, journal.read(uid, 1, 0).await?);
            return Ok(self.keep(uid, state));
        }
        tail.remove(0);
        if tail.is_empty() {
            self.lock().touch(uid);
            return Ok(kept);
        }
        // Take the kept state out so that, when no one else holds it, it is extended in place.
        {
            let mut lru = self.lock();
            if lru
                .entries
                .get(uid)
                .is_some_and(|e| Arc::ptr_eq(&e.state, &kept))
            {
                lru.remove(uid);
            }
        }
        let mut state = Arc::try_unwrap(kept).unwrap_or_else(|shared| (*shared).clone());
        state.extend(tail);
        Ok(self.keep(uid, state))
    }

    /// Keeps `state` (unless a newer one was kept meanwhile, or it alone exceeds the budget),
    /// evicting the least recently used states until the budget holds.
    fn keep(&self, uid: &str, state: SessionState) -> Arc<SessionState> {
        let bytes = state.bytes();
        let state = Arc::new(state);
        let mut lru = self.lock();
        if let Some(existing) = lru.entries.get(uid)
            && existing.state.head() > state.head()
        {
            return state;
        }
        lru.remove(uid);
        if bytes > self.budget {
            return state;
        }
        while lru.bytes + bytes > self.budget {
            let Some((_, oldest)) = lru.by_use.pop_first() else {
                break;
            };
            if let Some(entry) = lru.entries.remove(&oldest) {
                lru.bytes -= entry.bytes;
            }
        }
        lru.clock += 1;
        let used = lru.clock;
        lru.by_use.insert(used, uid.to_owned());
        lru.entries.insert(
            uid.to_owned(),
            Entry {
                state: Arc::clone(&state),
                bytes,
                used,
            },
        );
        lru.bytes += bytes;
        state
    }
}
