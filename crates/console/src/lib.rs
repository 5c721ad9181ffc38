//! The agentsessions web console and its JSON HTTP API, over the same
//! [`SessionsService`](agentsessions_server::SessionsService) the gRPC listener serves.
//!
//! ```text
//!  browser / curl ──HTTP──► router: guard (Host, CSRF) ─► Caller (same Authenticator as gRPC)
//!                                                            │ tonic::Request + Authenticated
//!                                                            ▼
//!                                      SessionsService RPCs (same validation, policy, owners)
//! ```
//!
//! Use: `agentsessions_console::router(Console::new(service).with_authenticator(auth))`, an
//! `axum::Router` serving `/` (the page), `/assets/*` and `/api/v1/*`.
//!
//! Module map:
//! - [`console`]: [`Console`], the shared state.
//! - `guard`: security headers (CSP), the `Host` check and CSRF protection.
//! - [`caller`]: authentication of a request, [`PeerCertificates`].
//! - `sessions`: the read endpoints (list, one session, records, verify, audit, tree).
//! - `actions`: the state-changing endpoints (create, cancel, suspend, resume, fork, delete,
//!   decisions).
//! - `approvals`: pending approvals.
//! - `live`: a session's records as Server-Sent Events, following new commits.
//! - `render`: the JSON forms; `request`: query and body parsing, hiding sessions.
//! - [`error`]: [`ConsoleError`] and its HTTP status.
//! - `assets`: the page, script and style compiled in.
#![warn(missing_docs)]

mod actions;
mod approvals;
mod assets;
pub mod caller;
pub mod console;
pub mod error;
mod guard;
mod live;
mod render;
mod request;
mod router;
mod sessions;

pub use caller::PeerCertificates;
pub use console::Console;
pub use error::ConsoleError;
pub use guard::{CONTENT_SECURITY_POLICY, CSRF_HEADER};
pub use router::router;
