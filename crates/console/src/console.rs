//! [`Console`]: what every console request shares — the Sessions service it drives, how callers
//! authenticate, and which `Host` names it answers to.

use std::sync::Arc;

use agentsessions_auth::Authenticator;
use agentsessions_server::SessionsService;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The console's state: build one, then serve [`crate::router`] with it.
#[derive(Debug, Clone)]
pub struct Console {
    pub(crate) service: SessionsService,
    pub(crate) authenticator: Option<Arc<Authenticator>>,
    pub(crate) allowed_hosts: Vec<String>,
    /// Ends the live streams, so a listener draining for shutdown is not held open by them.
    pub(crate) stop: CancellationToken,
    /// The live streams' followers; [`Console::shutdown`] waits for them.
    pub(crate) tasks: TaskTracker,
}

impl Console {
    /// A console over `service` (the same one the gRPC listener serves, so both see the same
    /// sessions, policy and turns). Callers are anonymous until
    /// [`Console::with_authenticator`].
    pub fn new(service: SessionsService) -> Self {
        Self {
            stop: service.stopping(),
            service,
            authenticator: None,
            allowed_hosts: Vec::new(),
            tasks: TaskTracker::new(),
        }
    }

    /// Authenticates every request with `authenticator`, the one the gRPC listener uses:
    /// bearer tokens in `Authorization`, and client certificates when the HTTP listener serves
    /// TLS and hands them over as [`crate::PeerCertificates`].
    #[must_use]
    pub fn with_authenticator(mut self, authenticator: Option<Arc<Authenticator>>) -> Self {
        self.authenticator = authenticator;
        self
    }

    /// Answers only requests whose `Host` is one of `hosts` (`host:port`, compared without
    /// case), so a web page whose name an attacker points at this address cannot read it (DNS
    /// rebinding). Empty: any host.
    #[must_use]
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = hosts
            .into_iter()
            .map(|host| host.to_ascii_lowercase())
            .collect();
        self
    }

    /// Ends the live streams and waits for their followers to finish. Call it when the HTTP
    /// listener starts draining (its graceful shutdown waits for open streams).
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// The loopback names a console bound to `addr` on a loopback address is reached by:
    /// `127.0.0.1:port`, `localhost:port` and `[::1]:port`.
    pub fn loopback_hosts(addr: std::net::SocketAddr) -> Vec<String> {
        let port = addr.port();
        vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ]
    }
}
