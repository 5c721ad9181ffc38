//! Reads one JSON value per line on stdin and writes its RFC 8785 canonical form (serde_jcs)
//! per line on stdout, or `!` and the error for a line it cannot canonicalize.

use std::io::{BufRead, BufWriter, Write};

fn main() -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut out = BufWriter::new(std::io::stdout().lock());
    for line in stdin.lock().lines() {
        let line = line?;
        let canonical = serde_json::from_str::<serde_json::Value>(&line)
            .map_err(|e| e.to_string())
            .and_then(|value| serde_jcs::to_string(&value).map_err(|e| e.to_string()));
        match canonical {
            Ok(text) => writeln!(out, "{text}")?,
            Err(reason) => writeln!(out, "!{reason}")?,
        }
        out.flush()?;
    }
    Ok(())
}
