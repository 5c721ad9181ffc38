//! [`TokenIssuer`]: short-lived, audience-scoped delegated tokens for the tools a session's
//! harness calls, in the shape of OAuth 2.0 Token Exchange (RFC 8693, `act`) and the IETF
//! Transaction Tokens draft (`txn`, `tctx`).
//!
//! A token is minted only after the host policy allows [`Action::Mint`] for the session's
//! principal, names exactly one audience, and never carries (or is derived from) the credential
//! the caller presented to the host: the harness gets a fresh token signed by the host's own key.
//!
//! ```text
//! { "iss": "<[identity].issuer>",        "sub": "<principal subject>",
//!   "aud": "<one audience>",             "iat": t, "nbf": t, "exp": t + lifetime,
//!   "jti": "<random, unique>",           "scope": "<[identity].scope, when set>",
//!   "sub_iss": "<who vouched for sub>",  "act": { "sub": "<agent principal>", "iss": ".." },
//!   "txn": "<execution id>",
//!   "tctx": { "session_uid": "..", "execution_id": "..", "tool_call_id": ".." } }
//! ```

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agentsessions_api::{
    Action, ApiErrorKind, AuthorizationRequest, Authorizer, CallerIdentity, IdentityRef, Redactor,
};
use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};

use crate::error::{AuthError, Result};

/// The method name carried by the [`AuthorizationRequest`] of every mint (there is no RPC: a
/// harness or a tool hub asks the host in process).
pub const MINT_METHOD: &str = "agentsessions.identity/Mint";

/// The default token lifetime, in seconds.
pub const DEFAULT_TOKEN_LIFETIME_SECS: u64 = 300;

/// Who a session acts for: its verified owner and the agent principal bound to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPrincipal {
    /// The session's stored owner; empty for an unbound session.
    pub owner: CallerIdentity,
    /// The agent principal bound to the session (provenance); may be empty.
    pub agent: IdentityRef,
}

impl SessionPrincipal {
    /// The subject the token is about: the owner when the session has one, else the bound agent
    /// principal (its issuer and subject, or its principal name). `None` when neither is set.
    pub fn subject(&self) -> Option<CallerIdentity> {
        if self.owner.valid() {
            return Some(self.owner.clone());
        }
        let name = if self.agent.subject.is_empty() {
            &self.agent.principal
        } else {
            &self.agent.subject
        };
        (!name.is_empty()).then(|| CallerIdentity::new(self.agent.issuer.clone(), name.clone()))
    }
}

/// One mint: the audience and the turn (and tool call) it is for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MintRequest {
    /// The one audience the token is valid for (a tool server's resource identifier).
    pub audience: String,
    /// The session acting.
    pub session_uid: String,
    /// The execution (turn) acting.
    pub execution_id: String,
    /// The tool call the token is for; empty when the harness mints outside a call.
    pub tool_call_id: String,
    /// Who the session acts for.
    pub principal: SessionPrincipal,
}

/// The `act` claim (RFC 8693 §4.1): the agent acting for the subject.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActorClaim {
    /// The agent principal.
    pub sub: String,
    /// Who vouched for the agent principal, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iss: String,
}

/// The `tctx` claim: the transaction (turn and tool call) the token was minted for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionContext {
    /// The session.
    pub session_uid: String,
    /// The execution (turn).
    pub execution_id: String,
    /// The tool call, when the token was minted for one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool_call_id: String,
}

/// Every claim of a delegated token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegatedClaims {
    /// The issuer: this host (`[identity].issuer`).
    pub iss: String,
    /// The principal the session acts for.
    pub sub: String,
    /// Who vouched for `sub` (the owner's issuer); absent when unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub_iss: String,
    /// The one audience.
    pub aud: String,
    /// Issued at (seconds since the epoch).
    pub iat: u64,
    /// Not before: the issue time.
    pub nbf: u64,
    /// Expiry: `iat` plus the configured lifetime.
    pub exp: u64,
    /// A unique token id, for replay detection at the audience.
    pub jti: String,
    /// The configured scope, space-separated; absent when none is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The agent acting for `sub`; absent when the session has no agent principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<ActorClaim>,
    /// The transaction id: the execution the token was minted for.
    pub txn: String,
    /// The transaction context.
    pub tctx: TransactionContext,
}

/// The key the issuer signs with.
#[derive(Clone)]
pub struct SigningKey {
    /// The algorithm: `ES256`, `EdDSA` or (tests, single-party setups) an HMAC one.
    pub algorithm: Algorithm,
    /// The private key (or HMAC secret).
    pub key: EncodingKey,
    /// The `kid` put in every token header and in the JWKS.
    pub kid: Option<String>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("algorithm", &self.algorithm)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// Mints delegated tokens under the host's mint policy. Cheap to share behind an [`Arc`].
#[derive(Clone)]
pub struct TokenIssuer {
    issuer: String,
    key: SigningKey,
    lifetime_secs: u64,
    scope: Option<String>,
    audiences: Vec<String>,
    policy: Option<Arc<dyn Authorizer>>,
    /// Told every token minted, so one echoed back by a harness or a tool is never journaled.
    redactor: Option<Arc<Redactor>>,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("issuer", &self.issuer)
            .field("key", &self.key)
            .field("lifetime_secs", &self.lifetime_secs)
            .field("scope", &self.scope)
            .field("audiences", &self.audiences)
            .field("policy", &self.policy.is_some())
            .field("redacts", &self.redactor.is_some())
            .finish()
    }
}

impl TokenIssuer {
    /// An issuer named `issuer` signing with `key`, with the default lifetime, no scope, any
    /// audience and no policy (every mint allowed, as a host without an authorizer).
    pub fn new(issuer: impl Into<String>, key: SigningKey) -> Self {
        Self {
            issuer: issuer.into(),
            key,
            lifetime_secs: DEFAULT_TOKEN_LIFETIME_SECS,
            scope: None,
            audiences: Vec::new(),
            policy: None,
            redactor: None,
        }
    }

    /// Every token minted is remembered by `redactor` (`docs/security.md`, "Redaction").
    #[must_use]
    pub fn with_redactor(mut self, redactor: Arc<Redactor>) -> Self {
        self.redactor = Some(redactor);
        self
    }

    /// Tokens live `secs` seconds.
    #[must_use]
    pub fn with_lifetime(mut self, secs: u64) -> Self {
        self.lifetime_secs = secs;
        self
    }

    /// Every token carries `scope`.
    #[must_use]
    pub fn with_scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Only these audiences may be minted for (empty: any).
    #[must_use]
    pub fn with_audiences(mut self, audiences: Vec<String>) -> Self {
        self.audiences = audiences;
        self
    }

    /// Every mint must pass `policy`'s [`Action::Mint`] check.
    #[must_use]
    pub fn with_policy(mut self, policy: Arc<dyn Authorizer>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// The `iss` of every token.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// How long tokens live, in seconds.
    pub fn lifetime_secs(&self) -> u64 {
        self.lifetime_secs
    }

    /// The signing algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.key.algorithm
    }

    /// Mints a token for `request`, issued now.
    ///
    /// # Errors
    ///
    /// As [`TokenIssuer::mint_at`].
    pub async fn mint(&self, request: &MintRequest) -> Result<String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        self.mint_at(request, now).await
    }

    /// Mints a token for `request`, issued at `now` (seconds since the epoch).
    ///
    /// # Errors
    ///
    /// [`AuthError::InvalidMintRequest`] for an empty audience or missing session or execution;
    /// [`AuthError::AudienceNotAllowed`] for an audience outside `[identity].audiences`;
    /// [`AuthError::NoPrincipal`] when the session has neither an owner nor an agent principal;
    /// [`AuthError::MintDenied`] when the policy denies [`Action::Mint`];
    /// [`AuthError::MintPolicyFailed`] when the policy fails otherwise;
    /// [`AuthError::Signing`] when the key cannot sign. Nothing is minted on any error.
    pub async fn mint_at(&self, request: &MintRequest, now: u64) -> Result<String> {
        if request.audience.is_empty() {
            return Err(AuthError::InvalidMintRequest {
                problem: "the audience is empty",
            });
        }
        if request.session_uid.is_empty() || request.execution_id.is_empty() {
            return Err(AuthError::InvalidMintRequest {
                problem: "a token is minted for a session's execution; both ids are required",
            });
        }
        if !self.audiences.is_empty() && !self.audiences.contains(&request.audience) {
            return Err(AuthError::AudienceNotAllowed {
                audience: request.audience.clone(),
            });
        }
        let subject = request
            .principal
            .subject()
            .ok_or_else(|| AuthError::NoPrincipal {
                session: request.session_uid.clone(),
            })?;
        self.authorize(request, &subject).await?;
        let agent = &request.principal.agent;
        let actor_name = if agent.principal.is_empty() {
            &agent.subject
        } else {
            &agent.principal
        };
        let claims = DelegatedClaims {
            iss: self.issuer.clone(),
            sub: subject.subject,
            sub_iss: subject.issuer,
            aud: request.audience.clone(),
            iat: now,
            nbf: now,
            exp: now.saturating_add(self.lifetime_secs),
            jti: random_jti(),
            scope: self.scope.clone(),
            act: (!actor_name.is_empty()).then(|| ActorClaim {
                sub: actor_name.clone(),
                iss: agent.issuer.clone(),
            }),
            txn: request.execution_id.clone(),
            tctx: TransactionContext {
                session_uid: request.session_uid.clone(),
                execution_id: request.execution_id.clone(),
                tool_call_id: request.tool_call_id.clone(),
            },
        };
        let token = self.sign(&claims)?;
        if let Some(redactor) = &self.redactor {
            redactor.remember_minted(&token);
        }
        Ok(token)
    }

    fn sign(&self, claims: &DelegatedClaims) -> Result<String> {
        let mut header = Header::new(self.key.algorithm);
        header.kid.clone_from(&self.key.kid);
        jsonwebtoken::encode(&header, claims, &self.key.key)
            .map_err(|source| AuthError::Signing { source })
    }

    /// Signs a throwaway token, so a key that parses but cannot sign fails at startup.
    pub(crate) fn check_key(&self) -> Result<()> {
        self.sign(&DelegatedClaims::default()).map(drop)
    }

    async fn authorize(&self, request: &MintRequest, subject: &CallerIdentity) -> Result<()> {
        let Some(policy) = &self.policy else {
            return Ok(());
        };
        let check = AuthorizationRequest::for_session(
            subject.clone(),
            Action::Mint,
            request.session_uid.clone(),
            request.principal.owner.clone(),
            MINT_METHOD,
        );
        match policy.authorize(&check).await {
            Ok(()) => Ok(()),
            Err(err) if err.is(ApiErrorKind::PermissionDenied) => Err(AuthError::MintDenied),
            Err(err) => {
                tracing::warn!(error = %err, "mint policy failed");
                Err(AuthError::MintPolicyFailed)
            }
        }
    }

    /// The public key as a JWKS document (`{"keys": [..]}`) for the audiences that verify
    /// minted tokens. An HMAC secret is never published: the set is then empty.
    ///
    /// # Errors
    ///
    /// [`AuthError::Signing`] when the public half cannot be derived from the private key.
    pub fn jwks(&self) -> Result<JwkSet> {
        if self.key.key.family() == jsonwebtoken::AlgorithmFamily::Hmac {
            return Ok(JwkSet { keys: Vec::new() });
        }
        let mut jwk = Jwk::from_encoding_key(&self.key.key, self.key.algorithm)
            .map_err(|source| AuthError::Signing { source })?;
        jwk.common.key_id.clone_from(&self.key.kid);
        jwk.common.public_key_use = Some(PublicKeyUse::Signature);
        Ok(JwkSet { keys: vec![jwk] })
    }

    /// [`TokenIssuer::jwks`] as JSON text.
    ///
    /// # Errors
    ///
    /// As [`TokenIssuer::jwks`].
    pub fn jwks_json(&self) -> Result<String> {
        let set = self.jwks()?;
        serde_json::to_string(&set).map_err(|source| AuthError::Signing {
            source: source.into(),
        })
    }
}

fn random_jti() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
