//! The SDK against a real server on 127.0.0.1, once in plaintext without authorization (the
//! published server's behavior) and once with security on: TLS with a CA made in the test,
//! bearer tokens verified against a per-run key, and the owner-allowlist policy. The same flow
//! must behave the same on both.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::sync::Arc;

use agentsessions_api::{Action, CallerIdentity, OwnerAllowlistAuthorizer, RuntimeCapabilities};
use agentsessions_auth::{Authenticator, JwtVerifier};
use agentsessions_client::{Client, ExecEvent, ExecOptions, ForkOptions, uid_of, verify};
use agentsessions_harnesses::EchoHarness;
use agentsessions_model::EchoModel;
use agentsessions_server::{ServeOptions, ServerBuilder, serve_tcp, serve_tcp_with};
use agentsessions_sqlite::SqliteJournal;
use agentsessions_wire::pb;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

const ISSUER: &str = "https://idp.sdk.test";
const AUDIENCE: &str = "agentsessions";

/// A server certificate for 127.0.0.1/localhost from a CA made here: (CA PEM, cert, key).
fn server_identity() -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "SDK test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let ca = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

async fn start(dir: &tempfile::TempDir, secure: bool) -> Client {
    let journal = Arc::new(SqliteJournal::open(dir.path().join("j.db")).unwrap());
    let mut builder = ServerBuilder::new(journal, Arc::new(EchoModel::new())).harness(
        "echo",
        Arc::new(EchoHarness::new()),
        RuntimeCapabilities::default(),
    );
    if secure {
        builder = builder.authorizer(Arc::new(
            OwnerAllowlistAuthorizer::new()
                .allowing(Action::Create, CallerIdentity::new(ISSUER, "sdk-user")),
        ));
    }
    let service = builder.build().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    if !secure {
        tokio::spawn(serve_tcp(listener, service, std::future::pending()));
        return Client::dial(&addr).unwrap();
    }
    agentsessions_auth::install_crypto_provider();
    let (ca, cert, key) = server_identity();
    let mut secret = vec![0_u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut secret);
    let mut verifier = JwtVerifier::new(vec![ISSUER.to_owned()], AUDIENCE.to_owned());
    verifier
        .add_hmac_secret(
            std::path::Path::new("test"),
            &secret,
            jsonwebtoken::Algorithm::HS256,
            None,
            None,
        )
        .unwrap();
    let options = ServeOptions {
        tls: Some(ServerTlsConfig::new().identity(Identity::from_pem(cert, key))),
        authenticator: Some(Arc::new(
            Authenticator::anonymous()
                .with_jwt(verifier)
                .requiring_authentication(true),
        )),
        ..ServeOptions::default()
    };
    tokio::spawn(serve_tcp_with(
        listener,
        service,
        options,
        std::future::pending(),
    ));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({
            "iss": ISSUER, "sub": "sdk-user", "aud": AUDIENCE, "nbf": now, "exp": now + 600,
        }),
        &jsonwebtoken::EncodingKey::from_secret(&secret).unwrap(),
    )
    .unwrap();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    Client::dial_tls(&format!("https://{addr}"), tls)
        .unwrap()
        .with_bearer_token(&token)
        .unwrap()
}

#[tokio::test]
async fn exec_replay_verify_fork_and_list() {
    let dir = tempfile::tempdir().unwrap();
    flow(start(&dir, false).await).await;
}

#[tokio::test]
async fn exec_replay_verify_fork_and_list_with_security_on() {
    let dir = tempfile::tempdir().unwrap();
    flow(start(&dir, true).await).await;
}

async fn flow(mut client: Client) {
    let mut seen = Vec::new();
    let turn = client
        .exec(ExecOptions::new("hello"), |event| {
            seen.push(match event {
                ExecEvent::Session(_) => "session",
                ExecEvent::Record(_) => "record",
                ExecEvent::Delta(_) => "delta",
                ExecEvent::Progress(_) => "progress",
            });
        })
        .await
        .unwrap();
    let uid = turn.session_uid();
    assert_eq!(seen.first(), Some(&"session"));
    assert_eq!(turn.records.len(), 5);
    assert_eq!(turn.last_seq, 5);
    assert!(turn.output.contains("hello"), "{}", turn.output);

    let second = client
        .exec(
            ExecOptions {
                expected_last_seq: Some(5),
                ..ExecOptions::new("again").on(&uid)
            },
            |_| {},
        )
        .await
        .unwrap();
    assert_eq!(second.last_seq, 10);

    let records = client.replay(&uid, 0, 0).await.unwrap();
    assert_eq!(verify(&records).unwrap().records, 10);
    // A changed byte is caught, at its seq.
    let mut tampered = records.clone();
    if let Some(pb::event::Body::Message(m)) = tampered[3].event.as_mut().unwrap().body.as_mut() {
        m.role = "someone-else".into();
    }
    let fault = verify(&tampered).unwrap_err().to_string();
    assert!(fault.contains("record 4"), "{fault}");

    let children = client
        .fork(
            &uid,
            ForkOptions {
                at_seq: 5,
                count: 2,
                ..ForkOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(children.len(), 2);
    let all = client.list(1).await.unwrap();
    assert_eq!(all.len(), 3);
    assert!(all.iter().any(|s| uid_of(s) == uid));

    let stale = client
        .exec(
            ExecOptions {
                expected_last_seq: Some(1),
                ..ExecOptions::new("late").on(&uid)
            },
            |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(stale.error.code(), tonic::Code::Aborted);
    assert_eq!(
        stale.partial.session_uid(),
        uid,
        "the partial result names the session"
    );
}

// ReadRecords from the SDK: a log of several pages, read with pages in flight at once, equals the
// streamed Replay in order, for the whole log and for ranges; large records make pages end early
// at the server's byte cap inside a range, and the rest of that range is still read.
#[tokio::test]
async fn read_records_in_concurrent_pages_equals_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = start(&dir, false).await;
    let mut uid = String::new();
    // 500 turns of 5 records: 2,500 records, the first page and 2 more of 1,000. Every fifth
    // input is 40 KiB and echoed back, so 1,000 records (200 turns) hold ~3.6 MB of them: a
    // page passes the server's 3 MiB cap and ends early.
    for t in 0..500 {
        let text = if t % 5 == 0 {
            format!("{t}:{}", "x".repeat(40 * 1024))
        } else {
            format!("turn {t}")
        };
        let turn = client
            .exec(ExecOptions::new(text).on(&uid), |_| {})
            .await
            .unwrap();
        uid = turn.session_uid();
    }
    let replayed = client.replay(&uid, 0, 0).await.unwrap();
    assert_eq!(replayed.len(), 2_500);
    let page_bytes: usize = replayed[1_000..2_000]
        .iter()
        .map(prost::Message::encoded_len)
        .sum();
    assert!(
        page_bytes > 3 << 20,
        "a page must pass the cap: {page_bytes}"
    );
    let read = client.read_records(&uid, 0, 0).await.unwrap();
    assert_eq!(read.len(), replayed.len());
    assert!(read == replayed, "the paged read differs from the replay");
    for (from, to) in [(1, 1), (999, 1_001), (1_000, 2_499), (2_001, 0), (7, 3_000)] {
        let read = client.read_records(&uid, from, to).await.unwrap();
        let last = if to == 0 { 2_500 } else { to.min(2_500) };
        let seqs: Vec<i64> = read.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (from..=last).collect::<Vec<_>>(), "{from}..={to}");
        assert!(
            read[..]
                == replayed[usize::try_from(from - 1).unwrap()..usize::try_from(last).unwrap()],
            "{from}..={to}"
        );
    }
    assert!(
        client
            .read_records(&uid, 2_501, 0)
            .await
            .unwrap()
            .is_empty()
    );
}
