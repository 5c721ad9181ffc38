//! The model-input hash (invariant I0).
//!
//! A MODEL_CALL record carries `input_hash`, a digest of everything the model was offered; replay
//! recomputes it from the request the harness makes and refuses to serve the recorded completion
//! when it differs ("model input hash mismatch"). Unlike the journal's content hash, it is not
//! defined over a language-neutral form: the reference host hashes Go's `encoding/json` output for
//! its `ModelRequest` struct, so journals written by a Go host only replay here if that output is
//! reproduced exactly. [`crate::gojson`] does that; this module only hashes it.

use sha2::{Digest as _, Sha256};

use agentsessions_api::ModelRequest;

use crate::gojson::model_request_to_json;

/// The model-input hash of a request: lowercase hex SHA-256 of its compact Go JSON
/// ([`model_request_to_json`]).
///
/// Requests that use no tool features (no `tools`, no `tool_choice`, no tool-call or tool-result
/// parts) hash exactly as they did before those features existed, because the Go fields that
/// carry them are `omitempty`. `params: None` and `Some` of an empty map hash differently (`null`
/// versus `{}`), as they do in Go.
///
/// ```
/// use agentsessions_api::{Message, ModelRequest};
/// use agentsessions_wire::model_input_hash;
///
/// let request = ModelRequest {
///     model: "echo".into(),
///     messages: vec![Message::text_message("user", "hello")],
///     ..ModelRequest::default()
/// };
/// assert_eq!(
///     model_input_hash(&request),
///     "2611c24a1a665deca46265ed96d1e1efc699260c9cba9c07f22cda7939232c30"
/// );
/// ```
pub fn model_input_hash(request: &ModelRequest) -> String {
    hex::encode(Sha256::digest(model_request_to_json(request).as_bytes()))
}
