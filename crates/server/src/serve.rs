//! Serving a [`SessionsService`] on a TCP listener or a unix socket, with `grpc.health.v1`,
//! gRPC reflection, TLS and authentication, until a shutdown future completes.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use agentsessions_wire::pb::sessions_server::SessionsServer;
use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::UnixListenerStream;

use crate::reflection::{HEALTH, SESSIONS, reflection_services};
use crate::service::SessionsService;

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
    /// The statuses `grpc.health.v1` reports. The server marks the Sessions service serving; a
    /// host keeps a clone to report its own parts (the daemon: each MCP server as
    /// `agentsessions.mcp.<name>`).
    pub health: tonic_health::server::HealthReporter,
}

/// Serves `service` with `grpc.health.v1` and gRPC reflection on an already bound TCP listener
/// until `shutdown` completes; in-flight RPCs are allowed to finish, then the turns they started
/// ([`SessionsService::shutdown`]).
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
    let owner = service.clone();
    let served = router(service, options)
        .await?
        .serve_with_incoming_shutdown(incoming, signalled(&owner, shutdown))
        .await;
    owner.shutdown().await;
    served?;
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
    let owner = service.clone();
    let served = router(service, ServeOptions::default())
        .await?
        .serve_with_incoming_shutdown(
            UnixListenerStream::new(listener),
            signalled(&owner, shutdown),
        )
        .await;
    let _ignored = std::fs::remove_file(path);
    owner.shutdown().await;
    served?;
    Ok(())
}

/// `shutdown`, which also tells the service's streams to stop waiting for their clients, so
/// draining the listener is not held up by a client that stopped reading.
fn signalled<F>(service: &SessionsService, shutdown: F) -> impl Future<Output = ()> + Send
where
    F: Future<Output = ()> + Send,
{
    let stop = service.stop_token();
    async move {
        shutdown.await;
        stop.cancel();
    }
}

async fn router(
    service: SessionsService,
    options: ServeOptions,
) -> std::result::Result<tonic::transport::server::Router, ServeError> {
    let health = options.health.clone();
    health
        .set_serving::<SessionsServer<SessionsService>>()
        .await;
    let health_service = tonic_health::pb::health_server::HealthServer::new(
        tonic_health::server::HealthService::from_health_reporter(health),
    );
    let (reflection, reflection_v1alpha) = reflection_services(&[SESSIONS, HEALTH])?;
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = options.tls {
        builder = builder.tls_config(tls)?;
    }
    let router = builder
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_v1alpha);
    let max_message_bytes = service.limits().max_message_bytes;
    Ok(match options.authenticator {
        Some(authenticator) => router.add_service(crate::MessageLimited::new(
            tonic::service::interceptor::InterceptedService::new(
                service.into_server(),
                authenticator.interceptor(),
            ),
            max_message_bytes,
        )),
        None => router.add_service(service.into_limited_server()),
    })
}
