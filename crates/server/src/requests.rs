//! Request validation (semantics §8, service-level rows): each Sessions request converts into a
//! validated request with `TryFrom`, so a handler holds only values it may act on. The
//! conversions read nothing and authorize nothing: a malformed request is refused the same way
//! whoever sends it, which discloses nothing.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentsessions_api::{ApprovalDecision, Message, Session};
use agentsessions_controller::ExecRequest;
use agentsessions_wire::pb;

use crate::error::ServerError;

/// Most children one Fork may create (semantics §4.4).
pub const MAX_FORK_COUNT: i32 = 128;

/// `value`, unless it is empty.
fn required(value: String, field: &'static str) -> Result<String, ServerError> {
    if value.is_empty() {
        return Err(ServerError::MissingField { field });
    }
    Ok(value)
}

/// The session a request names (Get, Delete, Suspend, Resume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionUid(pub(crate) String);

impl TryFrom<pb::GetSessionRequest> for SessionUid {
    type Error = ServerError;

    fn try_from(req: pb::GetSessionRequest) -> Result<Self, ServerError> {
        required(req.uid, "uid").map(Self)
    }
}

impl TryFrom<pb::DeleteSessionRequest> for SessionUid {
    type Error = ServerError;

    fn try_from(req: pb::DeleteSessionRequest) -> Result<Self, ServerError> {
        required(req.uid, "uid").map(Self)
    }
}

impl TryFrom<pb::SuspendRequest> for SessionUid {
    type Error = ServerError;

    fn try_from(req: pb::SuspendRequest) -> Result<Self, ServerError> {
        required(req.session, "session").map(Self)
    }
}

impl TryFrom<pb::ResumeRequest> for SessionUid {
    type Error = ServerError;

    fn try_from(req: pb::ResumeRequest) -> Result<Self, ServerError> {
        required(req.session, "session").map(Self)
    }
}

/// A Watch: the session, and the first seq to stream (at least 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchOrder {
    pub(crate) session: String,
    pub(crate) from_seq: i64,
}

impl TryFrom<pb::WatchRequest> for WatchOrder {
    type Error = ServerError;

    fn try_from(req: pb::WatchRequest) -> Result<Self, ServerError> {
        Ok(Self {
            session: required(req.session, "session")?,
            // As Replay: anything before the first record means from the first record.
            from_seq: req.from_seq.max(1),
        })
    }
}

/// A CreateSession's session (defaults when the request carries none).
#[derive(Debug, Clone)]
pub(crate) struct NewSession(pub(crate) Session);

impl TryFrom<pb::CreateSessionRequest> for NewSession {
    type Error = ServerError;

    fn try_from(req: pb::CreateSessionRequest) -> Result<Self, ServerError> {
        match req.session {
            Some(wire) => {
                Session::try_from(wire)
                    .map(Self)
                    .map_err(|source| ServerError::InvalidField {
                        field: "session",
                        source,
                    })
            }
            None => Ok(Self(Session::default())),
        }
    }
}

/// An Exec (semantics §2.1): the session (empty to create one) and the turn to run on it.
#[derive(Debug, Clone)]
pub(crate) struct ExecOrder {
    /// The session; empty creates one first.
    pub(crate) session: String,
    /// The per-turn harness override (empty: the session's).
    pub(crate) harness: String,
    /// The turn: inputs, CAS cursor, config, harness cursor, deadline, and whether it abandons
    /// the session's unfinished turn.
    pub(crate) turn: ExecRequest,
}

impl TryFrom<pb::ExecRequest> for ExecOrder {
    type Error = ServerError;

    fn try_from(req: pb::ExecRequest) -> Result<Self, ServerError> {
        let inputs = req
            .inputs
            .into_iter()
            .map(Message::try_from)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| ServerError::InvalidField {
                field: "inputs",
                source,
            })?;
        Ok(Self {
            session: req.session,
            harness: req.harness,
            turn: ExecRequest {
                inputs,
                expected_last_seq: req.expected_last_seq,
                config: req.config,
                resume_from_seq: req.resume_from_seq,
                deadline: deadline_of(req.deadline_unix),
                abandon_unfinished: req.abandon_unfinished,
            },
        })
    }
}

/// `deadline_unix` > 0 bounds the turn at that unix second (semantics §2.1).
fn deadline_of(deadline_unix: i64) -> Option<SystemTime> {
    u64::try_from(deadline_unix)
        .ok()
        .filter(|&s| s > 0)
        .map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

/// A Fork (semantics §4.4): 1 to [`MAX_FORK_COUNT`] children of `parent` at `at_seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ForkOrder {
    pub(crate) parent: String,
    pub(crate) at_seq: i64,
    pub(crate) count: usize,
    pub(crate) child_names: Vec<String>,
    pub(crate) labels: BTreeMap<String, String>,
}

impl TryFrom<pb::ForkRequest> for ForkOrder {
    type Error = ServerError;

    fn try_from(req: pb::ForkRequest) -> Result<Self, ServerError> {
        let parent = required(req.session, "session")?;
        if req.identity.is_some() {
            return Err(ServerError::ForkIdentitySet);
        }
        let count = match req.count {
            c if c <= 0 => 1,
            c if c > MAX_FORK_COUNT => return Err(ServerError::ForkCountOutOfRange { count: c }),
            c => c,
        };
        let count = usize::try_from(count).unwrap_or(1);
        if !req.child_names.is_empty() && req.child_names.len() != count {
            return Err(ServerError::ChildNamesMismatch {
                count,
                names: req.child_names.len(),
            });
        }
        Ok(Self {
            parent,
            at_seq: req.at_seq,
            count,
            child_names: req.child_names,
            labels: req.labels,
        })
    }
}

/// An Approve (semantics §5.5): the session and the decision on one recorded request.
#[derive(Debug, Clone)]
pub(crate) struct ApproveOrder {
    pub(crate) session: String,
    pub(crate) decision: ApprovalDecision,
}

impl TryFrom<pb::ApproveRequest> for ApproveOrder {
    type Error = ServerError;

    fn try_from(req: pb::ApproveRequest) -> Result<Self, ServerError> {
        let session = required(req.session, "session")?;
        let execution_id = required(req.execution_id, "execution_id")?;
        let tool_call_id = required(req.tool_call_id, "tool_call_id")?;
        if req.request_seq <= 0 {
            return Err(ServerError::RequestSeqNotPositive {
                request_seq: req.request_seq,
            });
        }
        let Some(approved) = req.approved else {
            return Err(ServerError::ApprovedUnset);
        };
        Ok(Self {
            session,
            decision: ApprovalDecision {
                execution_id,
                tool_call_id,
                request_seq: req.request_seq,
                approved,
                reason: req.reason,
                identity: req.identity.map(Into::into).unwrap_or_default(),
            },
        })
    }
}

/// A Cancel: the session, and optionally which execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CancelOrder {
    pub(crate) session: String,
    pub(crate) execution_id: String,
    pub(crate) reason: String,
}

impl TryFrom<pb::CancelRequest> for CancelOrder {
    type Error = ServerError;

    fn try_from(req: pb::CancelRequest) -> Result<Self, ServerError> {
        Ok(Self {
            session: required(req.session, "session")?,
            execution_id: req.execution_id,
            reason: req.reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    fn code<T: std::fmt::Debug>(result: Result<T, ServerError>) -> Code {
        match result {
            Ok(value) => panic!("accepted: {value:?}"),
            Err(err) => err.code(),
        }
    }

    // semantics §8: GetSession uid empty; Suspend/Resume session empty.
    #[test]
    fn a_missing_session_is_an_invalid_argument() {
        assert_eq!(
            code(SessionUid::try_from(pb::GetSessionRequest::default())),
            Code::InvalidArgument
        );
        assert_eq!(
            code(SessionUid::try_from(pb::SuspendRequest::default())),
            Code::InvalidArgument
        );
        assert_eq!(
            code(WatchOrder::try_from(pb::WatchRequest::default())),
            Code::InvalidArgument
        );
        assert_eq!(
            WatchOrder::try_from(pb::WatchRequest {
                session: "s".into(),
                from_seq: -5,
            })
            .unwrap(),
            WatchOrder {
                session: "s".into(),
                from_seq: 1
            }
        );
        assert_eq!(
            code(SessionUid::try_from(pb::ResumeRequest::default())),
            Code::InvalidArgument
        );
        assert_eq!(
            code(CancelOrder::try_from(pb::CancelRequest::default())),
            Code::InvalidArgument
        );
        assert_eq!(
            SessionUid::try_from(pb::DeleteSessionRequest { uid: "s".into() }).ok(),
            Some(SessionUid("s".into()))
        );
    }

    // semantics §8: Fork identity present, count > 128, child_names length ≠ 0/count.
    #[test]
    fn fork_requests_are_checked_before_anything_runs() {
        let fork = |count, names: &[&str], identity| pb::ForkRequest {
            session: "p".into(),
            count,
            child_names: names.iter().map(|n| (*n).to_owned()).collect(),
            identity,
            ..pb::ForkRequest::default()
        };
        assert_eq!(
            code(ForkOrder::try_from(fork(
                1,
                &[],
                Some(pb::IdentityRef::default())
            ))),
            Code::InvalidArgument
        );
        assert_eq!(
            code(ForkOrder::try_from(fork(MAX_FORK_COUNT + 1, &[], None))),
            Code::InvalidArgument
        );
        assert_eq!(
            code(ForkOrder::try_from(fork(2, &["a"], None))),
            Code::InvalidArgument
        );
        let order = ForkOrder::try_from(fork(0, &[], None)).unwrap();
        assert_eq!(order.count, 1);
        assert_eq!(
            ForkOrder::try_from(fork(2, &["a", "b"], None))
                .unwrap()
                .child_names,
            ["a", "b"]
        );
    }

    // semantics §8: Approve missing tuple field, request_seq ≤ 0, approved absent.
    #[test]
    fn approvals_need_the_whole_tuple_and_a_decision() {
        let full = pb::ApproveRequest {
            session: "s".into(),
            execution_id: "e".into(),
            tool_call_id: "t".into(),
            request_seq: 3,
            approved: Some(true),
            ..pb::ApproveRequest::default()
        };
        let order = ApproveOrder::try_from(full.clone()).unwrap();
        assert_eq!(order.decision.request_seq, 3);
        for broken in [
            pb::ApproveRequest {
                execution_id: String::new(),
                ..full.clone()
            },
            pb::ApproveRequest {
                tool_call_id: String::new(),
                ..full.clone()
            },
            pb::ApproveRequest {
                request_seq: 0,
                ..full.clone()
            },
            pb::ApproveRequest {
                approved: None,
                ..full
            },
        ] {
            assert_eq!(code(ApproveOrder::try_from(broken)), Code::InvalidArgument);
        }
    }

    #[test]
    fn exec_deadlines_are_unix_seconds_when_positive() {
        let exec = |deadline_unix| pb::ExecRequest {
            deadline_unix,
            ..pb::ExecRequest::default()
        };
        let order = ExecOrder::try_from(exec(0)).unwrap();
        assert_eq!(order.turn.deadline, None);
        let order = ExecOrder::try_from(exec(10)).unwrap();
        assert_eq!(
            order.turn.deadline,
            Some(UNIX_EPOCH + Duration::from_secs(10))
        );
    }
}
