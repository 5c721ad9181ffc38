//! The HTTP listener over TLS, with the `[auth.tls]` settings the gRPC listener uses: the same
//! certificate and key, the same client CAs and client-certificate mode, so an mTLS caller
//! reaches the console and `/api/v1` with the certificate it uses for gRPC.
//!
//! ```text
//!  TcpListener ─accept─▶ handshake task (JoinSet, ≤ MAX_HANDSHAKES, timeout) ─▶ axum::serve
//!                                                   │ verified client chain
//!                                                   ▼
//!                      TlsPeer (connect info) ─middleware─▶ PeerCertificates in each request
//! ```
//!
//! Handshakes run beside each other, so a client that stalls its handshake holds up nobody; they
//! belong to the listener and end with it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentsessions_console::PeerCertificates;
use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Handshakes in progress at most; further connections wait in the kernel's backlog.
const MAX_HANDSHAKES: usize = 256;
/// The only application protocol the listener speaks (axum is built with HTTP/1 alone).
const ALPN: &[&[u8]] = &[b"http/1.1"];

/// The HTTP listener's TLS: the rustls configuration and how long a handshake may take.
#[derive(Clone)]
pub struct HttpTls {
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
}

impl std::fmt::Debug for HttpTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTls")
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl HttpTls {
    /// TLS from the daemon's `[auth.tls]` settings, as the gRPC listener serves them.
    ///
    /// # Errors
    /// The settings' file, key and client-CA errors, naming the file.
    pub fn from_settings(
        settings: &agentsessions_auth::TlsSettings,
    ) -> agentsessions_auth::Result<Self> {
        let config = settings.rustls_server_config(ALPN)?;
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            handshake_timeout: settings.handshake_timeout(),
        })
    }

    /// A listener that hands `axum::serve` connections whose handshake completed.
    pub fn listen(&self, tcp: TcpListener) -> TlsListener {
        TlsListener {
            tcp,
            tls: self.clone(),
            handshakes: JoinSet::new(),
        }
    }
}

/// Who is at the other end of a TLS connection: its address and the client certificate chain
/// the handshake verified (empty without one).
#[derive(Debug, Clone)]
pub struct TlsPeer {
    /// The client's address.
    pub remote: SocketAddr,
    /// The verified client chain, end-entity first.
    pub certificates: PeerCertificates,
}

/// A [`Listener`] that accepts TCP connections and completes their TLS handshakes.
pub struct TlsListener {
    tcp: TcpListener,
    tls: HttpTls,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, TlsPeer)>>,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("tcp", &self.tcp)
            .field("handshakes", &self.handshakes.len())
            .finish_non_exhaustive()
    }
}

impl TlsListener {
    /// One handshake, bounded in time; `None` when it fails (plaintext, no or a refused client
    /// certificate, a client that gave up).
    async fn handshake(
        tls: HttpTls,
        tcp: TcpStream,
        remote: SocketAddr,
    ) -> Option<(TlsStream<TcpStream>, TlsPeer)> {
        let accepted = tokio::time::timeout(tls.handshake_timeout, tls.acceptor.accept(tcp)).await;
        let stream = match accepted {
            Ok(Ok(stream)) => stream,
            Ok(Err(err)) => {
                tracing::debug!(component = "http", %remote, error = %err, "TLS handshake failed");
                return None;
            }
            Err(_) => {
                tracing::debug!(component = "http", %remote, "TLS handshake timed out");
                return None;
            }
        };
        let chain = stream
            .get_ref()
            .1
            .peer_certificates()
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        let certificates = PeerCertificates(Arc::new(chain));
        Some((
            stream,
            TlsPeer {
                remote,
                certificates,
            },
        ))
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = TlsPeer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // Both branches are cancel safe: a handshake lives in the set, not in this future.
            tokio::select! {
                accepted = self.tcp.accept(), if self.handshakes.len() < MAX_HANDSHAKES => {
                    match accepted {
                        Ok((tcp, remote)) => {
                            let _nodelay = tcp.set_nodelay(true);
                            self.handshakes.spawn(Self::handshake(self.tls.clone(), tcp, remote));
                        }
                        Err(err) => {
                            tracing::warn!(component = "http", error = %err, "accept failed");
                            // Out of descriptors and the like: let connections close first.
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(connection)) = done {
                        return connection;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(TlsPeer {
            remote: self.tcp.local_addr()?,
            certificates: PeerCertificates(Arc::new(Vec::new())),
        })
    }
}

impl axum::extract::connect_info::Connected<IncomingStream<'_, TlsListener>> for TlsPeer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// Hands each request the client certificate chain of its connection, where the console's
/// authentication looks for it.
pub(crate) async fn peer_certificates(mut request: Request, next: Next) -> Response {
    if let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<TlsPeer>>() {
        let certificates = peer.certificates.clone();
        request.extensions_mut().insert(certificates);
    }
    next.run(request).await
}
