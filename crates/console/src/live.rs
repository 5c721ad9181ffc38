//! `GET /api/v1/sessions/{uid}/events?from=SEQ`: a session's records as Server-Sent Events, from
//! `from` (default 1) and then each new one as it commits, until the session is deleted (after
//! its delete record), the client goes away or the console stops.
//!
//! Events: `record` (data: the record's JSON, id: its seq), `end` (the session was deleted),
//! `error` (data: the API's error JSON; the stream then ends). A reconnecting `EventSource` sends
//! `Last-Event-ID`, which resumes after that seq.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agentsessions_wire::pb;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::caller::Caller;
use crate::console::Console;
use crate::error::{ConsoleError, Result};
use crate::render::RecordJson;
use crate::request::query;
use crate::sessions::{read_session, replay};

/// Events buffered per stream before the follower waits for the client.
const EVENT_BUFFER: usize = 64;
/// Records read per step while catching up.
const STEP: i64 = 500;

/// `GET /api/v1/sessions/{uid}/events` query.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct EventParams {
    from: i64,
}

pub(crate) async fn events(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
    headers: HeaderMap,
    params: Result<Query<EventParams>, QueryRejection>,
) -> Result<Response> {
    let params = query(params)?;
    if params.from < 0 {
        return Err(ConsoleError::InvalidField {
            field: "from",
            problem: "must not be negative".into(),
        });
    }
    // A reconnect resumes after the last record the client saw.
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .map(|seq| seq + 1);
    let from = resumed.unwrap_or(params.from).max(1);
    // Refused or missing sessions are answered before the stream opens.
    read_session(&console, &caller, &uid).await?;
    let (tx, rx) = mpsc::channel::<std::result::Result<Event, Infallible>>(EVENT_BUFFER);
    let stop = console.stop.clone();
    let tasks = console.tasks.clone();
    tasks.spawn(async move {
        tokio::select! {
            () = follow(&console, &caller, &uid, from, &tx) => {}
            () = stop.cancelled() => {}
            () = tx.closed() => {}
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// Whether `record` marks the session deleted.
fn is_delete(record: &pb::LogRecord) -> bool {
    record.event.as_ref().is_some_and(|event| {
        matches!(&event.body, Some(pb::event::Body::Lifecycle(l)) if l.kind == pb::lifecycle::Kind::LifecycleDelete as i32)
    })
}

async fn follow(
    console: &Console,
    caller: &Caller,
    uid: &str,
    mut next: i64,
    tx: &mpsc::Sender<std::result::Result<Event, Infallible>>,
) {
    loop {
        let head = match read_session(console, caller, uid).await {
            Ok(session) => session.last_seq,
            Err(err) => {
                let _ignored = tx.send(Ok(error_event(&err))).await;
                return;
            }
        };
        while next <= head {
            let to = head.min(next + STEP - 1);
            let records = match replay(console, caller, uid, next, to).await {
                Ok(records) => records,
                Err(err) => {
                    let _ignored = tx.send(Ok(error_event(&err))).await;
                    return;
                }
            };
            if records.is_empty() {
                break;
            }
            for record in &records {
                next = record.seq + 1;
                if tx.send(Ok(record_event(record))).await.is_err() {
                    return;
                }
                if is_delete(record) {
                    let _ignored = tx.send(Ok(Event::default().event("end").data(uid))).await;
                    return;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn record_event(record: &pb::LogRecord) -> Event {
    let json = serde_json::to_string(&RecordJson::from(record)).unwrap_or_default();
    Event::default()
        .event("record")
        .id(record.seq.to_string())
        .data(json)
}

fn error_event(err: &ConsoleError) -> Event {
    let body = serde_json::json!({"error": {"code": err.code_name(), "message": err.to_string()}});
    Event::default().event("error").data(body.to_string())
}
