//! How the harness under test is reached: in process, or (with `harnesswire`) in another task
//! behind `Harness.Connect`, in cleartext or over mutual TLS.

use std::sync::Arc;

use agentsessions_api::{Descriptor, EventSink, Harness, Start};
use agentsessions_harnesswire::{RemoteHarness, serve_tcp_listener};
use async_trait::async_trait;
use tokio::net::TcpListener;

use crate::tasks::FixtureTasks;

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
/// another process. The server serves until the returned handle is dropped.
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
        let server = FixtureTasks::default();
        let stopped = server.scope().stopped();
        server.scope().spawn(async move {
            // A server that fails shows up as the test's failing calls.
            let _ignored = serve_tcp_listener(listener, harness, stopped).await;
        });
        let remote =
            RemoteHarness::connect_lazy(&address).expect("dial the loopback harness server");
        Arc::new(ServedRemote {
            remote,
            _server: Arc::new(server),
        })
    }
}

/// The host-side handle of a harness a transport serves, holding the server: dropping the last
/// handle stops it.
#[derive(Debug)]
struct ServedRemote {
    remote: RemoteHarness,
    _server: Arc<FixtureTasks>,
}

#[async_trait]
impl Harness for ServedRemote {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        self.remote.describe().await
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        self.remote.run(start, sink).await
    }
}

/// [`Wire`] with security on: the harness server presents a certificate from a CA made for the
/// test and requires a client certificate from that CA; the host verifies the server and
/// presents its own certificate. Every frame of every check crosses a mutually authenticated
/// TLS stream, so the suite proves the contract holds unchanged with the harness link secured.
#[derive(Debug, Default, Clone, Copy)]
pub struct WireTls;

/// PEMs of a test CA and the certificates it issued for one harness link.
struct LinkCertificates {
    ca: String,
    server: (String, String),
    client: (String, String),
}

#[allow(clippy::expect_used)] // a test fixture: certificate generation failing is a broken build
fn link_certificates() -> LinkCertificates {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose, SanType,
    };
    let ca_key = KeyPair::generate().expect("generate the test CA key");
    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "conformance link CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .expect("self-sign the test CA");
    let ca = Issuer::new(ca_params, ca_key);
    let issue = |mut params: CertificateParams, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().expect("generate a test key");
        params.extended_key_usages = vec![usage];
        let cert = params
            .signed_by(&key, &ca)
            .expect("issue a test certificate");
        (cert.pem(), key.serialize_pem())
    };
    let mut server = CertificateParams::new(vec!["localhost".to_owned()])
        .expect("server certificate parameters");
    server
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    let mut client = CertificateParams::default();
    client.subject_alt_names = vec![SanType::URI(
        "spiffe://conformance/host"
            .try_into()
            .expect("a valid URI SAN"),
    )];
    LinkCertificates {
        ca: ca_cert.pem(),
        server: issue(server, ExtendedKeyUsagePurpose::ServerAuth),
        client: issue(client, ExtendedKeyUsagePurpose::ClientAuth),
    }
}

/// A harness served over mutual TLS on a loopback port: where it is and what a client needs.
/// The server serves until the last clone of the link is dropped.
#[derive(Debug, Clone)]
pub struct MtlsLink {
    /// The loopback port.
    pub port: u16,
    /// The CA that issued both sides' certificates (PEM).
    pub ca_pem: String,
    /// The client certificate and key the server accepts (PEM).
    pub client_pem: (String, String),
    server: Arc<FixtureTasks>,
}

impl MtlsLink {
    /// Serves `harness` on 127.0.0.1 with a server certificate from a fresh CA, requiring client
    /// certificates from that CA. The server serves until the link is dropped.
    #[allow(clippy::expect_used)] // a test fixture: failing to bind loopback is a broken machine
    pub async fn serve(harness: Arc<dyn Harness>) -> Self {
        use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
        agentsessions_auth::install_crypto_provider();
        let certs = link_certificates();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the harness server");
        let port = listener
            .local_addr()
            .expect("read the bound loopback address")
            .port();
        let server_tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(&certs.server.0, &certs.server.1))
            .client_ca_root(Certificate::from_pem(&certs.ca));
        let router = Server::builder()
            .tls_config(server_tls)
            .expect("server TLS settings")
            .add_service(agentsessions_harnesswire::HarnessService::new(harness).into_server());
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        let server = FixtureTasks::default();
        let stopped = server.scope().stopped();
        server.scope().spawn(async move {
            // A server that fails shows up as the test's failing calls.
            let _ignored = router.serve_with_incoming_shutdown(incoming, stopped).await;
        });
        Self {
            port,
            ca_pem: certs.ca,
            client_pem: certs.client,
            server: Arc::new(server),
        }
    }

    /// The host side: verifies the server against the CA and presents the client certificate
    /// (or none, to check that the server refuses such a client).
    #[allow(clippy::expect_used)] // a test fixture with settings made above
    pub fn remote(&self, with_client_certificate: bool) -> RemoteHarness {
        use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
        let mut client_tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .domain_name("localhost");
        if with_client_certificate {
            client_tls =
                client_tls.identity(Identity::from_pem(&self.client_pem.0, &self.client_pem.1));
        }
        let channel = Endpoint::from_shared(format!("https://127.0.0.1:{}", self.port))
            .expect("a valid endpoint")
            .tls_config(client_tls)
            .expect("client TLS settings")
            .tcp_nodelay(true)
            .connect_lazy();
        RemoteHarness::new(channel)
    }
}

#[async_trait]
impl Transport for WireTls {
    fn name(&self) -> &'static str {
        "harnesswire-mtls"
    }

    async fn attach(&self, harness: Arc<dyn Harness>) -> Arc<dyn Harness> {
        let link = MtlsLink::serve(harness).await;
        Arc::new(ServedRemote {
            remote: link.remote(true),
            _server: Arc::clone(&link.server),
        })
    }
}
