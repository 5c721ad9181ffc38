//! `agentctl`: the command line for agent sessions (semantics §10.8).
//!
//! With `--server` it talks to a running `agentsessionsd`; without, it starts an embedded server
//! over the local journal (`--journal`, default `agentsessions.db`) on a private unix socket,
//! with the echo harness and the offline echo model — so `agentctl exec "hello"` works on a
//! fresh machine with nothing else running.

mod approvals;
mod args;
mod connect;
mod error;
mod history;
mod lifecycle;
mod lineage;
mod out;
mod progress;
mod registry;
mod sessions;
mod ui;
mod watch;

use std::process::ExitCode;

use agentsessions_client::{Client, ExecOptions};
use clap::{CommandFactory as _, Parser as _};

use crate::args::{Cli, Command};
use crate::error::{Api, CliError};
use crate::out::Out;

async fn run(cli: Cli, out: &mut Out) -> Result<(), CliError> {
    match &cli.command {
        Command::Completions { shell } => {
            // clap_complete panics on a failed write: it writes into memory, and the script
            // goes out like every other output (a closed pipe ends quietly).
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "agentctl", &mut script);
            return out.bytes(&script);
        }
        Command::Harness { op } => {
            return registry::harness(&cli, op, out)
                .await
                .map_err(|e| e.at(&cli.server, Api::HarnessRegistry));
        }
        Command::Export { session, format } if cli.server.is_empty() => {
            let journal = connect::local_journal(&cli).await?;
            return history::export(journal.as_ref(), out, &cli.journal, session, format).await;
        }
        Command::Ui { addr } => return ui::serve(&cli, addr).await,
        Command::Import {
            file,
            session,
            copy,
        } => {
            let journal = connect::local_journal(&cli).await?;
            return history::import(journal.as_ref(), out, file, session, *copy).await;
        }
        _ => {}
    }
    let (mut client, embedded) = connect::connect(&cli).await?;
    let server = cli.server.clone();
    let place = if server.is_empty() {
        cli.journal.clone()
    } else {
        server.clone()
    };
    let result = command(&mut client, out, &place, cli).await;
    if let Some(embedded) = embedded {
        embedded.stop().await;
    }
    result.map_err(|e| e.at(&server, Api::Sessions))
}

/// The Sessions API commands; `place` names the server or journal in messages.
async fn command(
    client: &mut Client,
    out: &mut Out,
    place: &str,
    cli: Cli,
) -> Result<(), CliError> {
    let reattach = watch::Reattach::of(&cli);
    match cli.command {
        Command::Create {
            name,
            harness,
            model,
        } => sessions::create(client, out, &name, &harness, &model).await,
        Command::List { page_size, filter } => {
            sessions::list(client, out, page_size, &filter).await
        }
        Command::Get { session } => sessions::get(client, out, &session).await,
        Command::Exec {
            text,
            input,
            session,
            harness,
            expected_last_seq,
            abandon,
        } => {
            let options = ExecOptions {
                session,
                inputs: sessions::turn_inputs(text, input)?,
                harness,
                expected_last_seq,
                deadline_unix: 0,
                abandon_unfinished: abandon,
            };
            sessions::exec(client, out, options, &reattach).await
        }
        Command::Watch {
            session,
            from,
            until_end,
        } => watch::watch(client, out, &reattach, &session, from, until_end).await,
        Command::Delete { session } => sessions::delete(client, out, &session).await,
        Command::Replay { session, range } => {
            history::replay(client, out, place, &session, range).await
        }
        Command::Verify { session } => history::verify(client, out, place, &session).await,
        Command::Export { session, format } => {
            history::export_from_server(client, out, place, &session, &format).await
        }
        Command::Fork {
            session,
            at,
            count,
            names,
        } => lineage::fork(client, out, &session, at, count, names).await,
        Command::Tree { session } => lineage::tree(client, out, &session).await,
        Command::Suspend { session } => lifecycle::suspend(client, out, &session).await,
        Command::Resume { session } => lifecycle::resume(client, out, &session).await,
        Command::Cancel {
            session,
            execution,
            reason,
        } => lifecycle::cancel(client, out, &session, &execution, &reason).await,
        Command::Approvals { page_size } => approvals::list(client, out, page_size).await,
        Command::Approve(args) => approvals::decide(client, out, args, true).await,
        Command::Deny(args) => approvals::decide(client, out, args, false).await,
        Command::Import { .. }
        | Command::Harness { .. }
        | Command::Ui { .. }
        | Command::Completions { .. } => Ok(()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout: a closed pipe there ends as any other output does.
            let error = match e.print() {
                Err(closed) if closed.kind() == std::io::ErrorKind::BrokenPipe => {
                    CliError::ClosedPipe
                }
                _ => CliError::from(e),
            };
            return ExitCode::from(error);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTCTL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let mut out = Out::new(cli.json);
    match run(cli, &mut out).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            out.flush();
            error.report();
            ExitCode::from(error)
        }
    }
}
