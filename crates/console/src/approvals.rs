//! `GET /api/v1/approvals`: the pending approvals the caller may see (owner-filtered by the
//! ListApprovals RPC exactly as over gRPC), oldest first, each marked with whether the caller
//! may decide it. With `session=UID`, only that session's (in its own project, however many
//! other sessions wait), which is what a session's page shows.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentsessions_api::Action;
use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_server::Sessions as _;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::caller::Caller;
use crate::console::Console;
use crate::error::{ConsoleError, Result};
use crate::render::ApprovalJson;
use crate::request::query;
use crate::sessions::read_session;

/// Approvals one `session=` request reads at most while looking for that session's, so one
/// request cannot read a whole large queue; the page then ends early with a token.
const MAX_SCANNED: usize = 5_000;
/// ListApprovals page size while scanning for one session's approvals (the RPC's maximum).
const SCAN_PAGE: i32 = 500;

/// `GET /api/v1/approvals` query.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ApprovalParams {
    project: String,
    /// Only this session's approvals (its project replaces `project`).
    session: String,
    page_size: i32,
    page_token: String,
}

#[derive(Serialize)]
struct ApprovalPage {
    approvals: Vec<ApprovalJson>,
    next_page_token: String,
}

pub(crate) async fn list(
    State(console): State<Arc<Console>>,
    caller: Caller,
    params: Result<Query<ApprovalParams>, QueryRejection>,
) -> Result<Response> {
    let params = query(params)?;
    if params.page_size < 0 {
        return Err(ConsoleError::InvalidField {
            field: "page_size",
            problem: "must not be negative".into(),
        });
    }
    let page = if params.session.is_empty() {
        console
            .service
            .list_approvals(caller.request(pb::ListApprovalsRequest {
                project: params.project,
                page_size: params.page_size,
                page_token: params.page_token,
            }))
            .await?
            .into_inner()
    } else {
        of_session(&console, &caller, &params.session, params.page_token).await?
    };
    let mut decides: BTreeMap<String, bool> = BTreeMap::new();
    let mut approvals = Vec::with_capacity(page.approvals.len());
    for approval in page.approvals {
        let can = match decides.get(&approval.session_uid) {
            Some(can) => *can,
            None => {
                let can = !console
                    .service
                    .permitted(caller.identity(), &approval.session_uid, &[Action::Approve])
                    .await
                    .map_err(|err| ConsoleError::Rpc(err.status()))?
                    .is_empty();
                decides.insert(approval.session_uid.clone(), can);
                can
            }
        };
        approvals.push(ApprovalJson::new(approval, can));
    }
    Ok(Json(ApprovalPage {
        approvals,
        next_page_token: page.next_page_token,
    })
    .into_response())
}

/// The pending approvals of session `uid` (a 404 when the caller may not read it), read from
/// its project's queue from `token` on, until the queue ends or [`MAX_SCANNED`] were read.
async fn of_session(
    console: &Console,
    caller: &Caller,
    uid: &str,
    mut token: String,
) -> Result<pb::ListApprovalsResponse> {
    let session = read_session(console, caller, uid).await?;
    let project = session
        .metadata
        .as_ref()
        .map_or_else(String::new, |m| m.project.clone());
    let mut approvals = Vec::new();
    let mut scanned = 0;
    loop {
        let page = console
            .service
            .list_approvals(caller.request(pb::ListApprovalsRequest {
                project: project.clone(),
                page_size: SCAN_PAGE,
                page_token: token,
            }))
            .await?
            .into_inner();
        scanned += page.approvals.len();
        approvals.extend(
            page.approvals
                .into_iter()
                .filter(|approval| approval.session_uid == uid),
        );
        token = page.next_page_token;
        if token.is_empty() || scanned >= MAX_SCANNED {
            break;
        }
    }
    Ok(pb::ListApprovalsResponse {
        approvals,
        next_page_token: token,
    })
}
