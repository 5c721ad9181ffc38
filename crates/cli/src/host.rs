//! Assembling a Sessions service from configuration: the journal (a SQLite path or a
//! `postgres://` URL), the model (the offline echo model, or an OpenAI or Anthropic endpoint), the
//! built-in harnesses, any static remote harnesses (semantics §10.7) and the tools of the
//! configured MCP servers.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentsessions_api::RuntimeCapabilities;
use agentsessions_harnesses::{ChatHarness, EchoHarness};
use agentsessions_harnesswire::RemoteHarness;
use agentsessions_journal::Journal;
use agentsessions_mcp::{McpHub, McpHubOptions, ToolLedger};
use agentsessions_postgres::{PostgresJournal, PostgresOptions};
use agentsessions_server::harnesses::check_harness_address;
use agentsessions_server::{ServerBuilder, SessionsService};
use agentsessions_sqlite::{SqliteJournal, SqliteOptions};

use crate::config::{HostConfig, HostError, mcp_ledger_path, redact};
use crate::identity::DelegatedIdentity;
use crate::models::{ModelRouter, configured_model, model_policy};
use crate::redaction::host_redactor;

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
    // A running tool's progress goes to the streams of its session (extensions §11).
    if let Some(hub) = &mcp {
        hub.report_progress(service.progress_sink());
    }
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
    use agentsessions_mcp::McpServerConfig;

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
}
