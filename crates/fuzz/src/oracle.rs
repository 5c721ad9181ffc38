//! The independent RFC 8785 implementation the canonical-JSON target checks against:
//! `serde_jcs` from crates.io, in the `jcs-oracle` program beside this crate. It runs as a
//! process because it is a separate cargo workspace (see `jcs-oracle/Cargo.toml` for why).

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Why the oracle could not answer.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// Building or starting it failed.
    #[error("jcs-oracle: {0}")]
    Start(String),
    /// Talking to it failed.
    #[error("jcs-oracle I/O: {0}")]
    Io(#[from] std::io::Error),
    /// It refused the input (the message is its error).
    #[error("jcs-oracle refused the input: {0}")]
    Refused(String),
}

/// A running oracle: one JSON value in, its canonical form out.
#[derive(Debug)]
pub struct JcsOracle {
    child: Child,
    input: BufWriter<ChildStdin>,
    output: BufReader<ChildStdout>,
}

impl Drop for JcsOracle {
    fn drop(&mut self) {
        let _killed = self.child.kill();
        let _reaped = self.child.wait();
    }
}

/// Where the oracle is built: beside the workspace's other build output.
fn target_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| manifest.join("../../target"), PathBuf::from)
        .join("jcs-oracle")
}

impl JcsOracle {
    /// Builds the oracle (once; cargo skips an up-to-date build) and starts it.
    ///
    /// # Errors
    /// cargo or the program cannot run.
    pub fn start() -> Result<Self, OracleError> {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("jcs-oracle/Cargo.toml");
        let target = target_dir();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let built = Command::new(cargo)
            .args(["build", "--quiet", "--locked", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target)
            .env_remove("RUSTFLAGS")
            .output()
            .map_err(|e| OracleError::Start(e.to_string()))?;
        if !built.status.success() {
            return Err(OracleError::Start(
                String::from_utf8_lossy(&built.stderr).into_owned(),
            ));
        }
        let mut child = Command::new(target.join("debug/jcs-oracle"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| OracleError::Start(e.to_string()))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(OracleError::Start("no pipes".into()));
        };
        Ok(Self {
            child,
            input: BufWriter::new(input),
            output: BufReader::new(output),
        })
    }

    /// The RFC 8785 form of `json` (one JSON value, no newline inside).
    ///
    /// # Errors
    /// The oracle refused the value or went away.
    pub fn canonical(&mut self, json: &str) -> Result<String, OracleError> {
        writeln!(self.input, "{json}")?;
        self.input.flush()?;
        let mut line = String::new();
        self.output.read_line(&mut line)?;
        let line = line.trim_end_matches('\n');
        match line.strip_prefix('!') {
            Some(reason) => Err(OracleError::Refused(reason.to_owned())),
            None => Ok(line.to_owned()),
        }
    }
}
