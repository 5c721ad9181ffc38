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
//! router.
//!
//! Module map:
//! - `authz`: the per-RPC action table and the configured [`Authorizer`] (extensions §2).
//! - [`error`]: [`ServerError`] and the one error → gRPC status table.
//! - [`harnesses`]: harness address rules.
//! - [`service`]: every Sessions RPC.
//! - [`registry`]: the HarnessRegistry admin service.
//! - `render`: how a session is shown (projections, pending approval, deletion).
#![warn(missing_docs)]

mod authz;
pub mod error;
pub mod harnesses;
pub mod registry;
mod render;
pub mod service;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use agentsessions_api::{
    Authorizer, Harness, HarnessDialer, ModelProvider, Runtime, RuntimeCapabilities,
};
use agentsessions_controller::ToolExecutor;
use agentsessions_journal::Journal;
use agentsessions_journal::journal::DEFAULT_PROJECT;
use agentsessions_placement::{Backend, DescriptorSource, Placer, Registry};
use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_server::SessionsServer;
use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::UnixListenerStream;

pub use agentsessions_placement as placement;
pub use error::{Result, ServerError};
pub use registry::RegistryService;
pub use service::{MAX_FORK_COUNT, SessionsService};

/// Largest request or response message the service accepts or sends (an Exec frame carries a
/// whole record, a Start the whole history).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Assembles a [`SessionsService`].
pub struct ServerBuilder {
    journal: Arc<dyn Journal>,
    model: Arc<dyn ModelProvider>,
    harnesses: Registry,
    routes: Vec<(String, Backend)>,
    default_harness: Option<String>,
    project: String,
    tools: Option<Arc<dyn ToolExecutor>>,
    stream_deltas: bool,
    authorizer: Option<Arc<dyn Authorizer>>,
    link_tls: Option<tonic::transport::ClientTlsConfig>,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field(
                "routes",
                &self.routes.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// A service over `journal` whose harnesses call models through `model`.
    pub fn new(journal: Arc<dyn Journal>, model: Arc<dyn ModelProvider>) -> Self {
        Self {
            journal,
            model,
            harnesses: Registry::default(),
            routes: Vec::new(),
            default_harness: None,
            project: DEFAULT_PROJECT.to_owned(),
            tools: None,
            stream_deltas: true,
            authorizer: None,
            link_tls: None,
        }
    }

    /// Serves `harness` under `name`, on compute with `capabilities` (an in-process harness
    /// has no memory snapshots: `RuntimeCapabilities::default()`). The first harness added is
    /// the default unless [`ServerBuilder::default_harness`] says otherwise.
    #[must_use]
    pub fn harness(
        self,
        name: impl Into<String>,
        harness: Arc<dyn Harness>,
        capabilities: RuntimeCapabilities,
    ) -> Self {
        self.route(name, Backend::attached(harness, capabilities))
    }

    /// Serves the harness `runtime` places and `dialer` reaches under `name`; the admission gate
    /// checks the descriptor from `source` before any compute is created, then again on the
    /// dialed harness.
    #[must_use]
    pub fn runtime_harness(
        self,
        name: impl Into<String>,
        runtime: Arc<dyn Runtime>,
        dialer: Arc<dyn HarnessDialer>,
        source: DescriptorSource,
    ) -> Self {
        self.route(name, Backend::new(runtime, dialer, source))
    }

    /// Serves `backend` under `name` (static route). The first route added is the default.
    #[must_use]
    pub fn route(mut self, name: impl Into<String>, backend: Backend) -> Self {
        self.routes.push((name.into(), backend));
        self
    }

    /// The harness used when a session names none.
    #[must_use]
    pub fn default_harness(mut self, name: impl Into<String>) -> Self {
        self.default_harness = Some(name.into());
        self
    }

    /// The project used when a request names none (default `default`).
    #[must_use]
    pub fn project(mut self, project: impl Into<String>) -> Self {
        self.project = project.into();
        self
    }

    /// The executor for CONTROLLER_MEDIATED and approved tool calls (none by default, as the
    /// stock daemon).
    #[must_use]
    pub fn tools(mut self, tools: Arc<dyn ToolExecutor>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Whether model deltas are streamed on Exec (default true). Deltas are transport only:
    /// the journal is the same either way.
    #[must_use]
    pub fn stream_deltas(mut self, stream: bool) -> Self {
        self.stream_deltas = stream;
        self
    }

    /// Enforces `authorizer` on every Sessions and HarnessRegistry RPC (extensions §2), and
    /// creates sessions owned by their verified caller. Without one, every call is allowed and
    /// sessions have no owner (the published server). Serve it behind an authenticator that
    /// yields caller identities ([`ServeOptions::authenticator`]): an anonymous caller is refused
    /// by every built-in policy.
    #[must_use]
    pub fn authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// Dials harnesses registered at run time (HarnessRegistry) over TLS with `tls`, as the
    /// daemon's `[harness_tls]` does for its static `--harness` entries.
    #[must_use]
    pub fn harness_link_tls(mut self, tls: tonic::transport::ClientTlsConfig) -> Self {
        self.link_tls = Some(tls);
        self
    }

    /// The service.
    ///
    /// # Errors
    /// [`ServerError::InvalidArgument`] when no harness was added or one has an empty name;
    /// `Placement(UnknownHarness)` for a default that is not served.
    pub fn build(self) -> Result<SessionsService> {
        if self.routes.is_empty() {
            return Err(ServerError::InvalidArgument(
                "a server needs at least one harness".into(),
            ));
        }
        for (name, backend) in self.routes {
            self.harnesses
                .add_static(name, backend)
                .map_err(|e| ServerError::InvalidArgument(e.to_string()))?;
        }
        if let Some(name) = &self.default_harness {
            self.harnesses.set_default(name)?;
        }
        let mut placer = Placer::new(Arc::clone(&self.journal), self.model, self.harnesses)
            .with_stream_deltas(self.stream_deltas);
        if let Some(tools) = self.tools {
            placer = placer.with_tools(tools);
        }
        let project = if self.project.is_empty() {
            DEFAULT_PROJECT.to_owned()
        } else {
            self.project
        };
        Ok(SessionsService {
            inner: Arc::new(service::Inner {
                placer,
                journal: self.journal,
                project,
                gate: authz::Gate::new(self.authorizer),
                link_tls: self.link_tls,
            }),
        })
    }
}

impl SessionsService {
    /// The tonic service, with message limits of [`MAX_MESSAGE_BYTES`].
    pub fn into_server(self) -> SessionsServer<Self> {
        SessionsServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// One reclaimer pass over up to `limit` deleted sessions (extensions §3): stops their
    /// compute, which frees the snapshots the runtime kept, and marks them reclaimed. Hosts run
    /// it periodically; a session that cannot be reclaimed yet stays queued.
    ///
    /// # Errors
    /// Reading the queue failed.
    pub async fn reclaim_pending(&self, limit: usize) -> Result<placement::ReclaimReport> {
        Ok(self.inner.placer.reclaim_pending(limit).await?)
    }

    /// Names of the served harnesses and the default one.
    pub fn harness_names(&self) -> (Vec<String>, String) {
        let registry = self.inner.placer.registry();
        (registry.names(), registry.default_name())
    }
}

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The unix socket could not be bound.
    #[error("cannot listen on {path}: {source}")]
    Bind {
        /// The socket path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The reflection service could not be built from the contract's descriptors.
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The transport failed.
    #[error("gRPC transport: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// How a listener is secured: TLS (and client certificates), and who the caller is.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Serve TLS; `None` is plaintext HTTP/2.
    pub tls: Option<tonic::transport::ServerTlsConfig>,
    /// Authenticate every Sessions call (health and reflection stay anonymous); `None` serves
    /// anonymous callers.
    pub authenticator: Option<Arc<agentsessions_auth::Authenticator>>,
}

/// Serves `service` with `grpc.health.v1` and gRPC reflection on an already bound TCP listener
/// until `shutdown` completes; in-flight RPCs are allowed to finish.
///
/// # Errors
/// Transport failures.
pub async fn serve_tcp<F>(
    listener: TcpListener,
    service: SessionsService,
    shutdown: F,
) -> std::result::Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    serve_tcp_with(listener, service, ServeOptions::default(), shutdown).await
}

/// [`serve_tcp`] with TLS and authentication.
///
/// # Errors
/// A TLS configuration tonic refuses; transport failures.
pub async fn serve_tcp_with<F>(
    listener: TcpListener,
    service: SessionsService,
    options: ServeOptions,
    shutdown: F,
) -> std::result::Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    // Turns are many small frames each way: without TCP_NODELAY, Nagle's algorithm and delayed
    // ACKs add tens of milliseconds to every turn.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    router(service, options)
        .await?
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    Ok(())
}

/// [`serve_tcp`] on a unix socket at `path` (which must not exist); the socket file is removed
/// when serving ends.
///
/// # Errors
/// The socket cannot be bound; transport failures.
pub async fn serve_unix<F>(
    path: &Path,
    service: SessionsService,
    shutdown: F,
) -> std::result::Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    let listener = UnixListener::bind(path).map_err(|source| ServeError::Bind {
        path: path.display().to_string(),
        source,
    })?;
    let served = router(service, ServeOptions::default())
        .await?
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await;
    let _ignored = std::fs::remove_file(path);
    served?;
    Ok(())
}

async fn router(
    service: SessionsService,
    options: ServeOptions,
) -> std::result::Result<tonic::transport::server::Router, ServeError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<SessionsServer<SessionsService>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = options.tls {
        builder = builder.tls_config(tls)?;
    }
    let router = builder.add_service(health_service).add_service(reflection);
    Ok(match options.authenticator {
        Some(authenticator) => {
            router.add_service(tonic::service::interceptor::InterceptedService::new(
                service.into_server(),
                authenticator.interceptor(),
            ))
        }
        None => router.add_service(service.into_server()),
    })
}
