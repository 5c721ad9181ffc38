//! Authorization: [`Action`], [`AuthorizationRequest`], the [`Authorizer`] trait and the two
//! built-in policies, [`OwnerAuthorizer`] and [`OwnerAllowlistAuthorizer`] (the v0.3.0 API,
//! extensions §2).
//!
//! The built-in policies decide by [`AuthorizationRequest::action`] alone (never by
//! [`AuthorizationRequest::method`]) and interpret no grants and no identity supplied in requests.
//! Every denial is [`ApiError::PermissionDenied`]. Identities compare exactly: no trimming, case
//! folding or issuer mapping.
//!
//! | action | [`OwnerAuthorizer`] | [`OwnerAllowlistAuthorizer`] |
//! |---|---|---|
//! | read exec fork suspend resume delete cancel | session uid set, owner valid and equal to the caller | the same; the allowlist is never consulted |
//! | list | session uid empty, owner (the listing's owner filter) valid and equal to the caller | the owner rule, or an allowlisted caller with an empty session uid and an owner filter that is empty (every session) or valid |
//! | create | denied | allowlisted caller, session uid and owner empty |
//! | approve | denied | allowlisted caller, session uid set (the RPC also checks read, so the approver must own the session) |
//! | registry.read registry.list registry.register registry.retire | denied | caller allowlisted for that action, session uid and owner empty |
//! | mint | denied | denied |
//!
//! Both policies first deny an incomplete caller ([`CallerIdentity::valid`]).

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;

use crate::error::{ApiError, Result};
use crate::session::CallerIdentity;

/// A permission, independent of the RPC or transport that needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Read a session: Get, Replay (and the read half of Approve).
    Read,
    /// Run a turn: Exec (and a Resume that drives effects).
    Exec,
    /// Fork a session (authorizes the parent only; it assigns no child ownership).
    Fork,
    /// Suspend a session (and a stateful fork, which checkpoints the parent).
    Suspend,
    /// Resume a session.
    Resume,
    /// Delete a session.
    Delete,
    /// Cancel an execution.
    Cancel,
    /// Create a session (and an Exec that auto-creates one).
    Create,
    /// Decide an approval request.
    Approve,
    /// Mint a token for a downstream audience.
    Mint,
    /// List sessions.
    List,
    /// Read a harness registration.
    RegistryRead,
    /// List harness registrations.
    RegistryList,
    /// Register a harness.
    RegistryRegister,
    /// Retire a harness registration.
    RegistryRetire,
}

impl Action {
    /// Every action, in the v0.3.0 API's order.
    pub const ALL: [Self; 15] = [
        Self::Read,
        Self::Exec,
        Self::Fork,
        Self::Suspend,
        Self::Resume,
        Self::Delete,
        Self::Cancel,
        Self::Create,
        Self::Approve,
        Self::Mint,
        Self::List,
        Self::RegistryRead,
        Self::RegistryList,
        Self::RegistryRegister,
        Self::RegistryRetire,
    ];

    /// The v0.3.0 API's string (`read`, `registry.read` …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Exec => "exec",
            Self::Fork => "fork",
            Self::Suspend => "suspend",
            Self::Resume => "resume",
            Self::Delete => "delete",
            Self::Cancel => "cancel",
            Self::Create => "create",
            Self::Approve => "approve",
            Self::Mint => "mint",
            Self::List => "list",
            Self::RegistryRead => "registry.read",
            Self::RegistryList => "registry.list",
            Self::RegistryRegister => "registry.register",
            Self::RegistryRetire => "registry.retire",
        }
    }

    /// The action for its exact v0.3.0 API string; `None` for anything else, so an unknown action
    /// can never reach a policy (or an allowlist).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|action| action.as_str() == name)
    }

    /// Whether it is an ordinary owner action that [`OwnerAuthorizer`] can grant: read, exec,
    /// fork, suspend, resume, delete, cancel and list.
    pub fn is_owner_action(self) -> bool {
        matches!(
            self,
            Self::Read
                | Self::Exec
                | Self::Fork
                | Self::Suspend
                | Self::Resume
                | Self::Delete
                | Self::Cancel
                | Self::List
        )
    }

    /// Whether it is global: it names no session, so a request for it carries an empty
    /// [`AuthorizationRequest::session_uid`] (create, list and the registry actions).
    pub fn is_global(self) -> bool {
        matches!(
            self,
            Self::Create
                | Self::List
                | Self::RegistryRead
                | Self::RegistryList
                | Self::RegistryRegister
                | Self::RegistryRetire
        )
    }

    /// Whether an [`OwnerAllowlistAuthorizer`] allowlist entry for it has any effect: create,
    /// list, approve and the four registry actions. Entries for other actions are ignored.
    pub fn is_allowlistable(self) -> bool {
        matches!(
            self,
            Self::Create
                | Self::List
                | Self::Approve
                | Self::RegistryRead
                | Self::RegistryList
                | Self::RegistryRegister
                | Self::RegistryRetire
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One permission question: may the verified `caller` perform `action` on a session (or, for a
/// global action, on the service)?
///
/// `owner` is the trusted owner the host stored for the session, never an ownership assignment
/// supplied by the request. It is empty for legacy unbound sessions and for global actions; for
/// [`Action::List`] it is the owner filter the storage query will apply (empty: every session).
/// A stateful fork also needs a separate [`Action::Suspend`] check, and a resume that drives
/// effects an [`Action::Exec`] check.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuthorizationRequest {
    /// The caller, as verified by the host (TLS client certificate or verified bearer token).
    pub caller: CallerIdentity,
    /// What the caller wants to do.
    pub action: Action,
    /// The session acted on; empty for global actions.
    pub session_uid: String,
    /// The session's stored owner, or the listing's owner filter.
    pub owner: CallerIdentity,
    /// The full originating RPC name, e.g. `/agentsessions.v1.Sessions/Exec`. Every check made for
    /// one RPC carries that RPC's name, including compound permissions, auto-creation and
    /// recovery. The built-in policies ignore it.
    pub method: String,
}

impl AuthorizationRequest {
    /// A request for `action` on session `session_uid` owned by `owner`.
    pub fn for_session(
        caller: CallerIdentity,
        action: Action,
        session_uid: impl Into<String>,
        owner: CallerIdentity,
        method: impl Into<String>,
    ) -> Self {
        Self {
            caller,
            action,
            session_uid: session_uid.into(),
            owner,
            method: method.into(),
        }
    }

    /// A request for a global action: empty session uid and owner. For a listing restricted to
    /// the caller's own sessions, set [`AuthorizationRequest::owner`] to the caller afterwards.
    pub fn global(caller: CallerIdentity, action: Action, method: impl Into<String>) -> Self {
        Self::for_session(caller, action, "", CallerIdentity::default(), method)
    }
}

/// Decides one resource permission. Hosts call it before any disclosure or effect.
///
/// A listing is authorized as a storage query (filtered by [`AuthorizationRequest::owner`]), never
/// by filtering a page after the fact, so page sizes and tokens stay exact.
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// Allows (`Ok(())`) or denies the request.
    ///
    /// # Errors
    ///
    /// [`ApiError::PermissionDenied`] (possibly wrapped) for a denial. Any other error is a host
    /// failure, not a policy decision: the service reports a sanitized status, never the policy's
    /// error text, and the policy owns logging and metrics for its own failures.
    async fn authorize(&self, request: &AuthorizationRequest) -> Result<()>;
}

/// Owner checks only, no grants: the caller may perform the ordinary owner actions on sessions it
/// owns and list its own sessions. Creation, approval decisions and minting need a separate policy
/// and are denied even to owners, as are the registry actions. An empty owner (a legacy unbound
/// session) is denied. [`Action::Fork`] authorizes the parent only and assigns no child ownership.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnerAuthorizer;

impl OwnerAuthorizer {
    /// The decision [`Authorizer::authorize`] returns, without a future.
    ///
    /// # Errors
    ///
    /// [`ApiError::PermissionDenied`] when the caller is incomplete, the action is not an owner
    /// action, a session action has no session uid, a listing names a session, or the owner is
    /// incomplete or not exactly the caller.
    pub fn check(&self, request: &AuthorizationRequest) -> Result<()> {
        if !request.caller.valid() || !request.action.is_owner_action() {
            return Err(ApiError::PermissionDenied);
        }
        // An owner action is global only for list; every other one needs its session.
        if request.action.is_global() != request.session_uid.is_empty() {
            return Err(ApiError::PermissionDenied);
        }
        // The caller is valid, so equality also rules out an empty or incomplete owner.
        if request.owner != request.caller {
            return Err(ApiError::PermissionDenied);
        }
        Ok(())
    }
}

#[async_trait]
impl Authorizer for OwnerAuthorizer {
    async fn authorize(&self, request: &AuthorizationRequest) -> Result<()> {
        self.check(request)
    }
}

/// [`OwnerAuthorizer`]'s owner permissions plus exact-caller allowlists for create, list, approve
/// and the registry actions.
///
/// An allowlist never overrides an owner check (an entry for read or exec grants nothing) and
/// never enables mint. An allowlisted approver must still pass the read check the Approve RPC
/// makes separately, so under this policy an approver must also own the session. Global actions
/// carry an empty session uid and owner, except that an allowlisted lister may pass any valid
/// owner filter. Configure `allow` before serving; `&self` keeps it unchanged while in use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerAllowlistAuthorizer {
    /// For each action, the exact callers allowed to perform it.
    pub allow: BTreeMap<Action, Vec<CallerIdentity>>,
}

impl OwnerAllowlistAuthorizer {
    /// A policy with empty allowlists (the owner rules only).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `caller` to the allowlist for `action`.
    #[must_use]
    pub fn allowing(mut self, action: Action, caller: CallerIdentity) -> Self {
        self.allow.entry(action).or_default().push(caller);
        self
    }

    /// Whether `caller` is a valid identity listed exactly for `action`, an action an allowlist can
    /// grant ([`Action::is_allowlistable`]).
    pub fn is_allowlisted(&self, action: Action, caller: &CallerIdentity) -> bool {
        action.is_allowlistable()
            && caller.valid()
            && self
                .allow
                .get(&action)
                .is_some_and(|callers| callers.contains(caller))
    }

    /// The decision [`Authorizer::authorize`] returns, without a future.
    ///
    /// # Errors
    ///
    /// [`ApiError::PermissionDenied`] when neither the owner rules nor an allowlist entry (with
    /// the request shape the table in the module docs requires) allows the request.
    pub fn check(&self, request: &AuthorizationRequest) -> Result<()> {
        if !request.caller.valid() {
            return Err(ApiError::PermissionDenied);
        }
        let allowed = match request.action {
            Action::Read
            | Action::Exec
            | Action::Fork
            | Action::Suspend
            | Action::Resume
            | Action::Delete
            | Action::Cancel => return OwnerAuthorizer.check(request),
            Action::Mint => false,
            Action::List => {
                if OwnerAuthorizer.check(request).is_ok() {
                    return Ok(());
                }
                self.is_allowlisted(Action::List, &request.caller)
                    && request.session_uid.is_empty()
                    && (request.owner == CallerIdentity::default() || request.owner.valid())
            }
            Action::Approve => {
                self.is_allowlisted(Action::Approve, &request.caller)
                    && !request.session_uid.is_empty()
            }
            Action::Create
            | Action::RegistryRead
            | Action::RegistryList
            | Action::RegistryRegister
            | Action::RegistryRetire => {
                self.is_allowlisted(request.action, &request.caller)
                    && request.session_uid.is_empty()
                    && request.owner == CallerIdentity::default()
            }
        };
        if allowed {
            Ok(())
        } else {
            Err(ApiError::PermissionDenied)
        }
    }
}

#[async_trait]
impl Authorizer for OwnerAllowlistAuthorizer {
    async fn authorize(&self, request: &AuthorizationRequest) -> Result<()> {
        self.check(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::block_on;

    const METHOD: &str = "/agentsessions.v1.Sessions/Exec";

    const SESSION_ACTIONS: [Action; 7] = [
        Action::Read,
        Action::Exec,
        Action::Fork,
        Action::Suspend,
        Action::Resume,
        Action::Delete,
        Action::Cancel,
    ];

    fn alice() -> CallerIdentity {
        CallerIdentity::new("https://issuer.example", "alice")
    }

    fn bob() -> CallerIdentity {
        CallerIdentity::new("https://issuer.example", "bob")
    }

    fn on_session(
        caller: CallerIdentity,
        action: Action,
        owner: CallerIdentity,
    ) -> AuthorizationRequest {
        AuthorizationRequest::for_session(caller, action, "s1", owner, METHOD)
    }

    fn list_as(caller: CallerIdentity, owner: CallerIdentity) -> AuthorizationRequest {
        AuthorizationRequest {
            owner,
            ..AuthorizationRequest::global(caller, Action::List, METHOD)
        }
    }

    const DENIED: Result<()> = Err(ApiError::PermissionDenied);

    // v0.3.0 API: Action constants — exactly these fifteen strings.
    #[test]
    fn action_strings_are_the_seed_strings() {
        let names: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            names,
            [
                "read",
                "exec",
                "fork",
                "suspend",
                "resume",
                "delete",
                "cancel",
                "create",
                "approve",
                "mint",
                "list",
                "registry.read",
                "registry.list",
                "registry.register",
                "registry.retire"
            ]
        );
        for action in Action::ALL {
            assert_eq!(Action::parse(action.as_str()), Some(action));
            assert_eq!(action.to_string(), action.as_str());
        }
    }

    // extensions §2: allowlists never enable unknown actions — an unknown action cannot be named.
    #[test]
    fn unknown_action_strings_do_not_parse() {
        for name in ["", "READ", "admin", "registry", "registry.*", " read"] {
            assert_eq!(Action::parse(name), None, "{name:?}");
        }
    }

    // v0.3.0 API: OwnerAuthorizer — ordinary owner actions are allowed to the session's owner.
    #[test]
    fn owner_may_perform_every_owner_session_action() {
        for action in SESSION_ACTIONS {
            assert_eq!(
                OwnerAuthorizer.check(&on_session(alice(), action, alice())),
                Ok(()),
                "{action}"
            );
        }
    }

    // v0.3.0 API: ErrPermissionDenied — "the caller does not own the session".
    #[test]
    fn caller_who_does_not_own_the_session_is_denied() {
        for action in SESSION_ACTIONS {
            assert_eq!(
                OwnerAuthorizer.check(&on_session(bob(), action, alice())),
                DENIED,
                "{action}"
            );
        }
    }

    // v0.3.0 API: CallerIdentity.Valid — no trimming, case folding or issuer-prefix mapping.
    #[test]
    fn ownership_compares_issuer_and_subject_exactly() {
        for owner in [
            CallerIdentity::new("https://issuer.example", "Alice"),
            CallerIdentity::new("https://issuer.example", "alice "),
            CallerIdentity::new("https://issuer.example/", "alice"),
            CallerIdentity::new("https://other.example", "alice"),
        ] {
            assert_eq!(
                OwnerAuthorizer.check(&on_session(alice(), Action::Read, owner.clone())),
                DENIED,
                "{owner:?}"
            );
        }
    }

    // v0.3.0 API: AuthorizationRequest — OwnerAuthorizer denies an empty owner (legacy unbound
    // session).
    #[test]
    fn empty_owner_is_denied() {
        let req = on_session(alice(), Action::Read, CallerIdentity::default());
        assert_eq!(OwnerAuthorizer.check(&req), DENIED);
    }

    // v0.3.0 API: ErrPermissionDenied — "either identity is incomplete" (the owner side).
    #[test]
    fn incomplete_owner_is_denied() {
        for owner in [
            CallerIdentity::new("https://issuer.example", ""),
            CallerIdentity::new("", "alice"),
        ] {
            assert_eq!(
                OwnerAuthorizer.check(&on_session(alice(), Action::Read, owner)),
                DENIED
            );
        }
    }

    // v0.3.0 API: ErrPermissionDenied — "either identity is incomplete" (the caller side), even
    // when it equals the stored owner.
    #[test]
    fn incomplete_caller_is_denied_even_when_it_equals_the_owner() {
        let half = CallerIdentity::new("", "alice");
        assert_eq!(
            OwnerAuthorizer.check(&on_session(half.clone(), Action::Read, half.clone())),
            DENIED
        );
        assert_eq!(OwnerAuthorizer.check(&list_as(half.clone(), half)), DENIED);
    }

    // v0.3.0 API: ErrPermissionDenied — "the session UID is missing".
    #[test]
    fn session_action_without_session_uid_is_denied() {
        for action in SESSION_ACTIONS {
            let req = AuthorizationRequest::for_session(alice(), action, "", alice(), METHOD);
            assert_eq!(OwnerAuthorizer.check(&req), DENIED, "{action}");
        }
    }

    // v0.3.0 API: OwnerAuthorizer — approval decisions, audience minting and creation are denied
    // even to owners.
    #[test]
    fn create_approve_and_mint_are_denied_even_to_the_owner() {
        for action in [Action::Approve, Action::Mint] {
            assert_eq!(
                OwnerAuthorizer.check(&on_session(alice(), action, alice())),
                DENIED,
                "{action}"
            );
        }
        let create = AuthorizationRequest::global(alice(), Action::Create, METHOD);
        assert_eq!(OwnerAuthorizer.check(&create), DENIED);
    }

    // v0.3.0 API: ErrPermissionDenied — "the action is not an ordinary owner action" (registry
    // actions).
    #[test]
    fn registry_actions_are_not_owner_actions() {
        for action in [
            Action::RegistryRead,
            Action::RegistryList,
            Action::RegistryRegister,
            Action::RegistryRetire,
        ] {
            let req = AuthorizationRequest::global(alice(), action, METHOD);
            assert_eq!(OwnerAuthorizer.check(&req), DENIED, "{action}");
        }
    }

    // extensions §2: list is an owner action "with the caller as owner filter".
    #[test]
    fn caller_may_list_with_itself_as_owner_filter() {
        assert_eq!(OwnerAuthorizer.check(&list_as(alice(), alice())), Ok(()));
    }

    // extensions §2: listing is a storage query filtered by owner; an owner policy never lists
    // another owner's sessions or every session.
    #[test]
    fn listing_other_owners_or_all_sessions_is_denied_to_owners() {
        assert_eq!(OwnerAuthorizer.check(&list_as(alice(), bob())), DENIED);
        assert_eq!(
            OwnerAuthorizer.check(&list_as(alice(), CallerIdentity::default())),
            DENIED
        );
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — global actions use an empty session uid.
    #[test]
    fn listing_that_names_a_session_is_denied() {
        let req = AuthorizationRequest::for_session(alice(), Action::List, "s1", alice(), METHOD);
        assert_eq!(OwnerAuthorizer.check(&req), DENIED);
        let lister = OwnerAllowlistAuthorizer::new().allowing(Action::List, alice());
        assert_eq!(lister.check(&req), DENIED);
    }

    // v0.3.0 API: Authorizer — the trait method returns the policy's decision.
    #[test]
    fn authorize_returns_the_check_decision() {
        let allowed = on_session(alice(), Action::Exec, alice());
        let denied = on_session(bob(), Action::Exec, alice());
        assert_eq!(block_on(OwnerAuthorizer.authorize(&allowed)), Ok(()));
        assert_eq!(block_on(OwnerAuthorizer.authorize(&denied)), DENIED);
        let policy: &dyn Authorizer = &OwnerAllowlistAuthorizer::new();
        assert_eq!(block_on(policy.authorize(&allowed)), Ok(()));
        assert_eq!(block_on(policy.authorize(&denied)), DENIED);
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — "composes ordinary owner permissions" with allowlists.
    #[test]
    fn allowlist_policy_keeps_owner_permissions() {
        let policy = OwnerAllowlistAuthorizer::new();
        for action in SESSION_ACTIONS {
            assert_eq!(
                policy.check(&on_session(alice(), action, alice())),
                Ok(()),
                "{action}"
            );
            assert_eq!(
                policy.check(&on_session(bob(), action, alice())),
                DENIED,
                "{action}"
            );
        }
        assert_eq!(policy.check(&list_as(alice(), alice())), Ok(()));
        assert_eq!(
            policy.check(&on_session(
                alice(),
                Action::Read,
                CallerIdentity::default()
            )),
            DENIED
        );
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — "Allowlists cannot override owner checks".
    #[test]
    fn allowlist_entries_never_override_owner_checks() {
        let mut policy = OwnerAllowlistAuthorizer::new();
        for action in SESSION_ACTIONS {
            policy = policy.allowing(action, bob());
        }
        for action in SESSION_ACTIONS {
            assert_eq!(
                policy.check(&on_session(bob(), action, alice())),
                DENIED,
                "{action}"
            );
            assert_eq!(
                policy.check(&on_session(bob(), action, CallerIdentity::default())),
                DENIED,
                "{action} on an unbound session"
            );
        }
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — exact-caller allowlist for create.
    #[test]
    fn create_requires_an_exact_allowlist_entry() {
        let policy = OwnerAllowlistAuthorizer::new().allowing(Action::Create, alice());
        assert_eq!(
            policy.check(&AuthorizationRequest::global(
                alice(),
                Action::Create,
                METHOD
            )),
            Ok(())
        );
        for caller in [
            bob(),
            CallerIdentity::new("https://issuer.example", "ALICE"),
        ] {
            assert_eq!(
                policy.check(&AuthorizationRequest::global(
                    caller,
                    Action::Create,
                    METHOD
                )),
                DENIED
            );
        }
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — "Global actions use an empty SessionUID and Owner"; a
    // create never carries a request-supplied owner.
    #[test]
    fn global_action_with_a_session_or_owner_is_denied() {
        let policy = OwnerAllowlistAuthorizer::new()
            .allowing(Action::Create, alice())
            .allowing(Action::RegistryRegister, alice());
        for action in [Action::Create, Action::RegistryRegister] {
            let named = AuthorizationRequest::for_session(
                alice(),
                action,
                "s1",
                CallerIdentity::default(),
                METHOD,
            );
            let owned = AuthorizationRequest::for_session(alice(), action, "", alice(), METHOD);
            assert_eq!(policy.check(&named), DENIED, "{action}");
            assert_eq!(policy.check(&owned), DENIED, "{action}");
        }
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — exact-caller allowlist for list: an allowlisted caller
    // may list every session or any valid owner's, others only their own.
    #[test]
    fn allowlisted_lister_may_list_beyond_its_own_sessions() {
        let policy = OwnerAllowlistAuthorizer::new().allowing(Action::List, alice());
        assert_eq!(
            policy.check(&list_as(alice(), CallerIdentity::default())),
            Ok(())
        );
        assert_eq!(policy.check(&list_as(alice(), bob())), Ok(()));
        assert_eq!(
            policy.check(&list_as(alice(), CallerIdentity::new("", "bob"))),
            DENIED
        );
        assert_eq!(
            policy.check(&list_as(bob(), CallerIdentity::default())),
            DENIED
        );
        assert_eq!(policy.check(&list_as(bob(), alice())), DENIED);
        assert_eq!(policy.check(&list_as(bob(), bob())), Ok(()));
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — exact-caller allowlist for approve, on a named
    // session.
    #[test]
    fn approve_requires_an_allowlist_entry_and_a_session() {
        let policy = OwnerAllowlistAuthorizer::new().allowing(Action::Approve, alice());
        assert_eq!(
            policy.check(&on_session(alice(), Action::Approve, alice())),
            Ok(())
        );
        assert_eq!(
            policy.check(&on_session(bob(), Action::Approve, bob())),
            DENIED
        );
        let no_session = AuthorizationRequest::global(alice(), Action::Approve, METHOD);
        assert_eq!(policy.check(&no_session), DENIED);
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — "Approve RPCs check read separately: an approver must
    // also own the session with this policy".
    #[test]
    fn allowlisted_approver_who_does_not_own_the_session_fails_the_read_check() {
        let policy = OwnerAllowlistAuthorizer::new().allowing(Action::Approve, bob());
        assert_eq!(
            policy.check(&on_session(bob(), Action::Approve, alice())),
            Ok(())
        );
        assert_eq!(
            policy.check(&on_session(bob(), Action::Read, alice())),
            DENIED
        );
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — allowlists for the registry operator actions, each
    // exact.
    #[test]
    fn each_registry_action_needs_its_own_allowlist_entry() {
        let registry = [
            Action::RegistryRead,
            Action::RegistryList,
            Action::RegistryRegister,
            Action::RegistryRetire,
        ];
        for granted in registry {
            let policy = OwnerAllowlistAuthorizer::new().allowing(granted, alice());
            for action in registry {
                let req = AuthorizationRequest::global(alice(), action, METHOD);
                let want = if action == granted { Ok(()) } else { DENIED };
                assert_eq!(policy.check(&req), want, "{granted} grants {action}?");
            }
            assert_eq!(
                policy.check(&AuthorizationRequest::global(bob(), granted, METHOD)),
                DENIED
            );
        }
    }

    // v0.3.0 API: OwnerAllowlistAuthorizer — allowlists cannot enable mint.
    #[test]
    fn allowlist_never_enables_mint() {
        let policy = OwnerAllowlistAuthorizer::new().allowing(Action::Mint, alice());
        assert!(!policy.is_allowlisted(Action::Mint, &alice()));
        assert_eq!(
            policy.check(&on_session(alice(), Action::Mint, alice())),
            DENIED
        );
        assert_eq!(
            policy.check(&AuthorizationRequest::global(alice(), Action::Mint, METHOD)),
            DENIED
        );
    }

    // v0.3.0 API: ErrPermissionDenied — an incomplete caller is denied, allowlisted or not.
    #[test]
    fn incomplete_caller_is_denied_even_if_allowlisted() {
        let half = CallerIdentity::new("https://issuer.example", "");
        let mut policy = OwnerAllowlistAuthorizer::new();
        for action in Action::ALL {
            policy = policy.allowing(action, half.clone());
        }
        for action in Action::ALL {
            let global = AuthorizationRequest::global(half.clone(), action, METHOD);
            let session = on_session(half.clone(), action, half.clone());
            assert_eq!(policy.check(&global), DENIED, "{action}");
            assert_eq!(policy.check(&session), DENIED, "{action}");
        }
    }
}
