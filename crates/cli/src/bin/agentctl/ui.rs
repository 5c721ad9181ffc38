//! `agentctl ui`: the web console over the local journal, served by an embedded Sessions
//! service (as `exec` runs one) on a loopback address until Ctrl-C.

use std::io::Write as _;

use agentsessions_cli::config::HostConfig;
use agentsessions_cli::host::{build_service, open_journal};
use agentsessions_console::{Console, router};

use crate::args::Cli;
use crate::error::CliError;

pub(crate) async fn serve(cli: &Cli, addr: &str) -> Result<(), CliError> {
    if !cli.server.is_empty() {
        return Err(CliError::Usage(
            "agentctl ui serves the local journal (--journal); for a running daemon, start \
             agentsessionsd with --http-addr and open that address"
                .into(),
        ));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::Usage(format!("--addr {addr}: cannot listen: {e}")))?;
    let bound = listener.local_addr()?;
    // The embedded console has no authentication: only this machine may reach it.
    if !bound.ip().is_loopback() {
        return Err(CliError::Usage(format!(
            "--addr {addr}: agentctl ui listens only on a loopback address (127.0.0.1 or [::1])"
        )));
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
    let service = assembled.service;
    let console = Console::new(service.clone()).with_allowed_hosts(Console::loopback_hosts(bound));
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "agentctl ui: console at http://{bound}/ over {} (Ctrl-C stops)",
            cli.journal
        )?;
        out.flush()?;
    }
    let stopping = console.clone();
    let served = axum::serve(listener, router(console))
        .with_graceful_shutdown(async move {
            let _ignored = tokio::signal::ctrl_c().await;
            // Live streams end first, or draining would wait for their viewers.
            stopping.shutdown().await;
        })
        .await;
    service.shutdown().await;
    served.map_err(CliError::Output)
}
