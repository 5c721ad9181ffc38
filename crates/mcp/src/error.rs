//! [`McpError`]: why the hub could not start, or could not reach its ledger.

/// What went wrong in the MCP hub. Tool-call failures the model should see (a server down, a
/// timeout, an unknown tool) are not errors: they are error results the model can act on.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// A `[[mcp_servers]]` entry is invalid.
    #[error("[[mcp_servers]] {server:?}: {reason}")]
    Config {
        /// The entry's name.
        server: String,
        /// What to fix.
        reason: String,
    },
    /// The tool-call ledger could not be opened, read or written.
    #[error("tool-call ledger {path}: {reason}")]
    Ledger {
        /// The ledger file (`:memory:` for an in-memory one).
        path: String,
        /// Why.
        reason: String,
    },
}

/// The crate's result type.
pub type Result<T, E = McpError> = std::result::Result<T, E>;
