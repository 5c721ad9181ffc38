//! Tools from MCP servers for agentsessions hosts: the servers a daemon's configuration names are
//! started (stdio) or reached (streamable HTTP), their tools are offered to harnesses as a
//! [`agentsessions_api::ToolCatalog`], and calls to them run through
//! [`agentsessions_controller::ToolExecutor`] with at-most-once effects (semantics §3.7).

mod child;
mod config;
mod delegation;
mod error;
mod http_client;
mod hub;
mod ledger;
mod notifications;
mod outgoing;
mod result;
mod server;
mod trace_context;

pub use config::{
    ApprovalKeyword, ApprovalRule, DEFAULT_TOOL_TIMEOUT_SECS, DelegatedTokenConfig, Endpoint,
    McpServerConfig, NAME_SEPARATOR, validate_all,
};
pub use error::{McpError, Result};
pub use hub::McpHub;
pub use ledger::{Claim, StoredOutcome, ToolLedger};
pub use server::{McpHubOptions, ServerHealth, ServerStatus};
