//! Message content: messages, parts, tool calls and results, model requests and usage.

use std::collections::BTreeMap;

/// A JSON object as carried by `google.protobuf.Struct` (tool arguments, tool output,
/// structured data parts, tool input schemas). Numbers are doubles on the wire.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// A role-tagged sequence of content parts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The content, in order.
    pub parts: Vec<Part>,
}

impl Message {
    /// A message with one text part.
    pub fn text_message(role: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            parts: vec![Part::Text(TextPart { text: text.into() })],
        }
    }

    /// The concatenation of the message's text parts; other parts are ignored.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match part {
                Part::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// One unit of content. Exactly one kind; [`Part::Empty`] is a part with nothing set, which the
/// wire carries as an empty `Part` message.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Text.
    Text(TextPart),
    /// A file, inline or by URI.
    File(FilePart),
    /// Structured data.
    Data(JsonObject),
    /// An opaque provider reasoning block, replayed verbatim.
    Reasoning(ReasoningPart),
    /// A model's request to call a tool.
    ToolCall(ToolCall),
    /// A tool's result fed back to the model.
    ToolResult(ToolResult),
    /// A part with no member set.
    Empty,
}

/// A text content block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextPart {
    /// The text.
    pub text: String,
}

/// Media carried inline or by URI. When both `bytes` and `uri` are set, the bytes win on the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilePart {
    /// MIME type.
    pub mime: String,
    /// Inline content.
    pub bytes: Vec<u8>,
    /// External location of the content.
    pub uri: String,
    /// Digest of the URI target, so the chain covers externalized bytes.
    pub digest: String,
    /// Display name.
    pub name: String,
}

/// An opaque, provider-tagged reasoning block. The host never interprets `opaque`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReasoningPart {
    /// Provider name, e.g. `anthropic`.
    pub provider: String,
    /// Model id that produced it.
    pub model_id: String,
    /// Inline opaque bytes (wins over `opaque_uri` when both are set).
    pub opaque: Vec<u8>,
    /// Externalized opaque bytes.
    pub opaque_uri: String,
    /// Digest of the `opaque_uri` target.
    pub opaque_digest: String,
    /// Optional, non-authoritative summary.
    pub summary: Vec<Part>,
    /// Provider item id.
    pub item_id: String,
    /// Position within the turn.
    pub ordinal: i32,
    /// Validity scope (the execution id).
    pub validity_scope: String,
}

/// How a tool call is executed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Mediation {
    /// Not set (the wire's zero value).
    #[default]
    Unspecified,
    /// The harness executes the tool and reports the result for audit.
    InHarnessReported,
    /// The host executes the tool and returns the result.
    ControllerMediated,
    /// The call pauses for human or policy approval.
    RequiresApproval,
}

impl Mediation {
    /// The v0.3.0 API's name (`IN_HARNESS_REPORTED` …); empty for unspecified.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::InHarnessReported => "IN_HARNESS_REPORTED",
            Self::ControllerMediated => "CONTROLLER_MEDIATED",
            Self::RequiresApproval => "REQUIRES_APPROVAL",
        }
    }

    /// Parses a v0.3.0 API name; `None` for an unknown name. Empty is unspecified.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "" => Self::Unspecified,
            "IN_HARNESS_REPORTED" => Self::InHarnessReported,
            "CONTROLLER_MEDIATED" => Self::ControllerMediated,
            "REQUIRES_APPROVAL" => Self::RequiresApproval,
            _ => return None,
        })
    }
}

/// A tool invocation, shaped like an MCP tool call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    /// Call id, unique within the session.
    pub id: String,
    /// Tool name.
    pub tool: String,
    /// Structured arguments.
    pub args: Option<JsonObject>,
    /// How the call is executed.
    pub mediation: Mediation,
    /// Deduplicates a retried side-effecting call on the tool side.
    pub idempotency_key: String,
}

/// Machine-readable receipt status of a tool result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ToolResultCode {
    /// Legacy receipts, and success when `is_error` is false.
    #[default]
    Unspecified,
    /// The approval was denied; the executor was not called.
    ApprovalDenied,
    /// The executor failed after approval.
    ExecutorError,
}

impl ToolResultCode {
    /// The numeric code shared with the wire enum.
    pub fn number(self) -> i32 {
        match self {
            Self::Unspecified => 0,
            Self::ApprovalDenied => 1,
            Self::ExecutorError => 2,
        }
    }

    /// The code for a wire number; `None` if unknown.
    pub fn from_number(n: i32) -> Option<Self> {
        Some(match n {
            0 => Self::Unspecified,
            1 => Self::ApprovalDenied,
            2 => Self::ExecutorError,
            _ => return None,
        })
    }
}

/// The outcome of a tool call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolResult {
    /// Id of the call this answers.
    pub id: String,
    /// Inline structured output.
    pub output: Option<JsonObject>,
    /// Externalized output.
    pub output_uri: String,
    /// Digest of the `output_uri` target.
    pub output_digest: String,
    /// Whether the tool failed.
    pub is_error: bool,
    /// Error text.
    pub error: String,
    /// The model-facing result content.
    pub content: Vec<Part>,
    /// Receipt status.
    pub code: ToolResultCode,
    /// Seq of the host-owned APPROVAL_REQUEST this receipt answers.
    pub approval_request_seq: i64,
    /// Seq of the committed APPROVAL_RESULT this receipt binds.
    pub approval_decision_seq: i64,
    /// A host decision handed to a direct sink caller. Transient: never on the wire, never
    /// hashed; the durable decision is its own APPROVAL_RESULT record.
    pub approval: Option<ApprovalResult>,
}

/// The error of the result a host records for a call that was open when it closed the call's
/// turn without running it on (extensions §9): the call may have run.
pub const OUTCOME_UNKNOWN: &str = "outcome unknown, not retried: the turn was closed before this \
     call's result was recorded; it may have run, so check its effects before calling it again";

/// The error of the result a host records for a gated call whose approval was never decided when
/// it closed the call's turn: the call did not run.
pub const NOT_RUN: &str = "not run: the turn was closed before this call's approval was decided";

impl ToolResult {
    /// Whether this is a gated call's receipt: it names the approval request or decision seq it
    /// answers.
    pub fn carries_approval_seqs(&self) -> bool {
        self.approval_request_seq != 0 || self.approval_decision_seq != 0
    }

    /// The result that settles call `id` of a turn closed while the call was open: an error
    /// whose text is [`OUTCOME_UNKNOWN`], code [`ToolResultCode::ExecutorError`].
    pub fn outcome_unknown(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            is_error: true,
            error: OUTCOME_UNKNOWN.to_owned(),
            code: ToolResultCode::ExecutorError,
            ..Self::default()
        }
    }

    /// The result that settles gated call `id` of a turn closed before its approval was
    /// decided: an error whose text is [`NOT_RUN`].
    pub fn not_run(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            is_error: true,
            error: NOT_RUN.to_owned(),
            ..Self::default()
        }
    }

    /// Whether this is a result a host recorded when it closed the call's turn without running
    /// it on ([`ToolResult::outcome_unknown`], [`ToolResult::not_run`]).
    pub fn settles_closed_turn(&self) -> bool {
        self.is_error && (self.error == OUTCOME_UNKNOWN || self.error == NOT_RUN)
    }
}

/// A tool offered to a model on one call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolDefinition {
    /// Tool name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Option<JsonObject>,
}

/// Whether the model may call tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ToolChoiceMode {
    /// Provider default.
    #[default]
    Unspecified,
    /// The model decides.
    Auto,
    /// The model must not call a tool.
    None,
    /// The model must call a tool.
    Required,
}

/// Constrains whether and which tool the model calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolChoice {
    /// The mode.
    pub mode: ToolChoiceMode,
    /// Forces one tool; meaningful only with [`ToolChoiceMode::Required`].
    pub name: String,
}

/// A tool the harness can call and its default mediation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// Default mediation.
    pub mediation: Mediation,
}

/// A model call as recorded for audit and cost. The journal keeps only `model`, `input_hash` and
/// `id`; the request content rides the wire only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelCall {
    /// Model id.
    pub model: String,
    /// Provider parameters.
    pub params: BTreeMap<String, String>,
    /// The model-input hash (I0).
    pub input_hash: String,
    /// Correlation id of the served result.
    pub id: String,
}

/// A model call as a harness asks for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    /// Model id; empty means the execution's default.
    pub model: String,
    /// Context sent to the model.
    pub messages: Vec<Message>,
    /// Provider parameters. `None` and an empty map hash differently (I0).
    pub params: Option<BTreeMap<String, String>>,
    /// Tools offered on this call, in order.
    pub tools: Vec<ToolDefinition>,
    /// Tool constraint; `None` is the provider default.
    pub tool_choice: Option<ToolChoice>,
}

/// A model's completion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelResponse {
    /// The assistant message (text, reasoning and tool-call parts).
    pub message: Message,
    /// Token accounting.
    pub usage: Usage,
}

/// Token accounting for one model call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// Model id.
    pub model: String,
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// Reasoning tokens.
    pub reasoning_tokens: i64,
    /// Prompt tokens served from the provider's prompt cache (part of `input_tokens` for
    /// OpenAI, counted apart from it by Anthropic); zero when the provider reports none.
    pub cached_input_tokens: i64,
}

/// An ephemeral streaming chunk: transport only, never journaled, never hashed, never replayed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    /// The execution producing it.
    pub execution_id: String,
    /// Which content part it extends.
    pub part_index: i32,
    /// Text chunk.
    pub chunk: String,
    /// Last chunk of that part.
    pub done: bool,
}

/// An approval request for a tool call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The call awaiting approval.
    pub tool_call_id: String,
    /// Why approval is needed.
    pub reason: String,
}

/// A committed approval decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalResult {
    /// The call decided.
    pub tool_call_id: String,
    /// Whether it was approved.
    pub approved: bool,
    /// Why.
    pub reason: String,
    /// Seq of the host-owned APPROVAL_REQUEST; zero only in legacy decisions.
    pub request_seq: i64,
}

/// Identifies one host-owned approval request within its session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ApprovalRef {
    /// The execution that asked.
    pub execution_id: String,
    /// The call awaiting approval.
    pub tool_call_id: String,
    /// The positive journal seq of the request.
    pub request_seq: i64,
}

/// A caller's decision on one request. `identity` is provenance, not a credential.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalDecision {
    /// The execution that asked.
    pub execution_id: String,
    /// The call decided.
    pub tool_call_id: String,
    /// Seq of the request.
    pub request_seq: i64,
    /// The decision.
    pub approved: bool,
    /// Why.
    pub reason: String,
    /// Who decided (provenance).
    pub identity: crate::IdentityRef,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_concatenates_only_text_parts() {
        let mut m = Message::text_message("user", "a");
        m.parts.push(Part::Empty);
        m.parts.push(Part::Text(TextPart { text: "b".into() }));
        assert_eq!(m.text(), "ab");
    }

    #[test]
    fn mediation_names_round_trip() {
        for m in [
            Mediation::Unspecified,
            Mediation::InHarnessReported,
            Mediation::ControllerMediated,
            Mediation::RequiresApproval,
        ] {
            assert_eq!(Mediation::parse(m.as_str()), Some(m));
        }
        assert_eq!(Mediation::parse("BOGUS"), None);
    }

    // extensions §9: the results a host closes a turn with are errors it
    // recognizes again; a tool's own error with other words is not one of them.
    #[test]
    fn results_of_a_closed_turn_are_recognized() {
        let unknown = ToolResult::outcome_unknown("c1");
        assert!(unknown.is_error && unknown.settles_closed_turn());
        assert_eq!(unknown.code, ToolResultCode::ExecutorError);
        let not_run = ToolResult::not_run("c2");
        assert!(not_run.settles_closed_turn());
        assert_eq!(not_run.code, ToolResultCode::Unspecified);
        let own = ToolResult {
            is_error: true,
            error: "disk full".into(),
            ..ToolResult::default()
        };
        assert!(!own.settles_closed_turn());
    }
}
