//! Standard output: text lines for people, or JSON Lines (one serialized value per line).

use std::io::Write as _;

use serde::Serialize;

use crate::error::CliError;

/// Lines to stdout. Every write goes through [`Out::bytes`], and its I/O error becomes a
/// [`CliError`] by the one `From`, so a closed pipe ends any command quietly
/// ([`CliError::ClosedPipe`]).
pub(crate) struct Out {
    stdout: std::io::StdoutLock<'static>,
    json: bool,
}

impl Out {
    pub(crate) fn new(json: bool) -> Self {
        Self {
            stdout: std::io::stdout().lock(),
            json,
        }
    }

    /// Whether the caller asked for JSON Lines.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    pub(crate) fn line(&mut self, text: &str) -> Result<(), CliError> {
        self.bytes(text.as_bytes())?;
        self.bytes(b"\n")
    }

    /// One JSON value on its own line (encoded first, so an encoding error is never mistaken
    /// for a write error).
    pub(crate) fn value(&mut self, value: &impl Serialize) -> Result<(), CliError> {
        let mut encoded = serde_json::to_vec(value)?;
        encoded.push(b'\n');
        self.bytes(&encoded)
    }

    /// `bytes` as they are (a completion script, an export).
    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> Result<(), CliError> {
        self.stdout.write_all(bytes)?;
        Ok(())
    }

    /// `value` with --json, else the text `line` makes.
    pub(crate) fn either(
        &mut self,
        value: &impl Serialize,
        line: impl FnOnce() -> String,
    ) -> Result<(), CliError> {
        if self.json {
            self.value(value)
        } else {
            self.line(&line())
        }
    }

    pub(crate) fn partial(&mut self, text: &str) -> Result<(), CliError> {
        self.bytes(text.as_bytes())?;
        self.stdout.flush()?;
        Ok(())
    }

    pub(crate) fn flush(&mut self) {
        let _ignored = self.stdout.flush();
    }
}
