//! The daemon's HTTP listener: off unless `--http-addr` is set; when set it prints its address,
//! answers `/healthz`, and refuses to share a port with the Sessions listener. When the daemon
//! serves TLS (`[auth.tls]`), the HTTP listener serves HTTPS with the same settings: an mTLS
//! caller (certificates made in the test with rcgen) reads and approves in the console's API as
//! the identity its certificate names, exactly as over gRPC; without a client certificate, or in
//! plaintext, it is refused; bearer tokens work over HTTPS too, beside optional certificates.

#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;

use common::ca::Ca;
use common::{Daemon, fixture_server, write};
use serde_json::{Value, json};

/// One HTTP/1.1 GET on a fresh connection; the whole answer as text.
fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_http_listener_serves_healthz_when_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Daemon::command();
    command.current_dir(dir.path()).args([
        "--addr",
        "127.0.0.1:0",
        "--journal",
        "sessions.db",
        "--http-addr",
        "127.0.0.1:0",
    ]);
    let daemon = Daemon::spawn(command, false);
    assert!(daemon.http.starts_with("127.0.0.1:"), "{}", daemon.http);
    assert_ne!(daemon.http, daemon.addr);
    let answer = get(&daemon.http, "/healthz");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok\n"), "{answer}");
    let missing = get(&daemon.http, "/no-such-page");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
}

#[test]
fn the_http_listener_may_not_share_the_sessions_port() {
    let dir = tempfile::tempdir().unwrap();
    let output = Daemon::command()
        .current_dir(dir.path())
        .args([
            "--addr",
            "127.0.0.1:47011",
            "--journal",
            "sessions.db",
            "--http-addr",
            "127.0.0.1:47011",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--http-addr"), "{stderr}");
}

/// A certificate and its key, in one PEM text (how the console's TLS files take them).
fn joined((cert, key): (String, String)) -> String {
    format!("{cert}{key}")
}

const ALICE: &str = "spiffe://example/alice";
const BOB: &str = "spiffe://example/bob";
const CLIENT_ISSUER: &str = "corp-clients";

/// The daemon in `dir` with `config` (which names the journal and `[auth]`), gRPC and HTTP on
/// 127.0.0.1.
fn tls_daemon(dir: &Path, config: &str) -> Daemon {
    let path = write(dir, "agentsessionsd.toml", config);
    let mut command = Daemon::command();
    command
        .current_dir(dir)
        .args([
            "--addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--config",
            &path,
        ])
        .stderr(Stdio::null());
    Daemon::spawn(command, false)
}

/// An HTTPS client trusting `ca`, presenting `identity` (certificate and key PEM) when given;
/// a request waits at most 5 s (less than a TLS handshake may take).
fn https_client(ca: &Ca, identity: Option<&str>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .tls_certs_only([reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap()]);
    if let Some(identity) = identity {
        builder = builder.identity(reqwest::Identity::from_pem(identity.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

async fn get_json(client: &reqwest::Client, url: &str) -> (reqwest::StatusCode, Value) {
    let response = client.get(url).send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn uids(page: &Value) -> Vec<String> {
    page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["metadata"]["uid"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_client_certificates_reads_and_approves_as_the_certificate_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new("Console Test CA");
    let server = joined(ca.server());
    write(d, "server.pem", &server);
    write(d, "server.key", &server);
    write(d, "ca.pem", &ca.pem);
    let alice = joined(ca.client(ALICE));
    let bob = joined(ca.client(BOB));
    let alice_pem = write(d, "alice.pem", &alice);
    let bob_pem = write(d, "bob.pem", &bob);
    let config = format!(
        "journal = \"agents.db\"\n\
         model = \"directive\"\n\
         model_provider = \"directive\"\n\
         [auth.tls]\ncert = \"server.pem\"\nkey = \"server.key\"\nclient_ca = \"ca.pem\"\n\
         client_auth = \"require\"\nclient_issuer = \"{CLIENT_ISSUER}\"\n\
         [auth.authorization]\npolicy = \"owner_allowlist\"\n\
         [[auth.authorization.allow]]\nactions = [\"create\", \"approve\"]\nissuer = \"{CLIENT_ISSUER}\"\nsubject = \"{ALICE}\"\n\
         [[auth.authorization.allow]]\nactions = [\"create\"]\nissuer = \"{CLIENT_ISSUER}\"\nsubject = \"{BOB}\"\n\
         [[mcp_servers]]\nname = \"fixture\"\ncommand = \"{server}\"\n\
         env = {{ MCP_FIXTURE_COUNT_FILE = \"{count}\" }}\napproval = [\"count\"]\n",
        server = fixture_server().display(),
        count = d.join("count").display(),
    );
    let daemon = tls_daemon(d, &config);
    let (cert, key) = ca.client(ALICE);
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&ca.pem))
        .identity(tonic::transport::Identity::from_pem(cert, key))
        .domain_name("localhost");
    common::mcp_up(format!("https://{}", daemon.addr), Some(tls), &["fixture"]).await;
    let ca_path = d.join("ca.pem");
    let ca_path = ca_path.to_str().unwrap();
    // Turns over gRPC with the same certificates: alice's parks on its approval.
    let as_caller = |pem: &str, args: &[&str]| {
        let mut all = vec![
            "--server",
            &daemon.addr,
            "--tls-ca",
            ca_path,
            "--tls-cert",
            pem,
            "--tls-key",
            pem,
        ];
        all.extend(args);
        common::ctl(d, &all)
    };
    let out = common::parked(&as_caller(
        &alice_pem,
        &["exec", "--harness", "chat", "/tool fixture__count {}"],
    ));
    let hers = out
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session line in {out}"))
        .to_owned();
    let his = common::stdout(&as_caller(&bob_pem, &["create", "--name", "bobs"]))
        .trim()
        .to_owned();
    let base = format!("https://{}", daemon.http);

    // Each certificate is its caller, with the issuer and subject gRPC gives it.
    let alice_http = https_client(&ca, Some(&alice));
    let bob_http = https_client(&ca, Some(&bob));
    let (status, me) = get_json(&alice_http, &format!("{base}/api/v1/me")).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{me}");
    assert_eq!(me["subject"], ALICE);
    assert_eq!(me["issuer"], CLIENT_ISSUER);
    let (_, listed) = get_json(&alice_http, &format!("{base}/api/v1/sessions")).await;
    assert_eq!(uids(&listed), vec![hers.clone()], "{listed}");
    let (_, listed) = get_json(&bob_http, &format!("{base}/api/v1/sessions")).await;
    assert_eq!(uids(&listed), vec![his.clone()], "{listed}");
    let (status, hidden) = get_json(&bob_http, &format!("{base}/api/v1/sessions/{hers}")).await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND, "{hidden}");
    let (_, approvals) = get_json(&bob_http, &format!("{base}/api/v1/approvals")).await;
    assert!(
        approvals["approvals"].as_array().unwrap().is_empty(),
        "{approvals}"
    );

    // Bob cannot decide alice's call; alice can, and the decision's actor is her certificate.
    let decide = |client: &reqwest::Client| {
        client
            .post(format!("{base}/api/v1/sessions/{hers}/decision"))
            .header("x-agentsessions-csrf", "1")
            .header("content-type", "application/json")
            .body(json!({"approved": true}).to_string())
            .send()
    };
    let refused = decide(&bob_http).await.unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::NOT_FOUND);
    let decided = decide(&alice_http).await.unwrap();
    assert_eq!(decided.status(), reqwest::StatusCode::OK);
    let decided: Value = serde_json::from_str(&decided.text().await.unwrap()).unwrap();
    let actor = &decided["decision"]["event"]["actor"];
    assert_eq!(actor["subject"], ALICE, "{decided}");
    assert_eq!(actor["issuer"], CLIENT_ISSUER, "{decided}");
    assert_eq!(decided["session"]["exec_state"], "EXEC_COMPLETED");
    assert_eq!(
        std::fs::read_to_string(d.join("count")).unwrap().trim(),
        "1"
    );

    // mTLS is required: no client certificate, or one from another CA, gets no answer.
    let anonymous = https_client(&ca, None)
        .get(format!("{base}/api/v1/sessions"))
        .send()
        .await;
    assert!(anonymous.is_err(), "{anonymous:?}");
    let stranger = joined(Ca::new("Other CA").client("spiffe://example/intruder"));
    let stranger = https_client(&ca, Some(&stranger))
        .get(format!("{base}/api/v1/sessions"))
        .send()
        .await;
    assert!(stranger.is_err(), "{stranger:?}");
    // Plaintext to the TLS listener is no HTTP at all.
    let plaintext = reqwest::Client::new()
        .get(format!("http://{}/healthz", daemon.http))
        .send()
        .await;
    assert!(plaintext.is_err(), "{plaintext:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_optional_client_certificates_takes_bearer_tokens_too() {
    const ISSUER: &str = "https://idp.http.test";
    const AUDIENCE: &str = "agentsessions-http";
    const SECRET: &str = "http-tls-test-secret-of-more-than-32-bytes";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new("Console Test CA");
    let server = joined(ca.server());
    write(d, "server.pem", &server);
    write(d, "server.key", &server);
    write(d, "hmac.key", SECRET);
    write(d, "ca.pem", &ca.pem);
    let config = format!(
        "journal = \"agents.db\"\n\
         [auth.tls]\ncert = \"server.pem\"\nkey = \"server.key\"\nclient_ca = \"ca.pem\"\n\
         client_auth = \"optional\"\nclient_issuer = \"{CLIENT_ISSUER}\"\n\
         [auth.jwt]\nissuers = [\"{ISSUER}\"]\naudience = \"{AUDIENCE}\"\n\
         [[auth.jwt.hmac_keys]]\nsecret_file = \"hmac.key\"\n\
         [auth.authorization]\npolicy = \"owner\"\n"
    );
    let daemon = tls_daemon(d, &config);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"iss": ISSUER, "sub": "carol", "aud": AUDIENCE, "iat": now, "nbf": now, "exp": now + 600});
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap();
    // A client that connects and never starts its handshake holds up nobody else.
    let _stalled = TcpStream::connect(&daemon.http).unwrap();
    let client = https_client(&ca, None);
    let url = format!("https://{}/api/v1/me", daemon.http);
    let me = client
        .get(&url)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let me: Value = serde_json::from_str(&me).unwrap();
    assert_eq!(me["subject"], "carol", "{me}");
    assert_eq!(me["issuer"], ISSUER);
    let anonymous = client.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), reqwest::StatusCode::UNAUTHORIZED);
    // A certificate, when one is presented, is its caller.
    let (status, me) = get_json(&https_client(&ca, Some(&joined(ca.client(ALICE)))), &url).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{me}");
    assert_eq!(me["subject"], ALICE);
    assert_eq!(me["issuer"], CLIENT_ISSUER);
    let healthz = client
        .get(format!("https://{}/healthz", daemon.http))
        .send()
        .await
        .unwrap();
    assert_eq!(healthz.status(), reqwest::StatusCode::OK);
}
