//! The seeds of a fuzz target: the files of `corpus/<target>/`, valid inputs and the inputs that
//! once found a bug.

use std::path::{Path, PathBuf};

/// Why a corpus could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// The directory or one of its files could not be read.
    #[error("corpus {path}: {source}")]
    Read {
        /// What was being read.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A target without seeds: mutations need at least one.
    #[error("corpus {0} holds no seeds")]
    Empty(PathBuf),
}

/// The seeds of one target, in file-name order (so a run is reproducible).
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Each seed's file name and bytes.
    pub seeds: Vec<(String, Vec<u8>)>,
}

impl Corpus {
    /// The directory holding every target's corpus.
    pub fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
    }

    /// The seeds of `target`.
    ///
    /// # Errors
    /// The directory cannot be read, or holds no file.
    pub fn load(target: &str) -> Result<Self, CorpusError> {
        let dir = Self::root().join(target);
        let read_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CorpusError::Read { path, source }
        };
        let mut seeds = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(read_err(&dir))? {
            let path = entry.map_err(read_err(&dir))?.path();
            if path.is_file() {
                let bytes = std::fs::read(&path).map_err(read_err(&path))?;
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                seeds.push((name, bytes));
            }
        }
        if seeds.is_empty() {
            return Err(CorpusError::Empty(dir));
        }
        seeds.sort();
        Ok(Self { seeds })
    }

    /// The seed named `name`.
    pub fn seed(&self, name: &str) -> Option<&[u8]> {
        self.seeds
            .iter()
            .find(|(seed, _)| seed == name)
            .map(|(_, bytes)| bytes.as_slice())
    }

    /// The seeds' bytes.
    pub fn bytes(&self) -> Vec<Vec<u8>> {
        self.seeds.iter().map(|(_, bytes)| bytes.clone()).collect()
    }
}
