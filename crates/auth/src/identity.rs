//! [`IdentitySettings`]: the daemon's `[identity]` table, which turns on delegated tokens for
//! tools, and [`OwnerMintPolicy`], the policy that lets a session's owner mint.
//!
//! ```toml
//! [identity]
//! issuer = "https://agents.example.com"    # the `iss` of every minted token
//! signing_key = "mint-es256.key.pem"       # PKCS#8 PEM private key (relative: to the file)
//! algorithm = "ES256"                      # ES256 (default), ES384, EdDSA; HS256 for tests
//! key_id = "mint-2026"                     # optional `kid`, also in the JWKS
//! token_lifetime_secs = 300                # default 300, at most 3600
//! scope = "tools"                          # optional `scope` claim
//! audiences = ["https://mcp.example.com"]  # optional: refuse any other audience
//! mint_policy = "host"                     # host (default): [auth.authorization] decides;
//!                                          # owner: the session's owner may mint
//! ```

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use agentsessions_api::{Action, ApiError, AuthorizationRequest, Authorizer};
use async_trait::async_trait;
use jsonwebtoken::{Algorithm, EncodingKey};
use serde::{Deserialize, Serialize};

use crate::error::{AuthError, Result};
use crate::mint::{DEFAULT_TOKEN_LIFETIME_SECS, SigningKey, TokenIssuer};
use crate::pem;

/// The longest lifetime a delegated token may be configured with, in seconds.
pub const MAX_TOKEN_LIFETIME_SECS: u64 = 3600;

/// Who decides whether a session may mint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MintPolicy {
    /// The host's `[auth.authorization]` policy decides [`Action::Mint`]. Without one (policy
    /// `none`) every mint is allowed; the built-in `owner` and `owner_allowlist` policies deny
    /// mint by design (extensions §2), so pair them with [`MintPolicy::Owner`].
    #[default]
    Host,
    /// [`OwnerMintPolicy`]: a session's verified owner may mint for that session.
    Owner,
}

/// `[identity]`: delegated tokens for the tools a session's harness calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentitySettings {
    /// The `iss` of every token (this host, as its audiences know it).
    pub issuer: String,
    /// The private key file (PKCS#8 PEM; an HMAC secret's raw bytes for `HS*`).
    pub signing_key: PathBuf,
    /// `ES256` (default), `ES384`, `EdDSA`, or `HS256`/`HS384`/`HS512` (tests and single-party
    /// setups only: every verifier then holds the secret).
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    /// The `kid` of every token header and of the JWKS entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// How long a token lives, in seconds (default 300, at most 3600).
    #[serde(default = "default_lifetime")]
    pub token_lifetime_secs: u64,
    /// The `scope` claim of every token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The only audiences tokens are minted for; empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// Who decides whether a session may mint.
    #[serde(default)]
    pub mint_policy: MintPolicy,
}

fn default_algorithm() -> String {
    "ES256".to_owned()
}

fn default_lifetime() -> u64 {
    DEFAULT_TOKEN_LIFETIME_SECS
}

impl IdentitySettings {
    /// Settings for `issuer` signing with the ES256 key in `signing_key`, with the defaults.
    pub fn new(issuer: impl Into<String>, signing_key: impl Into<PathBuf>) -> Self {
        Self {
            issuer: issuer.into(),
            signing_key: signing_key.into(),
            algorithm: default_algorithm(),
            key_id: None,
            token_lifetime_secs: DEFAULT_TOKEN_LIFETIME_SECS,
            scope: None,
            audiences: Vec::new(),
            mint_policy: MintPolicy::Host,
        }
    }

    /// Resolves a relative key path against `base` (the configuration file's directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        self.signing_key = base.join(&self.signing_key);
    }

    /// Loads the key and returns the issuer, with `host_policy` (the `[auth.authorization]`
    /// authorizer, if any) deciding mints under [`MintPolicy::Host`].
    ///
    /// # Errors
    ///
    /// [`AuthError::InvalidConfig`] for an empty issuer or audience, or a lifetime of 0 or over
    /// [`MAX_TOKEN_LIFETIME_SECS`]; [`AuthError::UnsupportedAlgorithm`]; [`AuthError::ReadFile`]
    /// for a key file that cannot be read; [`AuthError::InvalidSigningKey`] for one that does
    /// not hold a usable key for the algorithm.
    pub fn issuer(&self, host_policy: Option<Arc<dyn Authorizer>>) -> Result<TokenIssuer> {
        if self.issuer.is_empty() {
            return Err(AuthError::InvalidConfig {
                setting: "identity.issuer",
                problem: "must not be empty",
            });
        }
        if self.token_lifetime_secs == 0 || self.token_lifetime_secs > MAX_TOKEN_LIFETIME_SECS {
            return Err(AuthError::InvalidConfig {
                setting: "identity.token_lifetime_secs",
                problem: "must be between 1 and 3600 seconds",
            });
        }
        if self.audiences.iter().any(String::is_empty) {
            return Err(AuthError::InvalidConfig {
                setting: "identity.audiences",
                problem: "an audience must not be empty",
            });
        }
        let key = self.signing_key()?;
        let mut issuer = TokenIssuer::new(self.issuer.clone(), key)
            .with_lifetime(self.token_lifetime_secs)
            .with_audiences(self.audiences.clone());
        if let Some(scope) = &self.scope {
            issuer = issuer.with_scope(scope.clone());
        }
        let policy = match self.mint_policy {
            MintPolicy::Host => host_policy,
            MintPolicy::Owner => Some(Arc::new(OwnerMintPolicy) as Arc<dyn Authorizer>),
        };
        if let Some(policy) = policy {
            issuer = issuer.with_policy(policy);
        }
        // A key that parses but cannot sign (or yield its public half) fails here, at startup,
        // not on a harness's first mint.
        let invalid = |source| AuthError::InvalidSigningKey {
            path: self.signing_key.clone(),
            source,
        };
        issuer.jwks().map_err(|err| match err {
            AuthError::Signing { source } => invalid(source),
            other => other,
        })?;
        issuer.check_key().map_err(|err| match err {
            AuthError::Signing { source } => invalid(source),
            other => other,
        })?;
        Ok(issuer)
    }

    fn signing_key(&self) -> Result<SigningKey> {
        let algorithm =
            Algorithm::from_str(&self.algorithm).map_err(|_| AuthError::UnsupportedAlgorithm {
                algorithm: self.algorithm.clone(),
                what: "identity.algorithm (ES256, ES384, EdDSA, HS256, HS384 or HS512)",
            })?;
        let bytes = pem::read(&self.signing_key)?;
        let invalid = |source| AuthError::InvalidSigningKey {
            path: self.signing_key.clone(),
            source,
        };
        let key = match algorithm {
            Algorithm::ES256 | Algorithm::ES384 => {
                EncodingKey::from_ec_pem(&bytes).map_err(invalid)?
            }
            Algorithm::EdDSA => EncodingKey::from_ed_pem(&bytes).map_err(invalid)?,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
                let mut secret = bytes;
                while secret.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    secret.pop();
                }
                if secret.len() < 32 {
                    return Err(AuthError::InvalidConfig {
                        setting: "identity.signing_key",
                        problem: "an HMAC secret needs at least 32 bytes",
                    });
                }
                EncodingKey::from_secret(&secret).map_err(invalid)?
            }
            _ => {
                return Err(AuthError::UnsupportedAlgorithm {
                    algorithm: self.algorithm.clone(),
                    what: "identity.algorithm (ES256, ES384, EdDSA, HS256, HS384 or HS512)",
                });
            }
        };
        Ok(SigningKey {
            algorithm,
            key,
            kid: self.key_id.clone(),
        })
    }
}

/// Allows [`Action::Mint`] to a session's verified owner, for that session only, and denies
/// every other action: a separate mint policy, as the v0.3.0 API asks of hosts that enforce
/// ownership (the built-in owner policies deny mint even to owners).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnerMintPolicy;

#[async_trait]
impl Authorizer for OwnerMintPolicy {
    async fn authorize(&self, request: &AuthorizationRequest) -> agentsessions_api::Result<()> {
        let allowed = request.action == Action::Mint
            && request.caller.valid()
            && !request.session_uid.is_empty()
            && request.owner == request.caller;
        if allowed {
            Ok(())
        } else {
            Err(ApiError::PermissionDenied)
        }
    }
}
