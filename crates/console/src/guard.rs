//! What every response and every request passes through: the browser security headers (a
//! strict Content-Security-Policy with no inline script), the `Host` check, and CSRF protection
//! of every state-changing request.
//!
//! CSRF: a request with any method but GET, HEAD and OPTIONS must carry [`CSRF_HEADER`] (a custom
//! header, which a cross-site form cannot send and a cross-site script cannot send without a
//! CORS preflight this server never grants), and when the browser names where it comes from
//! (`Origin`, `Sec-Fetch-Site`) that must be this very origin.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::console::Console;
use crate::error::ConsoleError;

/// The header every state-changing request must carry (any value but empty).
pub const CSRF_HEADER: &str = "x-agentsessions-csrf";

/// The console's Content-Security-Policy: scripts, styles and fetches from this origin only, no
/// inline script or style, no plugins, frames, forms to elsewhere or base-URI games. Images may
/// also be `data:` URLs: the images tool results carry (extensions §10), for `img` only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Adds the security headers to every response.
pub(crate) async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Refuses a request for a host this console does not answer to, and a state-changing request
/// that fails the CSRF checks, before any handler runs.
pub(crate) async fn request_guard(
    State(console): State<Arc<Console>>,
    request: Request,
    next: Next,
) -> Response {
    if let Err(refused) = check(&console, request.method(), request.headers()) {
        return refused.into_response();
    }
    next.run(request).await
}

fn check(console: &Console, method: &Method, headers: &HeaderMap) -> Result<(), ConsoleError> {
    let host = header_text(headers, header::HOST.as_str()).unwrap_or_default();
    if !console.allowed_hosts.is_empty()
        && !console
            .allowed_hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host))
    {
        return Err(ConsoleError::HostNotAllowed {
            host: host.to_owned(),
        });
    }
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    if header_text(headers, CSRF_HEADER).is_none_or(str::is_empty) {
        return Err(ConsoleError::MissingCsrfHeader {
            header: CSRF_HEADER,
        });
    }
    if let Some(site) = header_text(headers, "sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return Err(ConsoleError::CrossOrigin {
            origin: header_text(headers, header::ORIGIN.as_str())
                .unwrap_or(site)
                .to_owned(),
        });
    }
    if let Some(origin) = header_text(headers, header::ORIGIN.as_str())
        && !same_origin(origin, host)
    {
        return Err(ConsoleError::CrossOrigin {
            origin: origin.to_owned(),
        });
    }
    Ok(())
}

/// Whether `origin` (`scheme://host[:port]`, or `null`) names the host the request was sent to.
fn same_origin(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    (scheme == "http" || scheme == "https")
        && !host.is_empty()
        && authority.eq_ignore_ascii_case(host)
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_match_only_the_same_host_and_port() {
        assert!(same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(same_origin(
            "https://Console.Example:443",
            "console.example:443"
        ));
        assert!(!same_origin("http://127.0.0.1:8081", "127.0.0.1:8080"));
        assert!(!same_origin("http://evil.example", "127.0.0.1:8080"));
        assert!(!same_origin("null", "127.0.0.1:8080"));
        assert!(!same_origin("file://", ""));
    }
}
