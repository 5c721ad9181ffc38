//! `Harness.Describe` and `Harness.Connect` on both sides of the wire (semantics §9): the
//! harness SDK for Rust authors, and the host's adapter for harnesses that run elsewhere.
//!
//! - **Serving** a harness: implement [`agentsessions_api::Harness`] (two methods) and call
//!   [`serve()`](fn@serve) with a listen address (it stops on SIGINT/SIGTERM), or [`serve_tcp`]
//!   / [`serve_unix`] with a shutdown future of your own. The harness's [`agentsessions_api::EventSink`] calls become
//!   the Connect stream's events; the host's answers come back as their results. Health is served
//!   as `grpc.health.v1`.
//! - **Driving** a remote harness: [`RemoteHarness`] is an [`agentsessions_api::Harness`] whose
//!   `run` replays the remote harness's events into the host's sink, so the rest of the host
//!   cannot tell it from an in-process one.
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use agentsessions_api::{Descriptor, EventSink, Harness, Result, Start};
//!
//! struct Hello;
//!
//! #[async_trait::async_trait]
//! impl Harness for Hello {
//!     async fn describe(&self) -> Result<Descriptor> {
//!         Ok(Descriptor { id: "hello".into(), version: "1".into(), ..Descriptor::default() })
//!     }
//!     async fn run(&self, _start: &Start, sink: &dyn EventSink) -> Result<()> {
//!         sink.output("hello".into()).await
//!     }
//! }
//!
//! # async fn serve() -> agentsessions_harnesswire::Result<()> {
//! // Whatever should stop the server: a signal handler, a test, a supervisor.
//! let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let addr = "127.0.0.1:8080".parse().expect("a literal address");
//! agentsessions_harnesswire::serve_tcp(addr, Arc::new(Hello), async {
//!     let _ = stopped.await;
//! })
//! .await
//! # }
//! ```
//!
//! # Differences from the reference protocol
//!
//! - A Connect stream that ends without an END event is a **failed** run
//!   ([`HarnessWireError::ClosedWithoutEnd`], `UNAVAILABLE`), never success: a harness that
//!   crashed must not look like one that finished.
//! - The host's `model` frame carries the completion's usage, so a harness that reports a model
//!   call's usage (as the SDK contract asks) reports what the host recorded.
//! - Delegated tokens cross the wire (an extension, `docs/extensions.md`): when the start says
//!   `can_mint_tokens`, a served harness gets a minter that sends a `mint_request` event
//!   (`Event` field 21) and waits up to 30 s for the host's `mint_result` frame
//!   (`ControllerFrame` field 9), matched by request id. [`RemoteHarness`] answers with the
//!   minter the host bound to the execution (never the caller's own credential), or
//!   `FAILED_PRECONDITION` when it has none. Without `can_mint_tokens` there is no minter.
//! - A `cancel` frame drops the run and ends the stream with `END{CANCELED}`.
//! - Deltas are not part of `Harness.Connect` (the stream carries only `Event`s), so there is
//!   nothing to relay; the host streams deltas from its own model calls.
//!
//! Module map:
//! - [`service`]: [`HarnessService`], the serving side of both RPCs around any harness.
//! - [`remote`]: [`RemoteHarness`], the host side.
//! - [`serve`](mod@serve): [`serve_tcp`], [`serve_tcp_listener`], [`serve_unix`].
//! - [`address`]: [`AddressTarget`], the one address grammar, read for an [`AddressRole`] (dial or listen).
//! - [`listen`]: [`serve()`](fn@serve), [`ListenAddr`], [`HarnessListener`],
//!   [`remove_stale_socket`], [`shutdown_signal`].
//! - [`channel`](mod@channel): [`channel()`](fn@channel), a lazily dialed channel for an address.
//! - [`request_id`]: `x-request-id` propagation ([`with_request_id`], [`current_request_id`]).
//! - [`error`]: [`HarnessWireError`] and its mappings to [`agentsessions_api::ApiError`] and
//!   [`tonic::Status`].
//! - `stream_sink` (private): the serve side's [`agentsessions_api::EventSink`].
//! - `frames` (private): message builders and predicates shared by both sides.
//! - `mint` (private): token minting across the stream, both sides.

pub mod address;
pub mod channel;
pub mod error;
mod frames;
pub mod listen;
mod mint;
pub mod remote;
pub mod request_id;
pub mod serve;
pub mod service;
mod stream_sink;

pub use address::{AddressRole, AddressTarget};
pub use channel::{channel, channel_tls};
pub use error::{HarnessWireError, Result, status_code_of};
pub use listen::{HarnessListener, ListenAddr, remove_stale_socket, serve, shutdown_signal};
pub use remote::{DEFAULT_DESCRIBE_TIMEOUT, RemoteHarness};
pub use request_id::{REQUEST_ID_HEADER, current_request_id, with_request_id};
pub use serve::{serve_tcp, serve_tcp_listener, serve_tcp_listener_tls, serve_unix};
pub use service::{ConnectStream, HarnessService};
