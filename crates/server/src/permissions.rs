//! What a caller may do to a session, asked without doing it: for a console that shows only the
//! buttons a viewer may press. The RPCs still check every action themselves; this answers with
//! the same policy, the session's stored owner and the same rules for a missing session.

use agentsessions_api::{Action, CallerIdentity};
use agentsessions_journal::JournalError;

use crate::authz::{Call, method};
use crate::error::Result;
use crate::service::SessionsService;

/// The RPC whose name a policy sees when asked about `action` on a session.
fn method_of(action: Action) -> &'static str {
    match action {
        Action::Read => method::GET,
        Action::Exec => method::EXEC,
        Action::Fork => method::FORK,
        Action::Suspend => method::SUSPEND,
        Action::Resume => method::RESUME,
        Action::Delete => method::DELETE,
        Action::Cancel => method::CANCEL,
        Action::Approve => method::APPROVE,
        Action::Create => method::CREATE,
        Action::List => method::LIST,
        Action::Mint
        | Action::RegistryRead
        | Action::RegistryList
        | Action::RegistryRegister
        | Action::RegistryRetire => "",
    }
}

impl SessionsService {
    /// Which of `actions` the verified `caller` (`None`: anonymous) may perform on session
    /// `uid`, checked against its stored owner, in the order given. A session that does not
    /// exist is checked with no owner, as the RPCs do, so the answer never tells a refused
    /// caller whether it exists. Approve also needs read, as the Approve RPC does.
    ///
    /// # Errors
    /// The journal cannot be read, or the policy failed without deciding.
    pub async fn permitted(
        &self,
        caller: Option<&CallerIdentity>,
        uid: &str,
        actions: &[Action],
    ) -> Result<Vec<Action>> {
        let inner = &self.inner;
        let owner = match inner.journal.session_info(uid).await {
            Ok(info) => info.row.owner,
            Err(JournalError::SessionNotFound(_)) => CallerIdentity::default(),
            Err(e) => return Err(e.into()),
        };
        let caller = caller.cloned().unwrap_or_default();
        let mut allowed = Vec::with_capacity(actions.len());
        for &action in actions {
            let needs: &[Action] = if action == Action::Approve {
                &[Action::Approve, Action::Read]
            } else {
                std::slice::from_ref(&action)
            };
            let call = Call {
                caller: caller.clone(),
                method: method_of(action),
            };
            let mut all = true;
            for &needed in needs {
                all &= inner
                    .authz
                    .allows_session(&call, needed, uid, &owner)
                    .await?;
            }
            if all {
                allowed.push(action);
            }
        }
        Ok(allowed)
    }

    /// Whether a policy is enforced (sessions are then owned and every action checked).
    pub fn enforcing(&self) -> bool {
        self.inner.authz.enforcing()
    }
}
