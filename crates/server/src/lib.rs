//! The agentsessions `Sessions` gRPC service over a journal.
//!
//! ```text
//!  client ──Sessions RPC──► SessionsService ──► Placer (guard, routing, admission, runtime)
//!                                │                 │
//!                                │                 └─► Controller (turns, replay, approvals)
//!                                └──────────────► Journal (CAS + fence, the truth)
//! ```
//!
//! The API the binaries use, in full:
//!
//! ```text
//! let service = ServerBuilder::new(journal, model)         // Arc<dyn Journal>, Arc<dyn ModelProvider>
//!     .harness("echo", harness, RuntimeCapabilities::default())  // a harness object this process holds
//!     .runtime_harness("vm", runtime, dialer, source)     // Arc<dyn Runtime>, Arc<dyn HarnessDialer>
//!     .default_harness("echo")
//!     .project("default")
//!     .build()?;                                           // SessionsService
//! let registry = RegistryService::new(&service);           // HarnessRegistry (operator listener)
//! registry.load().await?;                                  // reserve static names, load stored rows
//! serve_tcp(listener, service, shutdown).await?;           // + grpc.health.v1 + reflection
//! ```
//!
//! Or add [`SessionsService::into_server`] and [`RegistryService::into_server`] to your own tonic
//! router, and call [`SessionsService::shutdown`] when it stops.
//!
//! Module map:
//! - `authz`: the per-RPC action table and the configured [`agentsessions_api::Authorizer`]
//!   (extensions §2).
//! - `builder`: [`ServerBuilder`].
//! - [`error`]: [`ServerError`] and the one error → gRPC status table.
//! - [`harnesses`]: harness address rules.
//! - `permissions`: [`SessionsService::permitted`], what a caller may do to a session.
//! - `requests`: request validation, proto request → validated request (`TryFrom`).
//! - `rpc`: what every RPC does around its handler (caller, span, request id, status).
//! - [`service`]: every Sessions RPC.
//! - [`streams`]: the bounded Exec and Replay response streams.
//! - `watch`: the Watch stream (extension): records as they commit, on any host.
//! - [`registry`]: the HarnessRegistry admin service.
//! - `render`: how a session is shown (projections, pending approval, deletion).
//! - [`reflection`]: gRPC reflection v1 and v1alpha listing only a listener's services.
//! - [`limits`]: overload limits (concurrent turns, open streams, message size) and admission.
//! - `message_limit`: the oversized-request status relabelled through the table.
//! - `serve`: serving on TCP or a unix socket, with health, reflection, TLS and authentication.
#![warn(missing_docs)]

mod authz;
mod builder;
pub mod error;
mod harness_spec;
pub mod harnesses;
pub mod limits;
mod message_limit;
mod permissions;
mod record_page;
pub mod reflection;
pub mod registry;
mod render;
mod requests;
mod rpc;
mod serve;
pub mod service;
pub mod streams;
mod watch;

pub use agentsessions_placement as placement;
pub use builder::ServerBuilder;
pub use error::{Result, ServerError};
pub use limits::Limits;
pub use message_limit::MessageLimited;
pub use registry::{RegistryService, SubstrateBackends};
pub use requests::MAX_FORK_COUNT;
pub use serve::{ServeError, ServeOptions, serve_tcp, serve_tcp_with, serve_unix};
pub use service::{MAX_MESSAGE_BYTES, SessionsService};
