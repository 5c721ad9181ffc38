//! `[redaction]` and the host's redactor: the secret values this host holds, taken out of every
//! record before it is journaled (`docs/security.md`, "Redaction").
//!
//! The host redacts, by the variable that holds it, the value of: the model key variables (the
//! configured `model_api_key_env` and every provider's default names), `AGENTCTL_TOKEN`, each MCP
//! server's `headers_from_env` variables and its passthrough credentials, and the names
//! `[redaction] secret_env` adds; every token it mints; and whatever `[redaction] patterns`
//! match.

use std::sync::Arc;

use agentsessions_api::Redactor;
use agentsessions_api::redaction::MIN_SECRET_LEN;

use crate::config::{HostConfig, HostError};

/// The environment variables whose values are secrets on every host, whatever its
/// configuration names: the providers' key variables and the client token `agentctl` reads.
pub const KNOWN_SECRET_VARIABLES: [&str; 4] = [
    "MODEL_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "AGENTCTL_TOKEN",
];

/// The variables whose values `config`'s host redacts, each once, in a stable order.
pub fn secret_variables(config: &HostConfig) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    };
    add(&config.model_api_key_env);
    KNOWN_SECRET_VARIABLES.iter().for_each(|name| add(name));
    for server in &config.mcp_servers {
        server.secret_variables().for_each(&mut add);
    }
    config
        .redaction
        .secret_env
        .iter()
        .for_each(|name| add(name));
    names
}

/// The host's redactor: the values of [`secret_variables`] read through `lookup` (the process
/// environment in the daemon) and the configured patterns. Values shorter than
/// [`MIN_SECRET_LEN`] are not redacted, and the log says so by name.
///
/// # Errors
/// [`HostError::Redaction`] for a pattern that does not compile.
pub fn host_redactor(
    config: &HostConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<Redactor>, HostError> {
    let redactor = Redactor::with_patterns(&config.redaction.patterns)?;
    for name in secret_variables(config) {
        let Some(value) = lookup(&name).filter(|v| !v.is_empty()) else {
            continue;
        };
        if !redactor.add_secret(&name, &value) {
            tracing::warn!(
                variable = %name,
                "not redacted from the journal: its value is shorter than {MIN_SECRET_LEN} bytes"
            );
        }
    }
    Ok(Arc::new(redactor))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentsessions_api::{EventBody, Message};
    use agentsessions_mcp::McpServerConfig;

    use super::*;
    use crate::config::RedactionSettings;

    fn config() -> HostConfig {
        HostConfig {
            model_api_key_env: "TEAM_KEY".into(),
            mcp_servers: vec![McpServerConfig {
                name: "web".into(),
                url: "http://127.0.0.1:9/mcp".into(),
                headers_from_env: BTreeMap::from([("Authorization".into(), "WEB_TOKEN".into())]),
                ..McpServerConfig::default()
            }],
            redaction: RedactionSettings {
                patterns: vec!["ghp_[A-Za-z0-9]{8,}".into()],
                secret_env: vec!["DB_PASSWORD".into()],
            },
            ..HostConfig::default()
        }
    }

    #[test]
    fn the_host_redacts_its_keys_header_values_and_named_variables() {
        assert_eq!(
            secret_variables(&config()),
            [
                "TEAM_KEY",
                "MODEL_API_KEY",
                "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
                "AGENTCTL_TOKEN",
                "WEB_TOKEN",
                "DB_PASSWORD"
            ]
        );
        let env = BTreeMap::from([
            ("TEAM_KEY", "sk-team-0123456789"),
            ("WEB_TOKEN", "Bearer web-0123456789"),
            ("DB_PASSWORD", "short"),
        ]);
        let lookup = |name: &str| env.get(name).map(|v| (*v).to_owned());
        let redactor = host_redactor(&config(), &lookup).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(redactor.secret_names(), ["TEAM_KEY", "WEB_TOKEN"]);
        let mut body = EventBody::Message(Message::text_message(
            "assistant",
            "sk-team-0123456789 / Bearer web-0123456789 / ghp_abcdefgh123 / short",
        ));
        let scrubbed = redactor.scrub(&mut body);
        assert_eq!(scrubbed.names, ["TEAM_KEY", "WEB_TOKEN", "pattern-1"]);
    }

    #[test]
    fn a_bad_pattern_is_refused_naming_it() {
        let mut bad = config();
        bad.redaction.patterns = vec!["(".into()];
        let refused = host_redactor(&bad, &|_| None).map(drop);
        let Err(error) = refused else {
            panic!("a bad pattern was accepted");
        };
        assert!(error.to_string().contains("pattern 1"), "{error}");
    }
}
