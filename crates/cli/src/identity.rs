//! The host's delegated identity (`[identity]`): the token issuer, the minter bound to each
//! live turn's harness, and the [`DelegatedTokens`] a tool hub attaches to its calls. Sessions'
//! principals (owner and agent principal) are read from the journal.

use std::sync::Arc;

use agentsessions_api::{
    ApiError, Authorizer, CallerIdentity, IdentityRef, Redactor, StatusCode, TokenMinter,
};
use agentsessions_auth::{
    AuthError, DelegatedTokens, IdentitySettings, MintBinding, PrincipalSource, SessionPrincipal,
    SessionTokens, TokenIssuer,
};
use agentsessions_journal::{Journal, JournalError};
use agentsessions_server::placement::TokenMinting;

/// What `[identity]` assembles.
#[derive(Clone)]
pub struct DelegatedIdentity {
    /// The issuer (its [`TokenIssuer::jwks`] is what audiences verify with).
    pub issuer: Arc<TokenIssuer>,
    /// Binds a minter to each live turn (handed to the placer).
    pub minting: Arc<dyn TokenMinting>,
    /// Tokens per tool call, for a hub calling tool servers over HTTP.
    pub tokens: Arc<dyn DelegatedTokens>,
    /// The host's redactor, told every token the issuer mints; the service journals with it.
    pub redactor: Arc<Redactor>,
}

impl std::fmt::Debug for DelegatedIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedIdentity")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// Builds the delegated identity from `settings` (`None`: identity is not configured and
/// harnesses get no minter), with `host_policy` deciding mints under `mint_policy = "host"`.
///
/// # Errors
/// As [`IdentitySettings::issuer`]: the setting or key file to fix.
pub fn delegated_identity(
    settings: Option<&IdentitySettings>,
    host_policy: Option<Arc<dyn Authorizer>>,
    journal: Arc<dyn Journal>,
    redactor: Arc<Redactor>,
) -> Result<Option<DelegatedIdentity>, AuthError> {
    let Some(settings) = settings else {
        return Ok(None);
    };
    let issuer = Arc::new(
        settings
            .issuer(host_policy)?
            .with_redactor(Arc::clone(&redactor)),
    );
    let principals: Arc<dyn PrincipalSource> = Arc::new(JournalPrincipals { journal });
    Ok(Some(DelegatedIdentity {
        minting: Arc::new(IssuerMinting {
            issuer: Arc::clone(&issuer),
        }),
        tokens: Arc::new(SessionTokens::new(Arc::clone(&issuer), principals)),
        issuer,
        redactor,
    }))
}

/// [`TokenMinting`] over the host's issuer.
struct IssuerMinting {
    issuer: Arc<TokenIssuer>,
}

impl TokenMinting for IssuerMinting {
    fn minter(
        &self,
        session_uid: &str,
        execution_id: &str,
        owner: &CallerIdentity,
        agent: &IdentityRef,
    ) -> TokenMinter {
        self.issuer.minter(MintBinding {
            session_uid: session_uid.to_owned(),
            execution_id: execution_id.to_owned(),
            principal: SessionPrincipal {
                owner: owner.clone(),
                agent: agent.clone(),
            },
        })
    }
}

/// A session's principal, as its journal row stores it.
struct JournalPrincipals {
    journal: Arc<dyn Journal>,
}

#[async_trait::async_trait]
impl PrincipalSource for JournalPrincipals {
    async fn principal(&self, session_uid: &str) -> agentsessions_api::Result<SessionPrincipal> {
        let info = self
            .journal
            .session_info(session_uid)
            .await
            .map_err(|err| match err {
                JournalError::SessionNotFound(uid) => {
                    ApiError::status(StatusCode::NotFound, format!("session {uid:?} not found"))
                }
                other => {
                    tracing::warn!(error = %other, "reading a session's principal failed");
                    ApiError::status(StatusCode::Unavailable, "cannot read the session")
                }
            })?;
        Ok(SessionPrincipal {
            owner: info.row.owner,
            agent: info.row.identity,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use agentsessions_journal::{MemoryJournal, SessionRow};
    use jsonwebtoken::jwk::JwkSet;
    use jsonwebtoken::{DecodingKey, Validation};

    use super::*;
    use crate::config::{HostConfig, HostError};
    use crate::host::{build_service, build_service_with_tools, host_identity, start_mcp};

    fn config_with_key(dir: &std::path::Path) -> HostConfig {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        std::fs::write(dir.join("mint.pem"), key.serialize_pem()).unwrap();
        let text = "[identity]\nissuer = \"https://agents.test\"\nsigning_key = \"mint.pem\"\n\
                    key_id = \"k1\"\ntoken_lifetime_secs = 60\n";
        let mut config: HostConfig = toml::from_str(text).unwrap();
        if let Some(identity) = &mut config.identity {
            identity.resolve_paths(dir);
        }
        config
    }

    // [identity] in the daemon's file: the host mints per tool call for the session's owner, as
    // the journal stores it, and publishes the key its audiences verify with.
    #[tokio::test]
    async fn an_identity_section_makes_a_host_that_mints_for_the_sessions_owner() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_with_key(dir.path());
        let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        journal
            .put_session(SessionRow {
                uid: "s1".to_owned(),
                harness: "echo".to_owned(),
                owner: CallerIdentity::new("https://idp.test", "alice"),
                ..SessionRow::default()
            })
            .await
            .unwrap();
        let assembled = build_service(Arc::clone(&journal), &config).unwrap();
        let identity = assembled.identity.unwrap();
        assert_eq!(identity.issuer.lifetime_secs(), 60);
        let token = identity
            .tokens
            .token_for("https://mcp.test", "s1", "x1", "call-1")
            .await
            .unwrap();
        let jwks: JwkSet = serde_json::from_str(&identity.issuer.jwks_json().unwrap()).unwrap();
        let key = DecodingKey::from_jwk(jwks.find("k1").unwrap()).unwrap();
        let mut validation = Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.set_issuer(&["https://agents.test"]);
        validation.set_audience(&["https://mcp.test"]);
        let claims = jsonwebtoken::decode::<serde_json::Value>(&token, &key, &validation)
            .unwrap()
            .claims;
        assert_eq!(claims["sub"], "alice");
        assert_eq!(claims["tctx"]["tool_call_id"], "call-1");
        let unknown = identity
            .tokens
            .token_for("https://mcp.test", "nope", "x1", "call-1")
            .await
            .unwrap_err();
        assert_eq!(unknown.status_code(), StatusCode::NotFound);
    }

    // A `delegated_token` MCP server gets its tokens from the host's one identity, and refuses
    // to start on a host that mints none.
    #[tokio::test]
    async fn a_delegated_token_server_uses_the_hosts_identity_and_needs_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config_with_key(dir.path());
        config.journal = ":memory:".to_owned();
        config.mcp_servers = vec![agentsessions_mcp::McpServerConfig {
            name: "tools".to_owned(),
            url: "http://127.0.0.1:9/mcp".to_owned(),
            delegated_token: Some(agentsessions_mcp::DelegatedTokenConfig {
                audience: "https://tools.test".to_owned(),
            }),
            ..agentsessions_mcp::McpServerConfig::default()
        }];
        let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        let refused = start_mcp(&config, None).await.map(|_| ());
        let message = refused.unwrap_err().to_string();
        assert!(message.contains("[identity]"), "{message}");
        let identity = host_identity(&journal, &config).unwrap();
        assert!(identity.is_some());
        let hub = start_mcp(&config, identity.as_ref())
            .await
            .unwrap()
            .unwrap();
        let assembled =
            build_service_with_tools(journal, &config, Some(Arc::clone(&hub)), identity).unwrap();
        assert!(assembled.identity.is_some());
        hub.shutdown().await;
    }

    #[test]
    fn without_an_identity_section_nothing_is_minted() {
        let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        let assembled = build_service(journal, &HostConfig::default()).unwrap();
        assert!(assembled.identity.is_none());
    }

    #[test]
    fn a_missing_key_file_stops_the_host_naming_the_section_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config_with_key(dir.path());
        if let Some(identity) = &mut config.identity {
            identity.signing_key = dir.path().join("absent.pem");
        }
        let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        let refused = build_service(journal, &config).map(|_| ());
        assert!(
            matches!(
                &refused,
                Err(HostError::Identity(AuthError::ReadFile { .. }))
            ),
            "{refused:?}"
        );
        let message = refused.unwrap_err().to_string();
        assert!(message.starts_with("[identity]: "), "{message}");
        assert!(message.contains("absent.pem"), "{message}");
    }
}
