//! Assembling a Sessions service from configuration: the journal (a SQLite path or a
//! `postgres://` URL), the model (the offline echo model, or an OpenAI or Anthropic endpoint), the
//! built-in harnesses, any static remote harnesses (semantics §10.7) and the tools of the
//! configured MCP servers.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentsessions_api::RuntimeCapabilities;
use agentsessions_harnesses::{ChatHarness, EchoHarness};
use agentsessions_harnesswire::RemoteHarness;
use agentsessions_journal::{Journal, SqliteJournal, SqliteOptions};
use agentsessions_mcp::{McpHub, McpHubOptions, McpServerConfig, ToolLedger};
use agentsessions_postgres::{PostgresJournal, PostgresOptions};
use agentsessions_server::harnesses::check_harness_address;
use agentsessions_server::{ServerBuilder, SessionsService};
use serde::Deserialize;

use crate::identity::DelegatedIdentity;
use crate::models::{ModelRouter, configured_model, model_policy};
use crate::redaction::host_redactor;

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
    pub redaction: crate::redaction::RedactionSettings,
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

/// Starts the configured MCP servers and waits for their first discovery (a server that fails
/// keeps retrying in the background); `None` when none is configured. With `identity` (from
/// [`host_identity`]), calls to a `delegated_token` server carry tokens it mints.
///
/// # Errors
/// [`HostError::Mcp`] for an invalid entry (a `delegated_token` one on a host without
/// `[identity]` among them) or a ledger that cannot be opened.
pub async fn start_mcp(
    config: &HostConfig,
    identity: Option<&DelegatedIdentity>,
) -> Result<Option<Arc<McpHub>>, HostError> {
    if config.mcp_servers.is_empty() {
        return Ok(None);
    }
    agentsessions_mcp::validate_all(&config.mcp_servers, identity.is_some())?;
    let ledger = open_ledger(config, identity)?;
    let tokens = identity.map(|identity| Arc::clone(&identity.tokens));
    let hub = McpHub::start_with_tokens(
        config.mcp_servers.clone(),
        ledger,
        McpHubOptions::default(),
        tokens,
    )
    .await?;
    Ok(Some(Arc::new(hub)))
}

/// The tool-call ledger at [`mcp_ledger_path`], storing outcomes without the host's secrets (the
/// identity's redactor, which also knows the tokens it mints).
fn open_ledger(
    config: &HostConfig,
    identity: Option<&DelegatedIdentity>,
) -> Result<ToolLedger, HostError> {
    let redactor = match identity {
        Some(identity) => Arc::clone(&identity.redactor),
        None => host_redactor(config, &|name| std::env::var(name).ok())?,
    };
    Ok(ToolLedger::open(mcp_ledger_path(config))?.with_redactor(redactor))
}

/// [`start_mcp`] without waiting: the servers connect in the background (each reports
/// `Starting`, then up or down) and their tools are offered once they are up, so the daemon
/// serves at once whatever its MCP servers do. Call it within a tokio runtime.
///
/// # Errors
/// As [`start_mcp`].
pub fn launch_mcp(
    config: &HostConfig,
    identity: Option<&DelegatedIdentity>,
) -> Result<Option<Arc<McpHub>>, HostError> {
    if config.mcp_servers.is_empty() {
        return Ok(None);
    }
    agentsessions_mcp::validate_all(&config.mcp_servers, identity.is_some())?;
    let ledger = open_ledger(config, identity)?;
    let tokens = identity.map(|identity| Arc::clone(&identity.tokens));
    let hub = McpHub::launch_with_tokens(
        config.mcp_servers.clone(),
        ledger,
        McpHubOptions::default(),
        tokens,
    )?;
    Ok(Some(Arc::new(hub)))
}

/// The host's delegated identity from `[identity]` (`None` when it is not configured), its
/// mints decided by the same policy as the RPCs unless `[identity]` says otherwise. Built once
/// and shared by the MCP hub ([`start_mcp`]) and the service ([`build_service_with_tools`]).
///
/// # Errors
/// [`HostError::Auth`] for an invalid authorization policy, [`HostError::Identity`] for
/// `[identity]` settings or a key file that make no issuer.
pub fn host_identity(
    journal: &Arc<dyn Journal>,
    config: &HostConfig,
) -> Result<Option<DelegatedIdentity>, HostError> {
    let authorizer = config.auth.authorizer()?;
    let redactor = host_redactor(config, &|name| std::env::var(name).ok())?;
    crate::identity::delegated_identity(
        config.identity.as_ref(),
        authorizer,
        Arc::clone(journal),
        redactor,
    )
    .map_err(HostError::Identity)
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

/// Opens the journal at `address`: `postgres://…`/`postgresql://…` for the Postgres journal
/// shared by many hosts (in `schema`, empty for the default), anything else as a SQLite file
/// path (created when missing).
///
/// # Errors
/// [`HostError::Journal`].
pub async fn open_journal(address: &str, schema: &str) -> Result<Arc<dyn Journal>, HostError> {
    let failed = |reason: String| HostError::Journal {
        address: redact(address),
        reason,
    };
    if address.starts_with("postgres://") || address.starts_with("postgresql://") {
        let mut options = PostgresOptions::default();
        if !schema.is_empty() {
            schema.clone_into(&mut options.schema);
        }
        let journal = PostgresJournal::connect(address, options)
            .await
            .map_err(|e| failed(e.to_string()))?;
        return Ok(Arc::new(journal));
    }
    let journal = SqliteJournal::open(address).map_err(|e| failed(e.to_string()))?;
    Ok(Arc::new(journal))
}

/// Opens the journal at `address` for a command that only reads it: a SQLite file is opened
/// read-only (so a file this user may not write can still be read), which never creates one; a
/// Postgres URL opens as in [`open_journal`].
///
/// # Errors
/// [`HostError::JournalMissing`] for a file that does not exist, else [`HostError::Journal`].
pub async fn open_journal_to_read(address: &str) -> Result<Arc<dyn Journal>, HostError> {
    let is_file = !(address.starts_with("postgres://") || address.starts_with("postgresql://"));
    if !is_file {
        return open_journal(address, "").await;
    }
    // The read-only open refuses a missing file too (it cannot create one); this only names
    // the common case plainly.
    if !std::path::Path::new(address).exists() {
        return Err(HostError::JournalMissing {
            path: address.to_owned(),
        });
    }
    let options = SqliteOptions {
        read_only: true,
        ..SqliteOptions::default()
    };
    let journal = SqliteJournal::open_with(address, options).map_err(|e| HostError::Journal {
        address: redact(address),
        reason: e.to_string(),
    })?;
    Ok(Arc::new(journal))
}

/// Parses `name=address` entries into a map, refusing malformed ones and duplicate names.
///
/// # Errors
/// [`HostError::HarnessEntry`].
pub fn parse_harness_entries(entries: &[String]) -> Result<BTreeMap<String, String>, HostError> {
    let mut parsed = BTreeMap::new();
    for entry in entries {
        let bad = |reason: String| HostError::HarnessEntry {
            entry: entry.clone(),
            reason,
        };
        let (name, address) = entry
            .split_once('=')
            .ok_or_else(|| bad("expected name=address".into()))?;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(bad(
                "the name must be lowercase letters, digits and '-'".into()
            ));
        }
        if name == "echo" || name == "chat" {
            return Err(bad(format!("{name:?} is a built-in harness name")));
        }
        check_harness_address(address).map_err(bad)?;
        if parsed.insert(name.to_owned(), address.to_owned()).is_some() {
            return Err(bad(format!("{name:?} is given twice")));
        }
    }
    Ok(parsed)
}

/// What [`build_service`] assembled, for the startup log.
#[derive(Debug, Clone)]
pub struct Assembled {
    /// The service.
    pub service: SessionsService,
    /// Served harness names.
    pub harnesses: Vec<String>,
    /// The default harness.
    pub default_harness: String,
    /// A one-line description of the model (never the key).
    pub model: String,
    /// The delegated identity, when `[identity]` is configured: its JWKS for verifiers and the
    /// tokens a tool hub attaches to its calls.
    pub identity: Option<DelegatedIdentity>,
    /// Where registered `substrate` placements run (`[runtime.microvm]`), when configured.
    pub substrate: Option<Arc<dyn agentsessions_server::SubstrateBackends>>,
}

/// Assembles the Sessions service over `journal` from `config`: `echo` (the default) always,
/// `chat` when a model is configured, and each static `name=address` harness over
/// `Harness.Connect`. The key comes only from the environment (see [`crate::models`]).
///
/// # Errors
/// [`HostError`] naming the setting to fix.
pub fn build_service(
    journal: Arc<dyn Journal>,
    config: &HostConfig,
) -> Result<Assembled, HostError> {
    let identity = host_identity(&journal, config)?;
    build_service_with_tools(journal, config, None, identity)
}

/// [`build_service`], with the tools of the MCP servers `mcp` (from [`start_mcp`]) as the
/// executor of controller-mediated and approved tool calls, and the delegated identity
/// `identity` (from [`host_identity`], the one the hub was started with).
///
/// # Errors
/// [`HostError`] naming the setting to fix.
pub fn build_service_with_tools(
    journal: Arc<dyn Journal>,
    config: &HostConfig,
    mcp: Option<Arc<McpHub>>,
    identity: Option<DelegatedIdentity>,
) -> Result<Assembled, HostError> {
    let remote = parse_harness_entries(&config.harness)?;
    if !remote.is_empty() && config.model.is_empty() {
        return Err(HostError::Model(
            "static --harness entries need --model (their model calls go to that model)".into(),
        ));
    }
    let none = RuntimeCapabilities::default();
    let configured = configured_model(config, &|name| std::env::var(name).ok())?;
    let policy = model_policy(config)?;
    let has_model = configured.is_some();
    let (provider, description) = match configured {
        Some(model) => (Some(model.provider), model.description),
        None => (None, "offline echo model".to_owned()),
    };
    let router = Arc::new(ModelRouter::new(provider));
    // One redactor for the turns and the issuer, so a token minted for a tool is redacted too.
    let redactor = match &identity {
        Some(identity) => Arc::clone(&identity.redactor),
        None => host_redactor(config, &|name| std::env::var(name).ok())?,
    };
    let mut builder = ServerBuilder::new(Arc::clone(&journal), router)
        .limits(config.limits)
        .redactor(redactor)
        .harness("echo", Arc::new(EchoHarness::new()), none)
        .default_harness("echo");
    if let Some(hub) = &mcp {
        builder = builder.tools(hub.clone());
    }
    if has_model {
        let mut chat =
            ChatHarness::new(config.model.clone()).map_err(|e| HostError::Model(e.to_string()))?;
        if let Some(steps) = config.chat_max_steps {
            chat = chat.with_max_steps(steps);
        }
        if let Some(hub) = &mcp {
            chat = chat.with_tools(hub.clone());
        }
        builder = builder.harness("chat", Arc::new(chat), none);
    }
    // Static remote harnesses are placed by the remote runtime (attach by address) and reached
    // through one shared dialer; the probe answers the admission gate's Describe.
    let link_tls = config
        .harness_tls
        .as_ref()
        .map(agentsessions_auth::ClientTlsSettings::client_tls_config)
        .transpose()
        .map_err(|e| HostError::HarnessTls(e.to_string()))?;
    let mut wire_dialer = agentsessions_runtime::WireDialer::new();
    if let Some(tls) = &link_tls {
        wire_dialer = wire_dialer.with_tls(tls.clone());
    }
    let dialer = Arc::new(wire_dialer);
    for (name, address) in &remote {
        let failed = |reason: String| HostError::HarnessEntry {
            entry: format!("{name}={address}"),
            reason,
        };
        let mut runtime = agentsessions_runtime::RemoteRuntime::new(address)
            .map_err(|e| failed(e.to_string()))?;
        if let Some(tls) = &link_tls {
            runtime = runtime.with_tls(tls.clone());
        }
        let probe = RemoteHarness::connect_lazy_tls(address, link_tls.clone())
            .map_err(|e| failed(e.to_string()))?;
        builder = builder.runtime_harness(
            name.clone(),
            Arc::new(runtime),
            dialer.clone(),
            agentsessions_server::placement::DescriptorSource::Probe(Arc::new(probe)),
        );
    }
    let mut substrate: Option<Arc<dyn agentsessions_server::SubstrateBackends>> = None;
    if let Some(microvm) = &config.runtime.microvm {
        let (with_vms, vms) = crate::microvm::add_routes(builder, microvm)?;
        builder = with_vms;
        substrate = Some(Arc::new(vms));
    }
    if !config.project.is_empty() {
        builder = builder.project(config.project.clone());
    }
    if let Some(tls) = link_tls {
        builder = builder.harness_link_tls(tls);
    }
    if let Some(policy) = policy {
        builder = builder.model_policy(policy);
    }
    let authorizer = config.auth.authorizer()?;
    if let Some(identity) = &identity {
        builder = builder.token_minting(Arc::clone(&identity.minting));
    }
    if let Some(authorizer) = authorizer {
        builder = builder.authorizer(authorizer);
    }
    let service = builder.build()?;
    let (harnesses, default_harness) = service.harness_names();
    Ok(Assembled {
        service,
        harnesses,
        default_harness,
        model: description,
        identity,
        substrate,
    })
}

#[cfg(test)]
#[allow(clippy::assertions_on_result_states)] // the refusals are the assertions
mod tests {
    use super::*;

    #[test]
    fn harness_entries_need_a_name_an_address_and_no_duplicates() {
        let ok = parse_harness_entries(&["remote=127.0.0.1:9000".into()]);
        assert!(matches!(ok, Ok(map) if map["remote"] == "127.0.0.1:9000"));
        for bad in [
            vec!["noequals".to_owned()],
            vec!["=127.0.0.1:1".to_owned()],
            vec!["Upper=127.0.0.1:1".to_owned()],
            vec!["echo=127.0.0.1:1".to_owned()],
            vec!["a=http://x:1".to_owned()],
            vec!["a=127.0.0.1:1".to_owned(), "a=127.0.0.1:2".to_owned()],
        ] {
            assert!(parse_harness_entries(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn passwords_never_appear_in_journal_errors() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/agents"),
            "postgres://app:***@db:5432/agents"
        );
        assert_eq!(redact("agentsessions.db"), "agentsessions.db");
    }

    #[test]
    fn config_files_take_the_reclaimer_interval_and_harness_link_tls() {
        let parsed: HostConfig = toml::from_str(
            "reclaim_interval_secs = 0\n[harness_tls]\nca = \"ca.pem\"\ncert = \"me.pem\"\nkey = \"me.key\"\ndomain = \"localhost\"\n",
        )
        .unwrap_or_default();
        assert_eq!(parsed.reclaim_interval_secs, Some(0));
        let tls = parsed.harness_tls.unwrap_or_default();
        assert_eq!(tls.ca, std::path::PathBuf::from("ca.pem"));
        assert_eq!(tls.domain.as_deref(), Some("localhost"));
        // A misspelt key inside the table is refused too.
        let bad: Result<HostConfig, _> = toml::from_str("[harness_tls]\nca = \"x\"\ncrt = \"y\"\n");
        assert!(bad.is_err());
        // A CA file that cannot be read stops the assembly with the table named.
        let config = HostConfig {
            harness: vec!["far=127.0.0.1:1".into()],
            model: "echo".into(),
            harness_tls: Some(agentsessions_auth::ClientTlsSettings::new(
                "/nonexistent/ca.pem",
            )),
            ..HostConfig::default()
        };
        let journal: Arc<dyn Journal> = Arc::new(agentsessions_journal::MemoryJournal::new());
        let refused = build_service(journal, &config).map(|_| ());
        assert!(
            matches!(&refused, Err(HostError::HarnessTls(why)) if why.contains("/nonexistent/ca.pem")),
            "{refused:?}"
        );
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

    #[tokio::test]
    async fn mcp_servers_start_with_the_host_and_refuse_bad_entries() {
        let none = start_mcp(&HostConfig::default(), None).await;
        assert!(matches!(none, Ok(None)));
        let both = HostConfig {
            journal: ":memory:".into(),
            mcp_servers: vec![McpServerConfig {
                name: "x".into(),
                command: "x".into(),
                url: "http://127.0.0.1:9".into(),
                ..McpServerConfig::default()
            }],
            ..HostConfig::default()
        };
        assert!(matches!(
            start_mcp(&both, None).await,
            Err(HostError::Mcp(_))
        ));
        // A server that cannot start does not stop the host: it is reported down and retried.
        let missing = HostConfig {
            journal: ":memory:".into(),
            mcp_servers: vec![McpServerConfig {
                name: "gone".into(),
                command: "/nonexistent/mcp-server".into(),
                ..McpServerConfig::default()
            }],
            ..HostConfig::default()
        };
        let hub = start_mcp(&missing, None).await.ok().flatten();
        let hub = hub.unwrap_or_else(|| panic!("the hub starts"));
        assert!(matches!(
            hub.health()[0].status,
            agentsessions_mcp::ServerStatus::Down { .. }
        ));
        let journal: Arc<dyn Journal> = Arc::new(agentsessions_journal::MemoryJournal::new());
        let assembled = build_service_with_tools(journal, &missing, Some(hub.clone()), None);
        assert!(assembled.is_ok());
        hub.shutdown().await;
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
