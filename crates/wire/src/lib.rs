//! The `agentsessions.v1` wire contract and everything defined on it.
//!
//! Module map:
//! - [`pb`]: the generated protobuf messages and gRPC services (the only generated code).
//! - [`convert`]: lossless conversion between `agentsessions-api` domain types and [`pb`].
//! - [`canonical`]: proto3-JSON rendered directly in RFC 8785 (JCS) form, and the hashes defined
//!   on it: [`content_hash`] for journal records and [`spec_digest`] for registry specs.
//! - [`gojson`]: the Go `encoding/json` shape of domain types, used by the model-input hash (I0)
//!   and by the reference JSON journal format.
//! - [`model_input`]: the model-input hash (I0).
//! - [`error`]: the crate error, [`WireError`].
#![warn(missing_docs)]

pub mod canonical;
pub mod convert;
pub mod error;
pub mod gojson;
pub mod model_input;
pub mod pb;

pub use canonical::{content_hash, spec_digest};
pub use error::{Result, WireError};
pub use model_input::model_input_hash;
