//! Bearer tokens: OIDC-style JWTs verified against configured keys.
//!
//! A token is accepted only when, in this order: it parses; a configured key matches its `kid`
//! (or, without a `kid`, its `alg`); its `alg` is the one that key is configured for; the
//! signature verifies; `iss` is a configured issuer (and the key's issuer, when the key is bound to
//! one); `aud` contains the configured audience; `exp` has not passed and `nbf` has, both give or
//! take the clock skew; and `sub` is a non-empty string. The identity is (`iss`, `sub`).
//!
//! Keys come from JWKS files (asymmetric keys only: `RSA`, `EC` P-256/P-384, `OKP` Ed25519), PEM
//! public keys, and, only when configured explicitly, HMAC secrets. A key never accepts a token
//! made for another algorithm, so an RSA public key cannot be replayed as an HMAC secret.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use agentsessions_api::CallerIdentity;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};

use crate::error::{AuthError, Result};
use crate::pem;

/// The default allowed clock skew, in seconds.
pub const DEFAULT_LEEWAY_SECS: u64 = 60;

/// Bearer-token settings (`[auth.jwt]` in the daemon's configuration).
///
/// ```toml
/// issuers = ["https://idp.example.com"]
/// audience = "agentsessions"
/// jwks_file = "/etc/agentsessions/idp-jwks.json"   # keys trusted for every issuer above
/// leeway_secs = 60
///
/// [[public_keys]]                                   # optional PEM keys
/// file = "/etc/agentsessions/ci-es256.pub.pem"
/// algorithm = "ES256"
/// kid = "ci-2026"                                   # optional: match the token's kid
/// issuer = "https://ci.example.com"                 # optional: only for this issuer
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtSettings {
    /// Accepted `iss` values, compared exactly.
    pub issuers: Vec<String>,
    /// The audience that `aud` must contain.
    pub audience: String,
    /// A JWKS document (`{"keys": [...]}`); its keys are trusted for every issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_file: Option<PathBuf>,
    /// PEM public keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub public_keys: Vec<PublicKeySettings>,
    /// HMAC secrets (HS256/384/512). Only for deployments that cannot use asymmetric keys: anyone
    /// holding the secret can mint tokens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hmac_keys: Vec<HmacKeySettings>,
    /// Allowed clock skew for `exp` and `nbf`, in seconds (default 60).
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
}

fn default_leeway() -> u64 {
    DEFAULT_LEEWAY_SECS
}

/// One PEM public key (SubjectPublicKeyInfo, or PKCS#1 for RSA, or a certificate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicKeySettings {
    /// The PEM file.
    pub file: PathBuf,
    /// `RS256`, `RS384`, `RS512`, `PS256`, `PS384`, `PS512`, `ES256`, `ES384` or `EdDSA`.
    pub algorithm: String,
    /// The `kid` tokens signed with it carry, if they carry one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// Restricts the key to tokens from this issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

/// One HMAC secret, read from a file as raw bytes (a trailing newline is dropped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HmacKeySettings {
    /// The secret file.
    pub secret_file: PathBuf,
    /// `HS256` (default), `HS384` or `HS512`.
    #[serde(default = "default_hmac")]
    pub algorithm: String,
    /// The `kid` tokens signed with it carry, if they carry one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// Restricts the key to tokens from this issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

fn default_hmac() -> String {
    "HS256".to_owned()
}

impl JwtSettings {
    /// Settings for `issuers` and `audience` with no keys yet and the default skew.
    pub fn new(
        issuers: impl IntoIterator<Item = impl Into<String>>,
        audience: impl Into<String>,
    ) -> Self {
        Self {
            issuers: issuers.into_iter().map(Into::into).collect(),
            audience: audience.into(),
            jwks_file: None,
            public_keys: Vec::new(),
            hmac_keys: Vec::new(),
            leeway_secs: DEFAULT_LEEWAY_SECS,
        }
    }

    /// Resolves relative key paths against `base` (the configuration file's directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        let paths = self
            .jwks_file
            .iter_mut()
            .chain(self.public_keys.iter_mut().map(|key| &mut key.file))
            .chain(self.hmac_keys.iter_mut().map(|key| &mut key.secret_file));
        for path in paths {
            *path = base.join(&*path);
        }
    }

    /// Loads every key and returns the verifier.
    ///
    /// # Errors
    ///
    /// [`AuthError::InvalidConfig`] without issuers, audience or keys; file, JWKS and key errors
    /// naming the file; [`AuthError::UnsupportedAlgorithm`] for an algorithm a key kind cannot
    /// use.
    pub fn verifier(&self) -> Result<JwtVerifier> {
        if self.issuers.is_empty() || self.issuers.iter().any(String::is_empty) {
            return Err(AuthError::InvalidConfig {
                setting: "jwt.issuers",
                problem: "list at least one issuer, none empty",
            });
        }
        if self.audience.is_empty() {
            return Err(AuthError::InvalidConfig {
                setting: "jwt.audience",
                problem: "must not be empty",
            });
        }
        let mut verifier = JwtVerifier::new(self.issuers.clone(), self.audience.clone())
            .with_leeway(self.leeway_secs);
        if let Some(path) = &self.jwks_file {
            verifier.add_jwks(path, &pem::read(path)?)?;
        }
        let bound = self.public_keys.iter().map(|key| &key.issuer);
        let bound = bound.chain(self.hmac_keys.iter().map(|key| &key.issuer));
        for issuer in bound.flatten() {
            if !self.issuers.contains(issuer) {
                return Err(AuthError::InvalidConfig {
                    setting: "jwt.public_keys.issuer",
                    problem: "a key's issuer must be one of jwt.issuers",
                });
            }
        }
        for key in &self.public_keys {
            let algorithm = parse_algorithm(&key.algorithm, "a PEM public key")?;
            let decoding = public_key_from_pem(&key.file, algorithm, &pem::read(&key.file)?)?;
            verifier.add_key(VerificationKey {
                kid: key.kid.clone(),
                algorithm,
                key: decoding,
                issuer: key.issuer.clone(),
            });
        }
        for key in &self.hmac_keys {
            let algorithm = parse_algorithm(&key.algorithm, "an HMAC key")?;
            let mut secret = pem::read(&key.secret_file)?;
            while secret.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                secret.pop();
            }
            verifier.add_hmac_secret(
                &key.secret_file,
                &secret,
                algorithm,
                key.kid.clone(),
                key.issuer.clone(),
            )?;
        }
        if verifier.keys.is_empty() {
            return Err(AuthError::InvalidConfig {
                setting: "jwt",
                problem: "configure jwks_file, public_keys or hmac_keys",
            });
        }
        Ok(verifier)
    }
}

fn parse_algorithm(name: &str, what: &'static str) -> Result<Algorithm> {
    Algorithm::from_str(name).map_err(|_| AuthError::UnsupportedAlgorithm {
        algorithm: name.to_owned(),
        what,
    })
}

fn is_hmac(algorithm: Algorithm) -> bool {
    matches!(
        algorithm,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    )
}

fn public_key_from_pem(path: &Path, algorithm: Algorithm, pem: &[u8]) -> Result<DecodingKey> {
    let key = match algorithm {
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512 => DecodingKey::from_rsa_pem(pem),
        Algorithm::ES256 | Algorithm::ES384 => DecodingKey::from_ec_pem(pem),
        Algorithm::EdDSA => DecodingKey::from_ed_pem(pem),
        _ => {
            return Err(AuthError::UnsupportedAlgorithm {
                algorithm: format!("{algorithm:?}"),
                what: "a PEM public key (HMAC secrets go in hmac_keys)",
            });
        }
    };
    key.map_err(|source| AuthError::InvalidJwtKey {
        path: path.to_path_buf(),
        source,
    })
}

/// One trusted key.
#[derive(Clone)]
pub struct VerificationKey {
    /// The key id tokens name it by, if any.
    pub kid: Option<String>,
    /// The one algorithm it verifies.
    pub algorithm: Algorithm,
    /// The key.
    pub key: DecodingKey,
    /// The one issuer it vouches for, if restricted.
    pub issuer: Option<String>,
}

impl std::fmt::Debug for VerificationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key material (an HMAC secret, possibly) stays out of logs.
        f.debug_struct("VerificationKey")
            .field("kid", &self.kid)
            .field("algorithm", &self.algorithm)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// Verifies bearer tokens and turns them into [`CallerIdentity`]s.
#[derive(Debug, Clone)]
pub struct JwtVerifier {
    issuers: Vec<String>,
    audience: String,
    leeway_secs: u64,
    keys: Vec<VerificationKey>,
}

/// The claims read after verification; `aud`, `exp` and `nbf` are checked by jsonwebtoken.
#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: Option<String>,
}

impl JwtVerifier {
    /// A verifier for `issuers` and `audience`, with no keys and the default skew.
    pub fn new(issuers: Vec<String>, audience: String) -> Self {
        Self {
            issuers,
            audience,
            leeway_secs: DEFAULT_LEEWAY_SECS,
            keys: Vec::new(),
        }
    }

    /// Sets the allowed clock skew.
    #[must_use]
    pub fn with_leeway(mut self, leeway_secs: u64) -> Self {
        self.leeway_secs = leeway_secs;
        self
    }

    /// Trusts one more key.
    pub fn add_key(&mut self, key: VerificationKey) {
        self.keys.push(key);
    }

    /// Trusts the asymmetric signing keys of the JWKS document `json` (read from `path`).
    /// Encryption keys, symmetric keys and key types this server cannot use are skipped with a
    /// warning; a document with no usable key is an error.
    ///
    /// # Errors
    ///
    /// [`AuthError::InvalidJwks`] when it is not `{"keys": [...]}`, [`AuthError::NoUsableJwk`]
    /// when no key is usable.
    pub fn add_jwks(&mut self, path: &Path, json: &[u8]) -> Result<()> {
        #[derive(Deserialize)]
        struct Document {
            keys: Vec<serde_json::Value>,
        }
        let document: Document =
            serde_json::from_slice(json).map_err(|source| AuthError::InvalidJwks {
                path: path.to_path_buf(),
                source,
            })?;
        let before = self.keys.len();
        for (index, value) in document.keys.into_iter().enumerate() {
            match jwk_key(value) {
                Ok(key) => self.keys.push(key),
                Err(reason) => {
                    tracing::warn!(path = %path.display(), index, reason, "skipping JWKS key");
                }
            }
        }
        if self.keys.len() == before {
            return Err(AuthError::NoUsableJwk {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Trusts an HMAC secret for `algorithm` (HS256/384/512).
    ///
    /// # Errors
    ///
    /// [`AuthError::UnsupportedAlgorithm`] for a non-HMAC algorithm, and
    /// [`AuthError::InvalidConfig`] for a secret shorter than 32 bytes.
    pub fn add_hmac_secret(
        &mut self,
        path: &Path,
        secret: &[u8],
        algorithm: Algorithm,
        kid: Option<String>,
        issuer: Option<String>,
    ) -> Result<()> {
        if !is_hmac(algorithm) {
            return Err(AuthError::UnsupportedAlgorithm {
                algorithm: format!("{algorithm:?}"),
                what: "an HMAC key",
            });
        }
        if secret.len() < 32 {
            return Err(AuthError::InvalidConfig {
                setting: "jwt.hmac_keys.secret_file",
                problem: "an HMAC secret needs at least 32 bytes",
            });
        }
        let key = DecodingKey::from_secret(secret).map_err(|source| AuthError::InvalidJwtKey {
            path: path.to_path_buf(),
            source,
        })?;
        self.keys.push(VerificationKey {
            kid,
            algorithm,
            key,
            issuer,
        });
        Ok(())
    }

    /// How many keys are trusted.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Verifies `token` (the part after `Bearer `) and returns its caller.
    ///
    /// # Errors
    ///
    /// One of [`AuthError::MalformedToken`], [`AuthError::UnknownSigningKey`],
    /// [`AuthError::AlgorithmNotAccepted`], [`AuthError::BadSignature`],
    /// [`AuthError::WrongIssuer`], [`AuthError::WrongAudience`], [`AuthError::TokenExpired`],
    /// [`AuthError::TokenNotYetValid`], [`AuthError::MissingClaim`] or
    /// [`AuthError::MalformedClaim`]; all map to `UNAUTHENTICATED`.
    pub fn verify(&self, token: &str) -> Result<CallerIdentity> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| AuthError::MalformedToken)?;
        // A token naming a key is checked against keys with that id; keys configured without an
        // id stand in for any id the issuer may assign.
        let mut candidates: Vec<&VerificationKey> = match &header.kid {
            Some(kid) => self
                .keys
                .iter()
                .filter(|key| key.kid.as_deref() == Some(kid.as_str()))
                .collect(),
            None => Vec::new(),
        };
        if candidates.is_empty() {
            candidates = self
                .keys
                .iter()
                .filter(|key| key.kid.is_none() || header.kid.is_none())
                .collect();
        } else if candidates.iter().all(|key| key.algorithm != header.alg) {
            return Err(AuthError::AlgorithmNotAccepted);
        }
        // A key bound to an issuer that is no longer configured vouches for nobody.
        candidates.retain(|key| {
            key.algorithm == header.alg
                && key
                    .issuer
                    .as_ref()
                    .is_none_or(|issuer| self.issuers.contains(issuer))
        });
        if candidates.is_empty() {
            return Err(AuthError::UnknownSigningKey);
        }
        for key in candidates {
            match self.verify_with(token, key) {
                Ok(caller) => return Ok(caller),
                // Another key with the same kid or algorithm may still match.
                Err(AuthError::BadSignature) => {}
                Err(other) => return Err(other),
            }
        }
        Err(AuthError::BadSignature)
    }

    fn verify_with(&self, token: &str, key: &VerificationKey) -> Result<CallerIdentity> {
        let mut validation = Validation::new(key.algorithm);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.set_audience(&[&self.audience]);
        match &key.issuer {
            Some(issuer) => validation.set_issuer(&[issuer]),
            None => validation.set_issuer(&self.issuers),
        }
        validation.leeway = self.leeway_secs;
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
            .map_err(|err| map_jwt_error(err.kind()))?;
        let subject = data
            .claims
            .sub
            .filter(|sub| !sub.is_empty())
            .ok_or_else(|| AuthError::MissingClaim {
                claim: "sub".to_owned(),
            })?;
        Ok(CallerIdentity::new(data.claims.iss, subject))
    }
}

fn map_jwt_error(kind: &ErrorKind) -> AuthError {
    match kind {
        ErrorKind::InvalidSignature => AuthError::BadSignature,
        ErrorKind::ExpiredSignature => AuthError::TokenExpired,
        ErrorKind::ImmatureSignature => AuthError::TokenNotYetValid,
        ErrorKind::InvalidIssuer => AuthError::WrongIssuer,
        ErrorKind::InvalidAudience => AuthError::WrongAudience,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => {
            AuthError::AlgorithmNotAccepted
        }
        ErrorKind::MissingRequiredClaim(claim) => AuthError::MissingClaim {
            claim: claim.clone(),
        },
        ErrorKind::InvalidClaimFormat(claim) => AuthError::MalformedClaim {
            claim: claim.clone(),
        },
        // Shape, base64, JSON, UTF-8 and key-format problems: the token is not one we can read.
        _ => AuthError::MalformedToken,
    }
}

/// The verification key for one JWKS entry, or why it is skipped.
fn jwk_key(value: serde_json::Value) -> Result<VerificationKey, &'static str> {
    let jwk: Jwk =
        serde_json::from_value(value).map_err(|_| "not a JWK this server understands")?;
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return Err("not a signing key (use is not \"sig\")");
    }
    let inferred = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(params) => match params.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            _ => return Err("unsupported elliptic curve"),
        },
        AlgorithmParameters::OctetKeyPair(params) if params.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        AlgorithmParameters::OctetKey(_) => return Err("symmetric keys are never taken from JWKS"),
        _ => return Err("unsupported key type"),
    };
    let algorithm = match jwk.common.key_algorithm {
        Some(declared) => Algorithm::try_from(declared).map_err(|_| "unsupported \"alg\"")?,
        None => inferred,
    };
    if is_hmac(algorithm) || algorithm.family() != inferred.family() {
        return Err("\"alg\" does not fit the key type");
    }
    let key = DecodingKey::from_jwk(&jwk).map_err(|_| "key parameters do not parse")?;
    Ok(VerificationKey {
        kid: jwk.common.key_id,
        algorithm,
        key,
        issuer: None,
    })
}
