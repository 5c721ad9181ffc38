//! The journal conformance suite (semantics §1, §7.2) against the memory journal, the reference
//! semantics every other backend is held to.
#![allow(clippy::tests_outside_test_module)]

use std::sync::Arc;

use agentsessions_journal::{Journal, MemoryJournal};

agentsessions_testkit::journal_conformance!((
    Arc::new(MemoryJournal::new()) as Arc<dyn Journal>,
    ()
));
