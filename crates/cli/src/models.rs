//! The model section of a host's configuration: which provider serves model calls (`openai` or
//! `anthropic`), where, with which limits and which key variable, and the model policy every
//! turn is held to (extensions §4).
//!
//! The key never appears in configuration: `model_api_key_env` names the environment variable
//! that holds it (default: `MODEL_API_KEY`, else `OPENAI_API_KEY` for `openai`;
//! `ANTHROPIC_API_KEY`, else `MODEL_API_KEY` for `anthropic`).

use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{DeltaSink, ModelPolicy, ModelProvider, ModelRequest, ModelResponse};
use agentsessions_model::{
    AnthropicConfig, AnthropicProvider, DirectiveModel, EchoModel, OpenAiConfig, OpenAiProvider,
    RetryPolicy,
};

use crate::config::{HostConfig, HostError};

/// The provider names `model_provider` accepts; empty means the first. `directive` is the offline
/// model that calls the tool a person names (`/tool NAME {json}`), for trying tools and approvals
/// without a model provider.
pub const PROVIDERS: [&str; 3] = ["openai", "anthropic", "directive"];

/// The provider the model settings describe, and a one-line description of it for the startup
/// log (never the key).
pub(crate) struct ConfiguredModel {
    pub(crate) provider: Arc<dyn ModelProvider>,
    pub(crate) description: String,
}

impl std::fmt::Debug for ConfiguredModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfiguredModel")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

fn refused(detail: impl Into<String>) -> HostError {
    HostError::Model(detail.into())
}

/// The provider for `config.model`, reading the key through `lookup` (the process environment
/// in the daemon). `None` when no model is configured.
///
/// # Errors
/// [`HostError::Model`] naming the setting that cannot work.
pub(crate) fn configured_model(
    config: &HostConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ConfiguredModel>, HostError> {
    if config.model.is_empty() {
        return Ok(None);
    }
    let timeout = match config.model_timeout_secs {
        Some(0) => return Err(refused("model_timeout_secs must be positive")),
        Some(secs) => Some(Duration::from_secs(secs)),
        None => None,
    };
    let retry = config.model_retries.map(|retries| RetryPolicy {
        max_attempts: retries.saturating_add(1),
        ..RetryPolicy::default()
    });
    let key_var = config.model_api_key_env.as_str();
    let key = |defaults: String| {
        if key_var.is_empty() {
            defaults
        } else {
            lookup(key_var).unwrap_or_default()
        }
    };
    let text_only_models = text_only_models(config)?;
    let provider_name = if config.model_provider.is_empty() {
        PROVIDERS[0]
    } else {
        config.model_provider.as_str()
    };
    if provider_name == "directive" {
        for (name, value) in [
            ("model_base_url", &config.model_base_url),
            ("model_path", &config.model_path),
            ("model_auth_header", &config.model_auth_header),
            ("model_api_key_env", &config.model_api_key_env),
        ] {
            if !value.is_empty() {
                return Err(refused(format!(
                    "{name} does not apply to the offline directive model"
                )));
            }
        }
        return Ok(Some(ConfiguredModel {
            provider: Arc::new(DirectiveModel::new()),
            description: format!(
                "{} via the offline directive model (no provider is called)",
                config.model
            ),
        }));
    }
    let (provider, endpoint, has_key): (Arc<dyn ModelProvider>, String, bool) = match provider_name
    {
        "openai" => {
            let mut openai = OpenAiConfig::from_lookup(config.model.clone(), lookup);
            openai.api_key = key(openai.api_key);
            openai.text_only_models = text_only_models;
            if !config.model_base_url.is_empty() {
                openai.base_url.clone_from(&config.model_base_url);
            }
            if !config.model_path.is_empty() {
                openai.path.clone_from(&config.model_path);
            }
            if !config.model_auth_header.is_empty() {
                openai.auth_header.clone_from(&config.model_auth_header);
            }
            if let Some(timeout) = timeout {
                openai.timeout = timeout;
            }
            if let Some(retry) = retry {
                openai.retry = retry;
            }
            let (endpoint, has_key) = (openai.endpoint(), !openai.api_key.is_empty());
            let provider = OpenAiProvider::new(openai).map_err(|e| refused(e.to_string()))?;
            (Arc::new(provider), endpoint, has_key)
        }
        "anthropic" => {
            for (name, value) in [
                ("model_path", &config.model_path),
                ("model_auth_header", &config.model_auth_header),
            ] {
                if !value.is_empty() {
                    return Err(refused(format!(
                        "{name} applies to the openai provider only"
                    )));
                }
            }
            let mut anthropic = AnthropicConfig::from_lookup(config.model.clone(), lookup);
            anthropic.api_key = key(anthropic.api_key);
            anthropic.text_only_models = text_only_models;
            if !config.model_base_url.is_empty() {
                anthropic.base_url.clone_from(&config.model_base_url);
            }
            if let Some(timeout) = timeout {
                anthropic.timeout = timeout;
            }
            if let Some(retry) = retry {
                anthropic.retry = retry;
            }
            let (endpoint, has_key) = (anthropic.endpoint(), !anthropic.api_key.is_empty());
            let provider = AnthropicProvider::new(anthropic).map_err(|e| refused(e.to_string()))?;
            (Arc::new(provider), endpoint, has_key)
        }
        other => {
            return Err(refused(format!(
                "model_provider {other:?}: expected one of {}",
                PROVIDERS.join(", ")
            )));
        }
    };
    let key_note = match (has_key, key_var.is_empty()) {
        (false, _) => "key not set".to_owned(),
        (true, true) => "key from the environment".to_owned(),
        (true, false) => format!("key from {key_var}"),
    };
    Ok(Some(ConfiguredModel {
        provider,
        description: format!(
            "{} via {provider_name} at {} ({key_note})",
            config.model,
            // A password in the base URL never reaches the log line this ends up in.
            crate::config::redact(&endpoint)
        ),
    }))
}

/// The models `model_modalities` says take text only (extensions §10).
///
/// # Errors
/// [`HostError::Model`] for a modality other than `text` and `image`, or a model without `text`.
fn text_only_models(config: &HostConfig) -> Result<Vec<String>, HostError> {
    let mut text_only = Vec::new();
    for (model, modalities) in &config.model_modalities {
        if let Some(other) = modalities
            .iter()
            .find(|m| !["text", "image"].contains(&m.as_str()))
        {
            return Err(refused(format!(
                "model_modalities {model:?}: {other:?} is not a modality (text, image)"
            )));
        }
        if !modalities.iter().any(|m| m == "text") {
            return Err(refused(format!(
                "model_modalities {model:?}: every model takes text"
            )));
        }
        if !modalities.iter().any(|m| m == "image") {
            text_only.push(model.clone());
        }
    }
    Ok(text_only)
}

/// The model policy `config` asks for: `model` as the default, `model_allowed` as the allowed
/// set; `None` when `model_allowed` is empty (no policy, the published behaviour).
///
/// # Errors
/// [`HostError::Model`] for a policy the v0.3.0 API calls invalid (no default, a default outside
/// the allowed set, an empty id).
pub(crate) fn model_policy(config: &HostConfig) -> Result<Option<ModelPolicy>, HostError> {
    if config.model_allowed.is_empty() {
        return Ok(None);
    }
    let policy = ModelPolicy::new(config.model.clone(), config.model_allowed.clone());
    policy
        .validate()
        .map_err(|e| refused(format!("model_allowed with model {:?}: {e}", config.model)))?;
    Ok(Some(policy))
}

/// Serves `echo` requests with the offline echo model and everything else with the configured
/// provider, so the echo harness keeps working next to a real model.
pub(crate) struct ModelRouter {
    echo: EchoModel,
    other: Option<Arc<dyn ModelProvider>>,
}

impl std::fmt::Debug for ModelRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRouter")
            .field("other", &self.other.as_ref().map(|p| p.name().to_owned()))
            .finish_non_exhaustive()
    }
}

impl ModelRouter {
    /// Routes non-echo requests to `other`, or everything to the echo model without one.
    pub(crate) fn new(other: Option<Arc<dyn ModelProvider>>) -> Self {
        Self {
            echo: EchoModel::new(),
            other,
        }
    }
}

#[async_trait::async_trait]
impl ModelProvider for ModelRouter {
    fn name(&self) -> &str {
        self.other
            .as_ref()
            .map_or_else(|| self.echo.name(), |p| p.name())
    }

    fn default_model(&self) -> &str {
        self.other
            .as_ref()
            .map_or_else(|| self.echo.default_model(), |p| p.default_model())
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: Option<&dyn DeltaSink>,
    ) -> agentsessions_api::Result<ModelResponse> {
        match &self.other {
            Some(provider) if request.model != EchoModel::MODEL => {
                provider.complete(request, deltas).await
            }
            _ => self.echo.complete(request, deltas).await,
        }
    }
}

#[cfg(test)]
#[allow(clippy::assertions_on_result_states)] // the refusals are the assertions
mod tests {
    use super::*;

    fn with_model(provider: &str) -> HostConfig {
        HostConfig {
            model: "m-small".into(),
            model_provider: provider.into(),
            ..HostConfig::default()
        }
    }

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn description(config: &HostConfig, vars: &'static [(&'static str, &'static str)]) -> String {
        match configured_model(config, &env(vars)) {
            Ok(Some(model)) => model.description,
            other => panic!("no provider: {other:?}"),
        }
    }

    // Model configuration: both providers are selectable; the description names provider and
    // endpoint and never the key.
    #[test]
    fn openai_and_anthropic_are_selectable_and_the_key_stays_out() {
        let vars = &[("MODEL_API_KEY", "sk-secret")];
        let openai = description(&with_model(""), vars);
        assert!(openai.contains("via openai at https://api.openai.com/v1/chat/completions"));
        let anthropic = description(&with_model("anthropic"), vars);
        assert!(anthropic.contains("via anthropic at "), "{anthropic}");
        for text in [&openai, &anthropic] {
            assert!(!text.contains("sk-secret"), "{text}");
            assert!(text.contains("key from the environment"), "{text}");
        }
        let err = configured_model(&with_model("gemini"), &env(&[])).unwrap_err();
        assert!(err.to_string().contains("openai, anthropic"), "{err}");
        assert!(matches!(
            configured_model(&HostConfig::default(), &env(&[])),
            Ok(None)
        ));
    }

    // The offline directive model needs no endpoint or key, and refuses settings that would
    // suggest one is called.
    #[test]
    fn the_directive_model_is_offline() {
        let offline = description(&with_model("directive"), &[]);
        assert!(offline.contains("offline directive model"), "{offline}");
        let config = HostConfig {
            model_base_url: "http://127.0.0.1:1".into(),
            ..with_model("directive")
        };
        let err = configured_model(&config, &env(&[])).unwrap_err();
        assert!(err.to_string().contains("model_base_url"), "{err}");
    }

    // Model configuration: the key variable is configurable; when set, only that variable is read.
    #[test]
    fn the_key_comes_from_the_named_variable_only() {
        let config = HostConfig {
            model_api_key_env: "TEAM_KEY".into(),
            ..with_model("anthropic")
        };
        let named = description(&config, &[("TEAM_KEY", "k")]);
        assert!(named.contains("key from TEAM_KEY"), "{named}");
        let unset = description(&config, &[("ANTHROPIC_API_KEY", "k")]);
        assert!(unset.contains("key not set"), "{unset}");
    }

    // Model configuration: settings that cannot work are refused with the setting named.
    #[test]
    fn unusable_settings_are_refused() {
        let zero = HostConfig {
            model_timeout_secs: Some(0),
            ..with_model("openai")
        };
        assert!(configured_model(&zero, &env(&[])).is_err());
        let path = HostConfig {
            model_path: "/v1/chat".into(),
            ..with_model("anthropic")
        };
        let err = configured_model(&path, &env(&[])).unwrap_err();
        assert!(err.to_string().contains("model_path"), "{err}");
        let ok = HostConfig {
            model_timeout_secs: Some(5),
            model_retries: Some(0),
            model_base_url: "http://127.0.0.1:1".into(),
            ..with_model("openai")
        };
        assert!(configured_model(&ok, &env(&[])).is_ok());
    }

    // Model configuration: the model section reads from the daemon's TOML file under the flags'
    // names.
    #[test]
    fn config_files_take_the_model_section() {
        let parsed: HostConfig = toml::from_str(
            "model = \"m-small\"\nmodel_provider = \"anthropic\"\nmodel_api_key_env = \"TEAM_KEY\"\n\
             model_timeout_secs = 30\nmodel_retries = 1\nmodel_allowed = [\"m-small\", \"echo\"]\n\
             chat_max_steps = 4\n",
        )
        .unwrap_or_default();
        assert_eq!(parsed.model_provider, "anthropic");
        assert_eq!(parsed.model_api_key_env, "TEAM_KEY");
        assert_eq!(parsed.model_timeout_secs, Some(30));
        assert_eq!(parsed.model_retries, Some(1));
        assert_eq!(parsed.model_allowed, ["m-small", "echo"]);
        assert_eq!(parsed.chat_max_steps, Some(4));
        let refused: Result<HostConfig, _> = toml::from_str("model_api_key = \"sk-x\"\n");
        assert!(refused.is_err(), "a key in the file is an unknown setting");
    }

    // extensions §10: model_modalities names the text-only models; a modality it does not know,
    // or a model without text, stops the host.
    #[test]
    fn model_modalities_name_the_text_only_models() {
        let parsed: HostConfig = toml::from_str(
            "model = \"m\"\n[model_modalities]\n\"m-text\" = [\"text\"]\n\"m-eyes\" = [\"text\", \"image\"]\n",
        )
        .unwrap_or_default();
        assert_eq!(
            text_only_models(&parsed).ok(),
            Some(vec!["m-text".to_owned()])
        );
        assert!(configured_model(&parsed, &env(&[])).is_ok());
        for bad in [&["text", "audio"][..], &["image"][..]] {
            let config = HostConfig {
                model_modalities: [(
                    "m".to_owned(),
                    bad.iter().map(|m| (*m).to_owned()).collect(),
                )]
                .into(),
                ..with_model("openai")
            };
            let err = configured_model(&config, &env(&[])).unwrap_err();
            assert!(err.to_string().contains("model_modalities \"m\""), "{err}");
        }
    }

    // extensions §4: model_allowed makes a policy with model as its default; invalid policies
    // (the v0.3.0 API's ErrInvalidModelPolicy) stop the host.
    #[test]
    fn model_allowed_makes_a_validated_policy() {
        assert_eq!(model_policy(&with_model("")).ok(), Some(None));
        let config = HostConfig {
            model_allowed: vec!["m-small".into(), "m-large".into()],
            ..with_model("")
        };
        assert_eq!(
            model_policy(&config).ok().flatten(),
            Some(ModelPolicy::new("m-small", ["m-small", "m-large"]))
        );
        let outside = HostConfig {
            model_allowed: vec!["m-large".into()],
            ..with_model("")
        };
        let err = model_policy(&outside).unwrap_err();
        assert!(
            err.to_string().contains("explicit allowed default"),
            "{err}"
        );
    }
}
