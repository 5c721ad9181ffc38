//! The host's delegated identity (`[identity]`): the token issuer, the minter bound to each
//! live turn's harness, and the [`DelegatedTokens`] a tool hub attaches to its calls. Sessions'
//! principals (owner and agent principal) are read from the journal.

use std::sync::Arc;

use agentsessions_api::{
    ApiError, Authorizer, CallerIdentity, IdentityRef, StatusCode, TokenMinter,
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
) -> Result<Option<DelegatedIdentity>, AuthError> {
    let Some(settings) = settings else {
        return Ok(None);
    };
    let issuer = Arc::new(settings.issuer(host_policy)?);
    let principals: Arc<dyn PrincipalSource> = Arc::new(JournalPrincipals { journal });
    Ok(Some(DelegatedIdentity {
        minting: Arc::new(IssuerMinting {
            issuer: Arc::clone(&issuer),
        }),
        tokens: Arc::new(SessionTokens::new(Arc::clone(&issuer), principals)),
        issuer,
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
