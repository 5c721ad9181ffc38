//! [`DirectiveModel`]: an offline model that calls the tool a person names, so the whole tool
//! loop (tool definitions, mediation, approval, execution, results) can be tried and tested on a
//! machine with no model provider. It decides nothing by itself:
//!
//! - a last message whose text is `/tool NAME {json arguments}` (arguments optional) is answered
//!   with one call of tool `NAME`, when the request offers a tool of that name;
//! - a last message holding tool results is answered with their text, one line per result
//!   (`NAME: text`, or `NAME failed: error`);
//! - anything else is answered with the list of offered tools and how to call one.
//!
//! Token usage counts whitespace-separated words, so usage records and totals have something to
//! show; they are not a tokenizer's counts.

use agentsessions_api::{
    self as api, DeltaSink, JsonObject, Message, ModelProvider, ModelRequest, ModelResponse, Part,
    TextPart, ToolCall, ToolResult, Usage,
};
use async_trait::async_trait;

/// The offline tool-directing model; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectiveModel;

impl DirectiveModel {
    /// The provider name.
    pub const NAME: &str = "offline-directive";
    /// The only model it serves.
    pub const MODEL: &str = "directive";
    /// What a message starts with to ask for a tool call.
    pub const PREFIX: &str = "/tool ";

    /// A directive model.
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl ModelProvider for DirectiveModel {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn default_model(&self) -> &str {
        Self::MODEL
    }

    /// Never streams and never fails: a directive it cannot follow is answered in text.
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: Option<&dyn DeltaSink>,
    ) -> api::Result<ModelResponse> {
        let parts = match request.messages.last() {
            Some(last) if has_results(last) => vec![text(report_results(request, last))],
            Some(last) => match directive(request, &last.text()) {
                Ok(call) => vec![Part::ToolCall(call)],
                Err(explanation) => vec![text(explanation)],
            },
            None => vec![text(usage_hint(request))],
        };
        let message = Message {
            role: "assistant".to_owned(),
            parts,
        };
        let usage = Usage {
            model: if request.model.is_empty() {
                Self::MODEL.to_owned()
            } else {
                request.model.clone()
            },
            input_tokens: request.messages.iter().map(words).sum(),
            output_tokens: words(&message),
            ..Usage::default()
        };
        Ok(ModelResponse { message, usage })
    }
}

fn text(text: String) -> Part {
    Part::Text(TextPart { text })
}

fn has_results(message: &Message) -> bool {
    message
        .parts
        .iter()
        .any(|part| matches!(part, Part::ToolResult(_)))
}

/// The call `text` asks for, or why there is none.
fn directive(request: &ModelRequest, text: &str) -> Result<ToolCall, String> {
    let Some(rest) = text.trim_start().strip_prefix(DirectiveModel::PREFIX) else {
        return Err(usage_hint(request));
    };
    let rest = rest.trim();
    let (name, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if !request.tools.iter().any(|tool| tool.name == name) {
        return Err(format!(
            "no tool named {name:?} is offered. {}",
            usage_hint(request)
        ));
    }
    let args = match arguments.trim() {
        "" => JsonObject::new(),
        json => match serde_json::from_str::<serde_json::Value>(json) {
            Ok(serde_json::Value::Object(args)) => args,
            Ok(_) | Err(_) => {
                return Err(format!(
                    "the arguments of {name} must be one JSON object: {json}"
                ));
            }
        },
    };
    Ok(ToolCall {
        // Unique within the request; the harness owns the journaled call id.
        id: format!("directive-{}", request.messages.len()),
        tool: name.to_owned(),
        args: Some(args),
        ..ToolCall::default()
    })
}

fn usage_hint(request: &ModelRequest) -> String {
    if request.tools.is_empty() {
        return "no tools are offered to this session".to_owned();
    }
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    format!(
        "say `{}NAME {{json arguments}}` to call one of: {}",
        DirectiveModel::PREFIX,
        names.join(", ")
    )
}

/// One line per tool result in `message`, named after the call it answers.
fn report_results(request: &ModelRequest, message: &Message) -> String {
    let lines: Vec<String> = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolResult(result) => Some(report(request, result)),
            _ => None,
        })
        .collect();
    lines.join("\n")
}

fn report(request: &ModelRequest, result: &ToolResult) -> String {
    let name = request
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|part| match part {
            Part::ToolCall(call) if call.id == result.id => Some(call.tool.as_str()),
            _ => None,
        })
        .unwrap_or("tool");
    if result.is_error {
        return format!("{name} failed: {}", result.error);
    }
    let content: String = result
        .content
        .iter()
        .filter_map(|part| match part {
            Part::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    if content.is_empty() {
        let output = result
            .output
            .as_ref()
            .map(|o| serde_json::Value::Object(o.clone()).to_string())
            .unwrap_or_default();
        format!("{name}: {output}")
    } else {
        format!("{name}: {content}")
    }
}

fn words(message: &Message) -> i64 {
    let count = message.text().split_whitespace().count();
    i64::try_from(count).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use agentsessions_api::ToolDefinition;

    use super::*;

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            messages,
            tools: vec![ToolDefinition {
                name: "time__get_current_time".into(),
                ..ToolDefinition::default()
            }],
            ..ModelRequest::default()
        }
    }

    async fn answer(request: &ModelRequest) -> Message {
        DirectiveModel
            .complete(request, None)
            .await
            .unwrap()
            .message
    }

    #[tokio::test]
    async fn a_directive_becomes_one_call_with_its_arguments() {
        let ask = Message::text_message(
            "user",
            r#"/tool time__get_current_time {"timezone": "UTC"}"#,
        );
        let message = answer(&request(vec![ask])).await;
        let [Part::ToolCall(call)] = message.parts.as_slice() else {
            panic!("{message:?}")
        };
        assert_eq!(call.tool, "time__get_current_time");
        assert_eq!(call.args.as_ref().unwrap()["timezone"], "UTC");
    }

    #[tokio::test]
    async fn an_unknown_tool_or_bad_arguments_are_answered_in_text() {
        for ask in ["/tool nope", "/tool time__get_current_time [1]", "hello"] {
            let message = answer(&request(vec![Message::text_message("user", ask)])).await;
            assert!(matches!(message.parts.as_slice(), [Part::Text(_)]), "{ask}");
            assert!(message.text().contains("time__get_current_time"), "{ask}");
        }
    }

    #[tokio::test]
    async fn results_are_reported_by_tool_name() {
        let call = ToolCall {
            id: "c1".into(),
            tool: "time__get_current_time".into(),
            ..ToolCall::default()
        };
        let asked = Message {
            role: "assistant".into(),
            parts: vec![Part::ToolCall(call)],
        };
        let result = ToolResult {
            id: "c1".into(),
            content: vec![text("12:00".into())],
            ..ToolResult::default()
        };
        let results = Message {
            role: "tool".into(),
            parts: vec![Part::ToolResult(result)],
        };
        let response = DirectiveModel
            .complete(&request(vec![asked, results]), None)
            .await
            .unwrap();
        assert_eq!(response.message.text(), "time__get_current_time: 12:00");
        assert_eq!(response.usage.model, DirectiveModel::MODEL);
        assert!(response.usage.output_tokens > 0);
    }
}
