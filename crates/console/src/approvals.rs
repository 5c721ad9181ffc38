//! `GET /api/v1/approvals`: the pending approvals the caller may see (owner-filtered by the
//! ListApprovals RPC exactly as over gRPC), oldest first, each marked with whether the caller
//! may decide it.

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

/// `GET /api/v1/approvals` query.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ApprovalParams {
    project: String,
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
    let page = console
        .service
        .list_approvals(caller.request(pb::ListApprovalsRequest {
            project: params.project,
            page_size: params.page_size,
            page_token: params.page_token,
        }))
        .await?
        .into_inner();
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
