//! What a host is configured with: [`HostConfig`] (the daemon's flags and TOML file), why an
//! assembly is refused ([`HostError`]), and the paths and addresses derived from them.

use agentsessions_mcp::McpServerConfig;
use serde::Deserialize;

/// Why a host could not be assembled. Each names the setting to fix.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The journal could not be opened.
    #[error("cannot open journal {address}: {reason}")]
    Journal {
        /// The journal address (a Postgres URL's password is never shown).
        address: String,
        /// Why.
        reason: String,
    },
    /// A command that only reads was pointed at a journal file that does not exist (it is
    /// never created for a read).
    #[error(
        "no journal at {path}: the file does not exist (give --journal the file that holds the \
         sessions)"
    )]
    JournalMissing {
        /// The path given.
        path: String,
    },
    /// A `--harness name=address` entry is malformed.
    #[error("--harness {entry:?}: {reason}")]
    HarnessEntry {
        /// The entry.
        entry: String,
        /// Why.
        reason: String,
    },
    /// The model settings do not make a provider.
    #[error("model configuration: {0}")]
    Model(String),
    /// The service refused the assembly.
    #[error(transparent)]
    Server(#[from] agentsessions_server::ServerError),
    /// The `[harness_tls]` settings cannot be loaded.
    #[error("[harness_tls]: {0}")]
    HarnessTls(String),
    /// The `[auth]` settings do not make a policy.
    #[error("[auth.authorization]: {0}")]
    Auth(#[from] agentsessions_auth::AuthError),
    /// The `[identity]` settings (or the signing key file they name) do not make a token issuer.
    #[error("[identity]: {0}")]
    Identity(agentsessions_auth::AuthError),
    /// The `[[mcp_servers]]` settings are invalid, or the tool-call ledger cannot be opened.
    #[error(transparent)]
    Mcp(#[from] agentsessions_mcp::McpError),
    /// A `[redaction]` pattern is not a regular expression.
    #[error("[redaction]: {0}")]
    Redaction(#[from] agentsessions_api::redaction::PatternError),
    /// The `[runtime.microvm]` settings cannot run VMs.
    #[error("[runtime.microvm]: {0}")]
    Microvm(#[from] agentsessions_microvm::MicrovmError),
}

/// How often the daemon's reclaimer looks for deleted sessions when the configuration says
/// nothing.
pub const DEFAULT_RECLAIM_INTERVAL_SECS: u64 = 60;

/// Everything a host is configured with. Fields mirror the daemon's flags; the TOML config file
/// uses the same names.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct HostConfig {
    /// Address the daemon serves on (`host:port`, a host name resolves; the daemon's default is
    /// `127.0.0.1:8080`).
    pub addr: String,
    /// Operator listener for the HarnessRegistry API (`host:port` on a loopback address; empty:
    /// none).
    pub registry_addr: String,
    /// HTTP listener for people and scrapers (`host:port`; empty: none): `/healthz` and the
    /// parts merged in [`crate::http::router`].
    pub http_addr: String,
    /// Log format of the daemon: `text` (the default) or `json`.
    pub log_format: String,
    /// SQLite file path, or a `postgres://` URL.
    pub journal: String,
    /// Postgres schema holding the journal's tables (default `agentsessions`); hosts sharing a
    /// journal use the same one.
    pub journal_schema: String,
    /// Project used when a request names none.
    pub project: String,
    /// Model for the chat harness; empty serves only the echo harness with the offline model.
    pub model: String,
    /// Base URL of an OpenAI-compatible endpoint.
    pub model_base_url: String,
    /// Path of the chat-completions endpoint.
    pub model_path: String,
    /// Header carrying the key (`Authorization` sends `Bearer <key>`; `openai` only).
    pub model_auth_header: String,
    /// Which wire format the model endpoint speaks: `openai` (the default) or `anthropic`.
    pub model_provider: String,
    /// Seconds one model call may take, from connecting to the last byte (provider default:
    /// 120).
    pub model_timeout_secs: Option<u64>,
    /// Retries of a model request the provider refused or failed before answering (429, 5xx,
    /// connect failures), with backoff; never once an answer started streaming.
    pub model_retries: Option<u32>,
    /// Name of the environment variable holding the model key (never the key itself).
    pub model_api_key_env: String,
    /// The model policy's allowed models, `model` being its default (extensions §4); empty: no
    /// policy. Add `echo` to keep the echo harness usable under a policy.
    pub model_allowed: Vec<String>,
    /// What models take as input, by model id (`[model_modalities]` in the file, e.g.
    /// `"gpt-3.5-turbo" = ["text"]`): a model without `image` is text-only, and the images of
    /// tool results are described to it in text (extensions §10). A model not listed takes
    /// text and images.
    pub model_modalities: std::collections::BTreeMap<String, Vec<String>>,
    /// Model calls one chat turn may make while the model keeps asking for tools (default
    /// [`ChatHarness::DEFAULT_MAX_STEPS`]).
    pub chat_max_steps: Option<u32>,
    /// Static remote harnesses, `name=address`.
    pub harness: Vec<String>,
    /// Seconds between reclaimer passes, which release the compute and snapshots of deleted
    /// sessions (default [`DEFAULT_RECLAIM_INTERVAL_SECS`]; 0 turns the periodic pass off, a
    /// deletion is still reclaimed right away when it can be).
    pub reclaim_interval_secs: Option<u64>,
    /// Transport security, authentication and the authorization policy for both listeners
    /// (`[auth]` in the file; see `docs/security.md`).
    pub auth: agentsessions_auth::AuthConfig,
    /// TLS for the links to the `harness` entries (`[harness_tls]` in the file): the CA bundle
    /// their certificates chain to and, for harnesses that require one, this host's client
    /// certificate and key. Unset: cleartext.
    pub harness_tls: Option<agentsessions_auth::ClientTlsSettings>,
    /// Delegated identity for tools (`[identity]` in the file; see `docs/security.md`): the host
    /// mints short-lived, audience-scoped tokens for each session's principal and hands
    /// harnesses a minter. Unset: harnesses get no minter.
    pub identity: Option<agentsessions_auth::IdentitySettings>,
    /// MCP servers whose tools the host offers and runs (`[[mcp_servers]]` in the file; see the
    /// README's "Tools from MCP servers").
    pub mcp_servers: Vec<McpServerConfig>,
    /// SQLite file of the tool-call ledger that keeps MCP tool effects at most once (default
    /// [`mcp_ledger_path`]).
    pub mcp_ledger: String,
    /// Trace export (`[telemetry]` in the file; the standard `OTEL_*` variables win over it):
    /// OTLP endpoint and protocol, service name, and whether model-call content goes on spans.
    pub telemetry: agentsessions_telemetry::TelemetryConfig,
    /// Further runtimes (`[runtime.microvm]` in the file; see `docs/microvm.md`).
    pub runtime: crate::microvm::RuntimeSettings,
    /// Overload limits (`[limits]` in the file; see RELIABILITY.md): concurrent turns, open
    /// streams and message size, each refused past its limit with `RESOURCE_EXHAUSTED`.
    pub limits: agentsessions_server::Limits,
    /// Patterns and further variables whose values are taken out of every record before it is
    /// journaled (`[redaction]` in the file; see `docs/security.md`, "Redaction").
    pub redaction: RedactionSettings,
}

/// Where the tool-call ledger lives: `mcp_ledger` when set; otherwise beside a SQLite journal
/// (`<journal>.tools.db`), in memory for an in-memory journal, and `agentsessions.tools.db` in
/// the working directory for a Postgres journal.
pub fn mcp_ledger_path(config: &HostConfig) -> String {
    let journal = config.journal.as_str();
    if !config.mcp_ledger.is_empty() {
        config.mcp_ledger.clone()
    } else if journal.is_empty() || journal == ":memory:" {
        ":memory:".to_owned()
    } else if journal.starts_with("postgres://") || journal.starts_with("postgresql://") {
        "agentsessions.tools.db".to_owned()
    } else {
        format!("{journal}.tools.db")
    }
}

/// Redacts the password of a URL-like journal address for messages.
pub fn redact(address: &str) -> String {
    match (address.find("://"), address.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &address[scheme + 3..at];
            match credentials.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &address[..scheme + 3],
                    &credentials[..colon],
                    &address[at..]
                ),
                None => address.to_owned(),
            }
        }
        _ => address.to_owned(),
    }
}

/// `[redaction]` in the daemon's file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct RedactionSettings {
    /// Regular expressions (Rust `regex` syntax) whose matches are redacted too, each named
    /// `pattern-<n>` (from 1) in the marker and the record's list.
    pub patterns: Vec<String>,
    /// Further environment variables whose values are secrets.
    pub secret_env: Vec<String>,
}

#[cfg(test)]
#[allow(clippy::assertions_on_result_states)] // the refusals are the assertions
mod tests {
    use super::*;

    #[test]
    fn passwords_never_appear_in_journal_errors() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/agents"),
            "postgres://app:***@db:5432/agents"
        );
        assert_eq!(redact("agentsessions.db"), "agentsessions.db");
    }

    #[test]
    fn config_files_declare_mcp_servers_and_their_ledger() {
        let parsed: HostConfig = toml::from_str(
            "journal = \"data/agents.db\"\n\
             [[mcp_servers]]\nname = \"time\"\ncommand = \"python3\"\n\
             args = [\"-m\", \"mcp_server_time\"]\napproval = [\"convert_time\"]\n\
             [[mcp_servers]]\nname = \"web\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
             headers_from_env = { Authorization = \"WEB_TOKEN\" }\napproval = \"always\"\n",
        )
        .unwrap_or_default();
        assert_eq!(parsed.mcp_servers.len(), 2);
        let time = &parsed.mcp_servers[0];
        assert_eq!(time.args, ["-m", "mcp_server_time"]);
        assert_eq!(
            time.approval.mediation("convert_time"),
            agentsessions_api::Mediation::RequiresApproval
        );
        assert_eq!(
            parsed.mcp_servers[1].headers_from_env["Authorization"],
            "WEB_TOKEN"
        );
        assert_eq!(mcp_ledger_path(&parsed), "data/agents.db.tools.db");
        let memory = HostConfig {
            journal: ":memory:".into(),
            ..HostConfig::default()
        };
        assert_eq!(mcp_ledger_path(&memory), ":memory:");
        let explicit = HostConfig {
            mcp_ledger: "ledger.db".into(),
            ..parsed
        };
        assert_eq!(mcp_ledger_path(&explicit), "ledger.db");
        let misspelt: Result<HostConfig, _> =
            toml::from_str("[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\napprove = \"never\"\n");
        assert!(misspelt.is_err());
    }

    #[test]
    fn config_files_refuse_unknown_keys() {
        let parsed: Result<HostConfig, _> = toml::from_str("journal = \"x.db\"\nmodle = \"gpt\"\n");
        assert!(parsed.is_err());
        let parsed: HostConfig =
            toml::from_str("journal = \"x.db\"\nharness = [\"a=127.0.0.1:1\"]\n")
                .unwrap_or_default();
        assert_eq!(parsed.journal, "x.db");
        assert_eq!(parsed.harness, ["a=127.0.0.1:1"]);
    }
}
