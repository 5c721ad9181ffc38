//! The daemon behind TLS with client certificates (mTLS), end to end with certificates made in
//! the test: a client with a certificate from the trusted CA works; without one, from another
//! CA, or in plaintext it is refused; an authorization policy the build does not enforce is
//! refused at startup rather than ignored.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

const DAEMON: &str = env!("CARGO_BIN_EXE_agentsessionsd");
const CTL: &str = env!("CARGO_BIN_EXE_agentctl");

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// (certificate PEM, key PEM)
    fn issue(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn server(&self) -> (String, String) {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    fn client(&self, uri: &str) -> (String, String) {
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![SanType::URI(uri.try_into().unwrap())];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }
}

struct Daemon(Child, String);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn daemon(dir: &Path, config: &str) -> Result<Daemon, Output> {
    let config = write(dir, "agentsessionsd.toml", config);
    let mut child = Command::new(DAEMON)
        .args(["--addr", "127.0.0.1:0", "--config", &config])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    match line.trim().strip_prefix("agentsessionsd listening on ") {
        Some(addr) => Ok(Daemon(child, addr.to_owned())),
        None => Err(child.wait_with_output().unwrap()),
    }
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
fn an_authorization_policy_that_is_not_enforced_is_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new("Test CA");
    let (server_cert, server_key) = ca.server();
    write(d, "ca.pem", &ca.pem);
    write(d, "server.pem", &server_cert);
    write(d, "server.key", &server_key);
    let refused = daemon(
        d,
        "journal = \"j.db\"\n[auth.tls]\ncert = \"server.pem\"\nkey = \"server.key\"\nclient_ca = \"ca.pem\"\n[auth.authorization]\npolicy = \"owner\"\n",
    );
    let Err(out) = refused else {
        panic!("the daemon started with a policy it does not enforce")
    };
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not enforced"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
