//! Reading requests: query strings and JSON bodies whose rejections answer in the API's JSON
//! error form, and the rule that turns a refusal on a session the caller may not read into "not
//! found".

use agentsessions_api::Action;
use axum::Json;
use axum::extract::Query;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use serde::de::DeserializeOwned;
use tonic::Code;

use crate::caller::Caller;
use crate::console::Console;
use crate::error::ConsoleError;

/// A query string, or the API's 400.
pub(crate) fn query<T: DeserializeOwned>(
    parsed: Result<Query<T>, QueryRejection>,
) -> Result<T, ConsoleError> {
    parsed
        .map(|Query(value)| value)
        .map_err(|rejection| ConsoleError::InvalidField {
            field: "query",
            problem: rejection.body_text(),
        })
}

/// A JSON body, or the API's 400. An empty body is `T::default()`, so actions without options
/// can be posted without one.
pub(crate) fn body<T: DeserializeOwned + Default>(
    parsed: Result<Json<T>, JsonRejection>,
) -> Result<T, ConsoleError> {
    match parsed {
        Ok(Json(value)) => Ok(value),
        Err(JsonRejection::MissingJsonContentType(_)) => Ok(T::default()),
        Err(rejection) => Err(ConsoleError::InvalidField {
            field: "body",
            problem: rejection.body_text(),
        }),
    }
}

/// The error to answer with when the service refused a call on session `uid`: a caller who
/// may not read the session learns only that it was not found (as a missing session looks to
/// it), a caller who may read it learns which action was refused.
pub(crate) async fn on_session(
    console: &Console,
    caller: &Caller,
    uid: &str,
    error: tonic::Status,
) -> ConsoleError {
    let hidden = ConsoleError::SessionNotFound {
        uid: uid.to_owned(),
    };
    match error.code() {
        Code::NotFound => hidden,
        Code::PermissionDenied => match console
            .service
            .permitted(caller.identity(), uid, &[Action::Read])
            .await
        {
            Ok(allowed) if allowed.is_empty() => hidden,
            Ok(_) => ConsoleError::Rpc(error),
            Err(err) => ConsoleError::Rpc(err.status()),
        },
        _ => ConsoleError::Rpc(error),
    }
}
