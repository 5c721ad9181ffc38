//! What `agentsessionsd` and `agentctl` share: opening a journal from its address, assembling a
//! Sessions service from configuration ([`host`], its model section in [`models`], the delegated
//! identity of [`identity`]), and printing records and sessions for people ([`output`]).
#![warn(missing_docs)]

pub mod host;
pub mod identity;
pub mod microvm;
pub mod models;
pub mod output;
