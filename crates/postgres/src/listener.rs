//! Commits made by other hosts, heard through `LISTEN`/`NOTIFY`: every write batch that
//! appends records sends one notification per session it appended to, inside its transaction
//! (so Postgres delivers it exactly when the commit is visible, and never for a rolled-back
//! batch), and each journal keeps one connection listening, whose notifications it publishes to
//! its [`CommitFeed`].
//!
//! ```text
//!  host A writer: BEGIN · insert events · pg_notify(CHANNEL, "<schema> <head> <session>") · COMMIT
//!                                                    │ (delivered at COMMIT)
//!  host B listener task: LISTEN CHANNEL ◀────────────┘ ─▶ CommitFeed::publish(session, head)
//! ```
//!
//! Notifications sent while the listening connection is down are lost, so after every
//! (re)connection the feed wakes all its followers, which then read the journal again. A lost
//! connection is retried with a growing pause, never in a tight loop.

use std::sync::Arc;
use std::time::Duration;

use agentsessions_journal::{CommitFeed, Result};
use tokio::sync::oneshot;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{AsyncMessage, Client, Connection, Socket};

use crate::connection::{CHANNEL, Target};
use crate::failure::DbError;

/// Largest payload Postgres accepts is 8000 bytes; a longer one (a huge session uid) is sent as
/// "`<schema> *`", which wakes every follower of the schema instead.
const MAX_PAYLOAD: usize = 7_999;

/// First pause before reconnecting, doubled after each failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest pause between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The notification payload announcing `session`'s new `head` in `schema` (unquoted).
pub(crate) fn payload(schema: &str, session: &str, head: i64) -> String {
    let payload = format!("{schema} {head} {session}");
    if payload.len() > MAX_PAYLOAD {
        format!("{schema} *")
    } else {
        payload
    }
}

/// What a payload tells a journal of `schema`.
#[derive(Debug, PartialEq, Eq)]
enum Heard<'a> {
    /// `session`'s head is at least `head`.
    Head { session: &'a str, head: i64 },
    /// Some session of the schema committed: wake every follower.
    Any,
    /// Another schema's, or not one of ours.
    Other,
}

fn parse<'a>(schema: &str, payload: &'a str) -> Heard<'a> {
    let Some((their_schema, rest)) = payload.split_once(' ') else {
        return Heard::Other;
    };
    if their_schema != schema {
        return Heard::Other;
    }
    if rest == "*" {
        return Heard::Any;
    }
    match rest.split_once(' ') {
        Some((head, session)) if !session.is_empty() => match head.parse() {
            Ok(head) => Heard::Head { session, head },
            Err(_) => Heard::Other,
        },
        _ => Heard::Other,
    }
}

/// One open connection that has run `LISTEN`.
pub(crate) struct Listening {
    /// Kept: dropping the client closes the connection.
    _client: Client,
    connection: Connection<Socket, NoTlsStream>,
}

impl std::fmt::Debug for Listening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listening").finish_non_exhaustive()
    }
}

/// Opens a connection and runs `LISTEN` on it, driving the connection meanwhile.
///
/// # Errors
/// Connection failures, as reads report them.
pub(crate) async fn listen(target: &Target) -> Result<Listening> {
    let (client, mut connection) = target.open_undriven().await?;
    let sql = format!("LISTEN {CHANNEL}");
    {
        let listen = client.batch_execute(&sql);
        tokio::pin!(listen);
        loop {
            tokio::select! {
                done = &mut listen => {
                    done.map_err(|e| DbError::Pg(e).into_read_error())?;
                    break;
                }
                message = std::future::poll_fn(|cx| connection.poll_message(cx)) => {
                    match message {
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(DbError::Pg(e).into_read_error()),
                        None => {
                            return Err(agentsessions_journal::JournalError::Io(
                                std::io::Error::new(
                                    std::io::ErrorKind::ConnectionAborted,
                                    "the listening connection closed during LISTEN",
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(Listening {
        _client: client,
        connection,
    })
}

/// The listening task of one journal: publishes what it hears to `feed` until `stop` fires
/// (its sender is dropped with the journal), reconnecting with backoff when the connection is
/// lost. `first` is the connection opened while the journal started.
pub(crate) async fn run(
    target: Arc<Target>,
    schema: String,
    feed: Arc<CommitFeed>,
    first: Listening,
    mut stop: oneshot::Receiver<()>,
) {
    let mut current = Some(first);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let listening = match current.take() {
            Some(listening) => listening,
            None => {
                let opened = tokio::select! {
                    opened = listen(&target) => opened,
                    _ = &mut stop => return,
                };
                match opened {
                    Ok(listening) => {
                        backoff = FIRST_BACKOFF;
                        // Logged because the failures are: without it an operator cannot tell
                        // a listener that recovered from one still retrying.
                        tracing::info!("journal commit listener reconnected");
                        // Commits made while no connection listened were not heard.
                        feed.wake_all();
                        listening
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in_ms = backoff.as_millis(),
                            "journal commit listener cannot reconnect");
                        tokio::select! {
                            () = tokio::time::sleep(backoff) => {}
                            _ = &mut stop => return,
                        }
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                }
            }
        };
        let lost = tokio::select! {
            lost = pump(listening, &schema, &feed) => lost,
            _ = &mut stop => return,
        };
        tracing::warn!(error = %lost, "journal commit listener lost its connection; reconnecting");
    }
}

/// Publishes every notification of `schema` until the connection ends; returns why it ended.
async fn pump(mut listening: Listening, schema: &str, feed: &CommitFeed) -> String {
    loop {
        match std::future::poll_fn(|cx| listening.connection.poll_message(cx)).await {
            Some(Ok(AsyncMessage::Notification(n))) if n.channel() == CHANNEL => {
                match parse(schema, n.payload()) {
                    Heard::Head { session, head } => feed.publish(session, head),
                    Heard::Any => feed.wake_all(),
                    Heard::Other => {}
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return e.to_string(),
            None => return "the server closed the connection".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_other_schemas_are_ignored() {
        let p = payload("agentsessions", "sess with spaces", 42);
        assert_eq!(
            parse("agentsessions", &p),
            Heard::Head {
                session: "sess with spaces",
                head: 42
            }
        );
        assert_eq!(parse("other", &p), Heard::Other);
        assert_eq!(parse("agentsessions", "agentsessions *"), Heard::Any);
        for junk in [
            "",
            "agentsessions",
            "agentsessions x s",
            "agentsessions 3 ",
            "x",
        ] {
            assert_eq!(parse("agentsessions", junk), Heard::Other, "{junk:?}");
        }
    }

    #[test]
    fn an_oversized_payload_wakes_everyone_instead() {
        let long = "s".repeat(MAX_PAYLOAD);
        assert_eq!(payload("sch", &long, 1), "sch *");
        assert!(payload("sch", "short", 1).len() < MAX_PAYLOAD);
    }
}
