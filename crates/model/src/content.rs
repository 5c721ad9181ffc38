//! Content rules both HTTP dialects share: which model a request means, a tool's parameter
//! schema, the parts a role cannot send, and how tool arguments and reasoning bytes are checked.

use agentsessions_api::{JsonObject, ReasoningPart, ToolDefinition};
use serde_json::{Value, json};

use crate::error::{ModelError, Result};

/// The model a request names: `""` and `"echo"` (the offline stub's name, which a harness may
/// carry over) mean the configured default (semantics §7.4).
pub(crate) fn resolve_model<'a>(requested: &'a str, default: &'a str) -> &'a str {
    match requested {
        "" | "echo" => default,
        named => named,
    }
}

/// Parses a tool call's JSON arguments, which must be an object; empty means no arguments (some
/// servers send `""` for a tool without parameters).
pub(crate) fn parse_arguments(id: &str, tool: &str, raw: &str) -> Result<JsonObject> {
    let invalid = |detail: String| ModelError::InvalidToolArguments {
        id: id.to_owned(),
        tool: tool.to_owned(),
        detail,
    };
    if raw.trim().is_empty() {
        return Ok(JsonObject::new());
    }
    match serde_json::from_str(raw) {
        Ok(Value::Object(args)) => Ok(args),
        Ok(other) => Err(invalid(format!(
            "expected a json object, got {}",
            kind(&other)
        ))),
        Err(err) => Err(invalid(format!("not json: {err}"))),
    }
}

/// The inline bytes of a reasoning part being sent back; externalized bytes must have been
/// inlined by the host first, since a provider cannot fetch them.
pub(crate) fn inline_opaque(part: &ReasoningPart) -> Result<&[u8]> {
    if part.opaque.is_empty() && !part.opaque_uri.is_empty() {
        return Err(ModelError::InvalidReasoning {
            detail: format!(
                "bytes are externalized at {:?}; inline them first",
                part.opaque_uri
            ),
        });
    }
    Ok(&part.opaque)
}

/// A tool's parameter schema; a tool without one takes an empty object.
pub(crate) fn input_schema(tool: &ToolDefinition) -> Value {
    tool.input_schema.clone().map_or_else(
        || json!({"type": "object", "properties": {}}),
        Value::Object,
    )
}

/// The refusal of a `part` a message of `role` cannot carry (an empty role is the user's).
pub(crate) fn unsupported(role: &str, part: &'static str) -> ModelError {
    ModelError::UnsupportedPart {
        role: if role.is_empty() { "user" } else { role }.to_owned(),
        part,
    }
}

/// A JSON value's type name, for messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    // semantics §7.4: "" and "echo" mean the configured default.
    #[test]
    fn empty_and_echo_mean_the_default_model() {
        assert_eq!(resolve_model("", "gpt"), "gpt");
        assert_eq!(resolve_model("echo", "gpt"), "gpt");
        assert_eq!(resolve_model("other", "gpt"), "other");
    }

    // brief: a non-object or malformed arguments string is a clear error.
    #[test]
    fn arguments_must_be_a_json_object() {
        assert_eq!(parse_arguments("c", "t", " ").unwrap(), JsonObject::new());
        let args = parse_arguments("c", "t", r#"{"a":1}"#).unwrap();
        assert_eq!(args.get("a"), Some(&json!(1)));
        let err = parse_arguments("c", "t", "[1]").unwrap_err();
        assert!(err.to_string().contains("got an array"), "{err}");
        assert!(matches!(
            parse_arguments("c", "t", "{"),
            Err(ModelError::InvalidToolArguments { .. })
        ));
    }
}
