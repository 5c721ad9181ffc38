//! The `[auth]` configuration: parsing, validation, file errors and the authorizers it builds.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use agentsessions_api::{Action, ApiError, AuthorizationRequest, CallerIdentity};
use agentsessions_auth::{AuthConfig, AuthError, ClientAuth, Policy, TlsSettings};
use common::{Ca, write};
use tonic::Code;

const METHOD: &str = "/agentsessions.v1.Sessions/Create";

fn parse(text: &str) -> AuthConfig {
    toml::from_str(text).unwrap()
}

// The documented example parses, validates and loads (docs/security.md).
#[test]
fn full_example_parses_and_loads() {
    let dir = tempfile::tempdir().unwrap();
    let server_ca = Ca::root("Server CA");
    let client_ca = Ca::root("Clients CA");
    let server = server_ca.server();
    write(dir.path(), "server.pem", &server.cert_pem);
    write(dir.path(), "server.key", &server.key_pem);
    write(dir.path(), "clients-ca.pem", &client_ca.cert_pem);
    let signer = common::Signer::rs256(Some("k1"));
    write(dir.path(), "idp-jwks.json", common::jwks(&[&signer]));
    let mut config = parse(
        r#"
        [tls]
        cert = "server.pem"
        key = "server.key"
        client_ca = "clients-ca.pem"
        client_auth = "optional"

        [jwt]
        issuers = ["https://idp.example.com"]
        audience = "agentsessions"
        jwks_file = "idp-jwks.json"
        leeway_secs = 30

        [authorization]
        policy = "owner_allowlist"

        [[authorization.allow]]
        actions = ["create", "list", "registry.register"]
        issuer = "https://idp.example.com"
        subject = "ops-bot"
        "#,
    );
    config.resolve_paths(dir.path());
    config.validate().unwrap();
    assert!(config.effective_require_authentication());
    assert_eq!(
        config.tls.as_ref().unwrap().client_auth(),
        ClientAuth::Optional
    );
    assert_eq!(config.jwt.as_ref().unwrap().leeway_secs, 30);
    config.server_tls_config().unwrap().unwrap();
    // The same settings for a listener that is not tonic's (the daemon's HTTP listener).
    let rustls = config
        .tls
        .as_ref()
        .unwrap()
        .rustls_server_config(&[b"http/1.1"])
        .unwrap();
    assert_eq!(rustls.alpn_protocols, vec![b"http/1.1".to_vec()]);
    let authenticator = config.authenticator().unwrap();
    assert!(authenticator.requires_authentication());
    assert!(authenticator.yields_identity());

    let authorizer = config.authorizer().unwrap().unwrap();
    let bot = CallerIdentity::new("https://idp.example.com", "ops-bot");
    let alice = CallerIdentity::new("https://idp.example.com", "alice");
    let block = |request| futures_lite(authorizer.authorize(&request));
    assert_eq!(
        block(AuthorizationRequest::global(
            bot.clone(),
            Action::Create,
            METHOD
        )),
        Ok(())
    );
    assert_eq!(
        block(AuthorizationRequest::global(alice, Action::Create, METHOD)),
        Err(ApiError::PermissionDenied)
    );
    assert_eq!(
        block(AuthorizationRequest::global(
            bot,
            Action::RegistryRetire,
            METHOD
        )),
        Err(ApiError::PermissionDenied)
    );
}

/// Runs a future that never waits (the built-in authorizers are synchronous).
fn futures_lite<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

// Defaults: nothing configured is the published server's behavior.
#[test]
fn empty_config_is_plaintext_anonymous_and_unchecked() {
    let config = parse("");
    config.validate().unwrap();
    assert!(!config.effective_require_authentication());
    assert!(config.server_tls_config().unwrap().is_none());
    assert!(config.authorizer().unwrap().is_none());
    assert!(!config.authenticator().unwrap().yields_identity());
}

// extensions §2: with an authorizer configured the server refuses to start without an
// authentication mode that yields a CallerIdentity.
#[test]
fn policy_without_an_authentication_mode_is_refused() {
    for text in [
        "[authorization]\npolicy = \"owner\"",
        "[tls]\ncert = \"c\"\nkey = \"k\"\n[authorization]\npolicy = \"owner\"",
        "require_authentication = true",
    ] {
        let err = parse(text).validate().unwrap_err();
        assert!(
            matches!(err, AuthError::InvalidConfig { .. }),
            "{text}: {err}"
        );
    }
}

#[test]
fn allowlist_entries_are_checked() {
    let base = "[jwt]\nissuers = [\"i\"]\naudience = \"a\"\n[authorization]\n";
    let entry = |policy: &str, action: &str| {
        parse(&format!(
            "{base}policy = \"{policy}\"\n[[authorization.allow]]\nactions = [\"{action}\"]\n\
             issuer = \"i\"\nsubject = \"s\"\n"
        ))
        .validate()
        .unwrap_err()
    };
    assert!(matches!(
        entry("owner_allowlist", "sudo"),
        AuthError::UnknownAction { .. }
    ));
    assert!(matches!(
        entry("owner_allowlist", "read"),
        AuthError::NotAllowlistable {
            action: Action::Read
        }
    ));
    assert!(matches!(
        entry("owner_allowlist", "mint"),
        AuthError::NotAllowlistable {
            action: Action::Mint
        }
    ));
    assert!(matches!(
        entry("owner", "create"),
        AuthError::InvalidConfig { .. }
    ));
    let empty_subject = parse(&format!(
        "{base}policy = \"owner_allowlist\"\n[[authorization.allow]]\nactions = [\"list\"]\n\
         issuer = \"i\"\nsubject = \"\"\n"
    ));
    assert!(matches!(
        empty_subject.validate(),
        Err(AuthError::InvalidConfig { .. })
    ));
}

#[test]
fn owner_policy_builds_the_owner_authorizer() {
    let config =
        parse("[jwt]\nissuers = [\"i\"]\naudience = \"a\"\n[authorization]\npolicy = \"owner\"");
    assert_eq!(config.authorization.policy, Policy::Owner);
    let authorizer = config.authorizer().unwrap().unwrap();
    let alice = CallerIdentity::new("i", "alice");
    let own =
        AuthorizationRequest::for_session(alice.clone(), Action::Read, "s1", alice.clone(), METHOD);
    assert_eq!(futures_lite(authorizer.authorize(&own)), Ok(()));
    let create = AuthorizationRequest::global(alice, Action::Create, METHOD);
    assert_eq!(
        futures_lite(authorizer.authorize(&create)),
        Err(ApiError::PermissionDenied)
    );
}

#[test]
fn unknown_settings_are_refused() {
    toml::from_str::<AuthConfig>("[tls]\ncert = \"c\"\nkey = \"k\"\nclient_cert = \"x\"")
        .unwrap_err();
    toml::from_str::<AuthConfig>("[authorization]\npolicy = \"everyone\"").unwrap_err();
}

// Setup errors name the file and never leak into a call's status.
#[test]
fn file_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::root("Server CA");
    let server = ca.server();
    let other = ca.server();
    let cert = write(dir.path(), "server.pem", &server.cert_pem);
    let key = write(dir.path(), "server.key", &server.key_pem);
    let wrong_key = write(dir.path(), "other.key", &other.key_pem);
    let garbage = write(dir.path(), "garbage.pem", "hello, not a certificate\n");
    let missing = dir.path().join("missing.pem");

    let cases = [
        (TlsSettings::new(&missing, &key), "missing.pem"),
        (TlsSettings::new(&garbage, &key), "garbage.pem"),
        (TlsSettings::new(&cert, &garbage), "garbage.pem"),
        (TlsSettings::new(&cert, &wrong_key), "other.key"),
        (
            TlsSettings::new(&cert, &key).with_client_ca(&garbage, ClientAuth::Require),
            "garbage.pem",
        ),
    ];
    for (settings, file) in cases {
        let rustls = settings.rustls_server_config(&[]).unwrap_err();
        assert!(rustls.to_string().contains(file), "{rustls}");
        let err = settings.server_tls_config().unwrap_err();
        assert!(err.to_string().contains(file), "{err}");
        let status = err.status();
        assert_eq!(status.code(), Code::Internal);
        assert!(!status.message().contains(file), "{}", status.message());
    }

    let mut jwt = agentsessions_auth::JwtSettings::new(["i"], "a");
    jwt.jwks_file = Some(write(dir.path(), "jwks.json", "{\"keys\": 5}"));
    let err = jwt.verifier().unwrap_err();
    assert!(matches!(err, AuthError::InvalidJwks { .. }));
    assert!(err.to_string().contains("jwks.json"), "{err}");
    jwt.jwks_file = Some(write(
        dir.path(),
        "sym.json",
        r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#,
    ));
    assert!(matches!(jwt.verifier(), Err(AuthError::NoUsableJwk { .. })));
}

#[test]
fn client_ca_and_client_auth_must_agree() {
    let none_with_ca = TlsSettings::new("c", "k").with_client_ca("ca", ClientAuth::None);
    assert!(matches!(
        none_with_ca.validate(),
        Err(AuthError::InvalidConfig { .. })
    ));
    let mut require_without_ca = TlsSettings::new("c", "k");
    require_without_ca.client_auth = Some(ClientAuth::Require);
    assert!(matches!(
        require_without_ca.validate(),
        Err(AuthError::InvalidConfig { .. })
    ));
    let mut default_with_ca = TlsSettings::new("c", "k");
    default_with_ca.client_ca = Some("ca".into());
    assert_eq!(default_with_ca.client_auth(), ClientAuth::Require);
}
