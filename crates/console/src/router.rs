//! The routes: `/`, `/assets/{file}` and `/api/v1/*`, behind the request guard and the security
//! headers.

use std::sync::Arc;

use axum::Router;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{get, post};

use crate::console::Console;
use crate::guard::{request_guard, security_headers};
use crate::{actions, approvals, assets, live, sessions};

/// The console's router: the page and its assets, and the JSON API under `/api/v1`, every route
/// authenticated like gRPC and every state-changing one CSRF-checked. Merge it into the HTTP
/// listener's router.
pub fn router(console: Console) -> Router {
    let state = Arc::new(console);
    let api = Router::new()
        .route("/me", get(sessions::me))
        .route("/sessions", get(sessions::list).post(actions::create))
        .route(
            "/sessions/{uid}",
            get(sessions::get).delete(actions::delete),
        )
        .route("/sessions/{uid}/records", get(sessions::records))
        .route("/sessions/{uid}/events", get(live::events))
        .route("/sessions/{uid}/verify", get(sessions::verify))
        .route("/sessions/{uid}/audit", get(sessions::audit))
        .route("/sessions/{uid}/tree", get(sessions::tree))
        .route("/sessions/{uid}/cancel", post(actions::cancel))
        .route("/sessions/{uid}/suspend", post(actions::suspend))
        .route("/sessions/{uid}/resume", post(actions::resume))
        .route("/sessions/{uid}/fork", post(actions::fork))
        .route("/sessions/{uid}/decision", post(actions::decide))
        .route("/approvals", get(approvals::list));
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{file}", get(assets::asset))
        .nest("/api/v1", api)
        .layer(from_fn_with_state(Arc::clone(&state), request_guard))
        .layer(from_fn(security_headers))
        .with_state(state)
}
