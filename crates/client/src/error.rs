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
    // The one code -> name table is the API's (`StatusCode::as_str`).
    agentsessions_api::StatusCode::from_number(i32::from(code))
        .unwrap_or(agentsessions_api::StatusCode::Unknown)
        .as_str()
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

#[cfg(test)]
mod tests {
    use super::code_name;

    #[test]
    fn every_grpc_code_has_its_own_name_from_the_one_table() {
        let names: std::collections::BTreeSet<&str> =
            (0..=16).map(|n| code_name(tonic::Code::from(n))).collect();
        assert_eq!(names.len(), 17, "{names:?}");
        assert_eq!(code_name(tonic::Code::NotFound), "NOT_FOUND");
        assert_eq!(code_name(tonic::Code::from(99)), "UNKNOWN");
    }
}
