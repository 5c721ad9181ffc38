//! semantics §10.5 (harnessnode): the binary on its own.

use std::time::Duration;

use agentsessions_api::Harness as _;
use agentsessions_harnesswire::RemoteHarness;

use crate::support::{RecordingSink, node, signal, start, start_frame};

#[tokio::test]
async fn serves_echo_on_a_unix_socket_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("echo.sock");
    let listen = format!("unix:{}", path.display());
    let (mut child, address) = start(&["--harness", "echo", "--listen", &listen]).await;
    assert_eq!(address, listen);

    let harness = RemoteHarness::connect_lazy(&address).unwrap();
    let descriptor = harness.describe().await.unwrap();
    assert_eq!(
        (descriptor.id.as_str(), descriptor.version.as_str()),
        ("echo", "1")
    );
    let sink = RecordingSink::default();
    harness.run(&start_frame("s", "hi"), &sink).await.unwrap();
    assert_eq!(sink.model_requests()[0].model, "echo");

    signal(child.id().unwrap(), "TERM");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(!path.exists(), "the socket is removed on shutdown");
}

#[tokio::test]
async fn serves_on_a_picked_tcp_port_and_stops_on_sigint() {
    let (mut child, address) = start(&["--harness", "counter", "--listen", "127.0.0.1:0"]).await;
    let port: u16 = address.strip_prefix("127.0.0.1:").unwrap().parse().unwrap();
    assert_ne!(port, 0);
    let harness = RemoteHarness::connect_lazy(&address).unwrap();
    assert_eq!(harness.describe().await.unwrap().id, "counter");

    signal(child.id().unwrap(), "INT");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
}

// The chat harness with an operator prompt: the prompt is part of the advertised version, and
// an execution without config gets it as its system message.
#[tokio::test]
async fn chat_with_a_system_prompt() {
    let (_child, address) = start(&[
        "--harness",
        "chat",
        "--model",
        "gpt-test",
        "--system-prompt",
        "be brief",
        "--listen",
        "127.0.0.1:0",
    ])
    .await;
    let harness = RemoteHarness::connect_lazy(&address).unwrap();
    let descriptor = harness.describe().await.unwrap();
    assert_eq!(descriptor.models, ["gpt-test"]);
    assert!(
        descriptor.version.starts_with("1+prompt."),
        "{}",
        descriptor.version
    );

    let sink = RecordingSink::default();
    harness
        .run(&start_frame("s", "hello"), &sink)
        .await
        .unwrap();
    let mut own = start_frame("s", "again");
    own.config = br#"{"system_prompt":"be verbose"}"#.to_vec();
    harness.run(&own, &sink).await.unwrap();
    let requests = sink.model_requests();
    let systems: Vec<String> = requests.iter().map(|r| r.messages[0].text()).collect();
    assert_eq!(systems, ["be brief", "be verbose"]);
    assert_eq!(requests[0].model, "gpt-test");
}

// Configuration is checked before anything listens: exit code 2, one clear line, no socket.
#[tokio::test]
async fn bad_configuration_is_refused_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("never.sock");
    let listen = format!("unix:{}", path.display());
    // (arguments, environment, what stderr must say)
    type Case<'a> = (Vec<&'a str>, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 7] = [
        (
            vec!["--harness", "bash", "--listen", &listen],
            &[],
            "invalid value 'bash'",
        ),
        (
            vec!["--harness", "chat", "--listen", &listen],
            &[],
            "needs a model",
        ),
        (
            vec!["--listen", &listen],
            &[("HARNESS_KIND", "chat")],
            "needs a model",
        ),
        (vec!["--listen", "http://127.0.0.1:1"], &[], "not a URL"),
        (vec!["--listen", "unix:"], &[], "socket path"),
        (vec!["--listen", "127.0.0.1"], &[], "needs a port"),
        (
            vec!["--system-prompt", "x", "--listen", &listen],
            &[],
            "chat harness only",
        ),
    ];
    for (args, env, message) in cases {
        let output = node(&args)
            .envs(env.iter().copied())
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}: no readiness line");
        assert!(!path.exists(), "{args:?}: the socket never appears");
    }
}

#[tokio::test]
async fn exits_when_stdin_closes_if_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sock");
    let listen = format!("unix:{}", path.display());
    let (mut child, _) = start(&["--listen", &listen, "--exit-on-stdin-eof"]).await;
    drop(child.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(!path.exists());
}

/// A CA, a server certificate for 127.0.0.1/localhost and a client certificate, as PEM files
/// in `dir`: (ca, server cert, server key, client cert, client key).
fn link_files(dir: &std::path::Path) -> [std::path::PathBuf; 5] {
    use rcgen::{
        BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
        KeyUsagePurpose, SanType,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
    let ca = Issuer::new(ca_params, ca_key);
    let issue = |mut params: CertificateParams, usage| {
        let key = KeyPair::generate().unwrap();
        params.extended_key_usages = vec![usage];
        (
            params.signed_by(&key, &ca).unwrap().pem(),
            key.serialize_pem(),
        )
    };
    let mut server = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    server
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let (server_cert, server_key) = issue(server, ExtendedKeyUsagePurpose::ServerAuth);
    let mut client = CertificateParams::default();
    client.subject_alt_names = vec![SanType::URI("spiffe://test/host".try_into().unwrap())];
    let (client_cert, client_key) = issue(client, ExtendedKeyUsagePurpose::ClientAuth);
    let files = [
        ("ca.pem", ca_pem),
        ("server.pem", server_cert),
        ("server.key", server_key),
        ("client.pem", client_cert),
        ("client.key", client_key),
    ];
    files.map(|(name, text)| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    })
}

// harnessnode over mutual TLS: a host with a certificate from the CA is served; one without,
// or one speaking cleartext, is not. TLS on a unix socket is refused before listening.
#[tokio::test]
async fn serves_mutual_tls_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let [ca, cert, key, client_cert, client_key] = link_files(dir.path());
    let path = |p: &std::path::PathBuf| p.to_str().unwrap().to_owned();
    let (ca, cert, key) = (path(&ca), path(&cert), path(&key));
    let (_child, address) = start(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-client-ca",
        &ca,
    ])
    .await;
    let client_tls = |identity: bool| {
        let mut settings = agentsessions_auth::ClientTlsSettings::new(&ca).with_domain("localhost");
        if identity {
            settings = settings.with_identity(&client_cert, &client_key);
        }
        settings.client_tls_config().unwrap()
    };
    let trusted = RemoteHarness::connect_lazy_tls(&address, Some(client_tls(true))).unwrap();
    assert_eq!(trusted.describe().await.unwrap().id, "echo");
    let sink = RecordingSink::default();
    trusted.run(&start_frame("s", "hi"), &sink).await.unwrap();
    RemoteHarness::connect_lazy_tls(&address, Some(client_tls(false)))
        .unwrap()
        .describe()
        .await
        .unwrap_err();
    RemoteHarness::connect_lazy(&address)
        .unwrap()
        .with_describe_timeout(Duration::from_secs(2))
        .describe()
        .await
        .unwrap_err();

    let socket = dir.path().join("never.sock");
    let listen = format!("unix:{}", socket.display());
    for (args, message) in [
        (
            vec!["--listen", &listen, "--tls-cert", &cert, "--tls-key", &key],
            "TLS applies to TCP",
        ),
        (
            vec![
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                &cert,
                "--tls-key",
                "/nonexistent.key",
            ],
            "nonexistent.key",
        ),
        (
            vec!["--listen", "127.0.0.1:0", "--tls-cert", &cert],
            "--tls-key",
        ),
    ] {
        let output = node(&args).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}: no readiness line");
    }
    assert!(!socket.exists());
}
