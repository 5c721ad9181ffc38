//! [`AuthConfig`]: the `[auth]` part of the daemon's TOML configuration, and what it builds (the
//! server TLS config, the [`Authenticator`] and the [`Authorizer`]).
//!
//! ```toml
//! [auth]
//! require_authentication = true        # default: true when a policy is set
//!
//! [auth.tls]
//! cert = "server.pem"
//! key = "server.key"
//! client_ca = "clients-ca.pem"
//! client_auth = "require"              # none | optional | require
//!
//! [auth.jwt]
//! issuers = ["https://idp.example.com"]
//! audience = "agentsessions"
//! jwks_file = "idp-jwks.json"
//! leeway_secs = 60
//!
//! [auth.authorization]
//! policy = "owner_allowlist"           # none | owner | owner_allowlist
//!
//! [[auth.authorization.allow]]
//! actions = ["create", "list"]
//! issuer = "https://idp.example.com"
//! subject = "ops-bot"
//! ```

use std::path::Path;
use std::sync::Arc;

use agentsessions_api::{
    Action, Authorizer, CallerIdentity, OwnerAllowlistAuthorizer, OwnerAuthorizer,
};
use serde::{Deserialize, Serialize};

use crate::authenticator::Authenticator;
use crate::error::{AuthError, Result};
use crate::jwt::JwtSettings;
use crate::tls::{ClientAuth, TlsSettings};

/// Transport security, authentication and authorization for one listener.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Refuse anonymous calls with `UNAUTHENTICATED`. Defaults to true when an authorization
    /// policy is set, false otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_authentication: Option<bool>,
    /// Serve TLS (and optionally verify client certificates). Without it the listener is
    /// plaintext.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSettings>,
    /// Accept bearer tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<JwtSettings>,
    /// The authorization policy.
    #[serde(default)]
    pub authorization: AuthorizationSettings,
}

/// Which built-in [`Authorizer`] to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// No checks and no owners (the published server's behavior).
    #[default]
    None,
    /// [`OwnerAuthorizer`].
    Owner,
    /// [`OwnerAllowlistAuthorizer`] with the `allow` entries.
    OwnerAllowlist,
}

/// `[auth.authorization]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationSettings {
    /// The policy.
    #[serde(default)]
    pub policy: Policy,
    /// Allowlist entries (only with `policy = "owner_allowlist"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<AllowEntry>,
}

/// One exact caller allowed some global or approval actions (extensions §2): `create`, `list`,
/// `approve`, `registry.read`, `registry.list`, `registry.register`, `registry.retire`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowEntry {
    /// The actions, by their v0.3.0 API names.
    pub actions: Vec<String>,
    /// The caller's issuer, exactly as authentication produces it.
    pub issuer: String,
    /// The caller's subject, exactly as authentication produces it.
    pub subject: String,
}

impl AuthConfig {
    /// Whether anonymous calls are refused: `require_authentication`, or by default whether a
    /// policy is set.
    pub fn effective_require_authentication(&self) -> bool {
        self.require_authentication
            .unwrap_or(self.authorization.policy != Policy::None)
    }

    /// Whether a credential kind that yields a [`CallerIdentity`] is configured: mTLS (a client
    /// CA with `optional` or `require`) or bearer tokens.
    pub fn yields_identity(&self) -> bool {
        let mtls = self
            .tls
            .as_ref()
            .is_some_and(|tls| tls.client_ca.is_some() && tls.client_auth() != ClientAuth::None);
        mtls || self.jwt.is_some()
    }

    /// Checks the settings against each other, without touching files.
    ///
    /// # Errors
    ///
    /// [`AuthError::InvalidConfig`] when a policy or `require_authentication` is set without a
    /// credential kind (extensions §2: a server with an authorizer refuses to start without an
    /// authentication mode), when mTLS is set up inconsistently, or when allow entries come
    /// without `owner_allowlist`; [`AuthError::UnknownAction`] / [`AuthError::NotAllowlistable`]
    /// for a bad entry.
    pub fn validate(&self) -> Result<()> {
        if let Some(tls) = &self.tls {
            tls.validate()?;
        }
        if !self.yields_identity() {
            if self.authorization.policy != Policy::None {
                return Err(AuthError::InvalidConfig {
                    setting: "authorization.policy",
                    problem: "an authorization policy needs mTLS (tls.client_ca) or bearer \
                              tokens (jwt) to identify callers",
                });
            }
            if self.effective_require_authentication() {
                return Err(AuthError::InvalidConfig {
                    setting: "require_authentication",
                    problem: "requires mTLS (tls.client_ca) or bearer tokens (jwt)",
                });
            }
        }
        self.authorization.allowlist()?;
        Ok(())
    }

    /// Resolves relative file paths against `base` (the configuration file's directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        if let Some(tls) = &mut self.tls {
            tls.resolve_paths(base);
        }
        if let Some(jwt) = &mut self.jwt {
            jwt.resolve_paths(base);
        }
    }

    /// Validates and loads every credential source into an [`Authenticator`].
    ///
    /// # Errors
    ///
    /// [`AuthConfig::validate`]'s errors, and file, PEM, JWKS and key errors naming the file.
    pub fn authenticator(&self) -> Result<Authenticator> {
        self.validate()?;
        let mut authenticator = Authenticator::anonymous()
            .requiring_authentication(self.effective_require_authentication());
        if let Some(identifier) = self
            .tls
            .as_ref()
            .map(TlsSettings::client_identifier)
            .transpose()?
            .flatten()
        {
            authenticator = authenticator.with_client_certs(identifier);
        }
        if let Some(jwt) = &self.jwt {
            authenticator = authenticator.with_jwt(jwt.verifier()?);
        }
        Ok(authenticator)
    }

    /// The authorizer for the configured policy; `None` for `policy = "none"`.
    ///
    /// # Errors
    ///
    /// As [`AuthConfig::validate`].
    pub fn authorizer(&self) -> Result<Option<Arc<dyn Authorizer>>> {
        self.validate()?;
        self.authorization.authorizer()
    }

    /// tonic's server TLS config, or `None` for a plaintext listener.
    ///
    /// # Errors
    ///
    /// As [`TlsSettings::server_tls_config`].
    pub fn server_tls_config(&self) -> Result<Option<tonic::transport::ServerTlsConfig>> {
        self.tls
            .as_ref()
            .map(TlsSettings::server_tls_config)
            .transpose()
    }
}

impl AuthorizationSettings {
    /// The allowlist policy the entries describe (also checks them).
    ///
    /// # Errors
    ///
    /// [`AuthError::InvalidConfig`] for entries without `owner_allowlist`, or an entry with no
    /// actions or an incomplete caller; [`AuthError::UnknownAction`] /
    /// [`AuthError::NotAllowlistable`] for a bad action name.
    pub fn allowlist(&self) -> Result<OwnerAllowlistAuthorizer> {
        if !self.allow.is_empty() && self.policy != Policy::OwnerAllowlist {
            return Err(AuthError::InvalidConfig {
                setting: "authorization.allow",
                problem: "allow entries need policy = \"owner_allowlist\"",
            });
        }
        let mut policy = OwnerAllowlistAuthorizer::new();
        for entry in &self.allow {
            let caller = CallerIdentity::new(entry.issuer.clone(), entry.subject.clone());
            if !caller.valid() || entry.actions.is_empty() {
                return Err(AuthError::InvalidConfig {
                    setting: "authorization.allow",
                    problem: "each entry needs actions, an issuer and a subject",
                });
            }
            for name in &entry.actions {
                let action = Action::parse(name)
                    .ok_or_else(|| AuthError::UnknownAction { name: name.clone() })?;
                // An entry that could never take effect is a configuration mistake, not a no-op.
                if !action.is_allowlistable() {
                    return Err(AuthError::NotAllowlistable { action });
                }
                policy = policy.allowing(action, caller.clone());
            }
        }
        Ok(policy)
    }

    /// The authorizer for the policy; `None` for `policy = "none"`.
    ///
    /// # Errors
    ///
    /// As [`AuthorizationSettings::allowlist`].
    pub fn authorizer(&self) -> Result<Option<Arc<dyn Authorizer>>> {
        let allowlist = self.allowlist()?;
        Ok(match self.policy {
            Policy::None => None,
            Policy::Owner => Some(Arc::new(OwnerAuthorizer)),
            Policy::OwnerAllowlist => Some(Arc::new(allowlist)),
        })
    }
}
