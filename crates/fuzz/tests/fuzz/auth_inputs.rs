//! Credentials from outside: bearer JWTs, JWKS documents, and PEM bundles and keys. Each is
//! accepted or refused with an error; a token that verifies after a mutation names the same
//! caller as the token it came from (the signature covers what it says).

use agentsessions_auth::{
    ClientCertIdentifier, HmacKeySettings, JwtSettings, JwtVerifier, PublicKeySettings,
};
use agentsessions_fuzz::{Corpus, bytes_or_mutation, config, config_scaled, run, text_or_mutation};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use proptest::prelude::*;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "agentsessions";
const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

fn claims(subject: &str) -> serde_json::Value {
    serde_json::json!({
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": subject,
        "exp": 4_102_444_800_u64,
        "nbf": 0,
    })
}

#[test]
fn bearer_tokens_verify_only_as_signed() {
    let mut verifier = JwtVerifier::new(vec![ISSUER.to_owned()], AUDIENCE.to_owned());
    verifier
        .add_hmac_secret("secret".as_ref(), SECRET, Algorithm::HS256, None, None)
        .unwrap();
    let key = EncodingKey::from_secret(SECRET).unwrap();
    let seeds: Vec<Vec<u8>> = ["alice", "bob", "svc-\u{e9}"]
        .iter()
        .map(|who| {
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims(who), &key)
                .unwrap()
                .into_bytes()
        })
        .collect();
    let originals: Vec<String> = seeds
        .iter()
        .map(|s| String::from_utf8(s.clone()).unwrap())
        .collect();
    run(
        "auth/jwt_verify",
        config(),
        &text_or_mutation(seeds),
        |token| {
            if let Ok(caller) = verifier.verify(&token) {
                prop_assert_eq!(&caller.issuer, ISSUER);
                let signed = originals
                    .iter()
                    .any(|o| verifier.verify(o).is_ok_and(|c| c == caller));
                prop_assert!(signed, "a forged token verified as {:?}", caller);
            }
            Ok(())
        },
    );
}

#[test]
fn jwks_documents_load_or_fail() {
    let inputs = bytes_or_mutation(Corpus::load("jwt").unwrap().bytes());
    run("auth/jwks", config(), &inputs, |json| {
        let mut verifier = JwtVerifier::new(vec![ISSUER.to_owned()], AUDIENCE.to_owned());
        let _loaded_or_refused = verifier.add_jwks("jwks.json".as_ref(), &json);
        Ok(())
    });
}

/// A CA certificate and an EC private key, as PEM.
fn pem_seeds() -> Vec<Vec<u8>> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::default();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = params.self_signed(&key).unwrap();
    vec![
        ca.pem().into_bytes(),
        key.serialize_pem().into_bytes(),
        key.public_key_pem().into_bytes(),
    ]
}

#[test]
fn pem_bundles_and_keys_load_or_fail() {
    let seeds = pem_seeds();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key.pem");
    run(
        "auth/pem",
        config_scaled(1, 2),
        &bytes_or_mutation(seeds),
        |pem| {
            let _anchors = ClientCertIdentifier::from_pem("ca.pem".as_ref(), &pem, None);
            // The same bytes as a configured public key and as an HMAC secret file.
            std::fs::write(&key_file, &pem).unwrap();
            let settings = JwtSettings {
                issuers: vec![ISSUER.to_owned()],
                audience: AUDIENCE.to_owned(),
                jwks_file: None,
                public_keys: vec![PublicKeySettings {
                    file: key_file.clone(),
                    algorithm: "ES256".to_owned(),
                    kid: None,
                    issuer: None,
                }],
                hmac_keys: Vec::<HmacKeySettings>::new(),
                leeway_secs: 60,
            };
            let _verifier = settings.verifier();
            Ok(())
        },
    );
}
