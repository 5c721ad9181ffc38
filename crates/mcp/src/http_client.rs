//! The reqwest clients MCP servers over streamable HTTP are called with. Idle connections are
//! not pooled (as rmcp's own default client: a reused connection whose last body was not fully
//! read stalls on delayed ACKs).

use reqwest::redirect::{Action, Attempt, Policy};

/// Hops a plain server may redirect through before the request fails.
const MAX_REDIRECTS: usize = 10;

/// For a `delegated_token` server: no redirect is followed, so a bearer token only ever goes to
/// the configured URL.
pub(crate) fn delegating() -> Result<reqwest::Client, String> {
    build(Policy::none())
}

/// For any other server: only 307 and 308 to the same origin are followed (they keep the POST
/// and its JSON-RPC body; another origin would receive the session id and configured headers).
pub(crate) fn plain() -> Result<reqwest::Client, String> {
    build(Policy::custom(same_origin))
}

fn same_origin(attempt: Attempt<'_>) -> Action {
    let keeps_body = matches!(
        attempt.status(),
        reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
    );
    let from_origin = attempt
        .previous()
        .first()
        .is_some_and(|first| first.origin() == attempt.url().origin());
    if !keeps_body || !from_origin {
        attempt.stop()
    } else if attempt.previous().len() > MAX_REDIRECTS {
        attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
    } else {
        attempt.follow()
    }
}

fn build(redirects: Policy) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(redirects)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}
