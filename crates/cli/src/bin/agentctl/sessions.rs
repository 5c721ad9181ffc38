//! One session at a time: create, list, get, exec and delete.

use std::io::Read as _;

use agentsessions_cli::output::{
    record_json, record_line, session_details, session_json, session_line,
};
use agentsessions_client::{Client, ExecEvent, ExecOptions, SessionFilter, exec_state, uid_of};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::args::ListFilter;
use crate::error::{CliError, parked};
use crate::lifecycle::transition;
use crate::out::Out;
use crate::progress::{progress_json, progress_line};
use crate::watch::{Reattach, detached};

pub(crate) async fn create(
    client: &mut Client,
    out: &mut Out,
    name: &str,
    harness: &str,
    model: &str,
) -> Result<(), CliError> {
    let session = client.create(name, harness, model).await?;
    out.either(&session_json(&session), || uid_of(&session).to_owned())
}

/// Every session of the project that `filter` keeps (ListSessions filters by project only;
/// the rest is the console's filter, applied to each page).
pub(crate) async fn list(
    client: &mut Client,
    out: &mut Out,
    page_size: i32,
    filter: &ListFilter,
) -> Result<(), CliError> {
    if page_size < 0 {
        return Err(CliError::Usage("--page-size must not be negative".into()));
    }
    let filter = SessionFilter {
        state: exec_state(&filter.state).map_err(|e| CliError::Usage(format!("--state: {e}")))?,
        harness: filter.harness.clone(),
        owner: filter.owner.clone(),
        text: filter.name.clone(),
    };
    for session in client.list(page_size).await? {
        if filter.keeps(&session) {
            out.either(&session_json(&session), || session_line(&session))?;
        }
    }
    Ok(())
}

pub(crate) async fn get(client: &mut Client, out: &mut Out, uid: &str) -> Result<(), CliError> {
    let session = client.get(uid).await?;
    out.either(&session_json(&session), || session_details(&session))
}

pub(crate) async fn delete(client: &mut Client, out: &mut Out, uid: &str) -> Result<(), CliError> {
    let session = client.delete(uid).await?;
    out.either(&session_json(&session), || transition(&session, "delete"))
}

/// The user messages of a turn: the words as one message (`-` alone: stdin), then each --input.
pub(crate) fn turn_inputs(words: Vec<String>, more: Vec<String>) -> Result<Vec<String>, CliError> {
    let first = if words.len() == 1 && words[0] == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(CliError::Stdin)?;
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text).to_owned();
        if text.is_empty() {
            return Err(CliError::Usage("stdin held no message".into()));
        }
        Some(text)
    } else if words.is_empty() {
        None
    } else {
        Some(words.join(" "))
    };
    Ok(first.into_iter().chain(more).collect())
}

/// One `--json` line of a streamed turn.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum ExecLine<'a> {
    Session(Box<RawValue>),
    Delta { part_index: i32, chunk: &'a str },
}

pub(crate) async fn exec(
    client: &mut Client,
    out: &mut Out,
    options: ExecOptions,
    reattach: &Reattach,
) -> Result<(), CliError> {
    if options.inputs.is_empty() && options.session.is_empty() {
        return Err(CliError::Usage(
            "nothing to say: give the input text, e.g. agentctl exec \"hello\"".into(),
        ));
    }
    let json = out.json();
    let created = options.session.is_empty();
    let mut announced = false;
    let mut in_delta = false;
    let mut write_error = None;
    // Where the turn stands, for the reattach command should the stream stop: the session and
    // the highest seq seen (in a session frame or a record).
    let mut session = options.session.clone();
    let mut seen = 0;
    let turn = client.exec(options, |event| {
        match event {
            ExecEvent::Session(s) => {
                uid_of(s).clone_into(&mut session);
                seen = seen.max(s.last_seq);
            }
            ExecEvent::Record(r) => seen = seen.max(r.seq),
            ExecEvent::Delta(_) | ExecEvent::Progress(_) => {}
        }
        let written = match event {
            ExecEvent::Session(s) if json => out.value(&ExecLine::Session(session_json(s))),
            ExecEvent::Session(s) if created && !announced => {
                announced = true;
                out.line(&format!("session {}", uid_of(s)))
            }
            ExecEvent::Session(_) => Ok(()),
            ExecEvent::Record(r) if json => out.value(&record_json(r)),
            ExecEvent::Record(r) => {
                let prefix = if in_delta { "\n" } else { "" };
                in_delta = false;
                out.line(&format!("{prefix}{}", record_line(r)))
            }
            ExecEvent::Delta(d) if json => out.value(&ExecLine::Delta {
                part_index: d.part_index,
                chunk: &d.chunk,
            }),
            ExecEvent::Delta(d) if d.chunk.is_empty() => Ok(()),
            ExecEvent::Delta(d) => {
                in_delta = true;
                out.partial(&d.chunk)
            }
            ExecEvent::Progress(p) if json => out.value(&progress_json(p)),
            ExecEvent::Progress(p) => {
                let prefix = if in_delta { "\n" } else { "" };
                in_delta = false;
                out.line(&format!("{prefix}{}", progress_line(p)))
            }
        };
        if let Err(e) = written {
            write_error.get_or_insert(e);
        }
    });
    let result = tokio::select! {
        result = turn => Some(result),
        interrupted = tokio::signal::ctrl_c() => {
            interrupted.map_err(CliError::Output)?;
            None
        }
    };
    if let Some(e) = write_error {
        return Err(e);
    }
    let Some(result) = result else {
        out.flush();
        if in_delta {
            out.line("")?;
        }
        if session.is_empty() {
            return Err(CliError::Interrupted);
        }
        return Err(CliError::Detached {
            reason: "interrupted".into(),
            reattach: reattach.command(&session, seen + 1),
            interrupted: true,
        });
    };
    match result {
        Ok(turn) => parked(turn.session.as_ref()),
        Err(failed) => {
            let uid = failed.partial.session_uid();
            if uid.is_empty() {
                Err(failed.error.into())
            } else if detached(&failed.error) {
                Err(CliError::Detached {
                    reason: failed.error.to_string(),
                    reattach: reattach.command(&uid, failed.partial.last_seq + 1),
                    interrupted: false,
                })
            } else {
                Err(CliError::Turn {
                    session: uid,
                    error: failed.error,
                })
            }
        }
    }
}
