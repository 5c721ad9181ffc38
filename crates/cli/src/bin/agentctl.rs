//! `agentctl`: the command line for agent sessions (semantics §10.8).
//!
//! With `--server` it talks to a running `agentsessionsd`; without, it starts an embedded server
//! over the local journal (`--journal`, default `agentsessions.db`) on a private unix socket,
//! with the echo harness and the offline echo model — so `agentctl exec "hello"` works on a
//! fresh machine with nothing else running.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentsessions_cli::host::{HostConfig, build_service, open_journal};
use agentsessions_cli::output::{
    compute_name, record_json, record_line, session_details, session_json, session_line,
};
use agentsessions_client::{Client, Decision, ExecEvent, ExecOptions, ForkOptions, uid_of, verify};
use agentsessions_journal::export::{
    JsonFormat, export_reference_json, import_reference_json, load_records,
};
use agentsessions_journal::rules::new_session_uid;
use agentsessions_journal::{Journal, audit};
use agentsessions_wire::pb;
use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};

/// Create, run, replay, fork, suspend, resume and audit durable agent sessions.
#[derive(Debug, Parser)]
#[command(name = "agentctl", version)]
struct Cli {
    /// Sessions server (host:port or unix:/path); empty runs an embedded server over --journal.
    #[arg(long, env = "AGENTCTL_SERVER", default_value = "", global = true)]
    server: String,
    /// Local journal for the embedded server, import and export (SQLite path or postgres:// URL).
    #[arg(
        long,
        env = "AGENTSESSIONS_JOURNAL",
        default_value = "agentsessions.db",
        global = true
    )]
    journal: String,
    /// Project for create and list (empty: the server's default).
    #[arg(long, default_value = "", global = true)]
    project: String,
    /// Print protobuf JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Talk TLS to --server, trusting this CA bundle (PEM).
    #[arg(long, env = "AGENTCTL_TLS_CA", global = true)]
    tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mTLS, with --tls-key.
    #[arg(long, env = "AGENTCTL_TLS_CERT", global = true, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Client key (PEM) for mTLS, with --tls-cert.
    #[arg(long, env = "AGENTCTL_TLS_KEY", global = true, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Server name to verify when it differs from the host in --server.
    #[arg(long, global = true)]
    tls_domain: Option<String>,
    /// Bearer token (a JWT) sent on every call; never a flag value in scripts' history: prefer
    /// the environment variable.
    #[arg(long, env = "AGENTCTL_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a session and print its uid.
    Create {
        /// Display name.
        #[arg(long, default_value = "")]
        name: String,
        /// Harness (empty: the server's default).
        #[arg(long, default_value = "")]
        harness: String,
        /// Model recorded on the session.
        #[arg(long, default_value = "")]
        model: String,
    },
    /// List every session of the project.
    List {
        /// Page size for each request (0: the server's default; all pages are walked).
        #[arg(long, default_value_t = 0)]
        page_size: i32,
    },
    /// Show one session.
    Get {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// Run one turn, streaming records as they commit.
    Exec {
        /// Input text (each argument is one user message).
        text: Vec<String>,
        /// More input messages.
        #[arg(long)]
        input: Vec<String>,
        /// Session uid (empty: create one).
        #[arg(long, default_value = "")]
        session: String,
        /// Harness for this turn (empty: the session's).
        #[arg(long, default_value = "")]
        harness: String,
        /// Commit only if the session's last seq is this (optimistic concurrency).
        #[arg(long)]
        expected_last_seq: Option<i64>,
    },
    /// Print a session's stored records.
    Replay {
        /// Session uid.
        #[arg(long)]
        session: String,
        /// First seq (default 1).
        #[arg(long, default_value_t = 0)]
        from: i64,
        /// Last seq (default the head).
        #[arg(long, default_value_t = 0)]
        to: i64,
    },
    /// Fork a session into children that share its history.
    Fork {
        /// Parent session uid.
        #[arg(long)]
        session: String,
        /// Seq to fork at (default the head).
        #[arg(long, default_value_t = 0)]
        at: i64,
        /// Number of children (1 to 128).
        #[arg(long, default_value_t = 1)]
        count: i32,
        /// Child names, comma separated (none, or one per child).
        #[arg(long, value_delimiter = ',')]
        names: Vec<String>,
    },
    /// Suspend a session's compute.
    Suspend {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// Resume a session (re-drives an interrupted or decided turn).
    Resume {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// Approve the pending tool call, then resume the session.
    Approve(Decide),
    /// Deny the pending tool call, then resume the session.
    Deny(Decide),
    /// Stop the running turn of a session.
    Cancel {
        /// Session uid.
        #[arg(long)]
        session: String,
        /// The execution to stop (default: whichever runs).
        #[arg(long, default_value = "")]
        execution: String,
        /// Why (recorded on the cancel record).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Mark a session for deletion; it accepts no further effects.
    Delete {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// Recompute every hash and link of a session from its records.
    Verify {
        /// Session uid.
        #[arg(long)]
        session: String,
    },
    /// Draw a session's fork lineage.
    Tree {
        /// Any session of the family.
        #[arg(long)]
        session: String,
    },
    /// Write a session's records from the local journal to stdout.
    Export {
        /// Session uid.
        #[arg(long)]
        session: String,
        /// `reference` (the reference implementation's JSON journal) or `audit` (proto3-JSON
        /// events for tools/verify_chain.py).
        #[arg(long, default_value = "reference", value_parser = ["reference", "audit"])]
        format: String,
    },
    /// Manage registered harnesses (the operator API: --server is the daemon's --registry-addr).
    Harness {
        #[command(subcommand)]
        op: HarnessOp,
    },
    /// Load a reference JSON journal into the local journal as a new session.
    Import {
        /// The JSON file.
        file: PathBuf,
        /// Session uid to create (default: a new uid).
        #[arg(long, default_value = "")]
        session: String,
    },
}

#[derive(Debug, Subcommand)]
enum HarnessOp {
    /// Register a harness running elsewhere under a new name.
    Register {
        /// Name (an RFC 1123 label).
        #[arg(long)]
        name: String,
        /// File with the HarnessSpec as proto JSON, e.g.
        /// {"remote":{"address":"127.0.0.1:9000"},"capabilities":{"resumability":"RESUMABILITY_STATELESS_REPLAY"}}
        #[arg(long)]
        spec: PathBuf,
    },
    /// Show one harness.
    Get {
        /// Name.
        #[arg(long)]
        name: String,
        /// Also ask the harness to describe itself.
        #[arg(long)]
        observe: bool,
    },
    /// List harnesses (all pages).
    List {
        /// Include retired registrations.
        #[arg(long)]
        include_retired: bool,
        /// Page size per request (0: the server's default; at most 500).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        page_size: i32,
    },
    /// Retire a registration: new sessions cannot select it, existing ones keep it.
    Retire {
        /// Name.
        #[arg(long)]
        name: String,
        /// Why.
        #[arg(long, default_value = "")]
        reason: String,
    },
}

#[derive(Debug, Args)]
struct Decide {
    /// Session uid (or --session).
    uid: Option<String>,
    /// Session uid.
    #[arg(long)]
    session: Option<String>,
    /// Execution of the request (with --tool-call and --request-seq; default: the pending one).
    #[arg(long)]
    execution: Option<String>,
    /// Tool call of the request.
    #[arg(long)]
    tool_call: Option<String>,
    /// Seq of the APPROVAL_REQUEST.
    #[arg(long)]
    request_seq: Option<i64>,
    /// Why.
    #[arg(long, default_value = "")]
    reason: String,
    /// Who decides (recorded on the decision).
    #[arg(long, default_value = "")]
    actor: String,
    /// Issuer of the decider's identity.
    #[arg(long, default_value = "")]
    identity_issuer: String,
    /// Subject of the decider's identity.
    #[arg(long, default_value = "")]
    identity_subject: String,
}

/// Lines to stdout; a closed pipe ends the program quietly.
struct Out(std::io::StdoutLock<'static>);

impl Out {
    fn line(&mut self, text: &str) -> anyhow::Result<()> {
        writeln!(self.0, "{text}")?;
        Ok(())
    }

    fn partial(&mut self, text: &str) -> anyhow::Result<()> {
        write!(self.0, "{text}")?;
        self.0.flush()?;
        Ok(())
    }
}

/// The embedded server's lifetime: dropping it stops the server and removes its socket.
struct Embedded {
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Embedded {
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ignored = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ignored = task.await;
        }
    }
}

/// The channel to --server: TLS when --tls-ca is given, plaintext otherwise.
fn server_channel(cli: &Cli) -> anyhow::Result<tonic::transport::Channel> {
    let Some(ca) = &cli.tls_ca else {
        if cli.tls_cert.is_some() {
            bail!("--tls-cert needs --tls-ca (the CA that signed the server's certificate)");
        }
        return Ok(agentsessions_harnesswire::channel(&cli.server)?);
    };
    let mut settings = agentsessions_auth::ClientTlsSettings::new(ca);
    if let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) {
        settings = settings.with_identity(cert, key);
    }
    if let Some(domain) = &cli.tls_domain {
        settings = settings.with_domain(domain);
    }
    let tls = settings.client_tls_config()?;
    let uri = if cli.server.contains("://") {
        cli.server.clone()
    } else {
        format!("https://{}", cli.server)
    };
    Ok(tonic::transport::Endpoint::from_shared(uri)?
        .tls_config(tls)?
        .connect_lazy())
}

async fn connect(cli: &Cli) -> anyhow::Result<(Client, Option<Embedded>)> {
    if !cli.server.is_empty() {
        let mut client =
            Client::from_channel(server_channel(cli)?).with_project(cli.project.clone());
        if let Some(token) = &cli.token {
            client = client.with_bearer_token(token)?;
        }
        return Ok((client, None));
    }
    let journal = open_journal(&cli.journal, "").await?;
    let assembled = build_service(
        journal,
        &HostConfig {
            journal: cli.journal.clone(),
            project: cli.project.clone(),
            ..HostConfig::default()
        },
    )?;
    let dir = tempfile::Builder::new()
        .prefix("agentctl-")
        .tempdir()
        .context("creating the embedded server's socket directory")?;
    let socket = dir.path().join("sessions.sock");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let path = socket.clone();
    let task = tokio::spawn(async move {
        let shutdown = async {
            let _ignored = stopped.await;
        };
        if let Err(e) = agentsessions_server::serve_unix(&path, assembled.service, shutdown).await {
            tracing::error!(error = %e, "embedded server failed");
        }
    });
    for _ in 0..200 {
        if socket.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let client =
        Client::dial(&format!("unix:{}", socket.display()))?.with_project(cli.project.clone());
    Ok((
        client,
        Some(Embedded {
            _dir: dir,
            stop: Some(stop),
            task: Some(task),
        }),
    ))
}

async fn run_exec(
    client: &mut Client,
    out: &mut Out,
    json: bool,
    options: ExecOptions,
) -> anyhow::Result<()> {
    let created = options.session.is_empty();
    let mut announced = false;
    let mut in_delta = false;
    let mut write_error = None;
    let result = client
        .exec(options, |event| {
            let written = match event {
                ExecEvent::Session(s) if json => {
                    out.line(&format!("{{\"session\":{}}}", session_json(s)))
                }
                ExecEvent::Session(s) if created && !announced => {
                    announced = true;
                    out.line(&format!("session {}", uid_of(s)))
                }
                ExecEvent::Session(_) => Ok(()),
                ExecEvent::Record(r) if json => out.line(&record_json(r)),
                ExecEvent::Record(r) => {
                    let prefix = if in_delta { "\n" } else { "" };
                    in_delta = false;
                    out.line(&format!("{prefix}{}", record_line(r)))
                }
                ExecEvent::Delta(d) if json => out.line(&format!(
                    "{{\"delta\":{{\"part_index\":{},\"chunk\":{}}}}}",
                    d.part_index,
                    json_string(&d.chunk)
                )),
                ExecEvent::Delta(d) if d.chunk.is_empty() => Ok(()),
                ExecEvent::Delta(d) => {
                    in_delta = true;
                    out.partial(&d.chunk)
                }
            };
            if let Err(e) = written {
                write_error.get_or_insert(e);
            }
        })
        .await;
    if let Some(e) = write_error {
        return Err(e);
    }
    match result {
        Ok(turn) => {
            if let Some(pending) = turn
                .session
                .as_ref()
                .and_then(|s| s.pending_approval.as_ref())
                && !json
            {
                out.line(&format!(
                    "awaiting approval: execution={} tool_call={} request_seq={} \
                     (agentctl approve|deny {})",
                    pending.execution_id,
                    pending.tool_call_id,
                    pending.request_seq,
                    turn.session_uid()
                ))?;
            }
            Ok(())
        }
        Err(failed) => {
            let uid = failed.partial.session_uid();
            if uid.is_empty() {
                Err(failed.error.into())
            } else {
                Err(anyhow::anyhow!("{} (session {uid})", failed.error))
            }
        }
    }
}

fn json_string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            c if u32::from(c) < 0x20 => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

async fn decide(
    client: &mut Client,
    out: &mut Out,
    json: bool,
    args: Decide,
    approved: bool,
) -> anyhow::Result<()> {
    let uid = match (args.uid, args.session) {
        (Some(uid), None) | (None, Some(uid)) => uid,
        (Some(_), Some(_)) => bail!("give the session once: positionally or with --session"),
        (None, None) => bail!("which session? give its uid or --session"),
    };
    let (execution_id, tool_call_id, request_seq) =
        match (args.execution, args.tool_call, args.request_seq) {
            (Some(e), Some(t), Some(r)) => (e, t, r),
            (None, None, None) => {
                let session = client.get(&uid).await?;
                let Some(p) = session.pending_approval else {
                    bail!(
                        "session {uid} has no pending approval; if a decision is already \
                         recorded, run `agentctl resume --session {uid}`, or name the request \
                         with --execution --tool-call --request-seq"
                    );
                };
                (p.execution_id, p.tool_call_id, p.request_seq)
            }
            _ => bail!("--execution, --tool-call and --request-seq go together: give all or none"),
        };
    let identity = (!args.actor.is_empty()
        || !args.identity_issuer.is_empty()
        || !args.identity_subject.is_empty())
    .then_some(pb::IdentityRef {
        principal: args.actor,
        issuer: args.identity_issuer,
        subject: args.identity_subject,
    });
    let response = client
        .approve(
            &uid,
            Decision {
                execution_id,
                tool_call_id,
                request_seq,
                approved,
                reason: args.reason,
                identity,
            },
        )
        .await?;
    let decision_seq = response.decision.as_ref().map_or(0, |d| d.seq);
    let verb = if approved { "approved" } else { "denied" };
    let session = match client.resume(&uid).await {
        Ok(session) => session,
        Err(e) => bail!("decision committed ({verb}, seq {decision_seq}) but Resume failed: {e}"),
    };
    if json {
        let decision = response
            .decision
            .as_ref()
            .map_or_else(|| "null".to_owned(), record_json);
        out.line(&format!(
            "{{\"decision\":{decision},\"session\":{}}}",
            session_json(&session)
        ))
    } else {
        out.line(&format!(
            "session {uid} {verb} seq={decision_seq} resumed compute={} last_seq={}",
            compute_name(&session),
            session.last_seq
        ))
    }
}

async fn tree(client: &mut Client, out: &mut Out, uid: &str) -> anyhow::Result<()> {
    let mut root = client.get(uid).await?;
    while !root.parent_uid.is_empty() {
        match client.get(&root.parent_uid).await {
            Ok(parent) => root = parent,
            Err(e) if e.code() == tonic::Code::NotFound => break,
            Err(e) => return Err(e.into()),
        }
    }
    let mut children: BTreeMap<String, Vec<pb::Session>> = BTreeMap::new();
    for session in client.list(0).await? {
        if !session.parent_uid.is_empty() {
            children
                .entry(session.parent_uid.clone())
                .or_default()
                .push(session);
        }
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| (a.fork_seq, uid_of(a)).cmp(&(b.fork_seq, uid_of(b))));
    }
    fn label(session: &pb::Session, marker: &str) -> String {
        let name = session.metadata.as_ref().map_or("", |m| m.name.as_str());
        let fork = if session.parent_uid.is_empty() {
            String::new()
        } else {
            format!(" @{}", session.fork_seq)
        };
        let name = if name.is_empty() {
            String::new()
        } else {
            format!(" ({name})")
        };
        format!(
            "{}{fork}{name} last_seq={}{marker}",
            uid_of(session),
            session.last_seq
        )
    }
    fn draw(
        out: &mut Out,
        children: &BTreeMap<String, Vec<pb::Session>>,
        session: &pb::Session,
        prefix: &str,
        asked: &str,
    ) -> anyhow::Result<()> {
        let Some(list) = children.get(uid_of(session)) else {
            return Ok(());
        };
        for (i, child) in list.iter().enumerate() {
            let last = i + 1 == list.len();
            let marker = if uid_of(child) == asked { "  <" } else { "" };
            out.line(&format!(
                "{prefix}{}{}",
                if last { "└── " } else { "├── " },
                label(child, marker)
            ))?;
            let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
            draw(out, children, child, &deeper, asked)?;
        }
        Ok(())
    }
    let marker = if uid_of(&root) == uid { "  <" } else { "" };
    out.line(&label(&root, marker))?;
    draw(out, &children, &root, "", uid)
}

fn registration_line(r: &pb::HarnessRegistration) -> String {
    let name = r.metadata.as_ref().map_or("", |m| m.name.as_str());
    let state = pb::HarnessState::try_from(r.state)
        .map_or("UNKNOWN", |s| s.as_str_name())
        .trim_start_matches("HARNESS_STATE_");
    let source = pb::HarnessSource::try_from(r.source)
        .map_or("UNKNOWN", |s| s.as_str_name())
        .trim_start_matches("HARNESS_SOURCE_");
    let mut line = format!("{name} state={state} source={source}");
    if let Some(pb::harness_spec::Placement::Remote(remote)) =
        r.spec.as_ref().and_then(|s| s.placement.as_ref())
    {
        line.push_str(&format!(" address={}", remote.address));
    }
    if !r.spec_digest.is_empty() {
        line.push_str(&format!(" digest={}", r.spec_digest));
    }
    if !r.retire_reason.is_empty() {
        line.push_str(&format!(" retired: {}", r.retire_reason));
    }
    if let Some(observed) = &r.observed {
        line.push_str(&format!(" observed_id={}", observed.id));
    }
    if !r.observe_error.is_empty() {
        line.push_str(&format!(" observe_error: {}", r.observe_error));
    }
    line
}

async fn harness_command(cli: &Cli, op: &HarnessOp, out: &mut Out) -> anyhow::Result<()> {
    use agentsessions_wire::pb::harness_registry_client::HarnessRegistryClient;
    if cli.server.is_empty() {
        bail!(
            "harness commands talk to a daemon's operator listener: give --server <--registry-addr>"
        );
    }
    let bearer = cli
        .token
        .as_deref()
        .map(agentsessions_auth::BearerToken::new)
        .transpose()?;
    let mut registry = HarnessRegistryClient::with_interceptor(
        server_channel(cli)?,
        move |request: tonic::Request<()>| match &bearer {
            Some(bearer) => tonic::service::Interceptor::call(&mut bearer.clone(), request),
            None => Ok(request),
        },
    );
    fn call<T>(message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(std::time::Duration::from_secs(30));
        request
    }
    let status = |e: tonic::Status| agentsessions_client::ClientError::from(e);
    match op {
        HarnessOp::Register { name, spec } => {
            let text = std::fs::read_to_string(spec)
                .with_context(|| format!("cannot read {}", spec.display()))?;
            let spec = agentsessions_server::registry::spec_from_json(&text)?;
            let response = registry
                .register_harness(call(pb::RegisterHarnessRequest {
                    name: name.clone(),
                    spec: Some(spec),
                }))
                .await
                .map_err(status)?
                .into_inner();
            let outcome = pb::RegisterOutcome::try_from(response.outcome)
                .map_or("UNKNOWN", |o| o.as_str_name())
                .trim_start_matches("REGISTER_OUTCOME_");
            let line = response
                .harness
                .as_ref()
                .map(registration_line)
                .unwrap_or_default();
            out.line(&format!("{outcome} {line}"))
        }
        HarnessOp::Get { name, observe } => {
            let r = registry
                .get_harness(call(pb::GetHarnessRequest {
                    name: name.clone(),
                    observe: *observe,
                }))
                .await
                .map_err(status)?
                .into_inner();
            out.line(&registration_line(&r))
        }
        HarnessOp::List {
            include_retired,
            page_size,
        } => {
            if *page_size < 0 {
                bail!("--page-size must not be negative");
            }
            let mut token = String::new();
            loop {
                let page = registry
                    .list_harnesses(call(pb::ListHarnessesRequest {
                        page_size: *page_size,
                        page_token: token,
                        include_retired: *include_retired,
                    }))
                    .await
                    .map_err(status)?
                    .into_inner();
                for r in &page.harnesses {
                    out.line(&registration_line(r))?;
                }
                if page.next_page_token.is_empty() {
                    return Ok(());
                }
                token = page.next_page_token;
            }
        }
        HarnessOp::Retire { name, reason } => {
            let r = registry
                .retire_harness(call(pb::RetireHarnessRequest {
                    name: name.clone(),
                    reason: reason.clone(),
                }))
                .await
                .map_err(status)?
                .into_inner();
            out.line(&registration_line(&r))
        }
    }
}

async fn local_journal(cli: &Cli) -> anyhow::Result<Arc<dyn Journal>> {
    if !cli.server.is_empty() {
        bail!("import and export work on the local journal file (--journal); drop --server");
    }
    Ok(open_journal(&cli.journal, "").await?)
}

async fn run(cli: Cli, out: &mut Out) -> anyhow::Result<()> {
    match &cli.command {
        Command::Harness { op } => return harness_command(&cli, op, out).await,
        Command::Export { session, format } => {
            let journal = local_journal(&cli).await?;
            let records = journal.read(session, 1, 0).await?;
            if records.is_empty() {
                bail!("session {session} has no records in {}", cli.journal);
            }
            let text = if format == "audit" {
                audit::audit_json(session, &records)?
            } else {
                export_reference_json(&records, JsonFormat::V030)?
            };
            return out.partial(&text);
        }
        Command::Import { file, session } => {
            let journal = local_journal(&cli).await?;
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let imported = import_reference_json(&text)?;
            let uid = if session.is_empty() {
                new_session_uid()
            } else {
                session.clone()
            };
            if journal.head(&uid).await? > 0 {
                bail!("session {uid} already has records; import into a new session");
            }
            load_records(journal.as_ref(), &uid, &imported.records).await?;
            return out.line(&format!(
                "imported {} records into {uid}",
                imported.records.len()
            ));
        }
        _ => {}
    }
    let (mut client, embedded) = connect(&cli).await?;
    let result = command(&mut client, out, cli).await;
    if let Some(embedded) = embedded {
        embedded.stop().await;
    }
    result
}

async fn command(client: &mut Client, out: &mut Out, cli: Cli) -> anyhow::Result<()> {
    let json = cli.json;
    match cli.command {
        Command::Create {
            name,
            harness,
            model,
        } => {
            let session = client.create(&name, &harness, &model).await?;
            if json {
                out.line(&session_json(&session))
            } else {
                out.line(uid_of(&session))
            }
        }
        Command::List { page_size } => {
            if page_size < 0 {
                bail!("--page-size must not be negative");
            }
            for session in client.list(page_size).await? {
                out.line(&if json {
                    session_json(&session)
                } else {
                    session_line(&session)
                })?;
            }
            Ok(())
        }
        Command::Get { session } => {
            let session = client.get(&session).await?;
            out.line(&if json {
                session_json(&session)
            } else {
                session_details(&session)
            })
        }
        Command::Exec {
            text,
            input,
            session,
            harness,
            expected_last_seq,
        } => {
            let inputs: Vec<String> = text.into_iter().chain(input).collect();
            if inputs.is_empty() && session.is_empty() {
                bail!("nothing to say: give the input text, e.g. agentctl exec \"hello\"");
            }
            let options = ExecOptions {
                session,
                inputs,
                harness,
                expected_last_seq,
                deadline_unix: 0,
            };
            run_exec(client, out, json, options).await
        }
        Command::Replay { session, from, to } => {
            for record in client.replay(&session, from, to).await? {
                out.line(&if json {
                    record_json(&record)
                } else {
                    record_line(&record)
                })?;
            }
            Ok(())
        }
        Command::Fork {
            session,
            at,
            count,
            names,
        } => {
            let children = client
                .fork(
                    &session,
                    ForkOptions {
                        at_seq: at,
                        count,
                        names,
                        labels: BTreeMap::new(),
                    },
                )
                .await?;
            for child in children {
                let name = child.metadata.as_ref().map_or("", |m| m.name.as_str());
                out.line(&if json {
                    session_json(&child)
                } else {
                    format!(
                        "child {} parent={} fork_seq={} name={name}",
                        uid_of(&child),
                        child.parent_uid,
                        child.fork_seq
                    )
                })?;
            }
            Ok(())
        }
        Command::Suspend { session } => {
            let s = client.suspend(&session).await?;
            out.line(&if json {
                session_json(&s)
            } else {
                transition(&s, "suspend")
            })
        }
        Command::Resume { session } => {
            let s = client.resume(&session).await?;
            out.line(&if json {
                session_json(&s)
            } else {
                transition(&s, "resume")
            })
        }
        Command::Approve(args) => decide(client, out, json, args, true).await,
        Command::Deny(args) => decide(client, out, json, args, false).await,
        Command::Cancel {
            session,
            execution,
            reason,
        } => {
            let s = client.cancel(&session, &execution, &reason).await?;
            out.line(&if json {
                session_json(&s)
            } else {
                transition(&s, "cancel")
            })
        }
        Command::Delete { session } => {
            let s = client.delete(&session).await?;
            out.line(&if json {
                session_json(&s)
            } else {
                transition(&s, "delete")
            })
        }
        Command::Verify { session } => {
            let records = client.replay(&session, 0, 0).await?;
            if records.is_empty() {
                bail!("session {session} has no records to verify");
            }
            let summary = verify(&records)?;
            out.line(&format!(
                "verified {} records of {session}: every hash and link checks out (head {})",
                summary.records, summary.head_hash
            ))
        }
        Command::Tree { session } => tree(client, out, &session).await,
        Command::Export { .. } | Command::Import { .. } | Command::Harness { .. } => Ok(()),
    }
}

fn transition(session: &pb::Session, op: &str) -> String {
    format!(
        "session {} {op} compute={} last_seq={}",
        uid_of(session),
        compute_name(session),
        session.last_seq
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTCTL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let mut out = Out(std::io::stdout().lock());
    match run(cli, &mut out).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ignored = out.0.flush();
            let _ignored = writeln!(std::io::stderr(), "agentctl: {e:#}");
            ExitCode::FAILURE
        }
    }
}
