//! Standard output: text lines for people, or JSON Lines (one serialized value per line).

use std::io::Write as _;

use serde::Serialize;

use crate::error::CliError;

/// Lines to stdout; a closed pipe ends the program quietly.
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
        writeln!(self.stdout, "{text}")?;
        Ok(())
    }

    /// One JSON value on its own line.
    pub(crate) fn value(&mut self, value: &impl Serialize) -> Result<(), CliError> {
        serde_json::to_writer(&mut self.stdout, value)?;
        writeln!(self.stdout)?;
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
        write!(self.stdout, "{text}")?;
        self.stdout.flush()?;
        Ok(())
    }

    pub(crate) fn flush(&mut self) {
        let _ignored = self.stdout.flush();
    }
}
