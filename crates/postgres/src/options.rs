//! [`PostgresOptions`]: where the journal lives in the database and how hard it drives it.

use std::time::Duration;

use agentsessions_journal::JournalError;
use agentsessions_journal::rows::DEFAULT_PROJECT;

/// Options for [`PostgresJournal::connect`](crate::PostgresJournal::connect).
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// The Postgres schema holding the journal's tables; created when missing. A lowercase SQL
    /// identifier (`[a-z_][a-z0-9_]*`, at most 63 bytes), so that every host names the same
    /// tables whatever its `search_path`.
    pub schema: String,
    /// Project for sessions created without one.
    pub default_project: String,
    /// Writer tasks, each with its own connection. Each commits one batch at a time, so two or
    /// more let one batch be built while another waits for its commit to be flushed.
    pub writers: usize,
    /// Read connections kept open; at most this many reads run at once.
    pub readers: usize,
    /// Most commands one writer commits in one transaction.
    pub max_batch: usize,
    /// Queue depth of the writer channel (back-pressure on appenders).
    pub queue_depth: usize,
    /// Bound on establishing one connection, used when the connection string sets none.
    pub connect_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            schema: "agentsessions".to_owned(),
            default_project: DEFAULT_PROJECT.to_owned(),
            writers: 2,
            readers: 4,
            max_batch: 256,
            queue_depth: 4096,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// The schema name as a quoted SQL identifier, after checking it is a plain lowercase one (so it
/// can be spliced into statements without any escaping question).
pub(crate) fn quoted_schema(schema: &str) -> Result<String, JournalError> {
    let mut chars = schema.chars();
    let plain = schema.len() <= 63
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !plain {
        return Err(JournalError::InvalidArgument(format!(
            "postgres schema name {schema:?} is not a lowercase SQL identifier ([a-z_][a-z0-9_]*, \
             at most 63 bytes)"
        )));
    }
    Ok(format!("\"{schema}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert_eq!(quoted_schema("agentsessions").unwrap(), "\"agentsessions\"");
        assert_eq!(quoted_schema("_t_01").unwrap(), "\"_t_01\"");
        for bad in [
            "",
            "1abc",
            "Public",
            "a-b",
            "a\"b",
            "a;drop",
            &"x".repeat(64),
        ] {
            assert!(
                matches!(quoted_schema(bad), Err(JournalError::InvalidArgument(_))),
                "{bad}"
            );
        }
    }
}
