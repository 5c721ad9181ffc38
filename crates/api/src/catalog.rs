//! [`ToolCatalog`]: the tools a host offers the harnesses it runs, so a harness can hand their
//! definitions to the model and emit each call with the mediation the host requires.
//!
//! The catalog belongs to the host (tools from MCP servers, for example); the harness only reads
//! it. Its contents may change while the host runs (a server announces a new list), so a harness
//! reads it once per model call rather than once at construction.

use std::fmt::Debug;

use crate::content::{Mediation, ToolDefinition};

/// One tool a host offers: what the model sees, and how a call to it must be mediated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OfferedTool {
    /// Name, description and argument schema, as the model sees them.
    pub definition: ToolDefinition,
    /// The mediation a call must carry: [`Mediation::ControllerMediated`] for a tool the host
    /// runs, [`Mediation::RequiresApproval`] for one a person must approve first.
    pub mediation: Mediation,
}

/// The tools a host offers right now.
pub trait ToolCatalog: Send + Sync + Debug {
    /// Every tool currently offered, in a stable order (the model sees them in this order, so a
    /// changing order would change the model's input hash for no reason).
    fn offered(&self) -> Vec<OfferedTool>;
}
