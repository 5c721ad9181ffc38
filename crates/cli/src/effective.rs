//! The daemon's effective configuration as one JSON object for its startup log line, with every
//! secret left out: passwords in URLs are masked ([`redact`]), the model key is named by its
//! environment variable and never read, and MCP servers show the names of their environment
//! variables and headers, not the values. Keys and certificates are files, so only paths show.

use serde_json::{Value, json};

use crate::config::{HostConfig, mcp_ledger_path, redact};

/// `config` (after flags, file and defaults were merged) with `telemetry` describing where
/// traces go, as logged at startup.
pub fn effective_config(config: &HostConfig, telemetry: Value) -> Value {
    let mcp: Vec<Value> = config
        .mcp_servers
        .iter()
        .map(|server| {
            json!({
                "name": server.name,
                "command": server.command,
                "args": server.args,
                "env": server.env.keys().collect::<Vec<_>>(),
                "url": redact(&server.url),
                "headers_from_env": server.headers_from_env,
                "timeout_secs": server.timeout_secs,
                "delegated_token": server.delegated_token.is_some(),
            })
        })
        .collect();
    json!({
        "addr": config.addr,
        "registry_addr": config.registry_addr,
        "log_format": config.log_format,
        "journal": redact(&config.journal),
        "journal_schema": config.journal_schema,
        "project": config.project,
        "model": config.model,
        "model_provider": config.model_provider,
        "model_base_url": redact(&config.model_base_url),
        "model_path": config.model_path,
        "model_auth_header": config.model_auth_header,
        "model_api_key_env": config.model_api_key_env,
        "model_timeout_secs": config.model_timeout_secs,
        "model_retries": config.model_retries,
        "model_allowed": config.model_allowed,
        "model_modalities": config.model_modalities,
        "chat_max_steps": config.chat_max_steps,
        "harness": config.harness.iter().map(|h| redact(h)).collect::<Vec<_>>(),
        "reclaim_interval_secs": config.reclaim_interval_secs,
        "limits": serde_json::to_value(config.limits).unwrap_or(Value::Null),
        "auth": serde_json::to_value(&config.auth).unwrap_or(Value::Null),
        "harness_tls": serde_json::to_value(&config.harness_tls).unwrap_or(Value::Null),
        "identity": serde_json::to_value(&config.identity).unwrap_or(Value::Null),
        "mcp_servers": mcp,
        "mcp_ledger": mcp_ledger_path(config),
        "telemetry": telemetry,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn secrets_never_show() {
        let config = HostConfig {
            journal: "postgres://app:hunter2@db:5432/sessions".into(),
            model_base_url: "https://user:sk-secret@models.example/v1".into(),
            model_api_key_env: "MY_KEY".into(),
            mcp_servers: vec![agentsessions_mcp::McpServerConfig {
                name: "tools".into(),
                command: "tool-server".into(),
                env: BTreeMap::from([("API_TOKEN".to_owned(), "tok-123".to_owned())]),
                ..agentsessions_mcp::McpServerConfig::default()
            }],
            ..HostConfig::default()
        };
        let text = effective_config(&config, Value::Null).to_string();
        for secret in ["hunter2", "sk-secret", "tok-123"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert!(
            text.contains("postgres://app:***@db:5432/sessions"),
            "{text}"
        );
        assert!(text.contains("API_TOKEN"), "variable names stay: {text}");
        assert!(text.contains("MY_KEY"), "{text}");
    }
}
