//! Per-RPC authorization (extensions §2): who the caller is, which actions each RPC needs, and
//! the one place a policy's answer becomes a status.
//!
//! Every check runs before the RPC discloses or changes anything. A session action carries the
//! session's *stored* owner; a session that does not exist is checked with an empty owner, so a
//! caller the policy refuses cannot tell a missing session from someone else's.
//!
//! | RPC | actions |
//! |---|---|
//! | CreateSession | create |
//! | GetSession, Replay, ReadRecords (extension), Watch and WatchUpdates (extensions) | read |
//! | ListSessions | list (unfiltered, else filtered to the caller as owner) |
//! | ListApprovals (extension) | list (unfiltered, else filtered to the caller as owner) |
//! | DeleteSession | delete |
//! | Exec | exec (+ create first when it creates the session) |
//! | Approve | approve + read |
//! | Cancel / Suspend | cancel / suspend |
//! | Resume | resume (+ exec when a decided approval makes it run the turn on) |
//! | Fork | fork on the parent (+ suspend when the fork checkpoints the parent's memory) |
//! | HarnessRegistry | registry.register / registry.read / registry.list / registry.retire |

use std::sync::Arc;

use agentsessions_api::{Action, ApiErrorKind, AuthorizationRequest, Authorizer, CallerIdentity};
use agentsessions_auth::Authenticated;

use crate::error::{Result, ServerError};

/// The `/package.Service/Method` names the policy sees.
pub(crate) mod method {
    pub(crate) const CREATE: &str = "/agentsessions.v1.Sessions/CreateSession";
    pub(crate) const GET: &str = "/agentsessions.v1.Sessions/GetSession";
    pub(crate) const LIST: &str = "/agentsessions.v1.Sessions/ListSessions";
    pub(crate) const LIST_APPROVALS: &str = "/agentsessions.v1.Sessions/ListApprovals";
    pub(crate) const DELETE: &str = "/agentsessions.v1.Sessions/DeleteSession";
    pub(crate) const EXEC: &str = "/agentsessions.v1.Sessions/Exec";
    pub(crate) const REPLAY: &str = "/agentsessions.v1.Sessions/Replay";
    pub(crate) const READ_RECORDS: &str = "/agentsessions.v1.Sessions/ReadRecords";
    pub(crate) const WATCH: &str = "/agentsessions.v1.Sessions/Watch";
    pub(crate) const WATCH_UPDATES: &str = "/agentsessions.v1.Sessions/WatchUpdates";
    pub(crate) const APPROVE: &str = "/agentsessions.v1.Sessions/Approve";
    pub(crate) const CANCEL: &str = "/agentsessions.v1.Sessions/Cancel";
    pub(crate) const SUSPEND: &str = "/agentsessions.v1.Sessions/Suspend";
    pub(crate) const RESUME: &str = "/agentsessions.v1.Sessions/Resume";
    pub(crate) const FORK: &str = "/agentsessions.v1.Sessions/Fork";
    pub(crate) const REGISTER_HARNESS: &str = "/agentsessions.v1.HarnessRegistry/RegisterHarness";
    pub(crate) const GET_HARNESS: &str = "/agentsessions.v1.HarnessRegistry/GetHarness";
    pub(crate) const LIST_HARNESSES: &str = "/agentsessions.v1.HarnessRegistry/ListHarnesses";
    pub(crate) const RETIRE_HARNESS: &str = "/agentsessions.v1.HarnessRegistry/RetireHarness";
}

/// One call's verified caller and the RPC it made.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// The caller the authentication layer verified; empty for an anonymous one (which every
    /// built-in policy refuses).
    pub(crate) caller: CallerIdentity,
    /// The full RPC name.
    pub(crate) method: &'static str,
}

impl Call {
    /// The caller of a request whose extensions the authentication interceptor filled. A request
    /// that did not pass through it is anonymous: with a policy configured it is refused, never
    /// trusted.
    pub(crate) fn of(extensions: &tonic::Extensions, method: &'static str) -> Self {
        let caller = extensions
            .get::<Authenticated>()
            .and_then(|a| a.caller.clone())
            .unwrap_or_default();
        Self { caller, method }
    }
}

/// Checks the actions of a call against the configured [`Authorizer`], or allows every call
/// when none is configured (no owners: the published server).
#[derive(Clone, Default)]
pub(crate) struct CallAuthorizer {
    authorizer: Option<Arc<dyn Authorizer>>,
}

impl std::fmt::Debug for CallAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallAuthorizer")
            .field("enforcing", &self.authorizer.is_some())
            .finish()
    }
}

impl CallAuthorizer {
    pub(crate) fn new(authorizer: Option<Arc<dyn Authorizer>>) -> Self {
        Self { authorizer }
    }

    /// Whether a policy is configured: sessions are then created owned.
    pub(crate) fn enforcing(&self) -> bool {
        self.authorizer.is_some()
    }

    /// The owner a session created by `call` gets: the caller when a policy is enforced (and
    /// the caller is complete), otherwise none.
    pub(crate) fn owner_for(&self, call: &Call) -> CallerIdentity {
        if self.enforcing() && call.caller.valid() {
            call.caller.clone()
        } else {
            CallerIdentity::default()
        }
    }

    /// Checks each of `actions` on session `uid` owned by `owner`, in order.
    ///
    /// # Errors
    /// [`ServerError::PermissionDenied`] for a denial, [`ServerError::AuthorizationFailed`] for
    /// any other policy failure (its text stays in the policy's own logs).
    pub(crate) async fn session(
        &self,
        call: &Call,
        actions: &[Action],
        uid: &str,
        owner: &CallerIdentity,
    ) -> Result<()> {
        for &action in actions {
            self.check(AuthorizationRequest::for_session(
                call.caller.clone(),
                action,
                uid,
                owner.clone(),
                call.method,
            ))
            .await?;
        }
        Ok(())
    }

    /// Checks a global action (no session), optionally with an owner filter (listing).
    ///
    /// # Errors
    /// As [`CallAuthorizer::session`].
    pub(crate) async fn global(
        &self,
        call: &Call,
        action: Action,
        owner: CallerIdentity,
    ) -> Result<()> {
        self.check(Self::global_request(call, action, owner)).await
    }

    fn global_request(call: &Call, action: Action, owner: CallerIdentity) -> AuthorizationRequest {
        AuthorizationRequest {
            owner,
            ..AuthorizationRequest::global(call.caller.clone(), action, call.method)
        }
    }

    /// Whether the policy allows a global action, a denial being an answer rather than an
    /// error (and not logged): for a listing, which asks for every owner first and falls back
    /// to the caller's own sessions.
    ///
    /// # Errors
    /// [`ServerError::AuthorizationFailed`] when the policy fails without deciding.
    pub(crate) async fn allows_global(
        &self,
        call: &Call,
        action: Action,
        owner: CallerIdentity,
    ) -> Result<bool> {
        match self
            .decide(&Self::global_request(call, action, owner))
            .await
        {
            Decision::Allowed => Ok(true),
            Decision::Denied => Ok(false),
            Decision::Failed => Err(ServerError::AuthorizationFailed),
        }
    }

    /// Whether the policy allows `action` on session `uid` owned by `owner`, a denial being an
    /// answer rather than an error (and not logged): for showing what a caller may do.
    ///
    /// # Errors
    /// [`ServerError::AuthorizationFailed`] when the policy fails without deciding.
    pub(crate) async fn allows_session(
        &self,
        call: &Call,
        action: Action,
        uid: &str,
        owner: &CallerIdentity,
    ) -> Result<bool> {
        let request = AuthorizationRequest::for_session(
            call.caller.clone(),
            action,
            uid,
            owner.clone(),
            call.method,
        );
        match self.decide(&request).await {
            Decision::Allowed => Ok(true),
            Decision::Denied => Ok(false),
            Decision::Failed => Err(ServerError::AuthorizationFailed),
        }
    }

    async fn check(&self, request: AuthorizationRequest) -> Result<()> {
        match self.decide(&request).await {
            Decision::Allowed => Ok(()),
            Decision::Denied => {
                // Who was refused what is the audit trail of the policy; no payload is logged.
                tracing::info!(
                    action = request.action.as_str(),
                    method = request.method,
                    caller_issuer = %request.caller.issuer,
                    caller_subject = %request.caller.subject,
                    session_uid = %request.session_uid,
                    "call denied by the authorization policy"
                );
                Err(ServerError::PermissionDenied(request.action))
            }
            Decision::Failed => Err(ServerError::AuthorizationFailed),
        }
    }

    async fn decide(&self, request: &AuthorizationRequest) -> Decision {
        let Some(authorizer) = &self.authorizer else {
            return Decision::Allowed;
        };
        match authorizer.authorize(request).await {
            Ok(()) => Decision::Allowed,
            Err(e) if e.is(ApiErrorKind::PermissionDenied) => Decision::Denied,
            // The policy logs its own failures; the caller learns only that it failed.
            Err(_) => Decision::Failed,
        }
    }
}

/// A policy's answer.
enum Decision {
    Allowed,
    Denied,
    /// The policy failed without deciding.
    Failed,
}
