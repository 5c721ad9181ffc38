//! `agentsessionsd`: the Sessions gRPC server (semantics §10.7).
//!
//! Flags override the TOML file given with `--config`, which overrides the defaults. Every setting
//! is checked and every port bound before the journal is opened, so a refused configuration
//! leaves no file behind. The Sessions API serves at once; MCP servers connect in the
//! background. SIGINT or SIGTERM, at any moment (startup included), stops the daemon within
//! [`SHUTDOWN_BOUND`]:
//!
//! ```text
//!  signal ─┬─ stop accepting; health NOT_SERVING
//!          ├─ ≤ DRAIN (4 s):        in-flight calls and turns finish on their own
//!          ├─ ≤ + TURN_CLOSE (2 s): turns still running are interrupted, each writing an ERROR
//!          │                        "host shutting down; resume to continue" (resumable)
//!          ├─ ≤ + MCP_STOP (3 s):   MCP stdio children get SIGTERM, SIGKILL 2 s later
//!          └─ exit (blocking work left gets EXIT_WAIT)
//! ```

mod exit;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agentsessions_cli::config::{HostConfig, mcp_ledger_path, redact};
use agentsessions_cli::host::{
    Assembled, build_service_with_tools, host_identity, launch_mcp, open_journal,
};
use agentsessions_journal::Journal;
use agentsessions_mcp::McpHub;
use anyhow::Context as _;

use crate::exit::Stop;
use clap::Parser;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// mimalloc instead of the system allocator: a turn allocates and frees many small buffers
/// (records, protobuf messages, HTTP/2 frames) across threads, where glibc's malloc took about
/// an eighth of the daemon's CPU under load (BENCHMARKS.md, "Flat cost per turn").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The documented bound (README): a signal stops the daemon, its children included, within this.
/// The phases below add up to less, leaving room for the process to exit.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(10);
/// How long in-flight RPCs and turns get to finish on their own after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(4);
/// How long interrupted turns get to write their ERROR notes, and the listeners to close.
const TURN_CLOSE: Duration = Duration::from_secs(2);
/// How long the MCP servers get to stop (the hub's own bound is 2.5 s).
const MCP_STOP: Duration = Duration::from_secs(3);
/// How long trace export may take to flush at exit.
const TELEMETRY_FLUSH: Duration = Duration::from_millis(500);
/// How long blocking work still running at exit is waited for.
const EXIT_WAIT: Duration = Duration::from_millis(300);
const _: () = assert!(
    DRAIN.as_millis()
        + TURN_CLOSE.as_millis()
        + MCP_STOP.as_millis()
        + TELEMETRY_FLUSH.as_millis()
        + EXIT_WAIT.as_millis()
        < SHUTDOWN_BOUND.as_millis()
);

/// Serve durable agent sessions over gRPC.
#[derive(Debug, Parser)]
#[command(
    name = "agentsessionsd",
    version,
    after_long_help = "Examples:\n  \
        agentsessionsd --addr localhost:8080 --journal agentsessions.db\n  \
        agentsessionsd --config agentsessionsd.toml --log-format json\n  \
        agentsessionsd --model gpt-4o-mini --registry-addr 127.0.0.1:8081\n\n\
        In the config file the limits are a [limits] table: max_concurrent_turns,\n\
        max_open_streams, max_message_bytes.\n\
        Config-file only: [auth], [harness_tls], mcp_ledger, and [[mcp_servers]] tables, each\n\
        with name, then command (+ args, env, cwd) or url (+ headers_from_env = { Header = \"ENV_VAR\" }),\n\
        approval = \"never\" | \"always\" | [\"tool\", ...], timeout_secs (default 60), tool_timeouts.\n\
        The model sees each MCP tool as <server>__<tool>."
)]
struct Args {
    /// Address to serve the Sessions API on (host:port; a host name resolves) [default:
    /// 127.0.0.1:8080].
    #[arg(long, env = "AGENTSESSIONS_ADDR")]
    addr: Option<String>,
    /// Journal: a SQLite file path, or a postgres:// URL shared by several hosts.
    #[arg(long, env = "AGENTSESSIONS_JOURNAL")]
    journal: Option<String>,
    /// Postgres schema of a shared journal (default agentsessions).
    #[arg(long)]
    journal_schema: Option<String>,
    /// Project used when a request names none.
    #[arg(long)]
    project: Option<String>,
    /// Model for the chat harness; empty = offline echo model.
    #[arg(long)]
    model: Option<String>,
    /// Wire format of the model endpoint [default: openai]; `directive` is an offline model that
    /// calls the tool a message names (`/tool NAME {json}`), to try tools without a provider.
    #[arg(long, value_parser = agentsessions_cli::models::PROVIDERS)]
    model_provider: Option<String>,
    /// Base URL of the model endpoint.
    #[arg(long)]
    model_base_url: Option<String>,
    /// Path of its chat-completions endpoint (openai only).
    #[arg(long)]
    model_path: Option<String>,
    /// Header that carries the key (openai only).
    #[arg(long)]
    model_auth_header: Option<String>,
    /// Environment variable holding the model key [default: MODEL_API_KEY, then
    /// OPENAI_API_KEY or ANTHROPIC_API_KEY]. The key itself is never a flag or a file setting.
    #[arg(long)]
    model_api_key_env: Option<String>,
    /// Seconds one model call may take [default: 120].
    #[arg(long)]
    model_timeout_secs: Option<u64>,
    /// Retries of a model request refused or failed before any answer (429, 5xx, connect).
    #[arg(long)]
    model_retries: Option<u32>,
    /// Models the policy allows, --model being its default (repeatable); none: no policy.
    #[arg(long = "model-allowed")]
    model_allowed: Vec<String>,
    /// Model calls one chat turn may make while the model keeps asking for tools [default: 16].
    #[arg(long)]
    chat_max_steps: Option<u32>,
    /// A harness already running elsewhere, as name=address (repeatable).
    #[arg(long = "harness")]
    harness: Vec<String>,
    /// Operator listener for the HarnessRegistry admin API: a loopback host and port (e.g.
    /// 127.0.0.1:8081 or localhost:8081); never served on the Sessions port.
    #[arg(long)]
    registry_addr: Option<String>,
    /// HTTP listener for people and scrapers (e.g. 127.0.0.1:8090): `GET /healthz`, and the
    /// console, JSON API and metrics where built in. Off unless set.
    #[arg(long)]
    http_addr: Option<String>,
    /// Seconds between passes of the reclaimer that releases deleted sessions' compute and
    /// snapshots (default 60; 0 = only when a session is deleted).
    #[arg(long)]
    reclaim_interval_secs: Option<u64>,
    /// Turns running at once; one more is refused with RESOURCE_EXHAUSTED [default: 512].
    #[arg(long)]
    max_concurrent_turns: Option<usize>,
    /// Exec, Replay and Watch streams open at once; one more is refused with
    /// RESOURCE_EXHAUSTED [default: 2048].
    #[arg(long)]
    max_open_streams: Option<usize>,
    /// Largest gRPC message in bytes; a larger request is refused with RESOURCE_EXHAUSTED
    /// [default: 16777216].
    #[arg(long)]
    max_message_bytes: Option<usize>,
    /// TOML file with any of the settings above and --log-format (flags win).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Log format [default: text].
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
}

fn merged(args: &Args) -> anyhow::Result<HostConfig> {
    let file = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config file {}", path.display()))?;
            let mut file = toml::from_str::<HostConfig>(&text)
                .with_context(|| format!("config file {}", path.display()))?;
            // Certificate and key paths are relative to the file that names them.
            if let Some(dir) = path.parent() {
                file.auth.resolve_paths(dir);
                if let Some(tls) = &mut file.harness_tls {
                    tls.resolve_paths(dir);
                }
                if let Some(identity) = &mut file.identity {
                    identity.resolve_paths(dir);
                }
                if let Some(microvm) = &mut file.runtime.microvm {
                    microvm.resolve_paths(dir);
                }
                if !file.mcp_ledger.is_empty() && file.mcp_ledger != ":memory:" {
                    file.mcp_ledger = dir.join(&file.mcp_ledger).display().to_string();
                }
                for server in &mut file.mcp_servers {
                    if let Some(cwd) = &mut server.cwd {
                        *cwd = dir.join(&*cwd);
                    }
                }
            }
            file
        }
        None => HostConfig::default(),
    };
    let mut host = file;
    let set = |slot: &mut String, flag: &Option<String>, default: &str| {
        if let Some(value) = flag {
            value.clone_into(slot);
        } else if slot.is_empty() {
            default.clone_into(slot);
        }
    };
    set(&mut host.addr, &args.addr, "127.0.0.1:8080");
    set(&mut host.registry_addr, &args.registry_addr, "");
    set(&mut host.http_addr, &args.http_addr, "");
    set(&mut host.log_format, &args.log_format, "text");
    set(&mut host.journal, &args.journal, "agentsessions.db");
    set(&mut host.journal_schema, &args.journal_schema, "");
    set(&mut host.project, &args.project, "default");
    set(&mut host.model, &args.model, "");
    set(&mut host.model_base_url, &args.model_base_url, "");
    set(&mut host.model_path, &args.model_path, "");
    set(&mut host.model_auth_header, &args.model_auth_header, "");
    set(&mut host.model_provider, &args.model_provider, "");
    set(&mut host.model_api_key_env, &args.model_api_key_env, "");
    if args.model_timeout_secs.is_some() {
        host.model_timeout_secs = args.model_timeout_secs;
    }
    if args.model_retries.is_some() {
        host.model_retries = args.model_retries;
    }
    if !args.model_allowed.is_empty() {
        host.model_allowed.clone_from(&args.model_allowed);
    }
    if args.chat_max_steps.is_some() {
        host.chat_max_steps = args.chat_max_steps;
    }
    if !args.harness.is_empty() {
        host.harness.clone_from(&args.harness);
    }
    if args.reclaim_interval_secs.is_some() {
        host.reclaim_interval_secs = args.reclaim_interval_secs;
    }
    // Limits live in the file's [limits] table; a flag wins over it.
    let limits = &mut host.limits;
    for (slot, flag) in [
        (&mut limits.max_concurrent_turns, args.max_concurrent_turns),
        (&mut limits.max_open_streams, args.max_open_streams),
        (&mut limits.max_message_bytes, args.max_message_bytes),
    ] {
        if let Some(value) = flag {
            *slot = value;
        }
    }
    host.limits.validate().context("[limits]")?;
    if !matches!(host.log_format.as_str(), "text" | "json") {
        anyhow::bail!(
            "log_format {:?}: expected \"text\" or \"json\"",
            host.log_format
        );
    }
    Ok(host)
}

/// Resolves `host:port` (an IP or a host name); of several addresses, the first IPv4 one, so
/// `localhost` listens where `127.0.0.1` clients look.
async fn resolve(setting: &str, text: &str) -> anyhow::Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(text)
        .await
        .with_context(|| format!("{setting} {text:?} is not a host:port that resolves"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .with_context(|| format!("{setting} {text:?} resolves to no address"))
}

/// TLS and authentication from the `[auth]` table (the policy goes into the service, see
/// `build_service`). `validate` refuses a policy without a credential kind that identifies
/// callers, so a policy never runs over anonymous calls.
fn serve_options(
    auth: &agentsessions_auth::AuthConfig,
) -> anyhow::Result<agentsessions_server::ServeOptions> {
    auth.validate().context("[auth]")?;
    let authenticator = (auth.yields_identity() || auth.effective_require_authentication())
        .then(|| auth.authenticator().map(std::sync::Arc::new))
        .transpose()
        .context("[auth]")?;
    Ok(agentsessions_server::ServeOptions {
        tls: auth.server_tls_config().context("[auth.tls]")?,
        authenticator,
        health: tonic_health::server::HealthReporter::new(),
    })
}

/// Listing pages (of 500 sessions) the startup settle of idle compute reads.
const SETTLE_PAGES: usize = 200;

/// Sessions released per reclaimer pass; the rest wait for the next one.
const RECLAIM_BATCH: usize = 1_000;

/// Releases deleted sessions' compute and snapshots: once at startup (deletions whose immediate
/// reclaim a crash interrupted) and then every `every`, until `stopping`.
async fn reclaimer(
    service: agentsessions_server::SessionsService,
    every: Duration,
    stopping: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stop = stopped(stopping);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = ticks.tick() => {}
        }
        match service.reclaim_pending(RECLAIM_BATCH).await {
            Ok(report) if report.reclaimed.is_empty() && report.failed.is_empty() => {}
            Ok(report) => tracing::info!(
                component = "reclaimer",
                reclaimed = report.reclaimed.len(),
                deferred = report.failed.len(),
                "reclaimer pass"
            ),
            Err(e) => tracing::warn!(component = "reclaimer", error = %e, "reclaimer pass failed"),
        }
    }
}

/// Resolves once the daemon is told to stop.
async fn stopped(mut stopping: watch::Receiver<bool>) {
    let _closed_means_stop = stopping.wait_for(|stop| *stop).await;
}

/// The daemon's tasks, told apart when one ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    Sessions,
    Registry,
    Reclaimer,
    SettleCompute,
    McpHealth,
    Http,
}

/// The `grpc.health.v1` service name of MCP server `name`.
fn mcp_health_name(name: &str) -> String {
    format!("agentsessions.mcp.{name}")
}

/// Reports each MCP server on `grpc.health.v1` as `agentsessions.mcp.<name>`: SERVING while its
/// tools are offered, NOT_SERVING while it starts or is down (logged as a warning with the
/// reason). Updated as the hub reports a change, and at least every second, until `stopping`.
async fn report_mcp_health(
    hub: Arc<McpHub>,
    health: tonic_health::server::HealthReporter,
    mut stopping: watch::Receiver<bool>,
) {
    use agentsessions_mcp::ServerStatus;
    use tonic_health::ServingStatus;
    let mut reported: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    loop {
        for server in hub.health() {
            let up = matches!(server.status, ServerStatus::Up);
            if reported.insert(server.name.clone(), up) == Some(up) {
                continue;
            }
            let status = if up {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            health
                .set_service_status(mcp_health_name(&server.name), status)
                .await;
            if let ServerStatus::Down { reason } = &server.status {
                tracing::warn!(component = "mcp", server = %server.name, %reason, "MCP server down; its tools are refused until it is back");
            }
        }
        tokio::select! {
            _ = stopping.wait_for(|stop| *stop) => return,
            () = hub.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is called, not when it is
/// first polled, so a signal sent right after the readiness line is not missed.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let terminate = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        let wait = |stream: std::io::Result<tokio::signal::unix::Signal>| async move {
            match stream {
                Ok(mut stream) => {
                    stream.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = wait(interrupt) => {}
            () = wait(terminate) => {}
        }
    }
}

fn main() -> ExitCode {
    match daemon() {
        Ok(()) => ExitCode::SUCCESS,
        Err(stop) => {
            // As a `Result` main would print it, on stderr, with its causes.
            let (Stop::Config(e) | Stop::Journal(e) | Stop::Listen(e) | Stop::Serving(e)) = &stop;
            let _ =
                std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("Error: {e:?}\n"));
            stop.exit_code()
        }
    }
}

/// The daemon, from its flags to its stop (`exit` maps the stop to the exit status).
fn daemon() -> Result<(), Stop> {
    let args = Args::parse();
    let settings = merged(&args).map_err(exit::config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
        .map_err(exit::serving)?;
    let result = runtime.block_on(async {
        // First of all, so a signal during startup stops the daemon too.
        let signal = shutdown_signal();
        let telemetry = install_telemetry(&settings).map_err(exit::config)?;
        let served = run(settings, signal).await;
        if tokio::time::timeout(TELEMETRY_FLUSH, telemetry.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                component = "telemetry",
                "traces not flushed in time; exiting anyway"
            );
        }
        served
    });
    // Blocking work still under way (a journal read, a ledger write) does not hold the exit
    // past the shutdown bound.
    runtime.shutdown_timeout(EXIT_WAIT);
    result
}

/// Logs and, when configured, trace export; then the effective configuration, secrets left out.
fn install_telemetry(config: &HostConfig) -> anyhow::Result<agentsessions_telemetry::Telemetry> {
    use agentsessions_telemetry::{LogFormat, Telemetry};
    let resolved = config.telemetry.resolve().context("[telemetry]")?;
    let format = if config.log_format == "json" {
        LogFormat::Json
    } else {
        LogFormat::Text
    };
    let telemetry = Telemetry::install(format, &resolved).context("[telemetry]")?;
    let traces = serde_json::json!({
        "otlp_endpoint": resolved.endpoint.as_deref().map(redact),
        "otlp_protocol": resolved.protocol.as_str(),
        "service_name": resolved.service_name,
        "capture_content": resolved.capture_content,
    });
    tracing::info!(
        component = "config",
        config = %agentsessions_cli::effective::effective_config(config, traces),
        "effective configuration"
    );
    Ok(telemetry)
}

/// Everything after logging is set up, until the daemon stops: startup (abandoned if `signal`
/// comes first), then serving until `signal`, then the bounded shutdown.
async fn run(config: HostConfig, signal: impl Future<Output = ()>) -> Result<(), Stop> {
    tokio::pin!(signal);
    let mut mcp = None;
    let started = tokio::select! {
        () = &mut signal => None,
        started = start(config, &mut mcp) => Some(started),
    };
    let ready = match started {
        Some(Ok(ready)) => ready,
        Some(Err(e)) => {
            stop_mcp(mcp).await;
            return Err(e);
        }
        None => {
            tracing::info!(
                component = "grpc",
                "shutdown signal during startup: stopping"
            );
            stop_mcp(mcp).await;
            tracing::info!(component = "grpc", "agentsessionsd stopped");
            return Ok(());
        }
    };
    serve(ready, mcp, signal).await.map_err(exit::serving)
}

/// Stops the MCP servers, bounded: each stdio child gets SIGTERM, then SIGKILL after a grace.
async fn stop_mcp(mcp: Option<Arc<McpHub>>) {
    let Some(hub) = mcp else {
        return;
    };
    if tokio::time::timeout(MCP_STOP, hub.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            component = "mcp",
            "MCP servers did not stop in time; exiting anyway"
        );
    } else {
        tracing::info!(component = "mcp", "MCP servers stopped");
    }
}

/// A host ready to serve: configuration checked, ports bound, journal open, service built.
struct Ready {
    config: HostConfig,
    journal: Arc<dyn Journal>,
    assembled: Assembled,
    registry: agentsessions_server::RegistryService,
    registered: usize,
    sessions: tokio::net::TcpListener,
    operator: Option<tokio::net::TcpListener>,
    http: Option<tokio::net::TcpListener>,
    http_tls: Option<agentsessions_cli::http::tls::HttpTls>,
    options: agentsessions_server::ServeOptions,
}

/// Startup, in the order that keeps a refused configuration from leaving anything behind:
/// every setting is checked, then every port bound, and only then is the journal opened (a
/// daemon that refuses to start creates no journal file). The MCP hub is launched without
/// waiting for its servers, and put in `mcp` at once so the caller can stop it should startup
/// be abandoned.
async fn start(config: HostConfig, mcp: &mut Option<Arc<McpHub>>) -> Result<Ready, Stop> {
    let addr = resolve("addr", &config.addr).await.map_err(exit::config)?;
    let registry_addr = match config.registry_addr.as_str() {
        "" => None,
        text => Some(resolve("registry_addr", text).await.map_err(exit::config)?),
    };
    if let Some(registry) = registry_addr {
        if !registry.ip().is_loopback() {
            return Err(exit::config(anyhow::anyhow!(
                "--registry-addr {registry}: the operator API listens only on a loopback address \
                 (127.0.0.1, [::1] or localhost)"
            )));
        }
        if registry.port() != 0 && registry.port() == addr.port() {
            return Err(exit::config(anyhow::anyhow!(
                "--registry-addr must not share the Sessions port {}",
                addr.port()
            )));
        }
    }
    let http_addr = match config.http_addr.as_str() {
        "" => None,
        text => Some(resolve("http_addr", text).await.map_err(exit::config)?),
    };
    if let Some(http) = http_addr
        && http.port() != 0
        && (http.port() == addr.port() || registry_addr.is_some_and(|r| r.port() == http.port()))
    {
        return Err(exit::config(anyhow::anyhow!(
            "--http-addr {http} must not share the Sessions or registry port"
        )));
    }
    let options = serve_options(&config.auth).map_err(exit::config)?;
    // The HTTP listener serves TLS whenever gRPC does, with the same settings.
    let http_tls = match (&http_addr, &config.auth.tls) {
        (Some(_), Some(tls)) => Some(
            agentsessions_cli::http::tls::HttpTls::from_settings(tls)
                .context("[auth.tls] for the HTTP listener")
                .map_err(exit::config)?,
        ),
        _ => None,
    };
    preflight(&config).map_err(exit::config)?;
    let sessions = bind(addr).await.map_err(exit::listen)?;
    let operator = match registry_addr {
        Some(registry_addr) => Some(bind(registry_addr).await.map_err(exit::listen)?),
        None => None,
    };
    let http = match http_addr {
        Some(http_addr) => Some(bind(http_addr).await.map_err(exit::listen)?),
        None => None,
    };

    let journal = open_journal(&config.journal, &config.journal_schema)
        .await
        .map_err(exit::journal)?;
    // One delegated identity for the host: the hub's tokens and the harnesses' minters.
    let identity = host_identity(&journal, &config).map_err(exit::config)?;
    if !config.mcp_servers.is_empty() {
        tracing::info!(
            component = "mcp",
            servers = config.mcp_servers.len(),
            ledger = %mcp_ledger_path(&config),
            "starting MCP servers in the background; their tools are offered as each comes up"
        );
    }
    *mcp = launch_mcp(&config, identity.as_ref()).map_err(exit::config)?;
    let assembled = build_service_with_tools(journal.clone(), &config, mcp.clone(), identity)
        .map_err(exit::config)?;
    let mut registry = agentsessions_server::RegistryService::new(&assembled.service);
    if let Some(substrate) = &assembled.substrate {
        registry = registry.with_substrate(Arc::clone(substrate));
    }
    let registered = registry
        .load()
        .await
        .context("loading the harness registry")
        .map_err(exit::journal)?;
    Ok(Ready {
        config,
        journal,
        assembled,
        registry,
        registered,
        sessions,
        operator,
        http,
        http_tls,
        options,
    })
}

/// What assembling the host would refuse, refused before the journal exists: the same assembly
/// over an in-memory journal. The MCP entries are checked alone (no server is started), and so
/// are the microVM settings (starting that runtime prepares its snapshot directory).
fn preflight(config: &HostConfig) -> anyhow::Result<()> {
    let journal: Arc<dyn Journal> = Arc::new(agentsessions_journal::MemoryJournal::new());
    let identity = host_identity(&journal, config)?;
    agentsessions_mcp::validate_all(&config.mcp_servers, identity.is_some())?;
    if let Some(microvm) = &config.runtime.microvm {
        microvm.check().context("[runtime.microvm]")?;
    }
    let without_vms = HostConfig {
        runtime: agentsessions_cli::microvm::RuntimeSettings::default(),
        ..config.clone()
    };
    build_service_with_tools(journal, &without_vms, None, identity)?;
    Ok(())
}

async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

/// Serves until `signal` or a fatal error, then shuts down within [`SHUTDOWN_BOUND`] (the
/// MCP servers included).
async fn serve(
    ready: Ready,
    mcp: Option<Arc<McpHub>>,
    signal: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> anyhow::Result<()> {
    let Ready {
        config,
        journal,
        assembled,
        registry,
        registered,
        sessions,
        operator,
        http,
        http_tls,
        options: serve_options,
    } = ready;
    let health = serve_options.health.clone();
    // Until its first connection, each MCP server is reported starting, not unknown.
    if let Some(hub) = &mcp {
        for server in hub.health() {
            health
                .set_service_status(
                    mcp_health_name(&server.name),
                    tonic_health::ServingStatus::NotServing,
                )
                .await;
        }
    }
    let bound = sessions.local_addr().context("reading the bound address")?;
    let (stop, stopping) = watch::channel(false);
    let mut tasks: JoinSet<(Task, anyhow::Result<()>)> = JoinSet::new();
    let mut operator_bound = None;
    if let Some(operator) = operator {
        let operator_addr = operator
            .local_addr()
            .context("reading the registry address")?;
        tracing::info!(component = "grpc", address = %operator_addr, "HarnessRegistry listening");
        operator_bound = Some(operator_addr);
        let incoming =
            tonic::transport::server::TcpIncoming::from(operator).with_nodelay(Some(true));
        let mut operator_server = tonic::transport::Server::builder();
        if let Some(tls) = serve_options.tls.clone() {
            operator_server = operator_server
                .tls_config(tls)
                .context("TLS for the registry listener")?;
        }
        let (reflection, reflection_v1alpha) =
            agentsessions_server::reflection::reflection_services(&[
                agentsessions_server::reflection::HARNESS_REGISTRY,
            ])
            .context("reflection for the registry listener")?;
        let operator_server = operator_server
            .add_service(reflection)
            .add_service(reflection_v1alpha);
        let operator_router = match serve_options.authenticator.clone() {
            Some(authenticator) => {
                operator_server.add_service(tonic::service::interceptor::InterceptedService::new(
                    registry.into_server(),
                    authenticator.interceptor(),
                ))
            }
            None => operator_server.add_service(registry.into_server()),
        };
        let until = stopped(stopping.clone());
        tasks.spawn(async move {
            let served = operator_router
                .serve_with_incoming_shutdown(incoming, until)
                .await
                .context("HarnessRegistry listener");
            (Task::Registry, served)
        });
    }
    let mut http_bound = None;
    if let Some(http) = http {
        let http_local = http.local_addr().context("reading the HTTP address")?;
        tracing::info!(component = "http", address = %http_local, tls = http_tls.is_some(), "HTTP listening");
        http_bound = Some(http_local);
        let router = agentsessions_cli::http::router(agentsessions_cli::http::HttpParts {
            service: assembled.service.clone(),
            authenticator: serve_options.authenticator.clone(),
            journal: journal.clone(),
            project: if config.project.is_empty() {
                agentsessions_journal::rows::DEFAULT_PROJECT.to_owned()
            } else {
                config.project.clone()
            },
        });
        let until = stopped(stopping.clone());
        tasks.spawn(async move {
            let served = agentsessions_cli::http::serve_http(http, router, http_tls, until)
                .await
                .context("HTTP listener");
            (Task::Http, served)
        });
    }
    tracing::info!(
        component = "grpc",
        address = %bound,
        journal = %redact(&config.journal),
        harnesses = ?assembled.harnesses,
        default_harness = %assembled.default_harness,
        model = %assembled.model,
        registered,
        "agentsessionsd started"
    );

    let reclaim_every = config
        .reclaim_interval_secs
        .unwrap_or(agentsessions_cli::config::DEFAULT_RECLAIM_INTERVAL_SECS);
    if reclaim_every > 0 {
        let reclaim = reclaimer(
            assembled.service.clone(),
            Duration::from_secs(reclaim_every),
            stopping.clone(),
        );
        tasks.spawn(async move {
            reclaim.await;
            (Task::Reclaimer, Ok(()))
        });
    }
    // Rows whose turns ended before their host settled the compute state at each turn's end
    // (or whose incarnation went away since) read what their runtime reports from now on
    // (docs/extensions.md, "Compute state").
    let settling = assembled.service.clone();
    let until = stopped(stopping.clone());
    tasks.spawn(async move {
        // A shutdown ends the pass: what it did not reach is settled at the next start.
        let settled = tokio::select! {
            settled = settling.settle_idle_compute(SETTLE_PAGES) => settled,
            () = until => Ok(0),
        };
        match settled {
            Ok(0) => {}
            Ok(settled) => {
                tracing::info!(component = "placement", settled, "idle sessions' compute state settled");
            }
            Err(e) => {
                tracing::warn!(component = "placement", error = %e, "settling idle sessions' compute state failed");
            }
        }
        (Task::SettleCompute, Ok(()))
    });
    if let Some(hub) = &mcp {
        let report = report_mcp_health(Arc::clone(hub), health.clone(), stopping.clone());
        tasks.spawn(async move {
            report.await;
            (Task::McpHealth, Ok(()))
        });
    }
    let service = assembled.service.clone();
    let serve = agentsessions_server::serve_tcp_with(
        sessions,
        assembled.service,
        serve_options,
        stopped(stopping),
    );
    tasks.spawn(async move { (Task::Sessions, serve.await.context("Sessions server")) });
    // A stable line on stdout so scripts and tests can wait for readiness and learn the port;
    // the listener accepts from its bind, so a client that reads it is answered at once.
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, "agentsessionsd listening on {bound}")?;
        if let Some(operator) = operator_bound {
            writeln!(out, "agentsessionsd registry on {operator}")?;
        }
        if let Some(http) = http_bound {
            writeln!(out, "agentsessionsd http on {http}")?;
        }
        out.flush()?;
    }

    let mut signal = signal;
    let mut failed = None;
    loop {
        tokio::select! {
            () = &mut signal => {
                tracing::info!(component = "grpc", "shutdown signal: draining in-flight calls");
                break;
            }
            joined = tasks.join_next() => match joined {
                Some(Ok((Task::Sessions, served))) => {
                    failed = served.err();
                    break;
                }
                Some(Ok((task, Err(e)))) => {
                    tracing::error!(component = "grpc", ?task, error = %format!("{e:#}"), "task failed");
                }
                Some(Ok((_, Ok(())))) => {}
                Some(Err(e)) => {
                    failed = Some(anyhow::Error::new(e).context("daemon task"));
                    break;
                }
                None => break,
            },
        }
    }
    let began = tokio::time::Instant::now();
    health
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
    let _ignored = stop.send(true);
    let drained = drain(&mut tasks, began + DRAIN).await;
    let drained = match drained {
        Some(result) => result,
        None => {
            // Turns still running (a slow tool or model): each stops where it is and writes an
            // ERROR note a person can act on; the session stays resumable.
            let interrupted = service.interrupt_turns();
            tracing::warn!(
                component = "grpc",
                interrupted,
                "in-flight calls did not finish in time; interrupting running turns (host \
                 shutting down; resume to continue)"
            );
            match drain(&mut tasks, began + DRAIN + TURN_CLOSE).await {
                Some(result) => result,
                None => {
                    tracing::warn!(
                        component = "grpc",
                        "calls still open after the turns were interrupted; closing them"
                    );
                    tasks.shutdown().await;
                    Ok(())
                }
            }
        }
    };
    stop_mcp(mcp).await;
    tracing::info!(
        component = "grpc",
        elapsed_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
        "agentsessionsd stopped"
    );
    match failed {
        Some(e) => Err(e),
        None => drained,
    }
}

/// Waits until every task has ended or `deadline` passes (`None`); the first error.
async fn drain(
    tasks: &mut JoinSet<(Task, anyhow::Result<()>)>,
    deadline: tokio::time::Instant,
) -> Option<anyhow::Result<()>> {
    tokio::time::timeout_at(deadline, async {
        let mut first_error = None;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((_, Ok(()))) => {}
                Ok((_, Err(e))) => {
                    first_error.get_or_insert(e);
                }
                Err(e) => {
                    first_error.get_or_insert_with(|| anyhow::Error::new(e).context("daemon task"));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    })
    .await
    .ok()
}
