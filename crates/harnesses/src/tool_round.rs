//! One tool round of the [`crate::ChatHarness`]: the tools offered on a model call, the calls a
//! model answer asks for, and running them through the sink into the tool message the next model
//! call reads.
//!
//! Every value here is derived from the execution id, the step and the call's position, never
//! drawn at random: replay and resume run the same round again and must emit the same calls
//! (ids, idempotency keys and arguments) for the host to serve what it recorded.

use agentsessions_api::{
    EventSink, Mediation, Message, OfferedTool, Part, Result, ToolCall, ToolCatalog,
    ToolDefinition, ToolResult,
};

/// The tools offered on one model call, read from the host's catalog just before the call.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Offer {
    tools: Vec<OfferedTool>,
}

impl Offer {
    /// What `catalog` offers now; nothing without a catalog.
    pub(crate) fn read(catalog: Option<&dyn ToolCatalog>) -> Self {
        Self {
            tools: catalog.map(ToolCatalog::offered).unwrap_or_default(),
        }
    }

    /// The definitions the model sees, in the catalog's order.
    pub(crate) fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .map(|tool| tool.definition.clone())
            .collect()
    }

    /// The mediation a call to `name` carries; `None` for a tool not offered.
    fn mediation(&self, name: &str) -> Option<Mediation> {
        self.tools
            .iter()
            .find(|tool| tool.definition.name == name)
            .map(|tool| tool.mediation)
    }
}

/// The tool calls a model answer asks for, in order.
pub(crate) fn requested_calls(message: &Message) -> Vec<ToolCall> {
    message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .collect()
}

/// Where a call sits in its execution: model step `step` (0-based) asked for it as call `index`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSite<'a> {
    pub(crate) execution_id: &'a str,
    pub(crate) step: u32,
    pub(crate) index: usize,
}

impl CallSite<'_> {
    /// The host-side call id. The model's own id is not used: models (and stubs) may repeat ids
    /// across steps, and a gated id must be unique within the execution.
    pub(crate) fn call_id(self) -> String {
        format!("{}/tool/{}/{}", self.execution_id, self.step, self.index)
    }

    /// The key a tool uses to recognize a retried call: the same call of the same execution.
    pub(crate) fn idempotency_key(self) -> String {
        format!("chat:{}:{}:{}", self.execution_id, self.step, self.index)
    }
}

/// Runs the calls of one model answer through `sink`, in order, and returns the `tool` message
/// holding one result per call, each under the model's own call id.
///
/// A call to a tool the host does not offer (or offers with a mediation this harness cannot
/// carry) is answered with an error result the model can read, without reaching the sink.
///
/// # Errors
///
/// Whatever [`EventSink::tool_call`] returns, unchanged: a park for approval must reach the host
/// as the sink raised it.
pub(crate) async fn run_calls(
    sink: &dyn EventSink,
    offer: &Offer,
    execution_id: &str,
    step: u32,
    calls: &[ToolCall],
) -> Result<Message> {
    let mut parts = Vec::with_capacity(calls.len());
    for (index, requested) in calls.iter().enumerate() {
        let site = CallSite {
            execution_id,
            step,
            index,
        };
        let answer = match offer.mediation(&requested.tool) {
            Some(mediation @ (Mediation::ControllerMediated | Mediation::RequiresApproval)) => {
                let call = ToolCall {
                    id: site.call_id(),
                    tool: requested.tool.clone(),
                    args: requested.args.clone(),
                    mediation,
                    idempotency_key: site.idempotency_key(),
                };
                model_facing(sink.tool_call(call).await?)
            }
            Some(_) => refused(format!(
                "tool {:?} cannot be run by this harness",
                requested.tool
            )),
            None => refused(format!("tool {:?} is not offered", requested.tool)),
        };
        parts.push(Part::ToolResult(ToolResult {
            id: requested.id.clone(),
            ..answer
        }));
    }
    Ok(Message {
        role: "tool".to_owned(),
        parts,
    })
}

/// What the model reads of a result: its output and error, without the host's receipt fields.
pub(crate) fn model_facing(result: ToolResult) -> ToolResult {
    ToolResult {
        output: result.output,
        output_uri: result.output_uri,
        output_digest: result.output_digest,
        is_error: result.is_error,
        error: result.error,
        content: result.content,
        ..ToolResult::default()
    }
}

fn refused(error: String) -> ToolResult {
    ToolResult {
        is_error: true,
        error,
        ..ToolResult::default()
    }
}
