//! The read endpoints of `/api/v1`: the sessions list (filtered, paged, newest first), one
//! session with what the caller may do, its records page by page, the chain's verification, the
//! audit bundle and the fork tree. Every read goes through the Sessions RPCs with the verified
//! caller, so it is authorized and owner-filtered exactly as over gRPC.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentsessions_api::Action;
use agentsessions_client::{SessionFilter, exec_state, uid_of};
use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_server::Sessions as _;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio_stream::StreamExt as _;

use crate::caller::Caller;
use crate::console::Console;
use crate::error::{ConsoleError, Result};
use crate::render::{RecordJson, SessionView, canonical};
use crate::request::{on_session, query};

/// Sessions per list page when the query names no size, and the most it may name.
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 500;
/// Sessions one list request reads at most while filtering, so a filter that matches little
/// cannot make one request read a whole large journal; the page then ends early with a token.
const MAX_SCANNED: usize = 5_000;
/// Records per page when the query names no limit, and the most it may name.
const DEFAULT_RECORDS: i64 = 500;
const MAX_RECORDS: i64 = 5_000;
/// Sessions a fork tree reads at most (its family is found by listing).
const MAX_TREE_SCAN: usize = 10_000;

/// Every action the console can offer on a session, in the order it shows them.
pub(crate) const SESSION_ACTIONS: [Action; 7] = [
    Action::Read,
    Action::Approve,
    Action::Cancel,
    Action::Suspend,
    Action::Resume,
    Action::Fork,
    Action::Delete,
];

/// `GET /api/v1/me`.
#[derive(Serialize)]
struct Me<'a> {
    /// Whether a credential verified (false: anonymous).
    authenticated: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    issuer: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    subject: &'a str,
    /// Whether an authorization policy decides what callers may do.
    enforcing: bool,
}

pub(crate) async fn me(State(console): State<Arc<Console>>, caller: Caller) -> Response {
    let identity = caller.identity();
    Json(Me {
        authenticated: identity.is_some(),
        issuer: identity.map_or("", |c| c.issuer.as_str()),
        subject: identity.map_or("", |c| c.subject.as_str()),
        enforcing: console.service.enforcing(),
    })
    .into_response()
}

/// `GET /api/v1/sessions` query.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ListParams {
    project: String,
    /// An execution state: PENDING RUNNING AWAITING COMPLETED FAILED CANCELED INTERRUPTED.
    state: String,
    harness: String,
    /// The owner's subject.
    owner: String,
    /// Part of the uid or the name, any case.
    q: String,
    page_size: usize,
    page_token: String,
}

impl ListParams {
    /// The filter the query names (the one `agentctl list` uses too).
    fn filter(&self) -> Result<SessionFilter> {
        let state = exec_state(&self.state).map_err(|e| ConsoleError::InvalidField {
            field: "state",
            problem: e.to_string(),
        })?;
        Ok(SessionFilter {
            state,
            harness: self.harness.clone(),
            owner: self.owner.clone(),
            text: self.q.clone(),
        })
    }
}

#[derive(Serialize)]
struct SessionPage {
    sessions: Vec<Box<RawValue>>,
    /// Give it back as `page_token` for the next page; empty on the last.
    next_page_token: String,
}

pub(crate) async fn list(
    State(console): State<Arc<Console>>,
    caller: Caller,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response> {
    let params = query(params)?;
    let filter = params.filter()?;
    let want = match params.page_size {
        0 => DEFAULT_PAGE,
        n => n.min(MAX_PAGE),
    };
    let mut sessions = Vec::with_capacity(want);
    let mut token = params.page_token.clone();
    let mut scanned = 0;
    // Each read asks for exactly what is still missing, so the token after it points at the
    // first session not yet looked at and pages never skip or repeat one.
    loop {
        let missing = want - sessions.len();
        let page = console
            .service
            .list_sessions(caller.request(pb::ListSessionsRequest {
                project: params.project.clone(),
                page_size: i32::try_from(missing).unwrap_or(i32::MAX),
                page_token: token,
            }))
            .await?
            .into_inner();
        scanned += page.sessions.len();
        sessions.extend(
            page.sessions
                .iter()
                .filter(|session| filter.keeps(session))
                .map(|session| canonical(session, "{}")),
        );
        token = page.next_page_token;
        if token.is_empty() || sessions.len() >= want || filter.is_empty() || scanned >= MAX_SCANNED
        {
            break;
        }
    }
    Ok(Json(SessionPage {
        sessions,
        next_page_token: token,
    })
    .into_response())
}

/// The session `uid` as the caller may read it, or the API's error.
pub(crate) async fn read_session(
    console: &Console,
    caller: &Caller,
    uid: &str,
) -> Result<pb::Session> {
    match console
        .service
        .get_session(caller.request(pb::GetSessionRequest {
            uid: uid.to_owned(),
        }))
        .await
    {
        Ok(response) => Ok(response.into_inner()),
        Err(status) => Err(on_session(console, caller, uid, status).await),
    }
}

/// `session` with the actions `caller` may take on it.
pub(crate) async fn view(
    console: &Console,
    caller: &Caller,
    session: &pb::Session,
) -> Result<SessionView> {
    let permissions = console
        .service
        .permitted(caller.identity(), uid_of(session), &SESSION_ACTIONS)
        .await
        .map_err(|err| ConsoleError::Rpc(err.status()))?;
    Ok(SessionView::new(session, &permissions))
}

pub(crate) async fn get(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
) -> Result<Response> {
    let session = read_session(&console, &caller, &uid).await?;
    Ok(Json(view(&console, &caller, &session).await?).into_response())
}

/// `GET /api/v1/sessions/{uid}/records` query.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RecordParams {
    /// First seq (default 1).
    from: i64,
    /// Last seq (default: the head).
    to: i64,
    /// Records at most (default 500, at most 5000).
    limit: i64,
}

#[derive(Serialize)]
struct RecordPage {
    records: Vec<RecordJson>,
    /// The seq to ask for next; 0 when the range is exhausted.
    next_seq: i64,
    /// The session's last seq when the page was read.
    head_seq: i64,
}

/// Records `from..=to` of `uid` through Replay (`to` 0: the head).
pub(crate) async fn replay(
    console: &Console,
    caller: &Caller,
    uid: &str,
    from: i64,
    to: i64,
) -> Result<Vec<pb::LogRecord>> {
    let mut stream = console
        .service
        .replay(caller.request(pb::ReplayRequest {
            session: uid.to_owned(),
            from_seq: from,
            to_seq: to,
        }))
        .await?
        .into_inner();
    let mut records = Vec::new();
    while let Some(record) = stream.next().await {
        records.push(record?);
    }
    Ok(records)
}

pub(crate) async fn records(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
    params: Result<Query<RecordParams>, QueryRejection>,
) -> Result<Response> {
    let params = query(params)?;
    if params.from < 0 || params.to < 0 || params.limit < 0 {
        return Err(ConsoleError::InvalidField {
            field: "from/to/limit",
            problem: "must not be negative".into(),
        });
    }
    let session = read_session(&console, &caller, &uid).await?;
    let head = session.last_seq;
    let from = params.from.max(1);
    let limit = match params.limit {
        0 => DEFAULT_RECORDS,
        n => n.min(MAX_RECORDS),
    };
    let last = if params.to == 0 {
        head
    } else {
        params.to.min(head)
    };
    let to = last.min(from.saturating_add(limit - 1));
    let records = if from > to {
        Vec::new()
    } else {
        replay(&console, &caller, &uid, from, to).await?
    };
    let next_seq = if to < last { to + 1 } else { 0 };
    Ok(Json(RecordPage {
        records: records.iter().map(RecordJson::from).collect(),
        next_seq,
        head_seq: head,
    })
    .into_response())
}

#[derive(Serialize)]
struct Verification {
    /// Whether every hash and link checks out.
    verified: bool,
    records: usize,
    #[serde(skip_serializing_if = "str::is_empty")]
    head_hash: String,
    /// Why it does not verify.
    #[serde(skip_serializing_if = "str::is_empty")]
    problem: String,
}

pub(crate) async fn verify(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
) -> Result<Response> {
    read_session(&console, &caller, &uid).await?;
    let records = replay(&console, &caller, &uid, 1, 0).await?;
    let verification = match agentsessions_client::verify(&records) {
        Ok(summary) => Verification {
            verified: true,
            records: summary.records,
            head_hash: summary.head_hash,
            problem: String::new(),
        },
        Err(fault) => Verification {
            verified: false,
            records: records.len(),
            head_hash: String::new(),
            problem: fault.to_string(),
        },
    };
    Ok(Json(verification).into_response())
}

pub(crate) async fn audit(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
) -> Result<Response> {
    read_session(&console, &caller, &uid).await?;
    let records = replay(&console, &caller, &uid, 1, 0).await?;
    let decoded = agentsessions_client::decode(&records)?;
    let bundle = agentsessions_journal::audit::audit_json(&uid, &decoded)?;
    let mut response = ([(header::CONTENT_TYPE, "application/json")], bundle).into_response();
    // The uid is a journal-made identifier, but only plain characters reach the header.
    let file: String = uid
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{file}.audit.json\""))
    {
        response
            .headers_mut()
            .insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// One session of a fork family, with its children.
#[derive(Serialize)]
struct Node {
    uid: String,
    name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    parent_uid: String,
    fork_seq: i64,
    last_seq: i64,
    exec_state: String,
    children: Vec<Node>,
}

#[derive(Serialize)]
struct Tree {
    /// The session asked for.
    uid: String,
    /// The oldest ancestor the caller may read, and everything below it.
    root: Node,
}

fn node(
    children: &BTreeMap<String, Vec<pb::Session>>,
    session: &pb::Session,
    depth: usize,
) -> Node {
    let uid = uid_of(session).to_owned();
    // Forks form a tree by construction; the depth bound only guards against a damaged store.
    let below = if depth < 256 {
        children
            .get(&uid)
            .map(|list| list.iter().map(|c| node(children, c, depth + 1)).collect())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    Node {
        name: session
            .metadata
            .as_ref()
            .map_or_else(String::new, |m| m.name.clone()),
        parent_uid: session.parent_uid.clone(),
        fork_seq: session.fork_seq,
        last_seq: session.last_seq,
        exec_state: pb::ExecState::try_from(session.exec_state)
            .map(|s| s.as_str_name().trim_start_matches("EXEC_").to_owned())
            .unwrap_or_default(),
        uid,
        children: below,
    }
}

pub(crate) async fn tree(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
) -> Result<Response> {
    let mut root = read_session(&console, &caller, &uid).await?;
    let mut seen = vec![uid.clone()];
    while !root.parent_uid.is_empty() && !seen.contains(&root.parent_uid) {
        seen.push(root.parent_uid.clone());
        match read_session(&console, &caller, &root.parent_uid).await {
            Ok(parent) => root = parent,
            // An ancestor the caller may not read (or one deleted and gone) ends the climb.
            Err(ConsoleError::SessionNotFound { .. }) => break,
            Err(err) => return Err(err),
        }
    }
    let project = root
        .metadata
        .as_ref()
        .map_or_else(String::new, |m| m.project.clone());
    let mut children: BTreeMap<String, Vec<pb::Session>> = BTreeMap::new();
    let mut token = String::new();
    let mut scanned = 0;
    loop {
        let page = console
            .service
            .list_sessions(caller.request(pb::ListSessionsRequest {
                project: project.clone(),
                page_size: 1_000,
                page_token: token,
            }))
            .await?
            .into_inner();
        scanned += page.sessions.len();
        for session in page.sessions {
            if !session.parent_uid.is_empty() {
                children
                    .entry(session.parent_uid.clone())
                    .or_default()
                    .push(session);
            }
        }
        token = page.next_page_token;
        if token.is_empty() || scanned >= MAX_TREE_SCAN {
            break;
        }
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| (a.fork_seq, uid_of(a)).cmp(&(b.fork_seq, uid_of(b))));
    }
    Ok(Json(Tree {
        root: node(&children, &root, 0),
        uid,
    })
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_filters_take_short_and_full_names() {
        let filter = |state: &str| {
            ListParams {
                state: state.to_owned(),
                ..ListParams::default()
            }
            .filter()
        };
        assert_eq!(filter("").unwrap().state, None);
        assert_eq!(
            filter("running").unwrap().state,
            Some(pb::ExecState::ExecRunning)
        );
        assert_eq!(
            filter("EXEC_AWAITING").unwrap().state,
            Some(pb::ExecState::ExecAwaiting)
        );
        let refused = filter("sleeping").unwrap_err();
        assert!(refused.to_string().starts_with("state: "), "{refused}");
        filter("STATE_UNSPECIFIED").unwrap_err();
    }
}
