//! mTLS: a real tonic server on 127.0.0.1:0 with certificates generated per run.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use agentsessions_api::CallerIdentity;
use agentsessions_auth::{
    AuthConfig, AuthError, ClientAuth, ClientCertIdentifier, ClientTlsSettings, JwtSettings,
    TlsSettings,
};
use common::{Ca, TestServer, dns_san, uri_san, write};
use tonic::Code;

// The CA subject as RFC 4514 (and `openssl x509 -nameopt RFC2253`) writes it: last RDN first.
const CA_DN: &str = "O=Agentsessions Test,CN=Clients CA";

struct Pki {
    dir: tempfile::TempDir,
    server_ca: Ca,
    client_ca: Ca,
}

impl Pki {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            server_ca: Ca::root("Server CA"),
            client_ca: Ca::root("Clients CA"),
        }
    }

    /// Server TLS with the client CA bundle and `mode`.
    fn server_settings(&self, mode: ClientAuth) -> TlsSettings {
        let server = self.server_ca.server();
        let dir = self.dir.path();
        let mut tls = TlsSettings::new(
            write(dir, "server.pem", &server.cert_pem),
            write(dir, "server.key", &server.key_pem),
        );
        if mode != ClientAuth::None {
            tls = tls.with_client_ca(write(dir, "clients-ca.pem", &self.client_ca.cert_pem), mode);
        }
        tls
    }

    fn config(&self, mode: ClientAuth) -> AuthConfig {
        AuthConfig {
            require_authentication: Some(true),
            tls: Some(self.server_settings(mode)),
            ..AuthConfig::default()
        }
    }

    async fn start(&self, config: &AuthConfig) -> TestServer {
        TestServer::start(
            config.server_tls_config().unwrap().unwrap(),
            config.authenticator().unwrap(),
        )
        .await
    }

    /// Client TLS trusting the server CA, presenting `identity` if given.
    fn client(
        &self,
        name: &str,
        identity: Option<&common::Issued>,
    ) -> tonic::transport::ClientTlsConfig {
        let dir = self.dir.path();
        let mut settings =
            ClientTlsSettings::new(write(dir, "server-ca.pem", &self.server_ca.cert_pem));
        if let Some(issued) = identity {
            settings = settings.with_identity(
                write(dir, &format!("{name}.pem"), &issued.cert_pem),
                write(dir, &format!("{name}.key"), &issued.key_pem),
            );
        }
        settings.client_tls_config().unwrap()
    }
}

// extensions §1: the caller of an mTLS call is (issuing CA, certificate identity), taken from the
// verified chain only.
#[tokio::test]
async fn valid_client_certificate_yields_the_ca_and_uri_san() {
    let pki = Pki::new();
    let server = pki.start(&pki.config(ClientAuth::Require)).await;
    let alice = pki.client_ca.client_uri("spiffe://test/alice");

    server
        .check(pki.client("alice", Some(&alice)), None)
        .await
        .unwrap();

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].caller,
        Some(CallerIdentity::new(CA_DN, "spiffe://test/alice"))
    );
    server.stop().await;
}

// A configured issuer name replaces the CA's distinguished name.
#[tokio::test]
async fn configured_client_issuer_names_the_ca() {
    let pki = Pki::new();
    let mut config = pki.config(ClientAuth::Require);
    if let Some(tls) = &mut config.tls {
        tls.client_issuer = Some("corp-clients".to_owned());
    }
    let server = pki.start(&config).await;
    let bob = pki.client_ca.client(vec![dns_san("bob.test")], Some("bob"));

    server
        .check(pki.client("bob", Some(&bob)), None)
        .await
        .unwrap();

    assert_eq!(
        server.seen()[0].caller,
        Some(CallerIdentity::new("corp-clients", "bob.test"))
    );
    server.stop().await;
}

// client_auth = require: no certificate, no connection (the handler never runs).
#[tokio::test]
async fn missing_client_certificate_is_refused_when_required() {
    let pki = Pki::new();
    let server = pki.start(&pki.config(ClientAuth::Require)).await;

    let err = server
        .check(pki.client("anon", None), None)
        .await
        .unwrap_err();

    assert_ne!(err.code(), Code::Ok);
    assert!(server.seen().is_empty());
    server.stop().await;
}

// client_auth = optional with require_authentication: the handshake succeeds, the call is
// UNAUTHENTICATED with its reason.
#[tokio::test]
async fn missing_client_certificate_is_unauthenticated_when_optional() {
    let pki = Pki::new();
    let config = pki.config(ClientAuth::Optional);
    let server = pki.start(&config).await;

    let err = server
        .check(pki.client("anon", None), None)
        .await
        .unwrap_err();

    assert_eq!(err.code(), Code::Unauthenticated);
    assert_eq!(err.message(), "missing client certificate");
    assert!(server.seen().is_empty());

    // A certificate is still verified and used when presented.
    let carol = pki.client_ca.client_uri("spiffe://test/carol");
    server
        .check(pki.client("carol", Some(&carol)), None)
        .await
        .unwrap();
    assert_eq!(
        server.seen()[0].caller,
        Some(CallerIdentity::new(CA_DN, "spiffe://test/carol"))
    );
    server.stop().await;
}

// A certificate from a CA outside the bundle is refused, even with a subject that matches a real
// caller's.
#[tokio::test]
async fn certificate_from_an_unknown_ca_is_refused() {
    let pki = Pki::new();
    let server = pki.start(&pki.config(ClientAuth::Optional)).await;
    let rogue_ca = Ca::root("Clients CA");
    let mallory = rogue_ca.client_uri("spiffe://test/alice");

    let err = server
        .check(pki.client("mallory", Some(&mallory)), None)
        .await
        .unwrap_err();

    assert_ne!(err.code(), Code::Ok);
    assert!(server.seen().is_empty());
    server.stop().await;
}

// With both mTLS and tokens, a bearer token decides the identity, and the handler never sees the
// token itself.
#[tokio::test]
async fn bearer_token_takes_precedence_over_the_certificate_and_is_stripped() {
    let pki = Pki::new();
    let signer = common::Signer::es256(Some("k1"));
    let mut jwt = JwtSettings::new([common::ISSUER], common::AUDIENCE);
    jwt.jwks_file = Some(write(pki.dir.path(), "jwks.json", common::jwks(&[&signer])));
    let config = AuthConfig {
        jwt: Some(jwt),
        ..pki.config(ClientAuth::Optional)
    };
    let server = pki.start(&config).await;
    let dave = pki.client_ca.client_uri("spiffe://test/dave");
    let token = signer.sign(&common::claims("erin"));

    server
        .check(pki.client("dave", Some(&dave)), Some(&token))
        .await
        .unwrap();
    server
        .check(pki.client("dave", Some(&dave)), None)
        .await
        .unwrap();
    let expired = signer.sign(&serde_json::json!({
        "iss": common::ISSUER, "sub": "erin", "aud": common::AUDIENCE, "exp": common::now() - 3600,
    }));
    let err = server
        .check(pki.client("dave", Some(&dave)), Some(&expired))
        .await
        .unwrap_err();

    assert_eq!(err.code(), Code::Unauthenticated);
    assert_eq!(err.message(), "token expired");
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].caller,
        Some(CallerIdentity::new(common::ISSUER, "erin"))
    );
    assert_eq!(
        seen[1].caller,
        Some(CallerIdentity::new(CA_DN, "spiffe://test/dave"))
    );
    assert!(seen.iter().all(|seen| !seen.authorization_visible));
    server.stop().await;
}

// Plain TLS without client certificates and without required authentication: anonymous callers
// pass, with no identity.
#[tokio::test]
async fn anonymous_caller_has_no_identity_when_allowed() {
    let pki = Pki::new();
    let config = AuthConfig {
        tls: Some(pki.server_settings(ClientAuth::None)),
        ..AuthConfig::default()
    };
    let server = pki.start(&config).await;

    server.check(pki.client("anon", None), None).await.unwrap();

    assert_eq!(server.seen()[0].caller, None);
    server.stop().await;
}

// Subject order: first URI SAN, else first DNS SAN, else subject CN.
#[test]
fn subject_prefers_uri_then_dns_then_cn() {
    let ca = Ca::root("Clients CA");
    let identifier =
        ClientCertIdentifier::from_pem("ca.pem".as_ref(), ca.cert_pem.as_bytes(), None).unwrap();
    let cases = [
        (
            ca.client(
                vec![
                    dns_san("d.test"),
                    uri_san("spiffe://t/u1"),
                    uri_san("spiffe://t/u2"),
                ],
                Some("cn"),
            ),
            "spiffe://t/u1",
        ),
        (
            ca.client(vec![dns_san("d1.test"), dns_san("d2.test")], Some("cn")),
            "d1.test",
        ),
        (ca.client(Vec::new(), Some("just-a-cn")), "just-a-cn"),
    ];
    for (issued, want) in cases {
        let caller = identifier.identify(&[issued.cert_der]).unwrap();
        assert_eq!(caller, CallerIdentity::new(CA_DN, want));
    }
    let nameless = ca.client(Vec::new(), None);
    assert!(matches!(
        identifier.identify(&[nameless.cert_der]),
        Err(AuthError::CertificateWithoutIdentity)
    ));
}

// The issuer is the configured CA the chain anchors to, through intermediates the client sends,
// not whatever the client's certificates claim.
#[test]
fn issuer_is_the_anchoring_ca_through_intermediates() {
    let root = Ca::root("Clients CA");
    let team = root.intermediate("Team CA");
    let leaf = team.client_uri("spiffe://t/frank");
    let identifier =
        ClientCertIdentifier::from_pem("ca.pem".as_ref(), root.cert_pem.as_bytes(), None).unwrap();

    let caller = identifier
        .identify(&[leaf.cert_der.clone(), team.cert_der.clone()])
        .unwrap();
    assert_eq!(caller, CallerIdentity::new(CA_DN, "spiffe://t/frank"));

    // Without the intermediate the chain does not verify.
    assert!(matches!(
        identifier.identify(std::slice::from_ref(&leaf.cert_der)),
        Err(AuthError::UntrustedCertificate { .. })
    ));

    // A bundle holding both CAs names the nearest one.
    let bundle = format!("{}{}", root.cert_pem, team.cert_pem);
    let identifier =
        ClientCertIdentifier::from_pem("ca.pem".as_ref(), bundle.as_bytes(), None).unwrap();
    let caller = identifier.identify(&[leaf.cert_der]).unwrap();
    assert_eq!(caller.issuer, "O=Agentsessions Test,CN=Team CA");
}

// Two CAs with one subject name would make their callers indistinguishable: refused at load.
#[test]
fn bundle_with_two_cas_sharing_a_name_is_refused() {
    let first = Ca::root("Clients CA");
    let second = Ca::root("Clients CA");
    let bundle = format!("{}{}", first.cert_pem, second.cert_pem);
    let err =
        ClientCertIdentifier::from_pem("bundle.pem".as_ref(), bundle.as_bytes(), None).unwrap_err();
    assert!(matches!(err, AuthError::AmbiguousCa { .. }), "{err}");
    assert!(err.to_string().contains("bundle.pem"));
    // With one configured issuer name the overlap is deliberate.
    ClientCertIdentifier::from_pem("bundle.pem".as_ref(), bundle.as_bytes(), Some("corp")).unwrap();
}

// A chain from the wrong CA fails verification at the identity step too (defence in depth, and
// the path for certificates that expire during a long-lived connection).
#[test]
fn identify_reverifies_the_chain() {
    let ca = Ca::root("Clients CA");
    let other = Ca::root("Other CA");
    let identifier =
        ClientCertIdentifier::from_pem("ca.pem".as_ref(), ca.cert_pem.as_bytes(), None).unwrap();
    let stranger = other.client_uri("spiffe://t/x");
    let err = identifier.identify(&[stranger.cert_der]).unwrap_err();
    assert!(matches!(err, AuthError::UntrustedCertificate { .. }));
    assert_eq!(err.code(), Code::Unauthenticated);
    assert!(matches!(
        identifier.identify(&[]),
        Err(AuthError::MissingClientCertificate)
    ));
}
