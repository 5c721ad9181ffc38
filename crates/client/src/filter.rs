//! [`SessionFilter`]: which sessions of a listing to keep. `ListSessions` filters by project
//! only; the console's `GET /api/v1/sessions` and `agentctl list` narrow its pages with this one
//! filter, so a field means the same in both.

use agentsessions_wire::pb;

use crate::error::{ClientError, Result};

/// What a listing keeps; an empty field keeps every session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// The execution state ([`exec_state`] reads its name).
    pub state: Option<pb::ExecState>,
    /// The harness, exactly.
    pub harness: String,
    /// The owner's subject, exactly.
    pub owner: String,
    /// Part of the uid or the name, any case.
    pub text: String,
}

impl SessionFilter {
    /// Whether the filter keeps every session.
    pub fn is_empty(&self) -> bool {
        self.state.is_none()
            && self.harness.is_empty()
            && self.owner.is_empty()
            && self.text.is_empty()
    }

    /// Whether `session` passes every field.
    pub fn keeps(&self, session: &pb::Session) -> bool {
        let (uid, name) = session
            .metadata
            .as_ref()
            .map_or(("", ""), |m| (m.uid.as_str(), m.name.as_str()));
        let needle = self.text.to_lowercase();
        self.state
            .is_none_or(|state| session.exec_state == state as i32)
            && (self.harness.is_empty() || session.harness == self.harness)
            && (self.owner.is_empty()
                || session
                    .owner
                    .as_ref()
                    .is_some_and(|owner| owner.subject == self.owner))
            && (needle.is_empty()
                || uid.to_lowercase().contains(&needle)
                || name.to_lowercase().contains(&needle))
    }
}

/// The execution state `name` names, short or full and in any case (`running`,
/// `EXEC_RUNNING`); `None` for an empty name.
///
/// # Errors
/// [`ClientError::UnknownExecState`] for a name that is no execution state (unspecified
/// included).
pub fn exec_state(name: &str) -> Result<Option<pb::ExecState>> {
    if name.is_empty() {
        return Ok(None);
    }
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("EXEC_") {
        upper
    } else {
        format!("EXEC_{upper}")
    };
    pb::ExecState::from_str_name(&full)
        .filter(|state| *state != pb::ExecState::Unspecified)
        .map(Some)
        .ok_or_else(|| ClientError::UnknownExecState {
            name: name.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(uid: &str, name: &str, harness: &str, state: pb::ExecState) -> pb::Session {
        pb::Session {
            metadata: Some(pb::ResourceMetadata {
                uid: uid.to_owned(),
                name: name.to_owned(),
                ..pb::ResourceMetadata::default()
            }),
            harness: harness.to_owned(),
            exec_state: state as i32,
            ..pb::Session::default()
        }
    }

    #[test]
    fn state_names_are_short_or_full_in_any_case() {
        assert_eq!(exec_state("").unwrap(), None);
        assert_eq!(
            exec_state("running").unwrap(),
            Some(pb::ExecState::ExecRunning)
        );
        assert_eq!(
            exec_state("EXEC_AWAITING").unwrap(),
            Some(pb::ExecState::ExecAwaiting)
        );
        exec_state("sleeping").unwrap_err();
        exec_state("STATE_UNSPECIFIED").unwrap_err();
        exec_state("unspecified").unwrap_err();
    }

    #[test]
    fn every_field_must_match_and_text_is_part_of_the_uid_or_name() {
        let notes = session("sess-1", "Notes", "chat", pb::ExecState::ExecAwaiting);
        assert!(SessionFilter::default().is_empty());
        assert!(SessionFilter::default().keeps(&notes));
        let by = |state, harness: &str, text: &str| SessionFilter {
            state,
            harness: harness.to_owned(),
            owner: String::new(),
            text: text.to_owned(),
        };
        assert!(by(Some(pb::ExecState::ExecAwaiting), "chat", "note").keeps(&notes));
        assert!(by(None, "", "SESS-1").keeps(&notes));
        assert!(!by(Some(pb::ExecState::ExecCompleted), "", "").keeps(&notes));
        assert!(!by(None, "echo", "").keeps(&notes));
        assert!(!by(None, "", "other").keeps(&notes));
        let owned = SessionFilter {
            owner: "alice".to_owned(),
            ..SessionFilter::default()
        };
        assert!(!owned.keeps(&notes), "no owner is not alice");
    }
}
