//! How the harness under test is reached: in process, or (with `harnesswire`) in another task
//! behind `Harness.Connect`.

use std::sync::Arc;

use agentsessions_api::Harness;
use agentsessions_harnesswire::{RemoteHarness, serve_tcp_listener};
use async_trait::async_trait;
use tokio::net::TcpListener;

/// Puts a harness behind a transport. The returned harness is what the host drives; it must
/// keep every guarantee the in-process harness has.
#[async_trait]
pub trait Transport: Send + Sync {
    /// A short name for test output.
    fn name(&self) -> &'static str;

    /// Serves `harness` over this transport and returns the host-side handle.
    async fn attach(&self, harness: Arc<dyn Harness>) -> Arc<dyn Harness>;
}

/// The harness runs in the host's process: the handle is the harness itself.
#[derive(Debug, Default, Clone, Copy)]
pub struct InProcess;

#[async_trait]
impl Transport for InProcess {
    fn name(&self) -> &'static str {
        "in-process"
    }

    async fn attach(&self, harness: Arc<dyn Harness>) -> Arc<dyn Harness> {
        harness
    }
}

/// The harness is served by `harnesswire` on a loopback TCP port and driven over
/// `Harness.Connect`: every frame crosses a real gRPC stream, as it does for a harness in
/// another process. The server task lives as long as the test's runtime.
#[derive(Debug, Default, Clone, Copy)]
pub struct Wire;

#[async_trait]
impl Transport for Wire {
    fn name(&self) -> &'static str {
        "harnesswire"
    }

    #[allow(clippy::expect_used)] // a test fixture: failing to bind loopback is a broken machine
    async fn attach(&self, harness: Arc<dyn Harness>) -> Arc<dyn Harness> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the harness server");
        let address = listener
            .local_addr()
            .expect("read the bound loopback address")
            .to_string();
        tokio::spawn(serve_tcp_listener(
            listener,
            harness,
            std::future::pending::<()>(),
        ));
        Arc::new(RemoteHarness::connect_lazy(&address).expect("dial the loopback harness server"))
    }
}
