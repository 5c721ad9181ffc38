//! The one-call SDK entry point, [`serve()`](fn@serve), and what it is made of: a parsed
//! [`ListenAddr`], a bound [`HarnessListener`] (so a caller can learn the port of `127.0.0.1:0`
//! or print a readiness line before serving), stale unix socket reclaim
//! ([`remove_stale_socket`]) and the process signals that stop a server ([`shutdown_signal`]).

use std::fmt;
use std::future::Future;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use agentsessions_api::Harness;
use tokio::net::{TcpListener, UnixListener};

use crate::address::{AddressRole, AddressTarget};
use crate::error::{HarnessWireError, Result};
use crate::serve::serve_unix_listener;

/// Where a harness listens: the listen side of the [address grammar](crate::address).
///
/// | text | meaning |
/// |---|---|
/// | `unix:/run/h.sock`, `unix:///run/h.sock` | unix socket, absolute path |
/// | `unix:h.sock`, `unix://h.sock` | unix socket, path relative to the working directory |
/// | `127.0.0.1:7070`, `[::1]:7070` | TCP on that IP; port `0` picks a free one |
/// | `localhost:7070` | TCP on `127.0.0.1` |
/// | `:7070` | TCP on every IPv4 interface |
///
/// Anything else (a URL such as `http://…`, a missing port, an empty socket path, a host name
/// other than `localhost`) is refused with [`HarnessWireError::InvalidListenAddress`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP socket address.
    Tcp(SocketAddr),
    /// A unix socket path.
    Unix(PathBuf),
}

impl ListenAddr {
    /// Parses one of the forms in the type docs.
    ///
    /// # Errors
    ///
    /// [`HarnessWireError::InvalidListenAddress`] naming what is wrong.
    pub fn parse(address: &str) -> Result<Self> {
        let invalid = |reason| HarnessWireError::InvalidListenAddress {
            address: address.to_owned(),
            reason,
        };
        let (host, port) =
            match AddressTarget::parse(address, AddressRole::Listen).map_err(invalid)? {
                AddressTarget::Unix(path) => return Ok(Self::Unix(path)),
                AddressTarget::Tcp { host, port, .. } => (host, port),
            };
        let ip = match host.as_str() {
            "" => Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            "localhost" => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            literal => match literal.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
                Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
                None => literal.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
            },
        };
        let ip =
            ip.ok_or_else(|| invalid("listen on an IP address or localhost, not a host name"))?;
        Ok(Self::Tcp(SocketAddr::new(ip, port)))
    }

    /// Binds the address. A unix path left behind by a crashed server is reclaimed first (see
    /// [`remove_stale_socket`]).
    ///
    /// # Errors
    ///
    /// [`HarnessWireError::Bind`] when the address cannot be bound;
    /// [`HarnessWireError::SocketInUse`] or [`HarnessWireError::NotASocket`] when a unix path is
    /// taken.
    pub async fn bind(&self) -> Result<HarnessListener> {
        match self {
            Self::Tcp(addr) => {
                let listener =
                    TcpListener::bind(addr)
                        .await
                        .map_err(|source| HarnessWireError::Bind {
                            address: addr.to_string(),
                            source,
                        })?;
                Ok(HarnessListener::Tcp(listener))
            }
            Self::Unix(path) => {
                remove_stale_socket(path)?;
                let listener =
                    UnixListener::bind(path).map_err(|source| HarnessWireError::Bind {
                        address: path.display().to_string(),
                        source,
                    })?;
                Ok(HarnessListener::Unix {
                    listener,
                    path: path.clone(),
                })
            }
        }
    }
}

impl FromStr for ListenAddr {
    type Err = HarnessWireError;

    fn from_str(address: &str) -> Result<Self> {
        Self::parse(address)
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(addr) => write!(f, "{addr}"),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// A bound harness listener, not yet serving.
#[derive(Debug)]
pub enum HarnessListener {
    /// A TCP listener.
    Tcp(TcpListener),
    /// A unix listener and its socket file (removed when serving ends).
    Unix {
        /// The listener.
        listener: UnixListener,
        /// The socket file.
        path: PathBuf,
    },
}

impl HarnessListener {
    /// Where the listener is bound, in a form a host can dial: `127.0.0.1:41234` (the real port
    /// when `0` was asked for) or `unix:/path`.
    pub fn local_addr(&self) -> String {
        match self {
            Self::Tcp(listener) => listener
                .local_addr()
                .map_or_else(|_| "tcp:unknown".to_owned(), |addr| addr.to_string()),
            Self::Unix { path, .. } => format!("unix:{}", path.display()),
        }
    }

    /// Serves `harness` (with gRPC health) until `shutdown` completes; a unix socket file is
    /// removed afterwards.
    ///
    /// # Errors
    ///
    /// [`HarnessWireError::Serve`] when the server fails.
    pub async fn serve<H, F>(self, harness: Arc<H>, shutdown: F) -> Result<()>
    where
        H: Harness + ?Sized + 'static,
        F: Future<Output = ()> + Send,
    {
        self.serve_tls(harness, None, shutdown).await
    }

    /// [`HarnessListener::serve`] over TLS when `tls` is set (TCP only; see
    /// [`serve_tcp_listener_tls`](crate::serve::serve_tcp_listener_tls)).
    ///
    /// # Errors
    ///
    /// [`HarnessWireError::InvalidTls`] for TLS on a unix socket (protected by its file
    /// permissions instead); [`HarnessWireError::Serve`] when the server fails.
    pub async fn serve_tls<H, F>(
        self,
        harness: Arc<H>,
        tls: Option<tonic::transport::ServerTlsConfig>,
        shutdown: F,
    ) -> Result<()>
    where
        H: Harness + ?Sized + 'static,
        F: Future<Output = ()> + Send,
    {
        match self {
            Self::Tcp(listener) => {
                crate::serve::serve_tcp_listener_tls(listener, harness, tls, shutdown).await
            }
            Self::Unix { listener, path } if tls.is_some() => {
                drop(listener);
                let _ignored = std::fs::remove_file(&path);
                Err(HarnessWireError::InvalidTls {
                    address: format!("unix:{}", path.display()),
                    reason: "TLS applies to TCP listeners; a unix socket is protected by its \
                             file permissions"
                        .to_owned(),
                })
            }
            Self::Unix { listener, path } => {
                serve_unix_listener(listener, &path, harness, shutdown).await
            }
        }
    }
}

/// Removes a unix socket file that no server answers any more, so the path can be bound again.
/// Nothing at `path` is fine. A socket that still accepts connections, and anything that is not
/// a socket, are left alone and reported.
///
/// # Errors
///
/// [`HarnessWireError::SocketInUse`], [`HarnessWireError::NotASocket`], or
/// [`HarnessWireError::Bind`] when the path cannot be inspected or removed.
pub fn remove_stale_socket(path: &Path) -> Result<()> {
    let bind_error = |source| HarnessWireError::Bind {
        address: path.display().to_string(),
        source,
    };
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(bind_error(err)),
    };
    if !metadata.file_type().is_socket() {
        return Err(HarnessWireError::NotASocket {
            path: path.display().to_string(),
        });
    }
    // A unix connect answers at once: refused means nobody listens behind the file.
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(HarnessWireError::SocketInUse {
            path: path.display().to_string(),
        }),
        Err(err) if err.kind() == ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "removing a stale harness socket");
            match std::fs::remove_file(path) {
                Ok(()) => Ok(()),
                Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
                Err(err) => Err(bind_error(err)),
            }
        }
        Err(err) => Err(bind_error(err)),
    }
}

/// Completes on the first SIGINT (ctrl-c) or SIGTERM this process receives.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %err, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = interrupt => tracing::info!("SIGINT: shutting down"),
        () = terminate => tracing::info!("SIGTERM: shutting down"),
    }
}

/// Serves `harness` on `address` (any [`ListenAddr`] form) with gRPC health until the process
/// gets SIGINT or SIGTERM, then drains running executions and returns. This is the one call a
/// harness author needs:
///
/// ```no_run
/// # use std::sync::Arc;
/// # async fn run(harness: Arc<dyn agentsessions_api::Harness>) -> agentsessions_harnesswire::Result<()> {
/// agentsessions_harnesswire::serve("unix:/tmp/my-harness.sock", harness).await
/// # }
/// ```
///
/// # Errors
///
/// [`HarnessWireError::InvalidListenAddress`] before anything is bound; then whatever
/// [`ListenAddr::bind`] and [`HarnessListener::serve`] report.
pub async fn serve<H>(address: &str, harness: Arc<H>) -> Result<()>
where
    H: Harness + ?Sized + 'static,
{
    let listener = ListenAddr::parse(address)?.bind().await?;
    tracing::info!(address = %listener.local_addr(), "harness ready");
    listener.serve(harness, shutdown_signal()).await
}

#[cfg(test)]
#[allow(clippy::assertions_on_result_states)] // the refusals are the assertions
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_parse_or_are_refused() {
        let ok = [
            ("unix:/run/h.sock", ListenAddr::Unix("/run/h.sock".into())),
            ("unix:///run/h.sock", ListenAddr::Unix("/run/h.sock".into())),
            ("unix:h.sock", ListenAddr::Unix("h.sock".into())),
            (
                "127.0.0.1:0",
                ListenAddr::Tcp(SocketAddr::from(([127, 0, 0, 1], 0))),
            ),
            (
                "localhost:7070",
                ListenAddr::Tcp(SocketAddr::from(([127, 0, 0, 1], 7070))),
            ),
            (":80", ListenAddr::Tcp(SocketAddr::from(([0, 0, 0, 0], 80)))),
            ("[::1]:9", ListenAddr::Tcp("[::1]:9".parse().unwrap())),
        ];
        for (text, want) in ok {
            assert_eq!(ListenAddr::parse(text).unwrap(), want, "{text}");
        }
        for bad in [
            "http://127.0.0.1:80",
            "127.0.0.1",
            "unix:",
            "unix://",
            "example.com:80",
            "127.0.0.1:99999",
            "",
        ] {
            assert!(
                matches!(
                    ListenAddr::parse(bad),
                    Err(HarnessWireError::InvalidListenAddress { .. })
                ),
                "{bad}"
            );
        }
        assert_eq!(
            ListenAddr::parse("unix:///a.sock").unwrap().to_string(),
            "unix:/a.sock"
        );
    }

    #[tokio::test]
    async fn stale_sockets_are_reclaimed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sock");
        remove_stale_socket(&path).unwrap();

        let live = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(matches!(
            remove_stale_socket(&path),
            Err(HarnessWireError::SocketInUse { .. })
        ));
        drop(live);
        remove_stale_socket(&path).unwrap();
        assert!(!path.exists());

        std::fs::write(&path, b"not a socket").unwrap();
        assert!(matches!(
            ListenAddr::Unix(path.clone()).bind().await,
            Err(HarnessWireError::NotASocket { .. })
        ));
    }
}
