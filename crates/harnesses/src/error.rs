//! [`HarnessesError`], the one error type of this crate.

use agentsessions_api::{ApiError, StatusCode};

/// Shorthand for results whose error is [`HarnessesError`].
pub type Result<T, E = HarnessesError> = std::result::Result<T, E>;

/// What went wrong building or running a reference harness.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HarnessesError {
    /// [`crate::ChatHarness::new`] was given an empty (or all-whitespace) model name; the chat
    /// harness has no default model of its own.
    #[error("chat harness: a model name is required")]
    EmptyModel,

    /// The chat harness's per-execution config is not a JSON object whose optional
    /// `system_prompt` is a string. The message is fixed on purpose: the config may hold a
    /// prompt, and errors end up in journals and logs, so it is never echoed.
    #[error("chat harness: config must be a JSON object with an optional string system_prompt")]
    InvalidChatConfig,

    /// The chat harness's model still asked for tools at the last model call one turn may make
    /// ([`crate::ChatHarness::with_max_steps`]).
    #[error(
        "chat harness: the model still asked for tools after {limit} model calls (the turn's step limit)"
    )]
    StepLimit {
        /// The configured step limit.
        limit: u32,
    },

    /// [`crate::reference_harness`] was asked for an id that is not `echo`, `counter` or `chat`.
    #[error("unknown reference harness {name:?}: want echo, counter or chat")]
    UnknownHarness {
        /// The id that was asked for.
        name: String,
    },
}

impl HarnessesError {
    /// Whether retrying could succeed. Always `false`: configuration fails the same way until
    /// someone changes it, and a step limit is reached again by the same conversation.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::EmptyModel
            | Self::InvalidChatConfig
            | Self::StepLimit { .. }
            | Self::UnknownHarness { .. } => false,
        }
    }

    /// The status code the host reports.
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::EmptyModel | Self::InvalidChatConfig | Self::UnknownHarness { .. } => {
                StatusCode::InvalidArgument
            }
            Self::StepLimit { .. } => StatusCode::ResourceExhausted,
        }
    }
}

/// Configuration mistakes are `INVALID_ARGUMENT`, a spent step budget `RESOURCE_EXHAUSTED`; the
/// message is this error's.
impl From<HarnessesError> for ApiError {
    fn from(err: HarnessesError) -> Self {
        Self::status(err.status_code(), err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // brief: a spent step budget names its limit and is RESOURCE_EXHAUSTED.
    #[test]
    fn the_step_limit_names_its_limit() {
        let err = HarnessesError::StepLimit { limit: 3 };
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("after 3 model calls"));
        assert_eq!(
            ApiError::from(err.clone()),
            ApiError::status(StatusCode::ResourceExhausted, err.to_string())
        );
    }

    // STYLE rule 4: messages are lowercase, without a trailing period; nothing is retryable.
    #[test]
    fn messages_are_lowercase_and_nothing_is_retryable() {
        for err in [
            HarnessesError::EmptyModel,
            HarnessesError::InvalidChatConfig,
            HarnessesError::UnknownHarness { name: "x".into() },
        ] {
            let text = err.to_string();
            assert!(text.starts_with(char::is_lowercase), "{text}");
            assert!(!text.ends_with('.'), "{text}");
            assert!(!err.is_retryable());
            assert!(matches!(
                ApiError::from(err),
                ApiError::Status {
                    code: StatusCode::InvalidArgument,
                    ..
                }
            ));
        }
    }
}
