//! Model calls: the journaled `ModelCall`, the wire-only request content it carries on the harness
//! stream, tool definitions and choice, usage, and the served `ModelResult`.

use agentsessions_api::{
    Message, ModelCall, ModelRequest, ModelResponse, ToolChoice, ToolChoiceMode, ToolDefinition,
    Usage,
};

use super::json::{opt_struct_from_pb, struct_to_pb};
use super::{enum_from_pb, opt_from_pb, vec_from_pb};
use crate::error::{Result, WireError};
use crate::pb;

/// The journaled form: `messages`, `tools` and `tool_choice` stay empty (they are wire-only).
impl From<ModelCall> for pb::ModelCall {
    fn from(m: ModelCall) -> Self {
        Self {
            model: m.model,
            params: m.params,
            input_hash: m.input_hash,
            id: m.id,
            messages: Vec::new(),
            tools: Vec::new(),
            tool_choice: None,
        }
    }
}

/// Keeps `model`, `params`, `input_hash` and `id`; the wire-only `messages`, `tools` and
/// `tool_choice` are dropped, as the journal drops them. Read those with
/// [`model_request_from_call`].
impl From<pb::ModelCall> for ModelCall {
    fn from(m: pb::ModelCall) -> Self {
        Self {
            model: m.model,
            params: m.params,
            input_hash: m.input_hash,
            id: m.id,
        }
    }
}

/// The `ModelCall` a harness sends on the Connect stream for `request`: the request content plus
/// the correlation `id` and the model-input hash. `params: None` and an empty map both go out as
/// an empty map (the wire cannot tell them apart).
pub fn model_call_from_request(req: &ModelRequest, id: &str, input_hash: &str) -> pb::ModelCall {
    pb::ModelCall {
        model: req.model.clone(),
        params: req.params.clone().unwrap_or_default(),
        input_hash: input_hash.to_owned(),
        id: id.to_owned(),
        messages: req.messages.iter().cloned().map(Into::into).collect(),
        tools: req.tools.iter().cloned().map(Into::into).collect(),
        tool_choice: req.tool_choice.clone().map(Into::into),
    }
}

/// The request content of a `ModelCall` received from a harness. `id` and `input_hash` are not
/// part of a [`ModelRequest`]; read them from the call first. An empty `params` map reads as
/// `None` (the reference SDK decodes an absent map as nil, and the model-input hash tells nil and
/// empty apart).
///
/// # Errors
///
/// [`WireError::UnknownEnumValue`] for an unknown `tool_choice.mode` or tool-call mediation, and
/// [`WireError::NonFiniteNumber`] for a NaN or infinite number in a message part or tool schema.
pub fn model_request_from_call(call: pb::ModelCall) -> Result<ModelRequest> {
    Ok(ModelRequest {
        model: call.model,
        messages: vec_from_pb::<pb::Message, Message>(call.messages, "messages")?,
        params: (!call.params.is_empty()).then_some(call.params),
        tools: vec_from_pb(call.tools, "tools")?,
        tool_choice: opt_from_pb(call.tool_choice, "tool_choice")?,
    })
}

/// The `ModelResult` frame serving `response` to the model call `model_call_id`.
pub fn model_result_from_response(
    response: &ModelResponse,
    model_call_id: &str,
) -> pb::ModelResult {
    pb::ModelResult {
        message: Some(response.message.clone().into()),
        usage: Some(response.usage.clone().into()),
        model_call_id: model_call_id.to_owned(),
    }
}

/// The served completion; `model_call_id` is not part of it, read it from the frame first. An
/// unset `message` or `usage` reads as the empty value.
impl TryFrom<pb::ModelResult> for ModelResponse {
    type Error = WireError;

    fn try_from(r: pb::ModelResult) -> Result<Self> {
        Ok(Self {
            message: opt_from_pb(r.message, "message")?.unwrap_or_default(),
            usage: r.usage.map(Into::into).unwrap_or_default(),
        })
    }
}

impl From<ToolDefinition> for pb::ToolDefinition {
    fn from(t: ToolDefinition) -> Self {
        Self {
            name: t.name,
            description: t.description,
            input_schema: t.input_schema.map(struct_to_pb),
        }
    }
}

impl TryFrom<pb::ToolDefinition> for ToolDefinition {
    type Error = WireError;

    fn try_from(t: pb::ToolDefinition) -> Result<Self> {
        Ok(Self {
            name: t.name,
            description: t.description,
            input_schema: opt_struct_from_pb(t.input_schema, "input_schema")?,
        })
    }
}

impl From<ToolChoiceMode> for pb::tool_choice::Mode {
    fn from(m: ToolChoiceMode) -> Self {
        match m {
            ToolChoiceMode::Unspecified => Self::Unspecified,
            ToolChoiceMode::Auto => Self::Auto,
            ToolChoiceMode::None => Self::None,
            ToolChoiceMode::Required => Self::Required,
        }
    }
}

impl From<pb::tool_choice::Mode> for ToolChoiceMode {
    fn from(m: pb::tool_choice::Mode) -> Self {
        match m {
            pb::tool_choice::Mode::Unspecified => Self::Unspecified,
            pb::tool_choice::Mode::Auto => Self::Auto,
            pb::tool_choice::Mode::None => Self::None,
            pb::tool_choice::Mode::Required => Self::Required,
        }
    }
}

impl From<ToolChoice> for pb::ToolChoice {
    fn from(c: ToolChoice) -> Self {
        Self {
            mode: pb::tool_choice::Mode::from(c.mode).into(),
            name: c.name,
        }
    }
}

/// # Errors
///
/// [`WireError::UnknownEnumValue`] (`mode`) for a mode number this build does not define: an
/// unknown ToolChoice mode is an error in both directions (semantics §1.1), and the domain side
/// cannot hold one at all.
impl TryFrom<pb::ToolChoice> for ToolChoice {
    type Error = WireError;

    fn try_from(c: pb::ToolChoice) -> Result<Self> {
        Ok(Self {
            mode: enum_from_pb::<pb::tool_choice::Mode>(
                c.mode,
                "mode",
                "agentsessions.v1.ToolChoice.Mode",
            )?
            .into(),
            name: c.name,
        })
    }
}

impl From<Usage> for pb::Usage {
    fn from(u: Usage) -> Self {
        Self {
            model: u.model,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            reasoning_tokens: u.reasoning_tokens,
            cached_input_tokens: u.cached_input_tokens,
        }
    }
}

impl From<pb::Usage> for Usage {
    fn from(u: pb::Usage) -> Self {
        Self {
            model: u.model,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            reasoning_tokens: u.reasoning_tokens,
            cached_input_tokens: u.cached_input_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prost::Message as _;

    use super::super::content::tests::{every_part, rich_object};
    use super::*;

    fn full_request() -> ModelRequest {
        ModelRequest {
            model: "gpt-x".into(),
            messages: vec![
                Message::text_message("system", "be brief"),
                Message {
                    role: "assistant".into(),
                    parts: every_part(),
                },
            ],
            params: Some(BTreeMap::from([
                ("temperature".to_owned(), "0".to_owned()),
                ("top_p".to_owned(), "1".to_owned()),
            ])),
            tools: vec![
                ToolDefinition {
                    name: "search".into(),
                    description: "find things".into(),
                    input_schema: Some(rich_object()),
                },
                ToolDefinition {
                    name: "noop".into(),
                    ..ToolDefinition::default()
                },
            ],
            tool_choice: Some(ToolChoice {
                mode: ToolChoiceMode::Required,
                name: "search".into(),
            }),
        }
    }

    #[test]
    fn journaled_model_call_round_trips() {
        // STYLE rule 2; hashing (a): the recorded MODEL_CALL keeps model, params, input_hash, id
        let call = ModelCall {
            model: "gpt-x".into(),
            params: BTreeMap::from([("k".to_owned(), "v".to_owned())]),
            input_hash: "abc".into(),
            id: "mc-1".into(),
        };
        let wire = pb::ModelCall::from(call.clone());
        assert!(wire.messages.is_empty() && wire.tools.is_empty() && wire.tool_choice.is_none());
        assert_eq!(ModelCall::from(wire), call);
    }

    #[test]
    fn model_request_round_trips_through_a_model_call() {
        let request = full_request();
        let wire = model_call_from_request(&request, "mc-1", "hash-1");
        assert_eq!(wire.id, "mc-1");
        assert_eq!(wire.input_hash, "hash-1");
        let decoded = pb::ModelCall::decode(wire.encode_to_vec().as_slice()).unwrap();
        assert_eq!(model_request_from_call(decoded.clone()).unwrap(), request);
        // the event conversion keeps only the journaled fields
        assert_eq!(
            ModelCall::from(decoded),
            ModelCall {
                model: "gpt-x".into(),
                params: request.params.unwrap(),
                input_hash: "hash-1".into(),
                id: "mc-1".into(),
            }
        );
    }

    #[test]
    fn absent_and_empty_params_both_read_back_as_none() {
        for params in [None, Some(BTreeMap::new())] {
            let request = ModelRequest {
                params,
                ..ModelRequest::default()
            };
            let back = model_request_from_call(model_call_from_request(&request, "", "")).unwrap();
            assert_eq!(back.params, None);
        }
    }

    #[test]
    fn every_tool_choice_mode_round_trips() {
        for mode in [
            ToolChoiceMode::Unspecified,
            ToolChoiceMode::Auto,
            ToolChoiceMode::None,
            ToolChoiceMode::Required,
        ] {
            let choice = ToolChoice {
                mode,
                name: "t".into(),
            };
            assert_eq!(
                ToolChoice::try_from(pb::ToolChoice::from(choice.clone())).unwrap(),
                choice
            );
        }
    }

    #[test]
    fn unknown_tool_choice_mode_is_an_error() {
        // semantics §1.1: an unknown ToolChoice mode is an error in both directions
        let wire = pb::ModelCall {
            tool_choice: Some(pb::ToolChoice {
                mode: 9,
                name: String::new(),
            }),
            ..pb::ModelCall::default()
        };
        assert_eq!(
            model_request_from_call(wire).unwrap_err(),
            WireError::UnknownEnumValue {
                field: "tool_choice.mode".into(),
                enum_name: "agentsessions.v1.ToolChoice.Mode",
                value: 9,
            }
        );
    }

    #[test]
    fn model_result_round_trips() {
        let response = ModelResponse {
            message: Message {
                role: "assistant".into(),
                parts: every_part(),
            },
            usage: Usage {
                model: "gpt-x".into(),
                input_tokens: 10,
                output_tokens: 20,
                reasoning_tokens: i64::MAX,
                cached_input_tokens: 7,
            },
        };
        let wire = model_result_from_response(&response, "mc-1");
        assert_eq!(wire.model_call_id, "mc-1");
        let decoded = pb::ModelResult::decode(wire.encode_to_vec().as_slice()).unwrap();
        assert_eq!(ModelResponse::try_from(decoded).unwrap(), response);
        assert_eq!(
            ModelResponse::try_from(pb::ModelResult::default()).unwrap(),
            ModelResponse::default()
        );
    }
}
