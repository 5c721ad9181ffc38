//! The journaled and streamed unit: [`Event`], its kind and its typed body.

use crate::content::{
    ApprovalRef, ApprovalRequest, ApprovalResult, Message, ModelCall, ToolCall, ToolResult, Usage,
};
use crate::session::{IdentityRef, SnapshotRef};

/// A point in time as `google.protobuf.Timestamp` carries it: seconds since the Unix epoch and
/// nanoseconds within the second (0..1e9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z.
    pub seconds: i64,
    /// Nanoseconds, 0..=999_999_999.
    pub nanos: i32,
}

impl Timestamp {
    /// The current wall-clock time.
    pub fn now() -> Self {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(since.subsec_nanos()).unwrap_or(0),
        }
    }

    /// Nanoseconds since the epoch, saturating.
    pub fn unix_nanos(self) -> i64 {
        self.seconds
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(self.nanos))
    }

    /// The timestamp for nanoseconds since the epoch.
    pub fn from_unix_nanos(nanos: i64) -> Self {
        Self {
            seconds: nanos.div_euclid(1_000_000_000),
            // rem_euclid of 1e9 always fits in i32.
            nanos: i32::try_from(nanos.rem_euclid(1_000_000_000)).unwrap_or(0),
        }
    }
}

/// What an event records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Not set, or a kind this build does not know (the wire's zero value).
    #[default]
    Unspecified,
    /// An input message of the turn.
    Input,
    /// A model call, recorded before the model runs.
    ModelCall,
    /// A model completion or harness output.
    Output,
    /// A tool call.
    ToolCall,
    /// A tool result.
    ToolResult,
    /// A host-owned approval request.
    ApprovalRequest,
    /// A committed approval decision.
    ApprovalResult,
    /// Token accounting.
    Usage,
    /// A compute or session transition.
    Lifecycle,
    /// The end of an execution.
    End,
    /// A failure record.
    Error,
    /// Host-owned invocation state, written before the harness runs.
    ExecutionStart,
    /// Transport-only park acknowledgement; never journaled.
    Parked,
}

impl EventKind {
    /// Every known kind, in wire-number order.
    pub const ALL: [Self; 14] = [
        Self::Unspecified,
        Self::Input,
        Self::ModelCall,
        Self::Output,
        Self::ToolCall,
        Self::ToolResult,
        Self::ApprovalRequest,
        Self::ApprovalResult,
        Self::Usage,
        Self::Lifecycle,
        Self::End,
        Self::Error,
        Self::ExecutionStart,
        Self::Parked,
    ];

    /// The v0.3.0 API's name (`INPUT`, `MODEL_CALL` …); empty for unspecified.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::Input => "INPUT",
            Self::ModelCall => "MODEL_CALL",
            Self::Output => "OUTPUT",
            Self::ToolCall => "TOOL_CALL",
            Self::ToolResult => "TOOL_RESULT",
            Self::ApprovalRequest => "APPROVAL_REQUEST",
            Self::ApprovalResult => "APPROVAL_RESULT",
            Self::Usage => "USAGE",
            Self::Lifecycle => "LIFECYCLE",
            Self::End => "END",
            Self::Error => "ERROR",
            Self::ExecutionStart => "EXECUTION_START",
            Self::Parked => "PARKED",
        }
    }

    /// The kind for a v0.3.0 API name. An unknown name maps to [`EventKind::Unspecified`], as the
    /// reference converter does.
    pub fn from_name(name: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .unwrap_or_default()
    }
}

/// The typed body of an event: exactly one member.
#[derive(Debug, Clone, PartialEq)]
pub enum EventBody {
    /// INPUT / OUTPUT.
    Message(Message),
    /// MODEL_CALL.
    ModelCall(ModelCall),
    /// TOOL_CALL.
    ToolCall(ToolCall),
    /// TOOL_RESULT.
    Result(ToolResult),
    /// APPROVAL_REQUEST.
    Approval(ApprovalRequest),
    /// APPROVAL_RESULT.
    ApprovalResult(ApprovalResult),
    /// USAGE.
    Usage(Usage),
    /// LIFECYCLE.
    Lifecycle(Lifecycle),
    /// END.
    End(HarnessEnd),
    /// ERROR.
    Error(ErrorInfo),
    /// EXECUTION_START.
    ExecutionStart(ExecutionStart),
    /// PARKED (transport only).
    Parked(ApprovalRef),
}

/// The shared unit of the session log and the harness stream. Ordering and integrity (seq,
/// prev_hash, content_hash, fence) live on the record envelope, not here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Event {
    /// The execution (turn) this belongs to; empty for lifecycle and legacy records.
    pub execution_id: String,
    /// Set only when the producer set it; `None` is the absent timestamp.
    pub timestamp: Option<Timestamp>,
    /// Versions the event body.
    pub schema_version: i32,
    /// What the event records.
    pub kind: EventKind,
    /// The typed body; `None` when nothing is set.
    pub body: Option<EventBody>,
    /// Who emitted it (provenance).
    pub actor: IdentityRef,
    /// The names of the secrets the host took out of its content before journaling it
    /// ([`crate::redaction`]), sorted; stored with the record, never part of its hash
    /// (extensions §1).
    pub redacted: Vec<String>,
}

impl Event {
    /// An event of `kind` with `body` and everything else default.
    pub fn new(kind: EventKind, body: EventBody) -> Self {
        Self {
            kind,
            body: Some(body),
            ..Self::default()
        }
    }

    /// Sets the execution id.
    #[must_use]
    pub fn with_execution(mut self, execution_id: impl Into<String>) -> Self {
        self.execution_id = execution_id.into();
        self
    }

    /// The message body, if that is the body.
    pub fn message(&self) -> Option<&Message> {
        match &self.body {
            Some(EventBody::Message(m)) => Some(m),
            _ => None,
        }
    }

    /// The lifecycle body, if that is the body.
    pub fn lifecycle(&self) -> Option<&Lifecycle> {
        match &self.body {
            Some(EventBody::Lifecycle(l)) => Some(l),
            _ => None,
        }
    }

    /// The execution-start body, if that is the body.
    pub fn execution_start(&self) -> Option<&ExecutionStart> {
        match &self.body {
            Some(EventBody::ExecutionStart(s)) => Some(s),
            _ => None,
        }
    }
}

/// Lifecycle transitions recorded in the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum LifecycleKind {
    /// Not set.
    #[default]
    Unspecified,
    /// Compute suspended; the snapshot rides inline.
    Suspend,
    /// Compute resumed.
    Resume,
    /// This session was forked from a parent.
    Fork,
    /// Replay / compaction checkpoint.
    Baseline,
    /// An execution was cancelled.
    Cancel,
    /// Host-owned durable intent to delete the session.
    Delete,
}

impl LifecycleKind {
    /// The v0.3.0 API's name (`SUSPEND` …); empty for unspecified.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::Suspend => "SUSPEND",
            Self::Resume => "RESUME",
            Self::Fork => "FORK",
            Self::Baseline => "BASELINE",
            Self::Cancel => "CANCEL",
            Self::Delete => "DELETE",
        }
    }

    /// Parses a v0.3.0 API name; `None` when unknown.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "" => Self::Unspecified,
            "SUSPEND" => Self::Suspend,
            "RESUME" => Self::Resume,
            "FORK" => Self::Fork,
            "BASELINE" => Self::Baseline,
            "CANCEL" => Self::Cancel,
            "DELETE" => Self::Delete,
            _ => return None,
        })
    }
}

/// A compute/session transition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifecycle {
    /// Which transition.
    pub kind: LifecycleKind,
    /// Free text, e.g. `parent@7` on a fork marker.
    pub detail: String,
    /// Captured state, set on SUSPEND.
    pub snapshot: Option<SnapshotRef>,
    /// On FORK only: the compute instance the child was cloned onto.
    pub compute_instance: String,
}

/// The terminal state of one execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarnessEnd {
    /// `COMPLETED`, `FAILED` or `CANCELED`.
    pub state: String,
    /// Why it failed, when it did.
    pub error: Option<ErrorInfo>,
}

/// A gRPC status code and description (the v0.3.0 API's `Error` struct, renamed so it is not
/// mistaken for a Rust error type).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorInfo {
    /// A gRPC status code.
    pub code: i32,
    /// What went wrong.
    pub description: String,
}

/// Host-owned invocation state, recorded before the harness runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutionStart {
    /// Effective default model under an explicit policy; empty otherwise.
    pub model: String,
    /// Opaque per-execution config, preserved byte for byte.
    pub config: Vec<u8>,
    /// The harness's own cursor (not the append CAS cursor).
    pub resume_from_seq: i64,
    /// Number of INPUT records that follow; `None` cannot establish completeness.
    pub input_count: Option<i64>,
    /// Resolved harness name.
    pub harness: String,
    /// Advertised harness version; empty is unknown.
    pub harness_version: String,
    /// Instance identity of the compute the turn was placed on.
    pub compute_instance: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_round_trip_and_unknown_is_unspecified() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::from_name(k.as_str()), k);
        }
        assert_eq!(EventKind::from_name("NOPE"), EventKind::Unspecified);
    }

    #[test]
    fn timestamp_nanos_round_trip_before_and_after_epoch() {
        for n in [0, 1, 1_700_000_000_500_000_000, -1, -1_500_000_000] {
            assert_eq!(Timestamp::from_unix_nanos(n).unix_nanos(), n);
        }
        assert_eq!(Timestamp::from_unix_nanos(-1).nanos, 999_999_999);
    }
}
