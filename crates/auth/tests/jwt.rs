//! Bearer tokens: every check, with keys generated per run.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use agentsessions_api::CallerIdentity;
use agentsessions_auth::{
    AuthConfig, AuthError, Authenticator, JwtSettings, JwtVerifier, PublicKeySettings,
};
use common::{AUDIENCE, ISSUER, Signer, claims, now, write};
use serde_json::json;
use tonic::Code;
use tonic::metadata::MetadataMap;

struct Keys {
    _dir: tempfile::TempDir,
    es: Signer,
    rs: Signer,
    settings: JwtSettings,
}

/// An ES256 key in a JWKS file (kid "es-1") and an RS256 key as PEM (kid "rs-1").
fn keys() -> Keys {
    let dir = tempfile::tempdir().unwrap();
    let es = Signer::es256(Some("es-1"));
    let rs = Signer::rs256(Some("rs-1"));
    let mut settings = JwtSettings::new([ISSUER, "https://second.test"], AUDIENCE);
    settings.jwks_file = Some(write(dir.path(), "jwks.json", common::jwks(&[&es])));
    settings.public_keys.push(PublicKeySettings {
        file: write(dir.path(), "rs.pub.pem", &rs.public_pem),
        algorithm: "RS256".to_owned(),
        kid: Some("rs-1".to_owned()),
        issuer: None,
    });
    Keys {
        _dir: dir,
        es,
        rs,
        settings,
    }
}

fn authenticator(settings: &JwtSettings) -> Authenticator {
    AuthConfig {
        jwt: Some(settings.clone()),
        require_authentication: Some(true),
        ..AuthConfig::default()
    }
    .authenticator()
    .unwrap()
}

fn bearer(token: &str) -> MetadataMap {
    let mut metadata = MetadataMap::new();
    metadata.insert("authorization", format!("Bearer {token}").parse().unwrap());
    metadata
}

/// The reason a token is refused with, after checking it maps to UNAUTHENTICATED.
fn refusal(auth: &Authenticator, metadata: &MetadataMap) -> String {
    let err = auth.authenticate_parts(metadata, None).unwrap_err();
    let status = err.status();
    assert_eq!(status.code(), Code::Unauthenticated, "{err}");
    assert_eq!(status.message(), err.to_string());
    err.to_string()
}

fn with(mut base: serde_json::Value, changes: serde_json::Value) -> serde_json::Value {
    for (key, value) in changes.as_object().unwrap() {
        if value.is_null() {
            base.as_object_mut().unwrap().remove(key);
        } else {
            base[key] = value.clone();
        }
    }
    base
}

// A valid token (RS256 from PEM, ES256 from JWKS) yields (iss, sub).
#[test]
fn valid_tokens_yield_issuer_and_subject() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    for signer in [&keys.es, &keys.rs] {
        let caller = auth
            .authenticate_parts(&bearer(&signer.sign(&claims("alice"))), None)
            .unwrap();
        assert_eq!(caller, Some(CallerIdentity::new(ISSUER, "alice")));
    }
    // A plain-string audience and the second issuer are fine too.
    let token = keys.es.sign(&with(
        claims("bob"),
        json!({"aud": AUDIENCE, "iss": "https://second.test"}),
    ));
    assert_eq!(
        auth.authenticate_parts(&bearer(&token), None).unwrap(),
        Some(CallerIdentity::new("https://second.test", "bob"))
    );
}

#[test]
fn expired_token_is_refused() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    let token = keys
        .es
        .sign(&with(claims("a"), json!({"exp": now() - 600})));
    assert_eq!(refusal(&auth, &bearer(&token)), "token expired");
}

#[test]
fn token_not_yet_valid_is_refused() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    let token = keys
        .rs
        .sign(&with(claims("a"), json!({"nbf": now() + 600})));
    assert_eq!(refusal(&auth, &bearer(&token)), "token not yet valid");
}

#[test]
fn wrong_audience_is_refused() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    let token = keys
        .es
        .sign(&with(claims("a"), json!({"aud": ["someone-else"]})));
    assert_eq!(refusal(&auth, &bearer(&token)), "wrong audience");
    let token = keys.es.sign(&with(claims("a"), json!({"aud": null})));
    assert_eq!(refusal(&auth, &bearer(&token)), "token lacks the aud claim");
}

#[test]
fn wrong_issuer_is_refused() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    let token = keys
        .es
        .sign(&with(claims("a"), json!({"iss": "https://evil.test"})));
    assert_eq!(refusal(&auth, &bearer(&token)), "wrong issuer");
}

// Signed by another key under a kid the server trusts.
#[test]
fn signature_by_another_key_is_refused() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    let impostor = Signer::es256(None);
    let token = impostor.sign_as("es-1", &claims("alice"));
    assert_eq!(refusal(&auth, &bearer(&token)), "bad signature");
    // Tampering with the payload of a real token breaks the signature too.
    let real = keys.es.sign(&claims("alice"));
    let forged = keys.es.sign(&claims("mallory"));
    let mut parts: Vec<&str> = real.split('.').collect();
    parts[1] = forged.split('.').nth(1).unwrap();
    assert_eq!(refusal(&auth, &bearer(&parts.join("."))), "bad signature");
}

#[test]
fn unknown_kid_is_refused() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    let stranger = Signer::es256(Some("nobody-knows"));
    assert_eq!(
        refusal(&auth, &bearer(&stranger.sign(&claims("a")))),
        "unknown signing key"
    );
}

// A token may not pick another algorithm for a trusted key (RS256 key, HS256 header).
#[test]
fn algorithm_confusion_is_refused() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("rs-1".to_owned());
    let secret = jsonwebtoken::EncodingKey::from_secret(keys.rs.public_pem.as_bytes()).unwrap();
    let token = jsonwebtoken::encode(&header, &claims("a"), &secret).unwrap();
    assert_eq!(
        refusal(&auth, &bearer(&token)),
        "token algorithm not accepted"
    );
    // Without a kid there is simply no HS256 key to try.
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    let token = jsonwebtoken::encode(&header, &claims("a"), &secret).unwrap();
    assert_eq!(refusal(&auth, &bearer(&token)), "unknown signing key");
}

#[test]
fn missing_token_is_refused_when_required() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    assert_eq!(refusal(&auth, &MetadataMap::new()), "missing bearer token");
}

#[test]
fn malformed_tokens_and_headers_are_refused() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    for token in [
        "not-a-jwt",
        "a.b.c",
        "e30.e30.",
        "....",
        "eyJhbGciOiJub25lIn0.e30.",
    ] {
        assert_eq!(refusal(&auth, &bearer(token)), "malformed token", "{token}");
    }
    let mut basic = MetadataMap::new();
    basic.insert("authorization", "Basic YWxpY2U6cHc=".parse().unwrap());
    assert_eq!(
        refusal(&auth, &basic),
        "malformed authorization header: expected \"Bearer <token>\""
    );
}

#[test]
fn missing_or_empty_subject_is_refused() {
    let keys = keys();
    let auth = authenticator(&keys.settings);
    let token = keys.es.sign(&with(claims("a"), json!({"sub": null})));
    assert_eq!(refusal(&auth, &bearer(&token)), "token lacks the sub claim");
    let token = keys.es.sign(&with(claims("a"), json!({"sub": ""})));
    assert_eq!(refusal(&auth, &bearer(&token)), "token lacks the sub claim");
    let token = keys.es.sign(&with(claims("a"), json!({"exp": null})));
    assert_eq!(refusal(&auth, &bearer(&token)), "token lacks the exp claim");
}

// The configured clock skew applies to both exp and nbf.
#[test]
fn clock_skew_is_honoured() {
    let keys = keys();
    let recently_expired = keys.es.sign(&with(claims("a"), json!({"exp": now() - 30})));
    let almost_valid = keys.es.sign(&with(claims("a"), json!({"nbf": now() + 30})));

    let lenient = authenticator(&keys.settings); // default 60 s
    for token in [&recently_expired, &almost_valid] {
        lenient.authenticate_parts(&bearer(token), None).unwrap();
    }

    let mut strict = keys.settings;
    strict.leeway_secs = 0;
    let strict = authenticator(&strict);
    assert_eq!(
        refusal(&strict, &bearer(&recently_expired)),
        "token expired"
    );
    assert_eq!(
        refusal(&strict, &bearer(&almost_valid)),
        "token not yet valid"
    );
}

// A key bound to one issuer does not vouch for another configured issuer.
#[test]
fn issuer_bound_key_only_vouches_for_its_issuer() {
    let dir = tempfile::tempdir().unwrap();
    let ci = Signer::es256(None);
    let mut settings = JwtSettings::new([ISSUER, "https://ci.test"], AUDIENCE);
    settings.public_keys.push(PublicKeySettings {
        file: write(dir.path(), "ci.pem", &ci.public_pem),
        algorithm: "ES256".to_owned(),
        kid: None,
        issuer: Some("https://ci.test".to_owned()),
    });
    let auth = authenticator(&settings);
    let good = ci.sign(&with(claims("job-1"), json!({"iss": "https://ci.test"})));
    assert_eq!(
        auth.authenticate_parts(&bearer(&good), None).unwrap(),
        Some(CallerIdentity::new("https://ci.test", "job-1"))
    );
    let spoof = ci.sign(&claims("alice")); // iss = the other configured issuer
    assert_eq!(refusal(&auth, &bearer(&spoof)), "wrong issuer");
    // A kid-less PEM key also serves tokens that carry some kid.
    let named = ci.sign_as(
        "rotated-7",
        &with(claims("job-2"), json!({"iss": "https://ci.test"})),
    );
    auth.authenticate_parts(&bearer(&named), None).unwrap();
}

// HS256 works only when an HMAC key is configured explicitly.
#[test]
fn hs256_needs_an_explicit_hmac_key() {
    let secret = b"0123456789abcdef0123456789abcdef";
    let key = jsonwebtoken::EncodingKey::from_secret(secret).unwrap();
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims("svc"),
        &key,
    )
    .unwrap();

    let keys = keys();
    assert_eq!(
        refusal(&authenticator(&keys.settings), &bearer(&token)),
        "unknown signing key"
    );

    let mut verifier = JwtVerifier::new(vec![ISSUER.to_owned()], AUDIENCE.to_owned());
    verifier
        .add_hmac_secret(
            "secret".as_ref(),
            secret,
            jsonwebtoken::Algorithm::HS256,
            None,
            None,
        )
        .unwrap();
    assert_eq!(
        verifier.verify(&token).unwrap(),
        CallerIdentity::new(ISSUER, "svc")
    );
    let short = verifier.add_hmac_secret(
        "short".as_ref(),
        b"short",
        jsonwebtoken::Algorithm::HS256,
        None,
        None,
    );
    assert!(matches!(short, Err(AuthError::InvalidConfig { .. })));
}

// Without required authentication, no token means an anonymous caller; a bad token still fails.
#[test]
fn optional_authentication_allows_anonymous_but_not_bad_tokens() {
    let keys = keys();
    let auth = keys
        .settings
        .verifier()
        .map(|verifier| Authenticator::anonymous().with_jwt(verifier))
        .unwrap();
    assert_eq!(
        auth.authenticate_parts(&MetadataMap::new(), None).unwrap(),
        None
    );
    let expired = keys
        .es
        .sign(&with(claims("a"), json!({"exp": now() - 600})));
    assert_eq!(refusal(&auth, &bearer(&expired)), "token expired");
}
