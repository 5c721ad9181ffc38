//! The console's page, script and style, compiled into the binary: nothing is fetched at run
//! time, and the page loads no inline script (see the Content-Security-Policy in
//! [`crate::guard`]).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/console.js");
const STYLE: &str = include_str!("../assets/console.css");

/// `GET /`: the single page; the script routes within it by the URL fragment.
pub(crate) async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response()
}

/// `GET /assets/{file}`.
pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "console.js" => (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            SCRIPT,
        )
            .into_response(),
        "console.css" => {
            ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}
