//! The serving helpers: everything a harness author calls after implementing
//! [`Harness::describe`] and [`Harness::run`].
//!
//! Each helper serves `agentsessions.v1.Harness` plus the standard `grpc.health.v1.Health`
//! service (reporting SERVING for the empty service name and for `agentsessions.v1.Harness`) over
//! cleartext HTTP/2, until `shutdown` completes. Shutdown is graceful: the listener closes at
//! once, and executions still running are allowed to finish before the helper returns (a host
//! that wants them gone cancels them).

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use agentsessions_api::Harness;
use agentsessions_wire::pb::harness_server::HarnessServer;
use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Server, ServerTlsConfig};

use crate::error::{HarnessWireError, Result};
use crate::service::HarnessService;

/// Serves `harness` on TCP `addr` until `shutdown` completes.
///
/// # Errors
///
/// [`HarnessWireError::Bind`] when `addr` cannot be bound; [`HarnessWireError::Serve`] when the
/// server fails.
pub async fn serve_tcp<H, F>(addr: SocketAddr, harness: Arc<H>, shutdown: F) -> Result<()>
where
    H: Harness + ?Sized + 'static,
    F: Future<Output = ()> + Send,
{
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| HarnessWireError::Bind {
            address: addr.to_string(),
            source,
        })?;
    serve_tcp_listener(listener, harness, shutdown).await
}

/// Serves `harness` on an already bound TCP listener (bind `127.0.0.1:0` and read the port
/// first, as tests do) until `shutdown` completes.
///
/// # Errors
///
/// [`HarnessWireError::Serve`] when the server fails.
pub async fn serve_tcp_listener<H, F>(
    listener: TcpListener,
    harness: Arc<H>,
    shutdown: F,
) -> Result<()>
where
    H: Harness + ?Sized + 'static,
    F: Future<Output = ()> + Send,
{
    serve_tcp_listener_tls(listener, harness, None, shutdown).await
}

/// [`serve_tcp_listener`] over TLS when `tls` is set: the host must dial `https://` and trust
/// the server's certificate; with a client CA in `tls`, it must also present a certificate
/// that CA issued (mutual TLS). A harness link that crosses an untrusted network needs this.
///
/// # Errors
///
/// [`HarnessWireError::Serve`] when the TLS settings are refused or the server fails.
pub async fn serve_tcp_listener_tls<H, F>(
    listener: TcpListener,
    harness: Arc<H>,
    tls: Option<ServerTlsConfig>,
    shutdown: F,
) -> Result<()>
where
    H: Harness + ?Sized + 'static,
    F: Future<Output = ()> + Send,
{
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, tls = tls.is_some(), "serving harness");
    }
    // Frames are small and interactive: Nagle's algorithm would hold each one back.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    serve_incoming(incoming, harness, tls, shutdown).await
}

/// Serves `harness` on a unix socket at `path` until `shutdown` completes, then removes the
/// socket file. The path must not exist: a stale socket left by a crashed process is the
/// caller's to remove (only the caller knows that no live server owns it).
///
/// # Errors
///
/// [`HarnessWireError::Bind`] when the socket cannot be created (the path exists, or its
/// directory does not); [`HarnessWireError::Serve`] when the server fails.
pub async fn serve_unix<H, F>(path: impl AsRef<Path>, harness: Arc<H>, shutdown: F) -> Result<()>
where
    H: Harness + ?Sized + 'static,
    F: Future<Output = ()> + Send,
{
    let path = path.as_ref();
    let listener = UnixListener::bind(path).map_err(|source| HarnessWireError::Bind {
        address: path.display().to_string(),
        source,
    })?;
    serve_unix_listener(listener, path, harness, shutdown).await
}

/// Serves `harness` on a bound unix `listener` whose socket file is `path`, then removes the file.
pub(crate) async fn serve_unix_listener<H, F>(
    listener: UnixListener,
    path: &Path,
    harness: Arc<H>,
    shutdown: F,
) -> Result<()>
where
    H: Harness + ?Sized + 'static,
    F: Future<Output = ()> + Send,
{
    tracing::info!(path = %path.display(), "serving harness");
    let served = serve_incoming(UnixListenerStream::new(listener), harness, None, shutdown).await;
    // The owner may already have removed it (a runtime tearing down without waiting).
    if let Err(err) = std::fs::remove_file(path)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %err, "could not remove the harness socket");
    }
    served
}

async fn serve_incoming<H, F, I, IO, IE>(
    incoming: I,
    harness: Arc<H>,
    tls: Option<ServerTlsConfig>,
    shutdown: F,
) -> Result<()>
where
    H: Harness + ?Sized + 'static,
    F: Future<Output = ()> + Send,
    I: tokio_stream::Stream<Item = std::result::Result<IO, IE>> + Send,
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<HarnessServer<HarnessService<H>>>()
        .await;
    let mut server = Server::builder();
    if let Some(tls) = tls {
        server = server.tls_config(tls).map_err(HarnessWireError::Serve)?;
    }
    server
        .add_service(health)
        .add_service(HarnessService::new(harness).into_server())
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(HarnessWireError::Serve)
}
