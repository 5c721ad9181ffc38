//! Fault injection on the SQLite journal (a failing disk ends a turn cleanly and loses nothing),
//! with the real daemon: an `LD_PRELOAD` shim, built here from C with the system `cc`, makes the
//! journal's writes fail with `ENOSPC` (disk full) or its `fsync`/`fdatasync` fail with `EIO`,
//! while a control file exists. Under a fault the turn fails with a clear status; nothing
//! acknowledged before it is lost; every chain verifies. A full disk is transient (`UNAVAILABLE`):
//! the daemon keeps serving reads and commits again once space is back. A failed fsync poisons the
//! journal (`INTERNAL`: the page cache can no longer be trusted to match the disk, so it refuses
//! further writes, and reads, until restarted); a restart on the same journal recovers, with
//! everything acknowledged intact.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use agentsessions_client::{Client, ExecEvent, ExecOptions, uid_of, verify};
use common::Daemon;

/// The shim: `write`, `pwrite`, `pwrite64` and `writev` on files whose path starts with
/// `FAULT_PATH_PREFIX` fail with ENOSPC while `FAULT_CONTROL_DIR/enospc` exists; `fsync` and
/// `fdatasync` on them fail with EIO while `FAULT_CONTROL_DIR/eio` exists.
const SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static int targeted(int fd) {
    const char *prefix = getenv("FAULT_PATH_PREFIX");
    if (!prefix || fd < 0) return 0;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    return strncmp(path, prefix, strlen(prefix)) == 0;
}

static int armed(const char *name) {
    const char *dir = getenv("FAULT_CONTROL_DIR");
    if (!dir) return 0;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

#define REAL(name, ret, ...) \
    static ret (*real_##name)(__VA_ARGS__); \
    if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name);

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write, ssize_t, int, const void *, size_t)
    if (targeted(fd) && armed("enospc")) { errno = ENOSPC; return -1; }
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite, ssize_t, int, const void *, size_t, off_t)
    if (targeted(fd) && armed("enospc")) { errno = ENOSPC; return -1; }
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite64, ssize_t, int, const void *, size_t, off_t)
    if (targeted(fd) && armed("enospc")) { errno = ENOSPC; return -1; }
    return real_pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    REAL(writev, ssize_t, int, const struct iovec *, int)
    if (targeted(fd) && armed("enospc")) { errno = ENOSPC; return -1; }
    return real_writev(fd, iov, iovcnt);
}

int fsync(int fd) {
    REAL(fsync, int, int)
    if (targeted(fd) && armed("eio")) { errno = EIO; return -1; }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync, int, int)
    if (targeted(fd) && armed("eio")) { errno = EIO; return -1; }
    return real_fdatasync(fd);
}
"#;

/// Builds the shim into `dir`; `None` (the test is skipped with a note) without a C compiler.
fn build_shim(dir: &Path) -> Option<PathBuf> {
    let source = dir.join("fault_shim.c");
    let shim = dir.join("fault_shim.so");
    std::fs::write(&source, SHIM).unwrap();
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&shim)
        .arg(&source)
        .arg("-ldl")
        .output();
    match built {
        Ok(out) if out.status.success() => Some(shim),
        Ok(out) => panic!("cc failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "no C compiler on CI: {e}");
            eprintln!("skipped: no C compiler ({e})");
            None
        }
    }
}

fn start(dir: &Path, shim: &Path, journal: &Path) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--journal"])
        .arg(journal)
        .env("LD_PRELOAD", shim)
        .env("FAULT_PATH_PREFIX", journal)
        .env("FAULT_CONTROL_DIR", dir)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null());
    Daemon::spawn(command, false)
}

/// One turn on `session`; the hashes of the records it acknowledged, or its status.
async fn turn(
    client: &mut Client,
    session: &str,
    text: &str,
) -> Result<Vec<(i64, String)>, String> {
    turn_with(client, session, text, false).await
}

/// [`turn`], closing an unfinished last turn first when `abandon` (extensions §9).
async fn turn_with(
    client: &mut Client,
    session: &str,
    text: &str,
    abandon: bool,
) -> Result<Vec<(i64, String)>, String> {
    let mut acked = Vec::new();
    let options = ExecOptions {
        session: session.to_owned(),
        abandon_unfinished: abandon,
        ..ExecOptions::new(text)
    };
    let result = client
        .exec(options, |event| {
            if let ExecEvent::Record(r) = event {
                acked.push((r.seq, r.content_hash.clone()));
            }
        })
        .await;
    match result {
        Ok(_) => Ok(acked),
        Err(failed) => Err(failed.error.to_string()),
    }
}

/// Every acknowledged record is stored unchanged and the chain verifies.
async fn check(client: &mut Client, session: &str, acked: &[(i64, String)]) {
    let records = client.replay(session, 0, 0).await.unwrap();
    verify(&records).unwrap();
    for (seq, hash) in acked {
        let stored = records.iter().find(|r| r.seq == *seq);
        assert_eq!(
            stored.map(|r| r.content_hash.as_str()),
            Some(hash.as_str()),
            "acknowledged record {seq} lost or changed"
        );
    }
}

/// How a fault is recovered from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Recovery {
    /// The same daemon serves reads under the fault and commits again once it clears.
    InPlace,
    /// The journal refuses everything until the daemon restarts.
    Restart,
}

impl Recovery {
    /// The code the failed turn carries. A full disk wrote nothing and clears by itself, so the
    /// client is told to retry later; a poisoned journal refuses every retry until an operator
    /// restarts the daemon, so it is a server fault, not a hint to retry.
    fn code(self) -> &'static str {
        match self {
            Self::InPlace => "UNAVAILABLE",
            Self::Restart => "INTERNAL",
        }
    }
}

async fn fault_then_recover(fault: &str, recovery: Recovery) {
    let dir = tempfile::tempdir().unwrap();
    let Some(shim) = build_shim(dir.path()) else {
        return;
    };
    let journal = dir.path().join("journal.db");
    let daemon = start(dir.path(), &shim, &journal);
    let mut client = Client::dial(&daemon.addr).unwrap();
    let created = client.create("faults", "echo", "").await.unwrap();
    let uid = uid_of(&created).to_owned();
    let mut acked = turn(&mut client, &uid, "before").await.unwrap();
    assert!(!acked.is_empty());

    // The fault: the turn fails with a status that names it; reads go on.
    std::fs::write(dir.path().join(fault), "").unwrap();
    let refused = turn(&mut client, &uid, "during").await.unwrap_err();
    eprintln!("{fault}: the turn failed with: {refused}");
    assert!(refused.contains(recovery.code()), "{refused}");
    let lowered = refused.to_lowercase();
    assert!(
        ["disk", "full", "i/o", "io error", "fsync", "write"]
            .iter()
            .any(|word| lowered.contains(word)),
        "the status should say what failed: {refused}"
    );
    if recovery == Recovery::Restart {
        // Still refused after the fault clears: the journal is poisoned until a restart.
        std::fs::remove_file(dir.path().join(fault)).unwrap();
        let still = turn(&mut client, &uid, "poisoned").await.unwrap_err();
        assert!(still.contains("refuses further writes"), "{still}");
        assert!(still.contains("INTERNAL"), "{still}");
        daemon.sigkill();
        let daemon = start(dir.path(), &shim, &journal);
        let mut client = Client::dial(&daemon.addr).unwrap();
        check(&mut client, &uid, &acked).await;
        // The failed turn's opening may have committed before the sync failed: never
        // acknowledged, but a killed process leaves committed WAL frames in place, so the
        // restarted journal can hold a turn that stopped before it ended. The next turn closes
        // it (extensions §9); what was acknowledged stays as it was.
        acked.extend(
            turn_with(&mut client, &uid, "restarted", true)
                .await
                .unwrap(),
        );
        check(&mut client, &uid, &acked).await;
        return;
    }
    check(&mut client, &uid, &acked).await;

    // The fault clears: the same daemon commits again, and so does a restarted one.
    std::fs::remove_file(dir.path().join(fault)).unwrap();
    let mut recovered = None;
    for _ in 0..20 {
        match turn(&mut client, &uid, "after").await {
            Ok(more) => {
                recovered = Some(more);
                break;
            }
            Err(e) => {
                eprintln!("{fault}: not yet: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    acked.extend(recovered.expect("the journal commits again once the fault clears"));
    check(&mut client, &uid, &acked).await;
    daemon.sigkill();

    let daemon = start(dir.path(), &shim, &journal);
    let mut client = Client::dial(&daemon.addr).unwrap();
    check(&mut client, &uid, &acked).await;
    acked.extend(turn(&mut client, &uid, "restarted").await.unwrap());
    check(&mut client, &uid, &acked).await;
}

#[tokio::test]
async fn a_full_disk_fails_the_turn_clearly_loses_nothing_and_recovers() {
    fault_then_recover("enospc", Recovery::InPlace).await;
}

#[tokio::test]
async fn a_failing_fsync_fails_the_turn_clearly_loses_nothing_and_recovers_on_restart() {
    fault_then_recover("eio", Recovery::Restart).await;
}
