//! What a caller hands the client ([`ExecOptions`], [`ForkOptions`], [`Decision`]) and what a
//! turn gives back ([`ExecEvent`], [`TurnResult`], [`TurnFailed`]).

use std::collections::BTreeMap;

use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;

use crate::error::ClientError;
use crate::records::text_of;

/// What [`Client::exec`] reports while the turn runs.
#[derive(Debug, Clone, Copy)]
pub enum ExecEvent<'a> {
    /// A session frame (the first frame, and a final one after a park or recovery).
    Session(&'a pb::Session),
    /// A committed record.
    Record(&'a pb::LogRecord),
    /// A streamed model chunk (transport only; never journaled).
    Delta(&'a pb::Delta),
    /// A running tool's progress (transport only; never journaled).
    Progress(&'a pb::ToolProgress),
}

/// A turn to run.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// The session; empty creates one.
    pub session: String,
    /// User text inputs, one message each.
    pub inputs: Vec<String>,
    /// Per-turn harness override (empty: the session's).
    pub harness: String,
    /// Strict CAS cursor; `None` appends at the head.
    pub expected_last_seq: Option<i64>,
    /// Unix second after which the turn is cancelled; 0 for none.
    pub deadline_unix: i64,
    /// Close the session's unfinished last turn first instead of being refused
    /// (`ExecRequest.abandon_unfinished`, extensions §9).
    pub abandon_unfinished: bool,
}

impl ExecOptions {
    /// One user input on a new session.
    pub fn new(input: impl Into<String>) -> Self {
        Self {
            inputs: vec![input.into()],
            ..Self::default()
        }
    }

    /// On `session`.
    #[must_use]
    pub fn on(mut self, session: impl Into<String>) -> Self {
        self.session = session.into();
        self
    }
}

/// What a turn produced.
#[derive(Debug, Clone, Default)]
pub struct TurnResult {
    /// The latest session frame.
    pub session: Option<pb::Session>,
    /// Records committed by the turn, in order.
    pub records: Vec<pb::LogRecord>,
    /// Texts of the OUTPUT records, concatenated.
    pub output: String,
    /// The highest seq seen in records and session frames.
    pub last_seq: i64,
}

impl TurnResult {
    /// The session's uid ("" before the first frame).
    pub fn session_uid(&self) -> String {
        self.session
            .as_ref()
            .and_then(|s| s.metadata.as_ref())
            .map(|m| m.uid.clone())
            .unwrap_or_default()
    }

    pub(crate) fn absorb(&mut self, update: &Update) {
        match update {
            Update::Session(session) => {
                self.last_seq = self.last_seq.max(session.last_seq);
                self.session = Some(session.clone());
            }
            Update::Record(record) => {
                self.last_seq = self.last_seq.max(record.seq);
                if let Some(event) = &record.event
                    && event.kind == pb::EventKind::EventOutput as i32
                    && let Some(pb::event::Body::Message(message)) = &event.body
                {
                    self.output.push_str(&text_of(message));
                }
                self.records.push(record.clone());
            }
            Update::Delta(_) | Update::Progress(_) => {}
        }
    }
}

/// A turn that failed, with what it produced before failing.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct TurnFailed {
    /// Why it failed.
    pub error: ClientError,
    /// What arrived before the failure (the session frame tells the uid).
    pub partial: TurnResult,
}

/// Children to create with [`Client::fork`].
#[derive(Debug, Clone, Default)]
pub struct ForkOptions {
    /// Parent seq to fork at; 0 for the head.
    pub at_seq: i64,
    /// How many children (0 means 1; at most 128).
    pub count: i32,
    /// Child names: none, or one per child.
    pub names: Vec<String>,
    /// Labels for every child.
    pub labels: BTreeMap<String, String>,
}

/// An approval decision for [`Client::approve`].
#[derive(Debug, Clone, Default)]
pub struct Decision {
    /// The parked execution.
    pub execution_id: String,
    /// The gated tool call.
    pub tool_call_id: String,
    /// Seq of the APPROVAL_REQUEST.
    pub request_seq: i64,
    /// Approve or deny.
    pub approved: bool,
    /// Why.
    pub reason: String,
    /// Who decided (recorded as provenance on the decision).
    pub identity: Option<pb::IdentityRef>,
}
