//! The pending-approvals projection: every approval request still waiting for a person, kept by
//! the journal in the same commit as the records that open and close it, so an operator lists
//! them with one indexed query instead of scanning every session's log.
//!
//! A request opens an entry; its decision, the end of its execution, or the session's delete
//! intent closes it. A fork child does not inherit its parent's entries: an inherited gate cannot
//! be decided in the child (semantics §5.3), and the parent's entry stays the parent's.

use agentsessions_api::{
    CallerIdentity, Event, EventBody, EventKind, JsonObject, Mediation, Timestamp,
};

use crate::error::{JournalError, Result};
use crate::page_token::PageCursor;
use crate::projection::marks_deletion;
use crate::rows::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::rules;

/// One approval request waiting for a decision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingApproval {
    /// Session uid.
    pub session: String,
    /// The session's project.
    pub project: String,
    /// The session's owner; empty for an unbound session.
    pub owner: CallerIdentity,
    /// The execution the gated call belongs to.
    pub execution_id: String,
    /// The gated tool call's id (what a decision names).
    pub tool_call_id: String,
    /// Seq of the APPROVAL_REQUEST record (what a decision names).
    pub request_seq: i64,
    /// The tool the call asks to run; empty when its TOOL_CALL was not found near the request.
    pub tool: String,
    /// The call's arguments.
    pub args: Option<JsonObject>,
    /// Why approval is needed, as the request says.
    pub reason: String,
    /// When the request was committed.
    pub requested_at: Timestamp,
}

/// One page request of [`Catalog::list_pending_approvals`](crate::Catalog::list_pending_approvals).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalsQuery {
    /// Exact project; empty means the default project.
    pub project: String,
    /// Page size; 0 or less is the default, more than the maximum is clamped.
    pub page_size: i64,
    /// Opaque token from a previous page; empty for the first page.
    pub page_token: String,
    /// Only requests on sessions owned by exactly this caller; `None` for every owner. An
    /// incomplete owner is refused.
    pub owner: Option<CallerIdentity>,
}

impl ApprovalsQuery {
    /// The effective page size after defaulting and clamping.
    pub fn effective_size(&self) -> usize {
        match usize::try_from(self.page_size) {
            Ok(0) | Err(_) => DEFAULT_PAGE_SIZE,
            Ok(n) => n.min(MAX_PAGE_SIZE),
        }
    }
}

/// One page of pending approvals, oldest request first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApprovalPage {
    /// The requests on this page.
    pub approvals: Vec<PendingApproval>,
    /// Token for the next page; empty on the last page.
    pub next_page_token: String,
}

/// The keyset position after a page: the last entry's `(requested_at, session, tool_call_id)`,
/// the order every backend lists in.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApprovalCursor {
    /// `requested_at` in unix nanoseconds.
    pub requested_at_ns: i64,
    /// Session uid.
    pub session: String,
    /// Tool call id.
    pub tool_call_id: String,
}

impl ApprovalCursor {
    /// The cursor naming `approval`.
    pub fn of(approval: &PendingApproval) -> Self {
        Self {
            requested_at_ns: approval.requested_at.unix_nanos(),
            session: approval.session.clone(),
            tool_call_id: approval.tool_call_id.clone(),
        }
    }

    /// Encodes the cursor as an opaque token (the listing token's shape, the uid part naming
    /// session and call).
    pub fn encode(&self) -> String {
        PageCursor {
            created_at_ns: self.requested_at_ns,
            uid: format!("{}\0{}", self.session, self.tool_call_id),
        }
        .encode()
    }

    /// Decodes a token; `Ok(None)` for the empty token (first page).
    ///
    /// # Errors
    /// [`JournalError::InvalidPageToken`] for a token this journal did not issue.
    pub fn decode(token: &str) -> Result<Option<Self>> {
        let Some(cursor) = PageCursor::decode(token)? else {
            return Ok(None);
        };
        let (session, call) = cursor
            .uid
            .split_once('\0')
            .ok_or_else(|| JournalError::InvalidPageToken("not an approvals token".to_owned()))?;
        Ok(Some(Self {
            requested_at_ns: cursor.created_at_ns,
            session: session.to_owned(),
            tool_call_id: call.to_owned(),
        }))
    }
}

/// What a listing of pending approvals asks a backend for, with the shared rules applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalsPlan {
    /// Where the page starts; `None` for the first page.
    pub cursor: Option<ApprovalCursor>,
    /// The project to list.
    pub project: String,
    /// Entries on the page.
    pub size: usize,
}

impl ApprovalsPlan {
    /// Checks `query` and fills in its defaults.
    ///
    /// # Errors
    /// [`JournalError::InvalidPageToken`] for a token this journal did not issue,
    /// [`JournalError::InvalidArgument`] for an incomplete owner filter.
    pub fn new(query: &ApprovalsQuery, default_project: &str) -> Result<Self> {
        let cursor = ApprovalCursor::decode(&query.page_token)?;
        rules::check_owner_filter(query.owner.as_ref())?;
        let project = if query.project.is_empty() {
            default_project
        } else {
            &query.project
        };
        Ok(Self {
            cursor,
            project: project.to_owned(),
            size: query.effective_size(),
        })
    }

    /// Whether an entry at `position` comes after the page's cursor.
    pub fn after_cursor(&self, position: &ApprovalCursor) -> bool {
        self.cursor.as_ref().is_none_or(|c| position > c)
    }

    /// The page from up to `size + 1` entries in listing order: the extra one, if present, only
    /// says that another page follows.
    pub fn page(&self, mut approvals: Vec<PendingApproval>) -> ApprovalPage {
        let more = approvals.len() > self.size;
        approvals.truncate(self.size);
        let next_page_token = match approvals.last() {
            Some(last) if more => ApprovalCursor::of(last).encode(),
            _ => String::new(),
        };
        ApprovalPage {
            approvals,
            next_page_token,
        }
    }
}

/// How committing one event changes its session's pending approvals.
#[derive(Debug, Clone, PartialEq)]
pub enum PendingChange {
    /// An APPROVAL_REQUEST opens an entry for its call.
    Request {
        /// The execution of the request.
        execution_id: String,
        /// The gated call.
        tool_call_id: String,
        /// Why approval is needed.
        reason: String,
    },
    /// An APPROVAL_RESULT decides the call.
    Decided {
        /// The decided call.
        tool_call_id: String,
    },
    /// An END closes every entry of its execution.
    Ended {
        /// The execution that ended.
        execution_id: String,
    },
    /// A delete intent closes every entry of the session.
    Deleted,
}

/// What committing `event` does to the pending approvals of its session.
pub fn pending_change(event: &Event) -> Option<PendingChange> {
    if marks_deletion(event) {
        return Some(PendingChange::Deleted);
    }
    match (&event.kind, &event.body) {
        (EventKind::ApprovalRequest, Some(EventBody::Approval(request))) => {
            Some(PendingChange::Request {
                execution_id: event.execution_id.clone(),
                tool_call_id: request.tool_call_id.clone(),
                reason: request.reason.clone(),
            })
        }
        (EventKind::ApprovalResult, Some(EventBody::ApprovalResult(decision))) => {
            Some(PendingChange::Decided {
                tool_call_id: decision.tool_call_id.clone(),
            })
        }
        (EventKind::End, _) => Some(PendingChange::Ended {
            execution_id: event.execution_id.clone(),
        }),
        _ => None,
    }
}

/// How far back from a request a backend looks for its gated TOOL_CALL, which the controller
/// appends right before it.
pub const CALL_LOOKBACK: usize = 8;

/// The tool and arguments of the gated call `tool_call_id` of `execution_id`, searched in
/// `events_newest_first`.
pub fn gated_call<'a>(
    events_newest_first: impl IntoIterator<Item = &'a Event>,
    execution_id: &str,
    tool_call_id: &str,
) -> Option<(String, Option<JsonObject>)> {
    events_newest_first
        .into_iter()
        .find_map(|event| match (&event.kind, &event.body) {
            (EventKind::ToolCall, Some(EventBody::ToolCall(call)))
                if event.execution_id == execution_id
                    && call.id == tool_call_id
                    && call.mediation == Mediation::RequiresApproval =>
            {
                Some((call.tool.clone(), call.args.clone()))
            }
            _ => None,
        })
}

/// Arguments as stored: compact JSON, `""` for none.
pub fn encode_args(args: Option<&JsonObject>) -> String {
    args.map(|a| serde_json::to_string(a).unwrap_or_default())
        .unwrap_or_default()
}

/// Arguments as read back; text that is not a JSON object reads as none rather than failing a
/// listing.
pub fn decode_args(text: &str) -> Option<JsonObject> {
    if text.is_empty() {
        return None;
    }
    serde_json::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use agentsessions_api::{ApprovalRequest, ApprovalResult, ToolCall};

    use super::*;

    #[test]
    fn request_decision_end_and_delete_are_the_changes() {
        let request = Event::new(
            EventKind::ApprovalRequest,
            EventBody::Approval(ApprovalRequest {
                tool_call_id: "c1".into(),
                reason: "writes".into(),
            }),
        )
        .with_execution("e1");
        assert_eq!(
            pending_change(&request),
            Some(PendingChange::Request {
                execution_id: "e1".into(),
                tool_call_id: "c1".into(),
                reason: "writes".into(),
            })
        );
        let decision = Event::new(
            EventKind::ApprovalResult,
            EventBody::ApprovalResult(ApprovalResult {
                tool_call_id: "c1".into(),
                ..ApprovalResult::default()
            }),
        );
        assert_eq!(
            pending_change(&decision),
            Some(PendingChange::Decided {
                tool_call_id: "c1".into()
            })
        );
        let call = Event::new(
            EventKind::ToolCall,
            EventBody::ToolCall(ToolCall {
                id: "c1".into(),
                tool: "rm".into(),
                mediation: Mediation::RequiresApproval,
                ..ToolCall::default()
            }),
        )
        .with_execution("e1");
        assert_eq!(pending_change(&call), None);
        assert_eq!(
            gated_call([&request, &call], "e1", "c1"),
            Some(("rm".to_owned(), None))
        );
        assert_eq!(gated_call([&call], "e2", "c1"), None);
    }

    #[test]
    fn cursors_round_trip_and_foreign_tokens_are_refused() {
        let cursor = ApprovalCursor {
            requested_at_ns: 42,
            session: "sess-1".into(),
            tool_call_id: "call-1".into(),
        };
        assert_eq!(
            ApprovalCursor::decode(&cursor.encode()).unwrap(),
            Some(cursor)
        );
        let listing = PageCursor {
            created_at_ns: 1,
            uid: "sess-1".into(),
        }
        .encode();
        assert!(matches!(
            ApprovalCursor::decode(&listing),
            Err(JournalError::InvalidPageToken(_))
        ));
    }
}
