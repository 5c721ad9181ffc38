//! The snapshot store on disk, one directory per session:
//!
//! ```text
//! <snapshot_dir>/sessions/<uid>/<id>.vmstate         the VM's state (QEMU migration stream)
//! <snapshot_dir>/sessions/<uid>/<id>.vmstate.sha256  its checksum (`sha256sum` format)
//! <snapshot_dir>/sessions/<uid>/<id>.json            [`Meta`]: instance, command line, size
//! <snapshot_dir>/sessions/<uid>/held                 the id of the snapshot the session holds
//! <snapshot_dir>/run/<n>/                            one running VM's QMP socket and log
//! ```
//!
//! Every file is written to a temporary name and renamed into place, so a crash of the daemon
//! leaves either the old state or the new one. Nothing is fsynced (that would double a
//! snapshot's time): a host crash can tear a file, and the checksums and metadata checks then
//! report the memory lost instead of restoring it. Snapshot ids are unique (time and randomness). A session holds
//! at most one snapshot: the one its latest Snapshot wrote, until a restore runs a VM from it
//! (the memory then moves on, and the file would only restore the past); whatever the session
//! does not hold is deleted right away, and Stop deletes the session's directory.

use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{MicrovmError, Result};
use crate::launch::Launch;

/// The scheme of this runtime's snapshot refs: `microvm://<session uid>/<snapshot id>`.
const SCHEME: &str = "microvm://";
const HELD: &str = "held";

/// What a snapshot records beside its state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub(crate) session: String,
    pub(crate) snapshot: String,
    /// The compute instance whose memory this is.
    pub(crate) instance: String,
    /// The command line a restore must use.
    pub(crate) launch: Launch,
    pub(crate) sha256: String,
    pub(crate) bytes: u64,
}

/// The store rooted at the configured snapshot directory.
#[derive(Debug)]
pub(crate) struct Store {
    root: PathBuf,
    next_run: AtomicU64,
}

/// A snapshot named by a ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SnapshotName {
    pub(crate) session: String,
    pub(crate) id: String,
}

impl SnapshotName {
    /// Parses `microvm://<uid>/<id>`; `None` for anything else.
    pub(crate) fn parse(uri: &str) -> Option<Self> {
        let (session, id) = uri.strip_prefix(SCHEME)?.split_once('/')?;
        (safe_name(session) && safe_name(id)).then(|| Self {
            session: session.to_owned(),
            id: id.to_owned(),
        })
    }

    pub(crate) fn uri(&self) -> String {
        format!("{SCHEME}{}/{}", self.session, self.id)
    }
}

/// Whether `name` can be a path component: ASCII letters, digits, `-`, `_` and `.`, not a dot
/// name, at most 128 bytes.
pub(crate) fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A fresh random id of 16 hex digits.
pub(crate) fn random_id() -> String {
    hex::encode(rand::random::<[u8; 8]>())
}

/// Writes `contents` under a temporary name and renames it into place: a reader sees the old
/// file or the new one. Not synced, like the state file it describes (see [`copy_hashing`]):
/// after a host crash a missing or torn file is evidence of lost memory, never restored.
fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    let tmp = path.with_file_name(name);
    std::fs::write(&tmp, contents).map_err(MicrovmError::store(&tmp))?;
    std::fs::rename(&tmp, path).map_err(MicrovmError::store(path))
}

fn remove_if_there(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(MicrovmError::store(path)(err))
        }
        _ => Ok(()),
    }
}

/// Copies `from` to a new file at `to`, hashing on the way. The sha256 (hex) and the size.
///
/// The file is not synced: that would double a snapshot's time. A snapshot survives the
/// daemon's death in the page cache; one torn by a host crash fails its checksum and is
/// reported as memory lost, never restored.
pub(crate) fn copy_hashing(mut from: impl Read, to: &Path) -> std::io::Result<(String, u64)> {
    let mut file = std::fs::File::create(to)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0_u8; 1 << 20];
    let mut bytes = 0_u64;
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        hasher.update(&buffer[..read]);
        file.write_all(&buffer[..read])?;
        bytes += read as u64;
    }
    Ok((hex::encode(hasher.finalize()), bytes))
}

/// Deletes `paths` (files [`Store::release`] returned); a failure is logged, since nothing
/// refers to them any more.
pub(crate) fn remove_files(paths: &[PathBuf]) {
    for path in paths {
        if let Err(err) = remove_if_there(path) {
            tracing::warn!(error = %err, "cannot delete an unheld snapshot file");
        }
    }
}

/// The sha256 of a file's contents, in hex.
pub(crate) fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0_u8; 1 << 20];
    let mut bytes = 0_u64;
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        bytes += read as u64;
    }
    Ok((hex::encode(hasher.finalize()), bytes))
}

impl Store {
    /// Opens (creating) the store at `root`. Run directories left by an earlier process are
    /// removed: their VMs died with it.
    pub(crate) fn open(root: &Path) -> Result<Self> {
        let sessions = root.join("sessions");
        std::fs::create_dir_all(&sessions).map_err(MicrovmError::store(&sessions))?;
        let run = root.join("run");
        if run.exists() {
            std::fs::remove_dir_all(&run).map_err(MicrovmError::store(&run))?;
        }
        std::fs::create_dir_all(&run).map_err(MicrovmError::store(&run))?;
        let root = std::fs::canonicalize(root).map_err(MicrovmError::store(root))?;
        Ok(Self {
            root,
            next_run: AtomicU64::new(0),
        })
    }

    /// A fresh run directory for one VM (short: it holds a unix socket path).
    pub(crate) fn run_dir(&self) -> PathBuf {
        let n = self.next_run.fetch_add(1, Ordering::Relaxed);
        self.root.join("run").join(n.to_string())
    }

    pub(crate) fn session_dir(&self, session: &str) -> Result<PathBuf> {
        if !safe_name(session) {
            return Err(MicrovmError::UnsafeSessionUid(session.to_owned()));
        }
        Ok(self.root.join("sessions").join(session))
    }

    fn state_path(&self, name: &SnapshotName) -> Result<PathBuf> {
        Ok(self
            .session_dir(&name.session)?
            .join(format!("{}.vmstate", name.id)))
    }

    /// A new snapshot name for `session`, and the temporary file its state is written to.
    pub(crate) fn begin(&self, session: &str) -> Result<(SnapshotName, PathBuf)> {
        let dir = self.session_dir(session)?;
        std::fs::create_dir_all(&dir).map_err(MicrovmError::store(&dir))?;
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let name = SnapshotName {
            session: session.to_owned(),
            id: format!("{millis:013}-{}", random_id()),
        };
        let tmp = dir.join(format!("{}.vmstate.tmp", name.id));
        Ok((name, tmp))
    }

    /// Publishes a state file written (and synced) to `tmp` with its checksum `sha256` and size
    /// `bytes`: metadata, rename, then the session holds it and every other snapshot of the
    /// session is deleted.
    pub(crate) fn commit(
        &self,
        name: &SnapshotName,
        tmp: &Path,
        (sha256, bytes): (String, u64),
        instance: &str,
        launch: &Launch,
    ) -> Result<Meta> {
        let state = self.state_path(name)?;
        let meta = Meta {
            session: name.session.clone(),
            snapshot: name.id.clone(),
            instance: instance.to_owned(),
            launch: launch.clone(),
            sha256: sha256.clone(),
            bytes,
        };
        let file_name = format!("{}.vmstate", name.id);
        write_atomically(
            &state.with_extension("vmstate.sha256"),
            format!("{sha256}  {file_name}\n").as_bytes(),
        )?;
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| MicrovmError::Store {
            path: state.clone(),
            source: std::io::Error::other(e),
        })?;
        write_atomically(&state.with_extension("json"), &json)?;
        std::fs::rename(tmp, &state).map_err(MicrovmError::store(&state))?;
        self.hold(&name.session, Some(&name.id))?;
        Ok(meta)
    }

    /// The id of the snapshot `session` holds, if any.
    pub(crate) fn held(&self, session: &str) -> Result<Option<String>> {
        let path = self.session_dir(session)?.join(HELD);
        match std::fs::read_to_string(&path) {
            Ok(id) => Ok(Some(id.trim().to_owned()).filter(|id| !id.is_empty())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(MicrovmError::store(path)(err)),
        }
    }

    /// Sets (or, with `None`, clears) the snapshot `session` holds, then deletes the others.
    pub(crate) fn hold(&self, session: &str, id: Option<&str>) -> Result<()> {
        let dir = self.session_dir(session)?;
        match id {
            Some(id) => write_atomically(&dir.join(HELD), id.as_bytes())?,
            None => remove_if_there(&dir.join(HELD))?,
        }
        self.reclaim_unheld(session, id)
    }

    /// Makes `session` hold no snapshot and returns its files, now unheld, for the caller to
    /// delete off its critical path (unlinking a ~100 MB file takes a while).
    pub(crate) fn release(&self, session: &str) -> Result<Vec<PathBuf>> {
        remove_if_there(&self.session_dir(session)?.join(HELD))?;
        self.unheld(session, None)
    }

    /// Deletes every snapshot of `session` except `keep`.
    fn reclaim_unheld(&self, session: &str, keep: Option<&str>) -> Result<()> {
        for path in self.unheld(session, keep)? {
            remove_if_there(&path)?;
        }
        Ok(())
    }

    /// The files of every snapshot of `session` except `keep`.
    fn unheld(&self, session: &str, keep: Option<&str>) -> Result<Vec<PathBuf>> {
        let dir = self.session_dir(session)?;
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(MicrovmError::store(dir)(err)),
        };
        let mut unheld = Vec::new();
        for entry in entries.flatten() {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            if file == HELD {
                continue;
            }
            let id = file.split('.').next().unwrap_or_default();
            if Some(id) != keep {
                unheld.push(entry.path());
            }
        }
        Ok(unheld)
    }

    /// The metadata and state file of snapshot `name`, or the reason its memory is gone.
    pub(crate) fn load(&self, name: &SnapshotName) -> Result<(Meta, PathBuf)> {
        let state = self.state_path(name)?;
        let lost = |reason: String| MicrovmError::lost(&name.session, reason);
        let meta_path = state.with_extension("json");
        let json = match std::fs::read(&meta_path) {
            Ok(json) => json,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(lost(format!("snapshot {} has no metadata file", name.id)));
            }
            Err(err) => return Err(MicrovmError::store(meta_path)(err)),
        };
        let meta: Meta = serde_json::from_slice(&json)
            .map_err(|e| lost(format!("snapshot {} metadata is corrupt: {e}", name.id)))?;
        if meta.session != name.session || meta.snapshot != name.id {
            return Err(lost(format!(
                "snapshot {} metadata names another snapshot",
                name.id
            )));
        }
        if !state.is_file() {
            return Err(lost(format!(
                "snapshot file {} is missing",
                state.display()
            )));
        }
        Ok((meta, state))
    }

    /// Checks the state file against both recorded checksums.
    pub(crate) async fn verify(&self, name: &SnapshotName, meta: &Meta) -> Result<()> {
        let state = self.state_path(name)?;
        let beside =
            std::fs::read_to_string(state.with_extension("vmstate.sha256")).unwrap_or_default();
        let beside = beside
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        let path = state.clone();
        let computed = tokio::task::spawn_blocking(move || sha256_file(&path))
            .await
            .map_err(|e| MicrovmError::Store {
                path: state.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
        let lost = |reason: String| Err(MicrovmError::lost(&name.session, reason));
        match computed {
            Ok((sum, bytes)) if sum == meta.sha256 && sum == beside && bytes == meta.bytes => {
                Ok(())
            }
            Ok(_) => lost(format!(
                "snapshot file {} does not match its checksum",
                state.display()
            )),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                lost(format!("snapshot file {} is missing", state.display()))
            }
            Err(err) => Err(MicrovmError::store(state)(err)),
        }
    }

    /// Deletes everything kept for `session`.
    pub(crate) fn remove_session(&self, session: &str) -> Result<()> {
        let dir = self.session_dir(session)?;
        match std::fs::remove_dir_all(&dir) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(MicrovmError::store(dir)(err))
            }
            _ => Ok(()),
        }
    }

    /// The files kept for `session` (for tests and the benchmark).
    pub(crate) fn files_of(&self, session: &str) -> Vec<PathBuf> {
        let Ok(dir) = self.session_dir(session) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unsafe_ones_are_refused() {
        let name = SnapshotName {
            session: "abc-1".into(),
            id: "0001-ff".into(),
        };
        assert_eq!(SnapshotName::parse(&name.uri()), Some(name));
        for bad in [
            "microvm://../x",
            "microvm://a/..",
            "microvm://a/b/c",
            "file:///a/b",
            "microvm://a",
            "microvm://a b/c",
        ] {
            assert_eq!(SnapshotName::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_streamed_copy_is_written_and_hashed_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("copy");
        let (sum, bytes) = copy_hashing(&b"abc"[..], &to).unwrap();
        assert_eq!(
            sum,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(bytes, 3);
        assert_eq!(std::fs::read(&to).unwrap(), b"abc");
        // Several buffers' worth: the streamed sum is the file's.
        let big: Vec<u8> = (0..3_000_000_u32).map(|i| (i % 251) as u8).collect();
        let streamed = copy_hashing(&big[..], &to).unwrap();
        assert_eq!(streamed, sha256_file(&to).unwrap());
        assert_eq!(streamed.1, 3_000_000);
    }

    #[test]
    fn release_unholds_at_once_and_hands_back_the_files_to_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let session = store.session_dir("s").unwrap();
        std::fs::create_dir_all(&session).unwrap();
        for file in ["a.vmstate", "a.json", "a.vmstate.sha256"] {
            std::fs::write(session.join(file), b"x").unwrap();
        }
        write_atomically(&session.join(HELD), b"a").unwrap();
        assert_eq!(store.held("s").unwrap().as_deref(), Some("a"));
        let unheld = store.release("s").unwrap();
        assert_eq!(store.held("s").unwrap(), None);
        assert_eq!(unheld.len(), 3, "{unheld:?}");
        remove_files(&unheld);
        assert!(store.files_of("s").is_empty());
    }

    #[test]
    fn sha256_of_a_known_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        let (sum, bytes) = sha256_file(&path).unwrap();
        assert_eq!(
            sum,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(bytes, 3);
    }
}
