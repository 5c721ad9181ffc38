//! `harnessnode`: one reference harness (`echo`, `chat`, `counter`) served over
//! `Harness.Connect` with gRPC health, configured by flags or environment (`--help`).
//!
//! Startup checks the whole configuration before binding anything; a refusal exits with code 2
//! and one line on stderr. Once listening it prints one readiness line on stdout,
//! `harnessnode: serving <harness> on <address>` (the real port when `:0` was asked for), and
//! logs go to stderr. SIGINT or SIGTERM (or stdin EOF with `--exit-on-stdin-eof`) stops
//! accepting, lets running executions finish, removes a unix socket and exits 0.
//!
//! Modules: `config` (flags, checks), `prompt` (chat with a default system prompt), `delay`
//! (the `--answer-delay-ms` test hook).

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;
use tokio::sync::oneshot;

mod config;
mod delay;
mod prompt;

use config::{Args, NodeConfig};

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let config = match NodeConfig::check(args) {
        Ok(config) => config,
        Err(err) => {
            report(&format!("harnessnode: invalid configuration: {err}"));
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            report(&format!(
                "harnessnode: cannot start the async runtime: {err}"
            ));
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(serve(config));
    runtime.shutdown_timeout(Duration::from_secs(1));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            report(&format!("harnessnode: {err}"));
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: NodeConfig) -> agentsessions_harnesswire::Result<()> {
    let listener = config.listen.bind().await?;
    let ready = format!(
        "harnessnode: serving {} on {}",
        config.kind.id(),
        listener.local_addr()
    );
    // Readiness is the one line supervisors and scripts wait for; a closed stdout is no reason
    // to stop serving.
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{ready}").and_then(|()| stdout.flush());
    drop(stdout);
    tracing::info!(harness = config.kind.id(), address = %listener.local_addr(), "ready");

    let stdin_closed = config.exit_on_stdin_eof.then(watch_stdin);
    let shutdown = async move {
        match stdin_closed {
            Some(closed) => tokio::select! {
                () = agentsessions_harnesswire::shutdown_signal() => {}
                // An error means no watcher runs: only the signals stop the process then.
                Ok(()) = closed => tracing::info!("stdin closed: shutting down"),
            },
            None => agentsessions_harnesswire::shutdown_signal().await,
        }
    };
    listener
        .serve_tls(config.harness, config.tls, shutdown)
        .await
}

/// Completes when stdin reaches EOF (or fails). Reading runs on a plain thread that is left
/// detached: tokio's stdin would keep the runtime from shutting down while the pipe is open.
fn watch_stdin() -> oneshot::Receiver<()> {
    let (closed, on_close) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("stdin-watch".into())
        .spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            let _ = closed.send(());
        });
    if let Err(err) = spawned {
        tracing::warn!(error = %err, "cannot watch stdin; only signals stop this process");
    }
    on_close
}

fn report(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
