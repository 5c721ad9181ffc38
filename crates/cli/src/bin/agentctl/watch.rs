//! `agentctl watch`: follow a session like `tail -f`, and the command that reattaches to a turn
//! an interrupted `exec` left running.

use agentsessions_cli::output::{record_json, record_line};
use agentsessions_client::{Client, ClientError, WatchItem};
use agentsessions_wire::pb;

use crate::args::Cli;
use crate::error::CliError;
use crate::out::Out;
use crate::progress::{progress_json, progress_line};

/// How to reach the same server (or journal) again from a shell: the global flags of this
/// invocation that say where to connect, never a secret (the token stays in the environment).
#[derive(Debug, Clone, Default)]
pub(crate) struct Reattach {
    flags: String,
}

impl Reattach {
    pub(crate) fn of(cli: &Cli) -> Self {
        let mut flags = String::new();
        let mut push = |flag: &str, value: &str| {
            flags.push_str(&format!(" --{flag} {}", shell_word(value)));
        };
        if cli.server.is_empty() {
            push("journal", &cli.journal);
        } else {
            push("server", &cli.server);
        }
        let paths = [
            ("tls-ca", &cli.tls_ca),
            ("tls-cert", &cli.tls_cert),
            ("tls-key", &cli.tls_key),
        ];
        for (flag, path) in paths {
            if let Some(path) = path {
                push(flag, &path.display().to_string());
            }
        }
        if let Some(domain) = &cli.tls_domain {
            push("tls-domain", domain);
        }
        Self { flags }
    }

    /// The exact command that watches `session` from `from` on.
    pub(crate) fn command(&self, session: &str, from: i64) -> String {
        format!(
            "agentctl{} watch --session {} --from {from}",
            self.flags,
            shell_word(session)
        )
    }
}

/// `word` as one shell word: as it is when it holds only characters no shell treats specially,
/// else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@=+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Prints `session`'s records from `from` on, then each one as it commits, until the session
/// is deleted (exit 0), with `until_end` until the first record that ends a turn (exit 0), or
/// until the stream is cut (an error that says how to resume).
pub(crate) async fn watch(
    client: &mut Client,
    out: &mut Out,
    reattach: &Reattach,
    session: &str,
    from: i64,
    until_end: bool,
) -> Result<(), CliError> {
    if from < 1 {
        return Err(CliError::Usage(format!("--from {from}: seqs start at 1")));
    }
    let mut watch = match client.watch_updates(session, from).await {
        // A server without WatchUpdates: the records alone.
        Err(error) if error.code() == tonic::Code::Unimplemented => {
            client.watch(session, from).await?
        }
        watch => watch?,
    };
    loop {
        let next = tokio::select! {
            next = watch.next_item() => next,
            interrupted = tokio::signal::ctrl_c() => {
                interrupted.map_err(CliError::Output)?;
                // Stopping a watch is how it is used; the command says where it stood.
                out.flush();
                return Err(CliError::Detached {
                    reason: "interrupted".into(),
                    reattach: reattach.command(session, watch.next_seq()),
                    interrupted: true,
                });
            }
        };
        match next {
            Ok(Some(WatchItem::Progress(progress))) => {
                out.either(&progress_json(&progress), || progress_line(&progress))?;
            }
            Ok(Some(WatchItem::Record(record))) => {
                out.either(&record_json(&record), || record_line(&record))?;
                if until_end && ends_turn(&record) {
                    return Ok(());
                }
            }
            Ok(None) => return Ok(()),
            Err(error @ (ClientError::WatchCut { .. } | ClientError::Status(_)))
                if detached(&error) =>
            {
                return Err(CliError::Detached {
                    reason: error.to_string(),
                    reattach: reattach.command(session, watch.next_seq()),
                    interrupted: false,
                });
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Whether `record` is the last of its turn: END (completed or cancelled), or the ERROR a
/// failed turn ends with (as the execution log groups them).
fn ends_turn(record: &pb::LogRecord) -> bool {
    let kind = record.event.as_ref().map(|event| event.kind);
    kind == Some(pb::EventKind::EventEnd as i32) || kind == Some(pb::EventKind::EventError as i32)
}

/// Whether `error` ended a stream without deciding anything about the session (the server or
/// the connection went away), so that watching again can pick up where it stopped.
pub(crate) fn detached(error: &ClientError) -> bool {
    matches!(error, ClientError::WatchCut { .. })
        || matches!(
            error.code(),
            tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
        )
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[test]
    fn the_reattach_command_names_where_to_connect_and_quotes_what_needs_it() {
        let cli = Cli::try_parse_from([
            "agentctl",
            "--server",
            "127.0.0.1:8080",
            "--tls-ca",
            "/etc/my ca.pem",
            "get",
            "--session",
            "x",
        ])
        .unwrap();
        assert_eq!(
            Reattach::of(&cli).command("sess-1", 7),
            "agentctl --server 127.0.0.1:8080 --tls-ca '/etc/my ca.pem' watch --session sess-1 \
             --from 7"
        );
        let embedded =
            Cli::try_parse_from(["agentctl", "--journal", "it's.db", "get", "--session", "x"])
                .unwrap();
        assert_eq!(
            Reattach::of(&embedded).command("s", 1),
            r"agentctl --journal 'it'\''s.db' watch --session s --from 1"
        );
    }
}
