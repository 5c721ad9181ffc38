//! Delegated tokens for tools: what is minted, who may mint, and how a verifier checks it, with
//! keys generated per run.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::assertions_on_result_states
)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agentsessions_api::{
    Action, ApiError, AuthorizationRequest, Authorizer, CallerIdentity, IdentityRef,
    OwnerAllowlistAuthorizer, OwnerAuthorizer, StatusCode,
};
use agentsessions_auth::{
    AuthError, DelegatedTokens, IdentitySettings, JwtSettings, MINT_METHOD, MintBinding,
    MintPolicy, MintRequest, OwnerMintPolicy, PrincipalSource, SessionPrincipal, SessionTokens,
    TokenIssuer,
};
use async_trait::async_trait;
use common::{Signer, claims, now, write};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

const HOST: &str = "https://agents.test";
const MCP: &str = "https://mcp.test/tools";

fn alice() -> CallerIdentity {
    CallerIdentity::new("https://idp.test", "alice")
}

fn agent() -> IdentityRef {
    IdentityRef {
        principal: "agent://triage".to_owned(),
        issuer: "https://agents.test/agents".to_owned(),
        subject: "triage-7".to_owned(),
    }
}

fn owned() -> SessionPrincipal {
    SessionPrincipal {
        owner: alice(),
        agent: agent(),
    }
}

fn request(audience: &str, principal: SessionPrincipal) -> MintRequest {
    MintRequest {
        audience: audience.to_owned(),
        session_uid: "s-1".to_owned(),
        execution_id: "x-1".to_owned(),
        tool_call_id: "call-1".to_owned(),
        principal,
    }
}

fn ec_key_pem() -> String {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .unwrap()
        .serialize_pem()
}

/// An Ed25519 key as `openssl genpkey -algorithm ed25519` writes it (PKCS#8 v1, seed only).
fn ed_key_pem() -> String {
    use base64::Engine as _;
    let generated = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let der = generated.serialize_der();
    // PKCS#8 v2 from rcgen: a 16-byte prefix, then the 32-byte seed, then the public key.
    let seed = &der[16..48];
    let mut v1 = vec![
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    v1.extend_from_slice(seed);
    let body = base64::engine::general_purpose::STANDARD.encode(v1);
    format!("-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n")
}

/// `[identity]` settings over a fresh key of `algorithm` written to `dir`.
fn settings(dir: &Path, algorithm: &str) -> IdentitySettings {
    let pem = match algorithm {
        "EdDSA" => ed_key_pem(),
        _ => ec_key_pem(),
    };
    let mut settings = IdentitySettings::new(HOST, write(dir, "mint.key.pem", pem));
    settings.algorithm = algorithm.to_owned();
    settings.key_id = Some("mint-1".to_owned());
    settings
}

fn unix_now() -> u64 {
    u64::try_from(now()).unwrap()
}

/// Decodes `token` as an audience would: the issuer's JWKS, the issuer, the audience, expiry
/// with no leeway.
fn verify(issuer: &TokenIssuer, token: &str, audience: &str) -> Result<Value, ErrorKind> {
    let jwks: JwkSet = serde_json::from_str(&issuer.jwks_json().unwrap()).unwrap();
    let jwk = jwks.find("mint-1").unwrap();
    let key = DecodingKey::from_jwk(jwk).unwrap();
    let mut validation = Validation::new(issuer.algorithm());
    validation.set_issuer(&[HOST]);
    validation.set_audience(&[audience]);
    validation.set_required_spec_claims(&["iss", "aud", "exp", "sub"]);
    validation.validate_nbf = true;
    validation.leeway = 0;
    jsonwebtoken::decode::<Value>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|err| err.kind().clone())
}

// Every claim of a minted token, checked by a verifier holding only the published JWKS.
#[tokio::test]
async fn minted_token_verifies_with_the_jwks_and_carries_every_claim() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = settings(dir.path(), "ES256");
    config.token_lifetime_secs = 120;
    config.scope = Some("tools.read tools.call".to_owned());
    let issuer = config.issuer(None).unwrap();
    let issued_at = unix_now();
    let token = issuer
        .mint_at(&request(MCP, owned()), issued_at)
        .await
        .unwrap();

    let header = jsonwebtoken::decode_header(&token).unwrap();
    assert_eq!(header.alg, Algorithm::ES256);
    assert_eq!(header.kid.as_deref(), Some("mint-1"));
    let claims = verify(&issuer, &token, MCP).unwrap();
    let jti = claims["jti"].as_str().unwrap().to_owned();
    assert_eq!(jti.len(), 32);
    assert!(jti.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(
        claims,
        json!({
            "iss": HOST,
            "sub": "alice",
            "sub_iss": "https://idp.test",
            "aud": MCP,
            "iat": issued_at,
            "nbf": issued_at,
            "exp": issued_at + 120,
            "jti": jti,
            "scope": "tools.read tools.call",
            "act": {"sub": "agent://triage", "iss": "https://agents.test/agents"},
            "txn": "x-1",
            "tctx": {"session_uid": "s-1", "execution_id": "x-1", "tool_call_id": "call-1"},
        })
    );
    // A second mint is a different token (fresh jti), never a cached one.
    let again = issuer
        .mint_at(&request(MCP, owned()), issued_at)
        .await
        .unwrap();
    assert_ne!(verify(&issuer, &again, MCP).unwrap()["jti"], jti);
}

// EdDSA keys work too, and the crate's own bearer-token verifier accepts the published JWKS.
#[tokio::test]
async fn eddsa_tokens_verify_with_the_published_jwks() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = settings(dir.path(), "EdDSA").issuer(None).unwrap();
    let token = issuer.mint(&request(MCP, owned())).await.unwrap();
    assert_eq!(verify(&issuer, &token, MCP).unwrap()["sub"], "alice");

    let mut verifier = JwtSettings::new([HOST], MCP);
    verifier.jwks_file = Some(write(dir.path(), "jwks.json", issuer.jwks_json().unwrap()));
    let caller = verifier.verifier().unwrap().verify(&token).unwrap();
    assert_eq!(caller, CallerIdentity::new(HOST, "alice"));
}

#[tokio::test]
async fn expired_tokens_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = settings(dir.path(), "ES256").issuer(None).unwrap();
    assert_eq!(issuer.lifetime_secs(), 300);
    let long_ago = unix_now() - 301;
    let token = issuer
        .mint_at(&request(MCP, owned()), long_ago)
        .await
        .unwrap();
    assert_eq!(
        verify(&issuer, &token, MCP),
        Err(ErrorKind::ExpiredSignature)
    );
    let fresh = issuer
        .mint_at(&request(MCP, owned()), unix_now())
        .await
        .unwrap();
    assert!(verify(&issuer, &fresh, MCP).is_ok());
}

#[tokio::test]
async fn a_token_for_one_audience_is_refused_by_another() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = settings(dir.path(), "ES256").issuer(None).unwrap();
    let token = issuer.mint(&request(MCP, owned())).await.unwrap();
    assert_eq!(
        verify(&issuer, &token, "https://other.test"),
        Err(ErrorKind::InvalidAudience)
    );
}

// docs/security.md, "Redaction": a token the host minted and a tool echoed back is never
// journaled, because the issuer tells the host's redactor every token it mints.
#[tokio::test]
async fn every_minted_token_is_known_to_the_hosts_redactor() {
    let dir = tempfile::tempdir().unwrap();
    let redactor = std::sync::Arc::new(agentsessions_api::Redactor::new());
    let issuer = settings(dir.path(), "ES256")
        .issuer(None)
        .unwrap()
        .with_redactor(std::sync::Arc::clone(&redactor));
    let token = issuer.mint(&request(MCP, owned())).await.unwrap();
    let mut echoed = agentsessions_api::EventBody::Message(
        agentsessions_api::Message::text_message("tool", format!("Authorization: Bearer {token}")),
    );
    let scrubbed = redactor.scrub(&mut echoed);
    assert_eq!(scrubbed.names, ["delegated-token"]);
    let agentsessions_api::EventBody::Message(message) = echoed else {
        panic!("the body changed kind");
    };
    assert_eq!(
        message.text(),
        "Authorization: Bearer [REDACTED:delegated-token]"
    );
}

#[tokio::test]
async fn audiences_outside_the_configured_list_are_not_minted() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = settings(dir.path(), "ES256");
    config.audiences = vec![MCP.to_owned()];
    let issuer = config.issuer(None).unwrap();
    assert!(issuer.mint(&request(MCP, owned())).await.is_ok());
    let refused = issuer
        .mint(&request("https://elsewhere.test", owned()))
        .await
        .unwrap_err();
    assert!(matches!(refused, AuthError::AudienceNotAllowed { .. }));
    assert_eq!(refused.into_api_error(), ApiError::PermissionDenied);
}

/// Allows or denies mint and remembers what it was asked.
#[derive(Default)]
struct RecordingPolicy {
    allow: bool,
    seen: Mutex<Vec<AuthorizationRequest>>,
}

#[async_trait]
impl Authorizer for RecordingPolicy {
    async fn authorize(&self, request: &AuthorizationRequest) -> agentsessions_api::Result<()> {
        self.seen.lock().unwrap().push(request.clone());
        if self.allow {
            Ok(())
        } else {
            Err(ApiError::PermissionDenied)
        }
    }
}

// extensions §2: the mint action is asked of the policy with the principal, session and owner.
#[tokio::test]
async fn an_allowing_policy_is_asked_for_mint_on_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let policy = Arc::new(RecordingPolicy {
        allow: true,
        ..RecordingPolicy::default()
    });
    let issuer = settings(dir.path(), "ES256")
        .issuer(Some(policy.clone()))
        .unwrap();
    assert!(issuer.mint(&request(MCP, owned())).await.is_ok());
    assert_eq!(
        *policy.seen.lock().unwrap(),
        [AuthorizationRequest::for_session(
            alice(),
            Action::Mint,
            "s-1",
            alice(),
            MINT_METHOD
        )]
    );
}

// v0.3.0 API: OwnerAuthorizer and OwnerAllowlistAuthorizer deny mint even to owners: nothing is
// minted and the refusal is PERMISSION_DENIED.
#[tokio::test]
async fn a_denying_policy_refuses_the_mint() {
    let dir = tempfile::tempdir().unwrap();
    let denying: [Arc<dyn Authorizer>; 3] = [
        Arc::new(OwnerAuthorizer),
        Arc::new(OwnerAllowlistAuthorizer::new().allowing(Action::Mint, alice())),
        Arc::new(RecordingPolicy::default()),
    ];
    for policy in denying {
        let issuer = Arc::new(settings(dir.path(), "ES256").issuer(Some(policy)).unwrap());
        let refused = issuer.mint(&request(MCP, owned())).await.unwrap_err();
        assert!(matches!(refused, AuthError::MintDenied), "{refused:?}");
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert_eq!(refused.status().code(), tonic::Code::PermissionDenied);
        let minter = issuer.minter(MintBinding {
            session_uid: "s-1".to_owned(),
            execution_id: "x-1".to_owned(),
            principal: owned(),
        });
        assert_eq!(
            minter.mint(vec![MCP.to_owned()]).await,
            Err(ApiError::PermissionDenied)
        );
    }
}

// A policy that fails without a decision is a host fault: sanitized, never its text.
#[tokio::test]
async fn a_failing_policy_is_a_sanitized_host_fault() {
    struct Broken;
    #[async_trait]
    impl Authorizer for Broken {
        async fn authorize(&self, _: &AuthorizationRequest) -> agentsessions_api::Result<()> {
            Err(ApiError::status(
                StatusCode::Unavailable,
                "policy db at 10.0.0.7 down",
            ))
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let issuer = settings(dir.path(), "ES256")
        .issuer(Some(Arc::new(Broken)))
        .unwrap();
    let refused = issuer.mint(&request(MCP, owned())).await.unwrap_err();
    assert!(matches!(refused, AuthError::MintPolicyFailed));
    let api = refused.into_api_error();
    assert_eq!(api.status_code(), StatusCode::Internal);
    assert!(!api.to_string().contains("10.0.0.7"));
}

// The owner mint policy: the session's verified owner may mint, nobody else, nothing else.
#[tokio::test]
async fn the_owner_mint_policy_allows_only_the_sessions_owner() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = settings(dir.path(), "ES256");
    config.mint_policy = MintPolicy::Owner;
    // The host policy is ignored under mint_policy = "owner".
    let issuer = config.issuer(Some(Arc::new(OwnerAuthorizer))).unwrap();
    assert!(issuer.mint(&request(MCP, owned())).await.is_ok());
    let unbound = SessionPrincipal {
        owner: CallerIdentity::default(),
        agent: agent(),
    };
    assert!(matches!(
        issuer.mint(&request(MCP, unbound)).await,
        Err(AuthError::MintDenied)
    ));
    let read = AuthorizationRequest::for_session(alice(), Action::Read, "s-1", alice(), "m");
    assert_eq!(
        OwnerMintPolicy.authorize(&read).await,
        Err(ApiError::PermissionDenied)
    );
    let other = CallerIdentity::new("https://idp.test", "bob");
    let foreign = AuthorizationRequest::for_session(other, Action::Mint, "s-1", alice(), "m");
    assert_eq!(
        OwnerMintPolicy.authorize(&foreign).await,
        Err(ApiError::PermissionDenied)
    );
}

#[tokio::test]
async fn an_unbound_session_mints_for_its_agent_principal_and_one_with_none_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = settings(dir.path(), "ES256").issuer(None).unwrap();
    let unbound = SessionPrincipal {
        owner: CallerIdentity::default(),
        agent: agent(),
    };
    let token = issuer.mint(&request(MCP, unbound)).await.unwrap();
    let claims = verify(&issuer, &token, MCP).unwrap();
    assert_eq!(claims["sub"], "triage-7");
    assert_eq!(claims["sub_iss"], "https://agents.test/agents");
    let refused = issuer
        .mint(&request(MCP, SessionPrincipal::default()))
        .await
        .unwrap_err();
    assert!(matches!(refused, AuthError::NoPrincipal { .. }));
    assert_eq!(
        refused.into_api_error().status_code(),
        StatusCode::FailedPrecondition
    );
    let empty = issuer.mint(&request("", owned())).await.unwrap_err();
    assert_eq!(empty.code(), tonic::Code::InvalidArgument);
}

// The harness's minter: bound to one session, execution and principal; one audience per token.
#[tokio::test]
async fn the_harness_minter_mints_one_audience_per_token_for_its_execution() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = Arc::new(settings(dir.path(), "ES256").issuer(None).unwrap());
    let minter = issuer.minter(MintBinding {
        session_uid: "s-9".to_owned(),
        execution_id: "x-9".to_owned(),
        principal: owned(),
    });
    let token = minter.mint(vec![MCP.to_owned()]).await.unwrap();
    let claims = verify(&issuer, &token, MCP).unwrap();
    assert_eq!(claims["txn"], "x-9");
    assert_eq!(
        claims["tctx"],
        json!({"session_uid": "s-9", "execution_id": "x-9"})
    );
    for audiences in [vec![], vec![MCP.to_owned(), "https://b.test".to_owned()]] {
        let refused = minter.mint(audiences).await.unwrap_err();
        assert_eq!(refused.status_code(), StatusCode::InvalidArgument);
    }
}

// The caller's own credential is never forwarded: the minted token is the host's, signed by the
// host's key, and embeds no part of what the caller presented.
#[tokio::test]
async fn the_minted_token_is_not_and_does_not_embed_the_callers_credential() {
    let dir = tempfile::tempdir().unwrap();
    let caller_key = Signer::es256(Some("idp-1"));
    let caller_token = caller_key.sign(&claims("alice"));
    let issuer = Arc::new(settings(dir.path(), "ES256").issuer(None).unwrap());
    let minter = issuer.minter(MintBinding {
        session_uid: "s-1".to_owned(),
        execution_id: "x-1".to_owned(),
        principal: owned(),
    });
    let minted = minter.mint(vec![MCP.to_owned()]).await.unwrap();
    assert_ne!(minted, caller_token);
    assert!(!minted.contains(&caller_token));
    for segment in caller_token.split('.') {
        assert!(!minted.contains(segment), "{segment}");
    }
    let claims = verify(&issuer, &minted, MCP).unwrap().to_string();
    assert!(!claims.contains(&caller_token));
    assert_eq!(
        jsonwebtoken::decode_header(&minted).unwrap().kid.as_deref(),
        Some("mint-1")
    );
}

struct Principals(BTreeMap<String, SessionPrincipal>);

#[async_trait]
impl PrincipalSource for Principals {
    async fn principal(&self, session_uid: &str) -> agentsessions_api::Result<SessionPrincipal> {
        self.0
            .get(session_uid)
            .cloned()
            .ok_or_else(|| ApiError::status(StatusCode::NotFound, "no such session"))
    }
}

// A tool hub's per-call token: the session's principal, the call's audience and ids.
#[tokio::test]
async fn session_tokens_mint_per_tool_call_for_the_sessions_principal() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = Arc::new(settings(dir.path(), "ES256").issuer(None).unwrap());
    let principals = Principals(BTreeMap::from([("s-1".to_owned(), owned())]));
    let tokens: Arc<dyn DelegatedTokens> = Arc::new(SessionTokens::new(
        Arc::clone(&issuer),
        Arc::new(principals),
    ));
    let token = tokens.token_for(MCP, "s-1", "x-1", "call-7").await.unwrap();
    let claims = verify(&issuer, &token, MCP).unwrap();
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["tctx"]["tool_call_id"], "call-7");
    let missing = tokens
        .token_for(MCP, "s-404", "x-1", "call-7")
        .await
        .unwrap_err();
    assert_eq!(missing.status_code(), StatusCode::NotFound);
}

// [identity] from TOML: defaults, every setting, unknown keys refused.
#[test]
fn identity_settings_parse_with_defaults() {
    let parsed: IdentitySettings =
        toml::from_str("issuer = \"https://agents.test\"\nsigning_key = \"mint.pem\"\n").unwrap();
    assert_eq!(parsed, IdentitySettings::new(HOST, "mint.pem"));
    assert_eq!(parsed.algorithm, "ES256");
    assert_eq!(parsed.token_lifetime_secs, 300);
    assert_eq!(parsed.mint_policy, MintPolicy::Host);
    let full: IdentitySettings = toml::from_str(
        "issuer = \"https://agents.test\"\nsigning_key = \"k.pem\"\nalgorithm = \"EdDSA\"\n\
         key_id = \"k1\"\ntoken_lifetime_secs = 60\nscope = \"tools\"\n\
         audiences = [\"https://mcp.test\"]\nmint_policy = \"owner\"\n",
    )
    .unwrap();
    assert_eq!(full.algorithm, "EdDSA");
    assert_eq!(full.key_id.as_deref(), Some("k1"));
    assert_eq!(full.token_lifetime_secs, 60);
    assert_eq!(full.scope.as_deref(), Some("tools"));
    assert_eq!(full.audiences, ["https://mcp.test"]);
    assert_eq!(full.mint_policy, MintPolicy::Owner);
    let mut relative = full;
    relative.resolve_paths(Path::new("/etc/agentsessions"));
    assert_eq!(relative.signing_key, Path::new("/etc/agentsessions/k.pem"));
    assert!(
        toml::from_str::<IdentitySettings>("issuer = \"x\"\nsigning_key = \"k\"\nlifetime = 5\n")
            .is_err()
    );
}

// Key files: a missing or invalid one is refused at startup, naming the file.
#[test]
fn missing_and_invalid_key_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = IdentitySettings::new(HOST, dir.path().join("absent.pem"));
    let err = missing.issuer(None).unwrap_err();
    assert!(matches!(err, AuthError::ReadFile { .. }), "{err:?}");
    assert!(err.to_string().contains("absent.pem"), "{err}");

    let garbage = IdentitySettings::new(HOST, write(dir.path(), "garbage.pem", "not a key"));
    let err = garbage.issuer(None).unwrap_err();
    assert!(
        matches!(err, AuthError::InvalidSigningKey { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("garbage.pem"), "{err}");

    // An EC key configured as EdDSA is the wrong kind of key.
    let mut mismatched = IdentitySettings::new(HOST, write(dir.path(), "ec.pem", ec_key_pem()));
    mismatched.algorithm = "EdDSA".to_owned();
    let err = mismatched.issuer(None).unwrap_err();
    assert!(
        matches!(err, AuthError::InvalidSigningKey { .. }),
        "{err:?}"
    );

    let mut unknown = IdentitySettings::new(HOST, dir.path().join("ec.pem"));
    unknown.algorithm = "ES999".to_owned();
    assert!(matches!(
        unknown.issuer(None),
        Err(AuthError::UnsupportedAlgorithm { .. })
    ));
}

#[test]
fn lifetimes_issuer_and_hmac_secrets_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let key = write(dir.path(), "ec.pem", ec_key_pem());
    for lifetime in [0, 3601] {
        let mut config = IdentitySettings::new(HOST, &key);
        config.token_lifetime_secs = lifetime;
        assert!(matches!(
            config.issuer(None),
            Err(AuthError::InvalidConfig {
                setting: "identity.token_lifetime_secs",
                ..
            })
        ));
    }
    assert!(matches!(
        IdentitySettings::new("", &key).issuer(None),
        Err(AuthError::InvalidConfig {
            setting: "identity.issuer",
            ..
        })
    ));
    let mut short = IdentitySettings::new(HOST, write(dir.path(), "short", "too short\n"));
    short.algorithm = "HS256".to_owned();
    assert!(matches!(
        short.issuer(None),
        Err(AuthError::InvalidConfig {
            setting: "identity.signing_key",
            ..
        })
    ));
    let mut hmac = IdentitySettings::new(HOST, write(dir.path(), "secret", [b'k'; 40]));
    hmac.algorithm = "HS256".to_owned();
    let issuer = hmac.issuer(None).unwrap();
    // A shared secret is never published.
    assert!(issuer.jwks().unwrap().keys.is_empty());
}
