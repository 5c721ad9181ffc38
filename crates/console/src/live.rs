//! `GET /api/v1/sessions/{uid}/events?from=SEQ`: a session's records as Server-Sent Events, from
//! `from` (default 1) and then each new one as it commits, until the session is deleted (after
//! its delete record), the client goes away or the console stops.
//!
//! The events come from the Sessions service's WatchUpdates RPC with the verified caller, so the
//! console follows commits exactly as `agentctl watch` does: authorized as a read, woken by the
//! journal's commit feed (on a shared Postgres journal also by other hosts' commits, through
//! LISTEN/NOTIFY), never by polling, and ended after the delete record.
//!
//! ```text
//!  WatchUpdates(caller, from) ──records, progress──▶ follower task ──[ EVENT_BUFFER ]──▶ SSE response
//! ```
//!
//! Events: `record` (data: the record's JSON, id: its seq), `progress` (data: a running tool's
//! progress, `{"execution_id", "tool_call_id", "tool", "progress", "total"?, "message"}`; no id,
//! never replayed: extensions §11), `end` (the session was deleted),
//! `error` (data: the API's error JSON; the stream then ends). A reconnecting `EventSource` sends
//! `Last-Event-ID`, which resumes after that seq.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agentsessions_server::streams::WatchUpdatesStream;
use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_server::Sessions as _;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;

use crate::caller::Caller;
use crate::console::Console;
use crate::error::{ConsoleError, Result};
use crate::render::RecordJson;
use crate::request::{on_session, query};

/// Events buffered per stream before the follower waits for the client.
const EVENT_BUFFER: usize = 64;

/// `GET /api/v1/sessions/{uid}/events` query.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct EventParams {
    from: i64,
}

type EventSender = mpsc::Sender<std::result::Result<Event, Infallible>>;

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
        .map(|seq| seq.saturating_add(1));
    let from = resumed.unwrap_or(params.from).max(1);
    // Refused or missing sessions are answered before the stream opens, as not found to a
    // caller who may not read the session.
    let watch = match console
        .service
        .watch_updates(caller.request(pb::WatchRequest {
            session: uid.clone(),
            from_seq: from,
        }))
        .await
    {
        Ok(response) => response.into_inner(),
        Err(status) => return Err(on_session(&console, &caller, &uid, status).await),
    };
    let (tx, rx) = mpsc::channel(EVENT_BUFFER);
    let stop = console.stop.clone();
    console.tasks.spawn(async move {
        tokio::select! {
            () = forward(watch, &uid, &tx) => {}
            () = stop.cancelled() => {}
            () = tx.closed() => {}
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// Turns the Watch's records into events. The Watch ends OK only once the session is deleted
/// (after its delete record), which the client learns as `end`; a failed Watch ends with
/// `error`.
async fn forward(mut watch: WatchUpdatesStream, uid: &str, tx: &EventSender) {
    while let Some(next) = watch.next().await {
        let event = match next {
            Ok(pb::WatchUpdate {
                update: Some(pb::watch_update::Update::Record(record)),
            }) => record_event(&record),
            Ok(pb::WatchUpdate {
                update: Some(pb::watch_update::Update::Progress(progress)),
            }) => progress_event(&progress),
            Ok(pb::WatchUpdate { update: None }) => continue,
            Err(status) => {
                let _ignored = tx.send(Ok(error_event(&ConsoleError::Rpc(status)))).await;
                return;
            }
        };
        if tx.send(Ok(event)).await.is_err() {
            return;
        }
    }
    let _ignored = tx.send(Ok(Event::default().event("end").data(uid))).await;
}

fn record_event(record: &pb::LogRecord) -> Event {
    let json = serde_json::to_string(&RecordJson::from(record)).unwrap_or_default();
    Event::default()
        .event("record")
        .id(record.seq.to_string())
        .data(json)
}

fn progress_event(progress: &pb::ToolProgress) -> Event {
    let json = serde_json::json!({
        "execution_id": progress.execution_id,
        "tool_call_id": progress.tool_call_id,
        "tool": progress.tool,
        "progress": progress.progress,
        "total": progress.total,
        "message": progress.message,
    });
    Event::default().event("progress").data(json.to_string())
}

fn error_event(err: &ConsoleError) -> Event {
    let body = serde_json::json!({"error": {"code": err.code_name(), "message": err.to_string()}});
    Event::default().event("error").data(body.to_string())
}
