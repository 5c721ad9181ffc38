//! Test PKI and token keys, generated fresh in every run, plus a TLS server on 127.0.0.1:0.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentsessions_api::CallerIdentity;
use agentsessions_auth::{Authenticated, Authenticator};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::CertificateDer;
use tokio::sync::oneshot;
use tonic::Request;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint, Server, ServerTlsConfig};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// A certificate authority.
pub struct Ca {
    pub cert_pem: String,
    pub cert_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

/// An issued certificate and its key.
pub struct Issued {
    pub cert_pem: String,
    pub cert_der: CertificateDer<'static>,
    pub key_pem: String,
}

impl Ca {
    /// A self-signed root with subject `CN=<cn>,O=Agentsessions Test`.
    pub fn root(cn: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let params = ca_params(cn);
        let cert = params.self_signed(&key).unwrap();
        Self {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    /// An intermediate CA signed by this one.
    pub fn intermediate(&self, cn: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let params = ca_params(cn);
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Self {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self) -> Issued {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "server");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate with the given SANs and subject CN.
    pub fn client(&self, sans: Vec<SanType>, cn: Option<&str>) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.subject_alt_names = sans;
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }

    /// A client certificate whose subject is the URI `uri`.
    pub fn client_uri(&self, uri: &str) -> Issued {
        self.client(vec![uri_san(uri)], Some("ignored-cn"))
    }

    fn issue(&self, params: CertificateParams) -> Issued {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Issued {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            key_pem: key.serialize_pem(),
        }
    }
}

fn ca_params(cn: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Agentsessions Test");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

pub fn uri_san(uri: &str) -> SanType {
    SanType::URI(uri.try_into().unwrap())
}

pub fn dns_san(name: &str) -> SanType {
    SanType::DnsName(name.try_into().unwrap())
}

/// Writes `contents` to `dir/name`.
pub fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// A token signing key.
pub struct Signer {
    pub algorithm: Algorithm,
    pub kid: Option<String>,
    pub encoding: EncodingKey,
    pub public_pem: String,
}

impl Signer {
    pub fn es256(kid: Option<&str>) -> Self {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        Self {
            algorithm: Algorithm::ES256,
            kid: kid.map(str::to_owned),
            encoding: EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).unwrap(),
            public_pem: key.public_key_pem(),
        }
    }

    pub fn rs256(kid: Option<&str>) -> Self {
        // RSA key generation is slow; one key per test binary is enough.
        static PEM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let pem = PEM.get_or_init(|| {
            KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
                .unwrap()
                .serialize_pem()
        });
        let key = KeyPair::from_pem(pem).unwrap();
        Self {
            algorithm: Algorithm::RS256,
            kid: kid.map(str::to_owned),
            encoding: EncodingKey::from_rsa_pem(key.serialize_pem().as_bytes()).unwrap(),
            public_pem: key.public_key_pem(),
        }
    }

    /// The public half as a JWK with `kid` and `alg`.
    pub fn jwk(&self) -> Jwk {
        let mut jwk = Jwk::from_encoding_key(&self.encoding, self.algorithm).unwrap();
        jwk.common.key_id = self.kid.clone();
        jwk
    }

    /// Signs `claims` with this key's algorithm and kid.
    pub fn sign(&self, claims: &serde_json::Value) -> String {
        let mut header = Header::new(self.algorithm);
        header.kid = self.kid.clone();
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }

    /// Signs `claims` but names `kid` in the header.
    pub fn sign_as(&self, kid: &str, claims: &serde_json::Value) -> String {
        let mut header = Header::new(self.algorithm);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// A JWKS document with the public halves of `signers`.
pub fn jwks(signers: &[&Signer]) -> String {
    let set = JwkSet {
        keys: signers.iter().map(|signer| signer.jwk()).collect(),
    };
    serde_json::to_string(&set).unwrap()
}

pub const ISSUER: &str = "https://idp.test";
pub const AUDIENCE: &str = "agentsessions";

/// Valid claims for `sub`, expiring in an hour.
pub fn claims(sub: &str) -> serde_json::Value {
    serde_json::json!({
        "iss": ISSUER,
        "sub": sub,
        "aud": [AUDIENCE, "other"],
        "iat": now(),
        "nbf": now() - 5,
        "exp": now() + 3600,
    })
}

/// What the server saw for each call that passed authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub caller: Option<CallerIdentity>,
    pub authorization_visible: bool,
}

/// A health service behind TLS and the authenticator, on 127.0.0.1:0.
pub struct TestServer {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start(tls: ServerTlsConfig, auth: Authenticator) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_reporter, health) = tonic_health::server::health_reporter();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let mut interceptor = Arc::new(auth).interceptor();
        let service = InterceptedService::new(health, move |request: Request<()>| {
            let request = interceptor.call(request)?;
            let caller = Authenticated::of(&request).unwrap().cloned();
            record.lock().unwrap().push(Seen {
                caller,
                authorization_visible: request.metadata().get("authorization").is_some(),
            });
            Ok(request)
        });
        let (shutdown, stop) = oneshot::channel::<()>();
        let router = Server::builder()
            .tls_config(tls)
            .unwrap()
            .add_service(service);
        let task = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            router
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stop.await;
                })
                .await
                .unwrap();
        });
        Self {
            addr,
            seen,
            shutdown: Some(shutdown),
            task,
        }
    }

    /// One health check over a fresh TLS connection, with an optional bearer token.
    pub async fn check(
        &self,
        tls: ClientTlsConfig,
        token: Option<&str>,
    ) -> Result<(), tonic::Status> {
        let endpoint = Endpoint::from_shared(format!("https://127.0.0.1:{}", self.addr.port()))
            .unwrap()
            .tls_config(tls.domain_name("localhost"))
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(5));
        let channel: Channel = match endpoint.connect().await {
            Ok(channel) => channel,
            Err(err) => return Err(tonic::Status::unavailable(err.to_string())),
        };
        let mut request = Request::new(HealthCheckRequest::default());
        if let Some(token) = token {
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        HealthClient::new(channel).check(request).await.map(|_| ())
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}
