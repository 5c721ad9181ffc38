//! [`ClientError`], what a client call fails with, and the gRPC code names it reports.

/// What a client call failed with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The target is not an address this client can dial.
    #[error("cannot dial {target:?}: {reason}")]
    Dial {
        /// The target given.
        target: String,
        /// Why.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("{}: {}", code_name(.0.code()), .0.message())]
    Status(tonic::Status),
    /// A record the server sent does not decode or does not verify.
    #[error("record {seq}: {reason}")]
    BadRecord {
        /// Its seq.
        seq: i64,
        /// Why.
        reason: String,
    },
    /// A task reading part of a paged read ended without an answer (it panicked or was
    /// cancelled, as when the runtime shuts down).
    #[error("a ReadRecords page of session {session} was not read: {reason}")]
    PageLost {
        /// The session read.
        session: String,
        /// Why.
        reason: String,
    },
    /// A state filter names no execution state.
    #[error(
        "{name:?} is not an execution state (PENDING, RUNNING, AWAITING, COMPLETED, FAILED, \
         CANCELED, INTERRUPTED)"
    )]
    UnknownExecState {
        /// The name given.
        name: String,
    },
    /// A watch stream ended while its session was not deleted (the server went away).
    #[error("the watch of session {session} ended early; resume from seq {next_seq}")]
    WatchCut {
        /// The watched session.
        session: String,
        /// Where to resume.
        next_seq: i64,
    },
}

impl From<tonic::Status> for ClientError {
    fn from(status: tonic::Status) -> Self {
        Self::Status(status)
    }
}

/// The canonical upper-case name of a gRPC code (`NOT_FOUND`).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

impl ClientError {
    /// The gRPC code (UNKNOWN for local failures).
    pub fn code(&self) -> tonic::Code {
        match self {
            Self::Status(status) => status.code(),
            Self::Dial { .. } | Self::UnknownExecState { .. } => tonic::Code::InvalidArgument,
            Self::BadRecord { .. } => tonic::Code::DataLoss,
            Self::WatchCut { .. } => tonic::Code::Unavailable,
            Self::PageLost { .. } => tonic::Code::Internal,
        }
    }
}

/// Results of the client.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;
