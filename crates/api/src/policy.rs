//! [`ModelPolicy`]: host-owned, opt-in model admission for one harness route (the v0.3.0 API,
//! extensions §4).

use crate::error::{ApiError, Result};
use crate::harness::Descriptor;

/// Which models one harness route may use, and which one it uses by default.
///
/// The operator configures it per harness route (daemon configuration); a Sessions client never
/// supplies it and it is never inferred from [`Descriptor::models`]. Model ids are opaque and
/// compared exactly. A valid policy has a non-empty `default` that is in `allowed`, and no empty
/// id in `allowed`. Without a policy the host keeps its existing model behavior.
///
/// The effective default is journaled in `ExecutionStart.model` and handed to the harness in
/// [`crate::Start::model`]; replay and resume use the recorded value, not today's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPolicy {
    /// The model used when a request names none; must be in `allowed`.
    pub default: String,
    /// Every model the route may use.
    pub allowed: Vec<String>,
}

impl ModelPolicy {
    /// A policy from its default and allowed set (not validated; see [`ModelPolicy::validate`]).
    pub fn new(
        default: impl Into<String>,
        allowed: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            default: default.into(),
            allowed: allowed.into_iter().map(Into::into).collect(),
        }
    }

    /// Checks that the policy is well formed.
    ///
    /// # Errors
    ///
    /// [`ApiError::InvalidModelPolicy`] when the default is empty or not allowed, or an allowed id
    /// is empty.
    pub fn validate(&self) -> Result<()> {
        if self.default.is_empty()
            || self.allowed.iter().any(String::is_empty)
            || !self.allowed.contains(&self.default)
        {
            return Err(ApiError::InvalidModelPolicy);
        }
        Ok(())
    }

    /// Whether `model` is in the allowed set (exact comparison; the policy is not validated).
    pub fn allows(&self, model: &str) -> bool {
        self.allowed.iter().any(|allowed| allowed == model)
    }

    /// Validates the policy and returns the model to use: `model` itself, or the default when
    /// `model` is empty.
    ///
    /// # Errors
    ///
    /// [`ApiError::InvalidModelPolicy`] when the policy is invalid (checked first, whatever
    /// `model` is); [`ApiError::ModelNotAllowed`] when `model` is non-empty and not allowed.
    pub fn resolve(&self, model: &str) -> Result<String> {
        self.validate()?;
        if model.is_empty() {
            return Ok(self.default.clone());
        }
        if !self.allows(model) {
            return Err(ApiError::ModelNotAllowed {
                model: model.to_owned(),
            });
        }
        Ok(model.to_owned())
    }

    /// Validates the policy and requires every model the descriptor declares to be allowed. An
    /// empty declaration is valid; a declaration never widens the policy or supplies its default.
    ///
    /// # Errors
    ///
    /// [`ApiError::InvalidModelPolicy`] when the policy is invalid; [`ApiError::ModelNotAllowed`]
    /// naming the first declared model that is not allowed (an empty id is never allowed).
    pub fn validate_descriptor(&self, descriptor: &Descriptor) -> Result<()> {
        self.validate()?;
        match descriptor.models.iter().find(|model| !self.allows(model)) {
            Some(model) => Err(ApiError::ModelNotAllowed {
                model: model.clone(),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ModelPolicy {
        ModelPolicy::new("m-small", ["m-small", "m-large"])
    }

    fn declaring(models: &[&str]) -> Descriptor {
        Descriptor {
            id: "chat".into(),
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            ..Descriptor::default()
        }
    }

    // v0.3.0 API: ModelPolicy — "Default must be nonempty and present in Allowed".
    #[test]
    fn policy_with_an_allowed_default_and_nonempty_ids_is_valid() {
        assert_eq!(policy().validate(), Ok(()));
        assert_eq!(ModelPolicy::new("m", ["m"]).validate(), Ok(()));
    }

    // v0.3.0 API: ErrInvalidModelPolicy — no explicit default.
    #[test]
    fn empty_default_is_invalid() {
        assert_eq!(
            ModelPolicy::new("", ["m-small"]).validate(),
            Err(ApiError::InvalidModelPolicy)
        );
    }

    // v0.3.0 API: ErrInvalidModelPolicy — the default must be allowed (an empty set allows
    // nothing).
    #[test]
    fn default_outside_the_allowed_set_is_invalid() {
        assert_eq!(
            ModelPolicy::new("m-other", ["m-small"]).validate(),
            Err(ApiError::InvalidModelPolicy)
        );
        assert_eq!(
            ModelPolicy::new("m-small", Vec::<String>::new()).validate(),
            Err(ApiError::InvalidModelPolicy)
        );
    }

    // v0.3.0 API: ErrInvalidModelPolicy — "empty Allowed IDs are invalid".
    #[test]
    fn empty_allowed_id_is_invalid() {
        assert_eq!(
            ModelPolicy::new("m-small", ["m-small", ""]).validate(),
            Err(ApiError::InvalidModelPolicy)
        );
    }

    // v0.3.0 API: Resolve — returns the explicit default when model is empty.
    #[test]
    fn resolve_of_no_model_is_the_default() {
        assert_eq!(policy().resolve(""), Ok("m-small".to_owned()));
    }

    // v0.3.0 API: Resolve — returns an allowed model as is.
    #[test]
    fn resolve_of_an_allowed_model_is_that_model() {
        assert_eq!(policy().resolve("m-large"), Ok("m-large".to_owned()));
    }

    // v0.3.0 API: ErrModelNotAllowed — ids are opaque and compared exactly.
    #[test]
    fn resolve_refuses_a_model_outside_the_allowed_set() {
        for model in ["m-huge", "M-LARGE", "m-large "] {
            assert_eq!(
                policy().resolve(model),
                Err(ApiError::ModelNotAllowed {
                    model: model.to_owned()
                })
            );
        }
    }

    // v0.3.0 API: Resolve — "validates the policy" before anything else.
    #[test]
    fn resolve_with_an_invalid_policy_fails_even_for_an_allowed_model() {
        let invalid = ModelPolicy::new("", ["m-small"]);
        assert_eq!(
            invalid.resolve("m-small"),
            Err(ApiError::InvalidModelPolicy)
        );
        assert_eq!(invalid.resolve(""), Err(ApiError::InvalidModelPolicy));
    }

    // v0.3.0 API: ValidateDescriptor — "An empty declaration is valid".
    #[test]
    fn descriptor_declaring_no_models_is_valid() {
        assert_eq!(policy().validate_descriptor(&declaring(&[])), Ok(()));
    }

    // v0.3.0 API: ValidateDescriptor — "requires every declared model to be allowed".
    #[test]
    fn descriptor_declaring_only_allowed_models_is_valid() {
        assert_eq!(
            policy().validate_descriptor(&declaring(&["m-large", "m-small"])),
            Ok(())
        );
    }

    // v0.3.0 API: ErrModelNotAllowed — a declared model outside the allowed set; it never widens
    // it.
    #[test]
    fn descriptor_declaring_a_model_outside_the_policy_is_refused() {
        assert_eq!(
            policy().validate_descriptor(&declaring(&["m-small", "m-huge", "m-other"])),
            Err(ApiError::ModelNotAllowed {
                model: "m-huge".into()
            })
        );
        assert_eq!(
            policy().validate_descriptor(&declaring(&[""])),
            Err(ApiError::ModelNotAllowed {
                model: String::new()
            })
        );
    }

    // extensions §4: a policy is validated before it is applied (the v0.3.0 API's
    // ValidateDescriptor is silent; this crate checks the policy first, as Resolve does).
    #[test]
    fn descriptor_check_with_an_invalid_policy_fails() {
        let invalid = ModelPolicy::new("m-other", ["m-small"]);
        assert_eq!(
            invalid.validate_descriptor(&declaring(&[])),
            Err(ApiError::InvalidModelPolicy)
        );
    }
}
