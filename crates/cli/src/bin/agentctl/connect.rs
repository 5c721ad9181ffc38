//! Where commands go: a running `agentsessionsd` (`--server`), or an embedded server over the
//! local journal on a private unix socket.

use std::sync::Arc;
use std::time::Duration;

use agentsessions_cli::config::HostConfig;
use agentsessions_cli::host::{build_service, open_journal, open_journal_to_read};
use agentsessions_client::Client;
use agentsessions_journal::Journal;
use tokio::task::JoinSet;

use crate::args::Cli;
use crate::error::CliError;

/// The embedded server's lifetime: stopping it ends the server and removes its socket.
pub(crate) struct Embedded {
    _dir: tempfile::TempDir,
    stop: tokio::sync::oneshot::Sender<()>,
    tasks: JoinSet<()>,
}

impl Embedded {
    pub(crate) async fn stop(mut self) {
        let _ignored = self.stop.send(());
        while self.tasks.join_next().await.is_some() {}
    }
}

/// The channel to --server: TLS when --tls-ca is given, plaintext otherwise.
pub(crate) fn server_channel(cli: &Cli) -> Result<tonic::transport::Channel, CliError> {
    let credentials = |e: &dyn std::fmt::Display| CliError::Credentials(e.to_string());
    let Some(ca) = &cli.tls_ca else {
        if cli.tls_cert.is_some() {
            return Err(CliError::Usage(
                "--tls-cert needs --tls-ca (the CA that signed the server's certificate)".into(),
            ));
        }
        return agentsessions_harnesswire::channel(&cli.server)
            .map_err(|e| CliError::Usage(format!("--server {:?}: {e}", cli.server)));
    };
    let mut settings = agentsessions_auth::ClientTlsSettings::new(ca);
    if let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) {
        settings = settings.with_identity(cert, key);
    }
    if let Some(domain) = &cli.tls_domain {
        settings = settings.with_domain(domain);
    }
    let tls = settings.client_tls_config().map_err(|e| credentials(&e))?;
    let uri = if cli.server.contains("://") {
        cli.server.clone()
    } else {
        format!("https://{}", cli.server)
    };
    Ok(tonic::transport::Endpoint::from_shared(uri)
        .map_err(|e| CliError::Usage(format!("--server {:?}: {e}", cli.server)))?
        .tls_config(tls)
        .map_err(|e| credentials(&e))?
        .connect_lazy())
}

/// A client for the Sessions API, and the embedded server behind it when there is no --server.
pub(crate) async fn connect(cli: &Cli) -> Result<(Client, Option<Embedded>), CliError> {
    if !cli.server.is_empty() {
        let mut client =
            Client::from_channel(server_channel(cli)?).with_project(cli.project.clone());
        if let Some(token) = &cli.token {
            client = client
                .with_bearer_token(token)
                .map_err(|e| CliError::Credentials(format!("--token: {e}")))?;
        }
        return Ok((client, None));
    }
    let journal = if cli.only_reads() {
        open_journal_to_read(&cli.journal).await?
    } else {
        open_journal(&cli.journal, "").await?
    };
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
        .map_err(|e| CliError::Embedded(format!("creating the socket directory: {e}")))?;
    let socket = dir.path().join("sessions.sock");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let path = socket.clone();
    let mut tasks = JoinSet::new();
    tasks.spawn(async move {
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
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let client =
        Client::dial(&format!("unix:{}", socket.display()))?.with_project(cli.project.clone());
    Ok((
        client,
        Some(Embedded {
            _dir: dir,
            stop,
            tasks,
        }),
    ))
}

/// The local journal for import and export (never through a server).
pub(crate) async fn local_journal(cli: &Cli) -> Result<Arc<dyn Journal>, CliError> {
    if !cli.server.is_empty() {
        return Err(CliError::Usage(
            "import and export work on the local journal file (--journal); drop --server".into(),
        ));
    }
    Ok(if cli.only_reads() {
        open_journal_to_read(&cli.journal).await?
    } else {
        open_journal(&cli.journal, "").await?
    })
}
