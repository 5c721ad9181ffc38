//! The state-changing endpoints of `/api/v1`: create, cancel, suspend, resume, fork, delete, and
//! approval decisions. Each calls the Sessions RPC of the same name with the verified caller, so
//! its validation, authorization and ownership rules are the gRPC ones; a decision's actor is
//! the verified caller, never a body field. (CSRF checks ran before any of these, see
//! [`crate::guard`].)

use std::collections::BTreeMap;
use std::sync::Arc;

use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_server::Sessions as _;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::caller::Caller;
use crate::console::Console;
use crate::error::{ConsoleError, Result};
use crate::render::{RecordJson, canonical};
use crate::request::{body, on_session};
use crate::sessions::{read_session, view};

/// `POST /api/v1/sessions` body.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct NewSession {
    project: String,
    name: String,
    harness: String,
    model: String,
    labels: BTreeMap<String, String>,
}

pub(crate) async fn create(
    State(console): State<Arc<Console>>,
    caller: Caller,
    parsed: Result<Json<NewSession>, JsonRejection>,
) -> Result<Response> {
    let new = body(parsed)?;
    let session = console
        .service
        .create_session(caller.request(pb::CreateSessionRequest {
            session: Some(pb::Session {
                metadata: Some(pb::ResourceMetadata {
                    project: new.project,
                    name: new.name,
                    ..pb::ResourceMetadata::default()
                }),
                harness: new.harness,
                model: new.model,
                labels: new.labels.into_iter().collect(),
                ..pb::Session::default()
            }),
        }))
        .await?
        .into_inner();
    let shown = view(&console, &caller, &session).await?;
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

/// The session after an action, with what the caller may now do.
async fn answer(
    console: &Console,
    caller: &Caller,
    uid: &str,
    result: std::result::Result<tonic::Response<pb::Session>, tonic::Status>,
) -> Result<Response> {
    match result {
        Ok(response) => {
            let session = response.into_inner();
            Ok(Json(view(console, caller, &session).await?).into_response())
        }
        Err(status) => Err(on_session(console, caller, uid, status).await),
    }
}

/// `POST /api/v1/sessions/{uid}/cancel` body.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct CancelBody {
    /// The execution to cancel; empty: whichever runs.
    execution_id: String,
    reason: String,
}

pub(crate) async fn cancel(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
    parsed: Result<Json<CancelBody>, JsonRejection>,
) -> Result<Response> {
    let order = body(parsed)?;
    let result = console
        .service
        .cancel(caller.request(pb::CancelRequest {
            session: uid.clone(),
            execution_id: order.execution_id,
            reason: order.reason,
        }))
        .await;
    answer(&console, &caller, &uid, result).await
}

pub(crate) async fn suspend(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
) -> Result<Response> {
    let result = console
        .service
        .suspend(caller.request(pb::SuspendRequest {
            session: uid.clone(),
        }))
        .await;
    answer(&console, &caller, &uid, result).await
}

pub(crate) async fn resume(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
) -> Result<Response> {
    let result = console
        .service
        .resume(caller.request(pb::ResumeRequest {
            session: uid.clone(),
            boot: false,
        }))
        .await;
    answer(&console, &caller, &uid, result).await
}

pub(crate) async fn delete(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
) -> Result<Response> {
    let result = console
        .service
        .delete_session(caller.request(pb::DeleteSessionRequest { uid: uid.clone() }))
        .await;
    answer(&console, &caller, &uid, result).await
}

/// `POST /api/v1/sessions/{uid}/fork` body.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ForkBody {
    /// The seq the children branch at; 0: the head.
    at_seq: i64,
    /// How many children (default 1).
    count: i32,
    /// The children's names: none, or one per child.
    names: Vec<String>,
}

#[derive(Serialize)]
struct Forked {
    children: Vec<Box<RawValue>>,
}

pub(crate) async fn fork(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
    parsed: Result<Json<ForkBody>, JsonRejection>,
) -> Result<Response> {
    let order = body(parsed)?;
    let count = if order.count == 0 { 1 } else { order.count };
    match console
        .service
        .fork(caller.request(pb::ForkRequest {
            session: uid.clone(),
            at_seq: order.at_seq,
            count,
            identity: None,
            labels: BTreeMap::new(),
            child_names: order.names,
        }))
        .await
    {
        Ok(response) => {
            let children = response
                .into_inner()
                .children
                .iter()
                .map(|child| canonical(child, "{}"))
                .collect();
            Ok((StatusCode::CREATED, Json(Forked { children })).into_response())
        }
        Err(status) => Err(on_session(&console, &caller, &uid, status).await),
    }
}

/// `POST /api/v1/sessions/{uid}/decision` body.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct DecisionBody {
    /// true approves, false denies; required.
    approved: Option<bool>,
    reason: String,
    /// The request decided; all three empty: the session's pending approval.
    execution_id: String,
    tool_call_id: String,
    request_seq: i64,
}

#[derive(Serialize)]
struct Decided {
    /// The APPROVAL_RESULT record.
    decision: Option<RecordJson>,
    /// The session after the turn resumed (or after the decision, when resuming failed).
    session: Box<RawValue>,
    /// Why the turn did not resume, when it did not (the decision is recorded either way; a
    /// later resume runs the turn on).
    #[serde(skip_serializing_if = "Option::is_none")]
    resume_error: Option<String>,
}

/// Records a decision on a pending approval, then resumes the turn (as `agentctl approve` and
/// `agentctl deny` do), answering once the turn has ended or parked again.
pub(crate) async fn decide(
    State(console): State<Arc<Console>>,
    caller: Caller,
    Path(uid): Path<String>,
    parsed: Result<Json<DecisionBody>, JsonRejection>,
) -> Result<Response> {
    let order = body(parsed)?;
    let (execution_id, tool_call_id, request_seq) =
        if order.execution_id.is_empty() && order.tool_call_id.is_empty() && order.request_seq == 0
        {
            let session = read_session(&console, &caller, &uid).await?;
            let pending = session
                .pending_approval
                .ok_or_else(|| ConsoleError::InvalidField {
                    field: "request_seq",
                    problem: format!("session {uid} has no pending approval; name the request"),
                })?;
            (
                pending.execution_id,
                pending.tool_call_id,
                pending.request_seq,
            )
        } else {
            (order.execution_id, order.tool_call_id, order.request_seq)
        };
    // The actor is the verified caller; under a policy the service sets it itself.
    let identity = caller.identity().map(|caller| pb::IdentityRef {
        principal: String::new(),
        issuer: caller.issuer.clone(),
        subject: caller.subject.clone(),
    });
    let decided = match console
        .service
        .approve(caller.request(pb::ApproveRequest {
            session: uid.clone(),
            execution_id,
            tool_call_id,
            request_seq,
            approved: order.approved,
            reason: order.reason,
            identity,
        }))
        .await
    {
        Ok(response) => response.into_inner(),
        Err(status) => return Err(on_session(&console, &caller, &uid, status).await),
    };
    let resumed = console
        .service
        .resume(caller.request(pb::ResumeRequest {
            session: uid.clone(),
            boot: false,
        }))
        .await;
    let (session, resume_error) = match resumed {
        Ok(response) => (response.into_inner(), None),
        Err(status) => (
            decided.session.clone().unwrap_or_default(),
            Some(status.message().to_owned()),
        ),
    };
    Ok(Json(Decided {
        decision: decided.decision.as_ref().map(RecordJson::from),
        session: canonical(&session, "{}"),
        resume_error,
    })
    .into_response())
}
