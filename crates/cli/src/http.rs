//! The daemon's HTTP listener (`--http-addr`, off unless set): one axum router for everything a
//! person or a scraper reaches over HTTP. Each part is a router built where its job lives and
//! merged here, in [`router`], so the listener, its shutdown and its address are set up once.
//! When the daemon serves gRPC over TLS, this listener serves HTTPS with the same settings
//! ([`tls`]), and a client certificate authenticates its requests as it does gRPC calls.

pub mod tls;

use std::future::Future;
use std::sync::Arc;

use agentsessions_server::SessionsService;
use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;

/// What the HTTP parts are built from.
#[derive(Clone)]
pub struct HttpParts {
    /// The Sessions service the gRPC listener serves; HTTP reads and actions go through it, so
    /// they obey the same validation, authorization and ownership rules.
    pub service: SessionsService,
    /// The authenticator of the gRPC listener (`None`: anonymous callers), so HTTP callers
    /// authenticate the same way.
    pub authenticator: Option<Arc<agentsessions_auth::Authenticator>>,
    /// The journal the service writes, read at scrape time for the gauges of `/metrics`
    /// (sessions by compute state, pending approvals).
    pub journal: Arc<dyn agentsessions_journal::Journal>,
    /// The project the gauges count.
    pub project: String,
}

impl std::fmt::Debug for HttpParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpParts").finish_non_exhaustive()
    }
}

/// The router the HTTP listener serves: `GET /healthz` (200 while the daemon serves), and the
/// parts merged in: the web console (`/`, `/assets/*`), its JSON API (`/api/v1/*`) and the
/// Prometheus metrics (`/metrics`).
pub fn router(parts: HttpParts) -> Router {
    let HttpParts {
        service,
        authenticator,
        journal,
        project,
    } = parts;
    let console = agentsessions_console::Console::new(service).with_authenticator(authenticator);
    Router::new()
        .route("/healthz", get(healthz))
        .merge(agentsessions_console::router(console))
        .merge(crate::observability::metrics_router(journal, &project))
        .layer(axum::middleware::from_fn(
            agentsessions_telemetry::trace_requests,
        ))
}

/// Liveness for load balancers and scripts: the listener answers only while the daemon runs.
async fn healthz() -> &'static str {
    "ok\n"
}

/// Serves `router` on `listener` until `shutdown` completes; requests in flight then finish.
/// With `tls`, connections are TLS and each request carries its connection's verified client
/// certificate chain for authentication.
///
/// # Errors
/// Transport failures of the listener.
pub async fn serve_http<F>(
    listener: TcpListener,
    router: Router,
    tls: Option<tls::HttpTls>,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    match tls {
        None => {
            axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
        }
        Some(tls) => {
            let router = router.layer(axum::middleware::from_fn(tls::peer_certificates));
            axum::serve(
                tls.listen(listener),
                router.into_make_service_with_connect_info::<tls::TlsPeer>(),
            )
            .with_graceful_shutdown(shutdown)
            .await
        }
    }
}
