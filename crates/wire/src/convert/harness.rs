//! The harness contract: descriptors, capabilities, tool specs, and the `Start` frame with its
//! identity context.
//!
//! Two domain fields have no wire form of their own. [`Start::execution_id`] rides on the enclosing
//! `ControllerFrame` ([`start_frame`] puts it there), and [`IdentityContext::mint_token`] is a
//! host-side function the wire reduces to `can_mint_tokens`; the receiving side supplies its own
//! minter (one that asks the host) to [`start_from_pb`] or [`identity_context_from_pb`].

use agentsessions_api::{
    Capabilities, Descriptor, Event, IdentityContext, Message, Resumability, Start, TokenMinter,
    ToolSpec,
};

use super::content::{identity_to_pb, mediation_from_pb};
use super::{enum_from_pb, vec_from_pb};
use crate::error::{Result, WireError};
use crate::pb;

impl From<Resumability> for pb::Resumability {
    fn from(r: Resumability) -> Self {
        match r {
            Resumability::Unspecified => Self::Unspecified,
            Resumability::StatelessReplay => Self::StatelessReplay,
            Resumability::RequiresMemorySnapshot => Self::RequiresMemorySnapshot,
        }
    }
}

impl From<pb::Resumability> for Resumability {
    fn from(r: pb::Resumability) -> Self {
        match r {
            pb::Resumability::Unspecified => Self::Unspecified,
            pb::Resumability::StatelessReplay => Self::StatelessReplay,
            pb::Resumability::RequiresMemorySnapshot => Self::RequiresMemorySnapshot,
        }
    }
}

impl From<Capabilities> for pb::Capabilities {
    fn from(c: Capabilities) -> Self {
        Self {
            resumability: pb::Resumability::from(c.resumability).into(),
            fork_safe: c.fork_safe,
            requires_gpu: c.requires_gpu,
            streaming: c.streaming,
            reasoning_replay: c.reasoning_replay,
        }
    }
}

/// # Errors
///
/// [`WireError::UnknownEnumValue`] (`resumability`) for a number this build does not define: a
/// harness declaring a resumability the host does not know cannot be placed safely.
impl TryFrom<pb::Capabilities> for Capabilities {
    type Error = WireError;

    fn try_from(c: pb::Capabilities) -> Result<Self> {
        Ok(Self {
            resumability: enum_from_pb::<pb::Resumability>(
                c.resumability,
                "resumability",
                "agentsessions.v1.Resumability",
            )?
            .into(),
            fork_safe: c.fork_safe,
            requires_gpu: c.requires_gpu,
            streaming: c.streaming,
            reasoning_replay: c.reasoning_replay,
        })
    }
}

impl From<ToolSpec> for pb::ToolSpec {
    fn from(t: ToolSpec) -> Self {
        Self {
            name: t.name,
            description: t.description,
            mediation: pb::Mediation::from(t.mediation).into(),
        }
    }
}

impl TryFrom<pb::ToolSpec> for ToolSpec {
    type Error = WireError;

    fn try_from(t: pb::ToolSpec) -> Result<Self> {
        Ok(Self {
            name: t.name,
            description: t.description,
            mediation: mediation_from_pb(t.mediation, "mediation")?,
        })
    }
}

/// `capabilities` is always sent (the domain value has no absent state).
impl From<Descriptor> for pb::HarnessDescriptor {
    fn from(d: Descriptor) -> Self {
        Self {
            id: d.id,
            models: d.models,
            tools: d.tools.into_iter().map(Into::into).collect(),
            capabilities: Some(d.capabilities.into()),
            version: d.version,
        }
    }
}

/// Unset `capabilities` read as the default (unspecified resumability, nothing declared).
impl TryFrom<pb::HarnessDescriptor> for Descriptor {
    type Error = WireError;

    fn try_from(d: pb::HarnessDescriptor) -> Result<Self> {
        Ok(Self {
            id: d.id,
            version: d.version,
            models: d.models,
            tools: vec_from_pb(d.tools, "tools")?,
            capabilities: d
                .capabilities
                .map(Capabilities::try_from)
                .transpose()
                .map_err(|e| e.within("capabilities"))?
                .unwrap_or_default(),
        })
    }
}

/// `can_mint_tokens` is whether a minter is present; an empty principal is omitted.
impl From<IdentityContext> for pb::IdentityContext {
    fn from(c: IdentityContext) -> Self {
        Self {
            principal: identity_to_pb(c.principal),
            can_mint_tokens: c.mint_token.is_some(),
        }
    }
}

/// The identity context a harness receives. `mint_token` is the receiver's own minter (typically
/// one that asks the host over the stream); it is kept only when the host said
/// `can_mint_tokens`, so a harness never mints where the host does not allow it.
pub fn identity_context_from_pb(
    context: pb::IdentityContext,
    mint_token: Option<TokenMinter>,
) -> IdentityContext {
    IdentityContext {
        principal: context.principal.map(Into::into).unwrap_or_default(),
        mint_token: mint_token.filter(|_| context.can_mint_tokens),
    }
}

/// The `Start` message; [`Start::execution_id`] is not part of it (it rides on the
/// `ControllerFrame`, see [`start_frame`]).
impl From<Start> for pb::Start {
    fn from(s: Start) -> Self {
        Self {
            config: s.config,
            history: s.history.iter().map(Into::into).collect(),
            inputs: s.inputs.into_iter().map(Into::into).collect(),
            identity: Some(s.identity.into()),
            resume_from_seq: s.resume_from_seq,
            model: s.model,
            session_uid: s.session_uid,
        }
    }
}

/// The first frame of a `Harness.Connect` stream: the envelope carries the session and execution
/// ids, and the `start` member the rest.
pub fn start_frame(start: Start) -> pb::ControllerFrame {
    pb::ControllerFrame {
        session: start.session_uid.clone(),
        execution_id: start.execution_id.clone(),
        frame: Some(pb::controller_frame::Frame::Start(start.into())),
    }
}

/// The domain `Start` for a received `Start` message, its frame's `execution_id`, and the
/// receiver's own token minter (kept only when `identity.can_mint_tokens` is set, see
/// [`identity_context_from_pb`]). An unset `identity` reads as an empty principal that cannot mint.
///
/// # Errors
///
/// Whatever converting `history` (paths `history[i]…`) or `inputs` (`inputs[i]…`) reports:
/// [`WireError::UnknownEnumValue`], [`WireError::NonFiniteNumber`] or
/// [`WireError::InvalidTimestamp`].
pub fn start_from_pb(
    start: pb::Start,
    execution_id: impl Into<String>,
    mint_token: Option<TokenMinter>,
) -> Result<Start> {
    Ok(Start {
        execution_id: execution_id.into(),
        model: start.model,
        session_uid: start.session_uid,
        config: start.config,
        history: vec_from_pb::<pb::Event, Event>(start.history, "history")?.into(),
        inputs: vec_from_pb::<pb::Message, Message>(start.inputs, "inputs")?,
        identity: identity_context_from_pb(start.identity.unwrap_or_default(), mint_token),
        resume_from_seq: start.resume_from_seq,
    })
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{
        EventBody, EventKind, ExecutionStart, IdentityRef, Mediation, Part, TextPart,
    };
    use prost::Message as _;

    use super::super::content::tests::every_part;
    use super::*;

    fn full_descriptor() -> Descriptor {
        Descriptor {
            id: "echo".into(),
            version: "1".into(),
            models: vec!["gpt-x".into(), "claude-y".into()],
            tools: vec![
                ToolSpec {
                    name: "search".into(),
                    description: "find".into(),
                    mediation: Mediation::ControllerMediated,
                },
                ToolSpec {
                    name: "rm".into(),
                    description: "delete".into(),
                    mediation: Mediation::RequiresApproval,
                },
            ],
            capabilities: Capabilities {
                resumability: Resumability::RequiresMemorySnapshot,
                fork_safe: true,
                requires_gpu: true,
                streaming: true,
                reasoning_replay: true,
            },
        }
    }

    fn minter() -> TokenMinter {
        TokenMinter::new(|audience: Vec<String>| async move { Ok(audience.join(",")) })
    }

    fn full_start(mint_token: Option<TokenMinter>) -> Start {
        Start {
            execution_id: "exec-2".into(),
            model: "gpt-x".into(),
            session_uid: "uid-1".into(),
            config: vec![0x00, 0xff, 0x7f],
            history: vec![
                Event::new(
                    EventKind::ExecutionStart,
                    EventBody::ExecutionStart(ExecutionStart {
                        input_count: Some(1),
                        ..ExecutionStart::default()
                    }),
                )
                .with_execution("exec-1"),
                Event::new(
                    EventKind::Output,
                    EventBody::Message(Message {
                        role: "assistant".into(),
                        parts: every_part(),
                    }),
                )
                .with_execution("exec-1"),
            ]
            .into(),
            inputs: vec![Message::text_message("user", "hi"), Message::default()],
            identity: IdentityContext {
                principal: IdentityRef {
                    principal: "agent://a".into(),
                    issuer: "entra".into(),
                    subject: "sub-1".into(),
                },
                mint_token,
            },
            resume_from_seq: 17,
        }
    }

    #[test]
    fn descriptor_round_trips() {
        // STYLE rule 2: api -> pb -> encode -> decode -> api is the identity
        let descriptor = full_descriptor();
        let wire = pb::HarnessDescriptor::from(descriptor.clone());
        let decoded = pb::HarnessDescriptor::decode(wire.encode_to_vec().as_slice()).unwrap();
        assert_eq!(Descriptor::try_from(decoded).unwrap(), descriptor);
        assert_eq!(
            Descriptor::try_from(pb::HarnessDescriptor::default()).unwrap(),
            Descriptor::default()
        );
        for resumability in [
            Resumability::Unspecified,
            Resumability::StatelessReplay,
            Resumability::RequiresMemorySnapshot,
        ] {
            let caps = Capabilities {
                resumability,
                ..Capabilities::default()
            };
            assert_eq!(
                Capabilities::try_from(pb::Capabilities::from(caps)).unwrap(),
                caps
            );
        }
    }

    #[test]
    fn unknown_resumability_and_mediation_name_the_field() {
        let wire = pb::HarnessDescriptor {
            capabilities: Some(pb::Capabilities {
                resumability: 3,
                ..pb::Capabilities::default()
            }),
            ..pb::HarnessDescriptor::default()
        };
        assert_eq!(
            Descriptor::try_from(wire).unwrap_err(),
            WireError::UnknownEnumValue {
                field: "capabilities.resumability".into(),
                enum_name: "agentsessions.v1.Resumability",
                value: 3,
            }
        );
        let wire = pb::HarnessDescriptor {
            tools: vec![
                pb::ToolSpec::default(),
                pb::ToolSpec {
                    mediation: 4,
                    ..pb::ToolSpec::default()
                },
            ],
            ..pb::HarnessDescriptor::default()
        };
        assert!(matches!(
            Descriptor::try_from(wire).unwrap_err(),
            WireError::UnknownEnumValue { ref field, value: 4, .. } if field == "tools[1].mediation"
        ));
    }

    #[test]
    fn start_round_trips_through_its_frame() {
        for mint_token in [None, Some(minter())] {
            let start = full_start(mint_token.clone());
            let frame = start_frame(start.clone());
            assert_eq!(frame.session, "uid-1");
            assert_eq!(frame.execution_id, "exec-2");
            let decoded = pb::ControllerFrame::decode(frame.encode_to_vec().as_slice()).unwrap();
            let Some(pb::controller_frame::Frame::Start(wire)) = decoded.frame else {
                panic!("start frame expected");
            };
            assert_eq!(
                wire.identity.as_ref().map(|i| i.can_mint_tokens),
                Some(mint_token.is_some())
            );
            let back = start_from_pb(wire, decoded.execution_id, mint_token).unwrap();
            assert_eq!(back, start);
        }
    }

    #[test]
    fn a_minter_is_kept_only_when_the_host_allows_minting() {
        let denied = pb::IdentityContext {
            principal: None,
            can_mint_tokens: false,
        };
        let context = identity_context_from_pb(denied, Some(minter()));
        assert_eq!(context, IdentityContext::default());
        let allowed = pb::IdentityContext::from(IdentityContext {
            principal: IdentityRef::default(),
            mint_token: Some(minter()),
        });
        assert_eq!(allowed.principal, None);
        assert!(allowed.can_mint_tokens);
        assert_eq!(identity_context_from_pb(allowed, None).mint_token, None);
    }

    #[test]
    fn bad_history_names_the_record() {
        let wire = pb::Start {
            history: vec![
                pb::Event::default(),
                pb::Event {
                    kind: 77,
                    ..pb::Event::default()
                },
            ],
            inputs: vec![pb::Message::from(Message {
                role: "user".into(),
                parts: vec![Part::Text(TextPart { text: "x".into() })],
            })],
            ..pb::Start::default()
        };
        assert!(matches!(
            start_from_pb(wire, "e", None).unwrap_err(),
            WireError::UnknownEnumValue { ref field, value: 77, .. } if field == "history[1].kind"
        ));
    }
}
