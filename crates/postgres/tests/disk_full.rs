//! A real full disk under the Postgres journal (retryable, nothing lost): the journal's tables live
//! in a tablespace on an 8 MiB tmpfs, a filler file takes most of it, and appends go on until the
//! server cannot extend a table (`53100 disk_full`). The failed append must be refused as a
//! retryable commit failure with nothing of it written, every acknowledged record must read back
//! unchanged and verify, reads must go on while the disk is full, and once the filler is removed
//! the same journal must append again on the same head, with no restart.
//!
//! It mounts a tmpfs, so it needs root and a server on this machine (CI has both). Elsewhere it
//! fails saying so, unless `AGENTSESSIONS_NO_MOUNT_TESTS` is set.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use agentsessions_journal::Log as _;
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _};
use agentsessions_journal::{JournalError, LogRecord, verify_records};
use agentsessions_postgres::PostgresJournal;
use agentsessions_testkit::fixtures::turn_event;
use common::{TestSchema, admin, url};

/// Size of the file system holding the tablespace.
const TMPFS_SIZE: &str = "8m";
/// Room left beside the filler: a few hundred kilobytes of records fill it.
const LEFT_FREE: u64 = 768 * 1024;
/// Events per append: ~200-byte records, so a few dozen appends reach the end.
const BATCH: usize = 64;
/// Appends before giving up on ever filling the disk.
const MAX_APPENDS: usize = 2_000;

/// A tablespace on a small tmpfs owned by the server's user, removed (tablespace, mount,
/// directory) when dropped. Drop the schemas using it first.
struct SmallTablespace {
    name: String,
    mount: PathBuf,
}

impl SmallTablespace {
    /// `None` (after saying why) when this machine cannot mount and the caller opted out.
    async fn create() -> Option<Self> {
        let mount =
            std::env::temp_dir().join(format!("agentsessions-pgfull-{}", std::process::id()));
        std::fs::create_dir_all(&mount).unwrap();
        let owner = postgres_owner();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!(
                "size={TMPFS_SIZE},mode=0700,uid={},gid={}",
                owner.0, owner.1
            ))
            .arg("tmpfs")
            .arg(&mount)
            .status();
        if !mounted.is_ok_and(|s| s.success()) {
            drop(std::fs::remove_dir(&mount));
            let why = "mounting a tmpfs for the tablespace failed: this test needs root and the \
                       PostgreSQL server on this machine";
            assert!(
                std::env::var_os("AGENTSESSIONS_NO_MOUNT_TESTS").is_some(),
                "{why} (set AGENTSESSIONS_NO_MOUNT_TESTS=1 to skip it)"
            );
            eprintln!("skipped: {why}");
            return None;
        }
        let name = format!("small_{}", std::process::id());
        let space = Self { name, mount };
        admin()
            .await
            .batch_execute(&format!(
                "CREATE TABLESPACE {} LOCATION '{}'",
                space.name,
                space.mount.display()
            ))
            .await
            .unwrap();
        Some(space)
    }

    /// A file of the server's user taking all but `LEFT_FREE` bytes of the file system.
    fn fill(&self) -> PathBuf {
        let filler = self.mount.join("filler");
        let free = free_bytes(&self.mount);
        let size = free.saturating_sub(LEFT_FREE);
        let file = std::fs::File::create(&filler).unwrap();
        // tmpfs allocates on write, not on set_len: write the bytes.
        let chunk = vec![0u8; 64 * 1024];
        let mut writer = std::io::BufWriter::new(file);
        let mut written = 0;
        while written < size {
            let n = chunk.len().min(usize::try_from(size - written).unwrap());
            std::io::Write::write_all(&mut writer, &chunk[..n]).unwrap();
            written += n as u64;
        }
        std::io::Write::flush(&mut writer).unwrap();
        filler
    }
}

impl Drop for SmallTablespace {
    fn drop(&mut self) {
        let statement = format!("DROP TABLESPACE IF EXISTS {}", self.name);
        // `Drop` cannot await; a thread with its own runtime does it (as `TestSchema` does).
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async move { admin().await.batch_execute(&statement).await })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("cannot drop tablespace {}: {dropped:?}", self.name);
        }
        drop(Command::new("umount").arg(&self.mount).status());
        drop(std::fs::remove_dir(&self.mount));
    }
}

/// The uid and gid of the server's user (the server writes the tablespace).
fn postgres_owner() -> (u32, u32) {
    (id_of_postgres("-u"), id_of_postgres("-g"))
}

/// `id FLAG postgres`, or 0 when there is no such user.
fn id_of_postgres(flag: &str) -> u32 {
    Command::new("id")
        .args([flag, "postgres"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Free bytes on the file system holding `path`, from `df`.
fn free_bytes(path: &Path) -> u64 {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap()
}

/// The test server's connection string with every table and index of new schemas placed in
/// `space`.
fn url_in(space: &SmallTablespace) -> String {
    let base = url();
    assert!(
        !base.starts_with("postgres"),
        "this test adds options to a key=value connection string"
    );
    format!("{base} options='-c default_tablespace={}'", space.name)
}

#[tokio::test]
async fn a_full_disk_refuses_the_append_loses_nothing_and_appends_again_once_freed() {
    let Some(space) = SmallTablespace::create().await else {
        return;
    };
    let schema = TestSchema::new().await;
    let journal: PostgresJournal = schema.journal_at(&url_in(&space)).await;
    let placed: i64 = admin()
        .await
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablespace = $2",
            &[&schema.name, &space.name],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        placed > 0,
        "the journal's tables are not in the small tablespace"
    );

    let fence = journal.new_fence("s").await.unwrap();
    let filler = space.fill();
    let mut acknowledged: Vec<LogRecord> = Vec::new();
    let mut head = 0;
    let refusal = loop {
        assert!(
            acknowledged.len() < MAX_APPENDS * BATCH,
            "the disk never filled: {} records acknowledged",
            acknowledged.len()
        );
        let events = (0..BATCH)
            .map(|i| turn_event(format!("{head}-{i}")))
            .collect();
        match journal
            .append_records(AppendRequest::new("s", head, FenceUse::Hold(fence), events))
            .await
        {
            Ok(records) => {
                head = records.last().unwrap().seq;
                acknowledged.extend(records);
            }
            Err(e) => break e,
        }
    };
    eprintln!("full after {} records: {refusal}", acknowledged.len());
    match &refusal {
        JournalError::CommitFailed { reason, retryable } => {
            assert!(*retryable, "a full disk is worth a retry: {reason}");
            assert!(
                reason.contains("53100"),
                "not the disk_full state: {reason}"
            );
        }
        other => panic!("a full disk was reported as {other:?}"),
    }
    assert!(
        !acknowledged.is_empty(),
        "the disk was full before any append"
    );

    // Reads go on while the disk is full, and hold exactly what was acknowledged.
    assert_eq!(
        journal.head("s").await.unwrap(),
        head,
        "the failed append left a trace"
    );
    let read = journal.read("s", 1, 0).await.unwrap();
    assert_eq!(read, acknowledged);
    verify_records(&read).unwrap();
    // Still full: the same append is refused again, and still writes nothing.
    let again = journal
        .append_records(AppendRequest::new(
            "s",
            head,
            FenceUse::Hold(fence),
            vec![turn_event("still full"); BATCH],
        ))
        .await;
    assert!(
        matches!(
            again,
            Err(JournalError::CommitFailed {
                retryable: true,
                ..
            })
        ),
        "{again:?}"
    );

    // Room again: the same journal appends on the same head, without a restart.
    std::fs::remove_file(&filler).unwrap();
    let more = journal
        .append_records(AppendRequest::new(
            "s",
            head,
            FenceUse::Hold(fence),
            vec![turn_event("after"); BATCH],
        ))
        .await
        .unwrap();
    assert_eq!(more.first().unwrap().seq, head + 1);
    let read = journal.read("s", 1, 0).await.unwrap();
    assert_eq!(read.len(), acknowledged.len() + BATCH);
    assert_eq!(read[..acknowledged.len()], acknowledged[..]);
    verify_records(&read).unwrap();

    drop(journal);
    drop(schema);
    drop(space);
}
