//! Handing delegated tokens out: a [`TokenMinter`] bound to one execution for the harness
//! ([`TokenIssuer::minter`]), and [`DelegatedTokens`] for a host-side tool hub that attaches a
//! token to each call it makes to a tool server over HTTP.
//!
//! Intended use by a tool hub (an MCP client calling servers over streamable HTTP): build one
//! [`SessionTokens`] at startup from the host's [`TokenIssuer`] and a [`PrincipalSource`] over the
//! journal, then for each outgoing call
//!
//! ```text
//! let token = tokens.token_for(server_audience, session_uid, execution_id, tool_call_id).await?;
//! request.header("Authorization", format!("Bearer {token}"));
//! ```
//!
//! A token is never reused across audiences or calls, and the caller's own credential (the
//! bearer token or certificate it presented to the host) is never what is attached.

use std::sync::Arc;

use agentsessions_api::{ApiError, StatusCode, TokenMinter};
use async_trait::async_trait;

use crate::mint::{MintRequest, SessionPrincipal, TokenIssuer};

/// Mints a token for one call to a tool server.
#[async_trait]
pub trait DelegatedTokens: Send + Sync {
    /// A fresh token valid only for `audience`, minted for the principal of `session_uid`'s
    /// execution `execution_id` and its tool call `tool_call_id`.
    ///
    /// # Errors
    ///
    /// [`ApiError::PermissionDenied`] when the mint policy refuses (nothing is minted; the call
    /// should fail rather than go out without a token); [`ApiError::Status`] with
    /// `INVALID_ARGUMENT` for an empty audience or ids, `FAILED_PRECONDITION` for a session with
    /// no principal, `NOT_FOUND` (from the [`PrincipalSource`]) for an unknown session, and
    /// `INTERNAL` for a host fault.
    async fn token_for(
        &self,
        audience: &str,
        session_uid: &str,
        execution_id: &str,
        tool_call_id: &str,
    ) -> agentsessions_api::Result<String>;
}

/// Finds who a session acts for (in a host: its journal row's owner and agent principal).
#[async_trait]
pub trait PrincipalSource: Send + Sync {
    /// The principal of `session_uid`.
    ///
    /// # Errors
    ///
    /// Whatever the lookup reports, typically `NOT_FOUND` for an unknown session.
    async fn principal(&self, session_uid: &str) -> agentsessions_api::Result<SessionPrincipal>;
}

/// [`DelegatedTokens`] over a [`TokenIssuer`], looking each session's principal up.
#[derive(Clone)]
pub struct SessionTokens {
    issuer: Arc<TokenIssuer>,
    principals: Arc<dyn PrincipalSource>,
}

impl std::fmt::Debug for SessionTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTokens")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl SessionTokens {
    /// Tokens from `issuer` for the principals `principals` reports.
    pub fn new(issuer: Arc<TokenIssuer>, principals: Arc<dyn PrincipalSource>) -> Self {
        Self { issuer, principals }
    }
}

#[async_trait]
impl DelegatedTokens for SessionTokens {
    async fn token_for(
        &self,
        audience: &str,
        session_uid: &str,
        execution_id: &str,
        tool_call_id: &str,
    ) -> agentsessions_api::Result<String> {
        let principal = self.principals.principal(session_uid).await?;
        let request = MintRequest {
            audience: audience.to_owned(),
            session_uid: session_uid.to_owned(),
            execution_id: execution_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            principal,
        };
        self.issuer
            .mint(&request)
            .await
            .map_err(crate::AuthError::into_api_error)
    }
}

/// What a harness's minter is bound to: one execution of one session, acting for its principal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MintBinding {
    /// The session.
    pub session_uid: String,
    /// The execution (turn) the harness runs.
    pub execution_id: String,
    /// Who the session acts for.
    pub principal: SessionPrincipal,
}

impl TokenIssuer {
    /// The [`TokenMinter`] for the harness running `binding`'s execution: each call mints a
    /// token for exactly one audience (`INVALID_ARGUMENT` for none or several), for this
    /// session, execution and principal only.
    pub fn minter(self: &Arc<Self>, binding: MintBinding) -> TokenMinter {
        let issuer = Arc::clone(self);
        let binding = Arc::new(binding);
        TokenMinter::new(move |audience: Vec<String>| {
            let issuer = Arc::clone(&issuer);
            let binding = Arc::clone(&binding);
            async move {
                let [audience] = <[String; 1]>::try_from(audience).map_err(|_| {
                    ApiError::status(
                        StatusCode::InvalidArgument,
                        "a delegated token is minted for exactly one audience",
                    )
                })?;
                let request = MintRequest {
                    audience,
                    session_uid: binding.session_uid.clone(),
                    execution_id: binding.execution_id.clone(),
                    tool_call_id: String::new(),
                    principal: binding.principal.clone(),
                };
                issuer
                    .mint(&request)
                    .await
                    .map_err(crate::AuthError::into_api_error)
            }
        })
    }
}
