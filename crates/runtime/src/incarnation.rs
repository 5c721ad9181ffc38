//! Argument checks and shapes shared by the filesystem-only backends, which all treat a session
//! uid as the incarnation id and the journal as the only state worth keeping.

use agentsessions_api::{ForkOpts, Incarnation, SessionSpec, SnapshotKind, SnapshotRef};

use crate::error::{Result, RuntimeError};

/// The spec's session uid, which must not be empty.
pub(crate) fn session_uid<'a>(runtime: &'static str, spec: &'a SessionSpec) -> Result<&'a str> {
    if spec.session_uid.is_empty() {
        return Err(RuntimeError::MissingSessionUid { runtime });
    }
    Ok(&spec.session_uid)
}

/// The session a snapshot ref names (`local`), which must not be empty.
pub(crate) fn restore_uid<'a>(runtime: &'static str, snapshot: &'a SnapshotRef) -> Result<&'a str> {
    if snapshot.local.is_empty() {
        return Err(RuntimeError::MissingSnapshotHandle { runtime });
    }
    Ok(&snapshot.local)
}

/// The fork child's uid, which must not be empty.
pub(crate) fn fork_child<'a>(runtime: &'static str, opts: &'a ForkOpts) -> Result<&'a str> {
    if opts.child_session_uid.is_empty() {
        return Err(RuntimeError::MissingChildUid { runtime });
    }
    Ok(&opts.child_session_uid)
}

/// LOCAL is refused; EXTERNAL is the session as a replay handle, with no memory captured.
pub(crate) fn external_snapshot(
    runtime: &'static str,
    incarnation: &Incarnation,
    kind: SnapshotKind,
) -> Result<SnapshotRef> {
    match kind {
        SnapshotKind::Local => Err(RuntimeError::LocalSnapshotUnsupported { runtime }),
        SnapshotKind::External => Ok(SnapshotRef {
            local: incarnation.id.clone(),
            memory: false,
            ..SnapshotRef::default()
        }),
    }
}

/// `<hostname>/<pid>`, the worker name of a process on this machine.
pub(crate) fn worker(pid: u32) -> String {
    format!("{}/{pid}", hostname())
}

/// This machine's name, read without libc: the kernel's, then `$HOSTNAME`, else `localhost`.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| {
            std::env::var("HOSTNAME")
                .ok()
                .filter(|name| !name.is_empty())
        })
        .unwrap_or_else(|| "localhost".to_owned())
}
