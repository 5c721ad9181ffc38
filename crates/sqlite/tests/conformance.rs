//! The journal conformance suite (semantics §1, §7.2) against the SQLite journal: every case on a
//! fresh file, in the default pipelined durability and again with `synchronous=FULL`.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::sync::Arc;

use agentsessions_journal::Journal;
use agentsessions_sqlite::SqliteJournal;

fn fresh() -> (Arc<dyn Journal>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let journal = SqliteJournal::open(dir.path().join("journal.db")).unwrap();
    (Arc::new(journal), dir)
}

agentsessions_testkit::journal_conformance!(fresh());

/// The same suite with `synchronous=FULL`.
mod full {
    use std::sync::Arc;

    use agentsessions_journal::Journal;
    use agentsessions_sqlite::{Durability, SqliteJournal, SqliteOptions};

    fn fresh() -> (Arc<dyn Journal>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions {
            durability: Durability::Full,
            ..SqliteOptions::default()
        };
        let journal = SqliteJournal::open_with(dir.path().join("journal.db"), options).unwrap();
        assert_eq!(journal.durability(), Durability::Full);
        (Arc::new(journal), dir)
    }

    agentsessions_testkit::journal_conformance!(fresh());
}
