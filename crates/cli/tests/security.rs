//! The daemon behind TLS with client certificates (mTLS), end to end with certificates made in
//! the test: a client with a certificate from the trusted CA works; without one, from another
//! CA, or in plaintext it is refused. Bearer tokens (ES256, keys made in the test) under the
//! owner-allowlist policy: ownership, denials, and every kind of bad token. A policy without a
//! credential kind that identifies callers is refused at startup.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

mod common;

use common::ca::Ca;
use common::write;
use rcgen::KeyPair;

const DAEMON: &str = env!("CARGO_BIN_EXE_agentsessionsd");
const CTL: &str = env!("CARGO_BIN_EXE_agentctl");

struct Daemon(Child, String);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn daemon(dir: &Path, config: &str) -> Result<Daemon, Output> {
    daemon_with(dir, config, &[]).map(|(daemon, _)| daemon)
}

/// The daemon with extra flags; with `--registry-addr` among them, also the operator address.
fn daemon_with(dir: &Path, config: &str, extra: &[&str]) -> Result<(Daemon, String), Output> {
    let config = write(dir, "agentsessionsd.toml", config);
    let mut child = Command::new(DAEMON)
        .args(["--addr", "127.0.0.1:0", "--config", &config])
        .args(extra)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let Some(addr) = line.trim().strip_prefix("agentsessionsd listening on ") else {
        return Err(child.wait_with_output().unwrap());
    };
    let addr = addr.to_owned();
    let mut registry = String::new();
    if extra.contains(&"--registry-addr") {
        stdout.read_line(&mut registry).unwrap();
        registry = registry
            .trim()
            .strip_prefix("agentsessionsd registry on ")
            .unwrap_or_default()
            .to_owned();
    }
    Ok((Daemon(child, addr), registry))
}

fn ctl(dir: &Path, args: &[&str]) -> Output {
    Command::new(CTL)
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn mtls_admits_trusted_clients_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new("Test CA");
    let (server_cert, server_key) = ca.server();
    let (client_cert, client_key) = ca.client("spiffe://example/agent-runner");
    let stranger = Ca::new("Other CA");
    let (other_cert, other_key) = stranger.client("spiffe://example/intruder");
    write(d, "ca.pem", &ca.pem);
    write(d, "server.pem", &server_cert);
    write(d, "server.key", &server_key);
    let client_cert = write(d, "client.pem", &client_cert);
    let client_key = write(d, "client.key", &client_key);
    let other_cert = write(d, "other.pem", &other_cert);
    let other_key = write(d, "other.key", &other_key);
    let daemon = daemon(
        d,
        "journal = \"j.db\"\n[auth]\nrequire_authentication = true\n[auth.tls]\ncert = \"server.pem\"\nkey = \"server.key\"\nclient_ca = \"ca.pem\"\n",
    )
    .unwrap_or_else(|out| panic!("daemon refused: {}", String::from_utf8_lossy(&out.stderr)));
    let ca_path = d.join("ca.pem");
    let ca_path = ca_path.to_str().unwrap();
    let server = daemon.1.as_str();

    let trusted = ctl(
        d,
        &[
            "--server",
            server,
            "--tls-ca",
            ca_path,
            "--tls-cert",
            &client_cert,
            "--tls-key",
            &client_key,
            "exec",
            "over mTLS",
        ],
    );
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    assert!(String::from_utf8_lossy(&trusted.stdout).contains("echo:over mTLS"));

    for (what, args) in [
        ("no client certificate", vec!["--tls-ca", ca_path]),
        (
            "a certificate from another CA",
            vec![
                "--tls-ca",
                ca_path,
                "--tls-cert",
                &other_cert,
                "--tls-key",
                &other_key,
            ],
        ),
        ("plaintext", vec![]),
    ] {
        let mut all = vec!["--server", server];
        all.extend(args);
        all.extend(["list"]);
        let refused = ctl(d, &all);
        assert!(!refused.status.success(), "{what} was admitted");
    }
}

#[test]
fn a_policy_without_a_credential_that_identifies_callers_is_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new("Test CA");
    let (server_cert, server_key) = ca.server();
    write(d, "server.pem", &server_cert);
    write(d, "server.key", &server_key);
    // TLS without client certificates or bearer tokens: every caller would be anonymous.
    let refused = daemon(
        d,
        "journal = \"j.db\"\n[auth.tls]\ncert = \"server.pem\"\nkey = \"server.key\"\n[auth.authorization]\npolicy = \"owner\"\n",
    );
    let Err(out) = refused else {
        panic!("the daemon started a policy over anonymous callers")
    };
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("identify callers"), "{stderr}");
    assert!(
        !d.join("j.db").exists(),
        "nothing opened before the refusal"
    );
}

const ISSUER: &str = "https://idp.e2e.test";
const AUDIENCE: &str = "agentsessions-e2e";

/// An ES256 signing key made for the test, and tokens it signs.
struct TokenIssuer {
    key: jsonwebtoken::EncodingKey,
    public_pem: String,
}

impl TokenIssuer {
    fn new() -> Self {
        let pair = KeyPair::generate().unwrap();
        Self {
            key: jsonwebtoken::EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap(),
            public_pem: pair.public_key_pem(),
        }
    }

    fn sign(&self, claims: &serde_json::Value) -> String {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256),
            claims,
            &self.key,
        )
        .unwrap()
    }

    fn token(&self, subject: &str) -> String {
        self.sign(&claims(ISSUER, subject, AUDIENCE, 600))
    }
}

fn claims(iss: &str, sub: &str, aud: &str, expires_in: i64) -> serde_json::Value {
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    serde_json::json!({
        "iss": iss, "sub": sub, "aud": aud,
        "iat": now, "nbf": now - 5, "exp": now + expires_in,
    })
}

fn as_caller(d: &Path, server: &str, token: &str, args: &[&str]) -> Output {
    let mut all = vec!["--server", server, "--token", token];
    all.extend(args);
    ctl(d, &all)
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

// Bearer tokens through the real daemon under the owner-allowlist policy: a valid token acts
// as its subject (alice may create; what she creates is hers, bob can neither see nor touch
// it); expired, wrong audience, wrong issuer, wrong signature and missing tokens are refused
// with the reason; nothing a refused call asked for happens.
#[test]
fn bearer_tokens_and_ownership_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let idp = TokenIssuer::new();
    let impostor = TokenIssuer::new();
    write(d, "idp.pub.pem", &idp.public_pem);
    let config = format!(
        "journal = \"j.db\"
reclaim_interval_secs = 1
[auth.jwt]
issuers = [\"{ISSUER}\"]
audience = \"{AUDIENCE}\"
[[auth.jwt.public_keys]]
file = \"idp.pub.pem\"
algorithm = \"ES256\"
[auth.authorization]
policy = \"owner_allowlist\"
[[auth.authorization.allow]]
actions = [\"create\"]
issuer = \"{ISSUER}\"
subject = \"alice\"
"
    );
    let daemon = daemon(d, &config)
        .unwrap_or_else(|out| panic!("daemon refused: {}", String::from_utf8_lossy(&out.stderr)));
    let server = daemon.1.as_str();
    let alice = idp.token("alice");
    let bob = idp.token("bob");

    let uid = stdout(&as_caller(
        d,
        server,
        &alice,
        &["create", "--name", "alices-notes"],
    ))
    .trim()
    .to_owned();
    let ran = stdout(&as_caller(
        d,
        server,
        &alice,
        &["exec", "--session", &uid, "hello"],
    ));
    assert!(ran.contains("echo:hello"), "{ran}");
    let shown = stdout(&as_caller(d, server, &alice, &["get", "--session", &uid]));
    assert!(shown.contains("owner     alice"), "{shown}");
    let listed = stdout(&as_caller(d, server, &alice, &["list"]));
    assert!(
        listed.contains(&uid) && listed.contains("owner=alice"),
        "{listed}"
    );

    // bob: not allowed to create, sees none of alice's sessions, cannot read or run hers.
    assert!(!stdout(&as_caller(d, server, &bob, &["list"])).contains(&uid));
    for args in [
        vec!["create"],
        vec!["get", "--session", &uid],
        vec!["exec", "--session", &uid, "let me in"],
        vec!["replay", "--session", &uid],
        vec!["delete", "--session", &uid],
    ] {
        let out = as_caller(d, server, &bob, &args);
        assert!(!out.status.success(), "bob: {args:?} was allowed");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.to_lowercase().contains("permission"),
            "{args:?}: {stderr}"
        );
        assert!(
            !stderr.contains("alices-notes"),
            "{args:?} disclosed: {stderr}"
        );
    }

    // Tokens that fail a check are refused before any handler, each with its reason.
    for (what, token, reason) in [
        (
            "expired",
            idp.sign(&claims(ISSUER, "alice", AUDIENCE, -3600)),
            "expired",
        ),
        (
            "wrong audience",
            idp.sign(&claims(ISSUER, "alice", "someone-else", 600)),
            "aud",
        ),
        (
            "wrong issuer",
            idp.sign(&claims("https://evil.test", "alice", AUDIENCE, 600)),
            "issuer",
        ),
        ("wrong signature", impostor.token("alice"), "signature"),
    ] {
        let out = as_caller(d, server, &token, &["get", "--session", &uid]);
        assert!(!out.status.success(), "{what} token admitted");
        let stderr = String::from_utf8_lossy(&out.stderr).to_lowercase();
        assert!(
            stderr.contains("unauthenticated") || stderr.contains("authenticat"),
            "{what}: {stderr}"
        );
        assert!(
            stderr.contains(reason),
            "{what}: the reason is missing: {stderr}"
        );
    }
    let missing = ctl(d, &["--server", server, "get", "--session", &uid]);
    assert!(
        !missing.status.success(),
        "a call without a token was admitted"
    );

    // After all of that, alice's session holds exactly her one turn.
    let replay = stdout(&as_caller(
        d,
        server,
        &alice,
        &["replay", "--session", &uid],
    ));
    assert_eq!(replay.matches("INPUT").count(), 1, "{replay}");

    // Deleting it: pending, still readable by its owner, refuses effects.
    stdout(&as_caller(
        d,
        server,
        &alice,
        &["delete", "--session", &uid],
    ));
    let shown = stdout(&as_caller(d, server, &alice, &["get", "--session", &uid]));
    assert!(shown.contains("deletion  PENDING"), "{shown}");
    let listed = stdout(&as_caller(d, server, &alice, &["list"]));
    assert!(listed.contains("deletion=PENDING"), "{listed}");
    assert!(
        !as_caller(d, server, &alice, &["exec", "--session", &uid, "more"])
            .status
            .success()
    );
    // The daemon's reclaimer marked it reclaimed in the journal (read here as a second process).
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let journal = agentsessions_sqlite::SqliteJournal::open(d.join("j.db")).unwrap();
    let reclaimed = runtime.block_on(async {
        for _ in 0..300 {
            let info = agentsessions_journal::Catalog::session_info(&journal, &uid)
                .await
                .unwrap();
            assert!(info.deletion.is_deleted());
            if info.reclaimed_at.is_some() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        false
    });
    assert!(reclaimed, "the deleted session was never reclaimed");
}

/// An echo harness served over mutual TLS (on a runtime the caller keeps), and a directory
/// holding the link's CA (`link-ca.pem`) and this host's certificate (`host.pem`, `host.key`).
fn echo_over_mtls() -> (
    tokio::runtime::Runtime,
    agentsessions_conformance::MtlsLink,
    tempfile::TempDir,
) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let link = runtime.block_on(agentsessions_conformance::MtlsLink::serve(
        std::sync::Arc::new(agentsessions_harnesses::EchoHarness::new()),
    ));
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "link-ca.pem", &link.ca_pem);
    write(dir.path(), "host.pem", &link.client_pem.0);
    write(dir.path(), "host.key", &link.client_pem.1);
    (runtime, link, dir)
}

// The link to a remote harness over mutual TLS: the daemon verifies the harness's certificate
// and presents its own (`[harness_tls]`); a daemon that speaks cleartext to it, or has no
// client certificate, gets no turn out of it.
#[test]
fn a_remote_harness_over_mutual_tls() {
    let (_runtime, link, dir) = echo_over_mtls();
    let d = dir.path();
    let base = format!(
        "journal = \"j.db\"\nmodel = \"echo\"\nharness = [\"far=127.0.0.1:{}\"]\n",
        link.port
    );
    let turn = |config: &str| -> Output {
        let daemon = daemon(d, config).unwrap_or_else(|out| {
            panic!("daemon refused: {}", String::from_utf8_lossy(&out.stderr))
        });
        let server = daemon.1.clone();
        let created = ctl(d, &["--server", &server, "create", "--harness", "far"]);
        let uid = String::from_utf8_lossy(&created.stdout).trim().to_owned();
        ctl(
            d,
            &[
                "--server",
                &server,
                "exec",
                "--session",
                &uid,
                "over mutual TLS",
            ],
        )
    };

    let secured = turn(&format!(
        "{base}[harness_tls]\nca = \"link-ca.pem\"\ncert = \"host.pem\"\nkey = \"host.key\"\ndomain = \"localhost\"\n"
    ));
    assert!(
        secured.status.success(),
        "{}",
        String::from_utf8_lossy(&secured.stderr)
    );
    assert!(String::from_utf8_lossy(&secured.stdout).contains("echo:over mutual TLS"));

    for (what, config) in [
        ("cleartext", base.clone()),
        (
            "no client certificate",
            format!("{base}[harness_tls]\nca = \"link-ca.pem\"\ndomain = \"localhost\"\n"),
        ),
    ] {
        std::fs::remove_file(d.join("j.db")).ok();
        let refused = turn(&config);
        assert!(!refused.status.success(), "{what}: the harness ran a turn");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        // The link itself failed: the harness could not even describe itself.
        assert!(stderr.contains("harness \"far\""), "{what}: {stderr}");
    }
}

// A harness registered at run time is dialed over the same `[harness_tls]` link settings.
#[test]
fn a_registered_harness_over_mutual_tls() {
    let (_runtime, link, dir) = echo_over_mtls();
    let d = dir.path();
    let spec = write(
        d,
        "spec.json",
        &format!(
            r#"{{"remote":{{"address":"127.0.0.1:{}"}},"capabilities":{{"resumability":"RESUMABILITY_STATELESS_REPLAY"}},"descriptor_id":"echo"}}"#,
            link.port
        ),
    );
    let (daemon, operator) = daemon_with(
        d,
        "journal = \"j.db\"\nmodel = \"echo\"\n[harness_tls]\nca = \"link-ca.pem\"\ncert = \"host.pem\"\nkey = \"host.key\"\ndomain = \"localhost\"\n",
        &["--registry-addr", "127.0.0.1:0"],
    )
    .unwrap_or_else(|out| panic!("daemon refused: {}", String::from_utf8_lossy(&out.stderr)));
    let registered = ctl(
        d,
        &[
            "--server", &operator, "harness", "register", "--name", "far", "--spec", &spec,
        ],
    );
    assert!(
        registered.status.success(),
        "{}",
        String::from_utf8_lossy(&registered.stderr)
    );
    let created = ctl(d, &["--server", &daemon.1, "create", "--harness", "far"]);
    let uid = String::from_utf8_lossy(&created.stdout).trim().to_owned();
    let turn = ctl(
        d,
        &[
            "--server",
            &daemon.1,
            "exec",
            "--session",
            &uid,
            "registered over mTLS",
        ],
    );
    assert!(
        turn.status.success(),
        "{}",
        String::from_utf8_lossy(&turn.stderr)
    );
    assert!(String::from_utf8_lossy(&turn.stdout).contains("echo:registered over mTLS"));
}
