//! What `agentsessionsd` and `agentctl` share: opening a journal from its address, assembling a
//! Sessions service from configuration ([`host`], its model section in [`models`], the delegated
//! identity of [`identity`], the secrets kept out of the journal in [`redaction`]), printing records and sessions for people ([`output`]), and the daemon's HTTP
//! listener ([`http`]).
#![warn(missing_docs)]

pub mod config;
pub mod effective;
pub mod host;
pub mod http;
pub mod identity;
pub mod microvm;
pub mod models;
pub mod observability;
pub mod output;
pub mod redaction;
