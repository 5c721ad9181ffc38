//! What can go wrong in `agentctl`, and the one table from an error to the process exit code.

use std::process::ExitCode;

use agentsessions_cli::config::HostError;
use agentsessions_client::{ClientError, uid_of};
use agentsessions_wire::pb;

/// Why a command failed. Each message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The command line itself (clap already explains it).
    #[error("{0}")]
    Arguments(#[from] clap::Error),
    /// A flag or argument that parses but makes no sense.
    #[error("{0}")]
    Usage(String),
    /// The session does not exist where we looked.
    #[error("NOT_FOUND: session {session} does not exist in {place}")]
    SessionNotFound {
        /// The uid asked for.
        session: String,
        /// The server address or the journal.
        place: String,
    },
    /// The session exists but holds no records.
    #[error("session {session} has no records in {place}")]
    NoRecords {
        /// The uid.
        session: String,
        /// The server address or the journal.
        place: String,
    },
    /// The server answered with an error status.
    #[error("{0}")]
    Server(ClientError),
    /// Nothing answers at `--server`.
    #[error(
        "cannot reach the {} API at {address}: {reason}; is agentsessionsd running? \
         start it with `agentsessionsd {} {address}`",
        .api.name(),
        .api.flag()
    )]
    Unreachable {
        /// The address given.
        address: String,
        /// The transport's reason.
        reason: String,
        /// The API asked for.
        api: Api,
    },
    /// The connection to `--server` failed below gRPC (a TLS handshake the server refused, a
    /// connection cut mid-call): the transport's own reason, not the bare "transport error".
    #[error("the connection to {address} failed: {reason}")]
    Transport {
        /// The address given.
        address: String,
        /// The transport's reason.
        reason: String,
    },
    /// The server at `--server` serves another API (the ports swapped).
    #[error("the server at {address} does not serve the {api} API; {hint}")]
    WrongApi {
        /// The address given.
        address: String,
        /// The API asked for.
        api: &'static str,
        /// Which port to use instead.
        hint: &'static str,
    },
    /// The journal holds the same chain already.
    #[error(
        "{file} is already in the journal as session {existing} (same chain head); \
         give --copy to import a second copy"
    )]
    AlreadyImported {
        /// The file given.
        file: String,
        /// The session holding it.
        existing: String,
    },
    /// The target session of an import already has records.
    #[error("session {session} already has records; import into a new session")]
    SessionExists {
        /// The uid given.
        session: String,
    },
    /// A file named on the command line cannot be read.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Standard input cannot be read.
    #[error("cannot read the message from stdin: {0}")]
    Stdin(std::io::Error),
    /// Writing the output failed (other than a closed pipe).
    #[error("cannot write the output: {0}")]
    Output(std::io::Error),
    /// Whoever read the output stopped reading (`agentctl replay … | head -1`): the command
    /// ends quietly, as a shell command killed by SIGPIPE does.
    #[error("the output was closed")]
    ClosedPipe,
    /// JSON output could not be encoded.
    #[error("cannot encode JSON output: {0}")]
    Json(#[from] serde_json::Error),
    /// The local journal or embedded server could not be assembled.
    #[error("{0}")]
    Host(#[from] HostError),
    /// The local journal failed.
    #[error("journal: {0}")]
    Journal(#[from] agentsessions_journal::JournalError),
    /// A reference journal could not be read or written.
    #[error("{0}")]
    Export(#[from] agentsessions_journal::export::ExportError),
    /// A harness spec file is not a HarnessSpec.
    #[error("harness spec: {0}")]
    Spec(String),
    /// The TLS or token settings cannot be used.
    #[error("{0}")]
    Credentials(String),
    /// The embedded server could not be started.
    #[error("embedded server: {0}")]
    Embedded(String),
    /// A decision committed but the resume after it failed.
    #[error("decision committed ({verb}, seq {seq}) but Resume failed: {error}")]
    ResumeAfterDecision {
        /// `approved` or `denied`.
        verb: &'static str,
        /// The decision's seq.
        seq: i64,
        /// Why the resume failed.
        error: ClientError,
    },
    /// The client stopped following a session that may go on (Ctrl-C, a dropped connection,
    /// a server shutting down): the message is the exact command that picks up where it stood.
    #[error("{reason}; the session may go on: reattach with `{reattach}`")]
    Detached {
        /// What stopped the stream.
        reason: String,
        /// The `agentctl watch` command that resumes.
        reattach: String,
        /// Ctrl-C, rather than the connection.
        interrupted: bool,
    },
    /// Ctrl-C before the server named the new session: nothing to reattach to.
    #[error("interrupted before the server named the session")]
    Interrupted,
    /// The turn parked on a tool call that waits for a person's decision: the records so far
    /// are printed, and `approve` or `deny` goes on.
    #[error(
        "session {session} awaits approval: execution={execution} tool_call={tool_call} \
         request_seq={request_seq} (agentctl approve|deny --session {session})"
    )]
    Parked {
        /// The session.
        session: String,
        /// The execution of the request.
        execution: String,
        /// The gated tool call.
        tool_call: String,
        /// The APPROVAL_REQUEST's seq.
        request_seq: i64,
    },
    /// `approve` or `deny` named no request and the session has none waiting (the server's
    /// FAILED_PRECONDITION when a named request is not pending says the same: one exit code).
    #[error(
        "session {session} has no pending approval; if a decision is already recorded, run \
         `agentctl resume --session {session}`, or name the request with --execution \
         --tool-call --request-seq"
    )]
    NoPendingApproval {
        /// The session.
        session: String,
    },
    /// A turn failed after its session was known.
    #[error("{error} (session {session})")]
    Turn {
        /// The session.
        session: String,
        /// Why.
        error: ClientError,
    },
}

impl From<ClientError> for CliError {
    fn from(error: ClientError) -> Self {
        Self::Server(error)
    }
}

/// Every write to stdout (and any other I/O error a command returns) lands here: a closed pipe
/// is [`CliError::ClosedPipe`], so that every command ends the same quiet way.
impl From<std::io::Error> for CliError {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            Self::ClosedPipe
        } else {
            Self::Output(error)
        }
    }
}

impl From<tonic::Status> for CliError {
    fn from(status: tonic::Status) -> Self {
        Self::Server(ClientError::from(status))
    }
}

impl CliError {
    /// Adds where the command talked to: an unreachable server and a server answering for
    /// another API get messages that name the address.
    pub(crate) fn at(self, address: &str, api: Api) -> Self {
        let Self::Server(error) = self else {
            return self;
        };
        if address.is_empty() {
            return Self::Server(error);
        }
        match error.code() {
            tonic::Code::Unavailable => Self::Unreachable {
                address: address.to_owned(),
                reason: transport_reason(&error),
                api,
            },
            // A status the client made from a transport failure carries its cause; one the
            // server sent does not. (A connection the server cut shows up as any of these,
            // depending on what the client was doing when it noticed.)
            tonic::Code::Unknown | tonic::Code::Cancelled | tonic::Code::Internal
                if transport_failure(&error) =>
            {
                Self::Transport {
                    address: address.to_owned(),
                    reason: transport_reason(&error),
                }
            }
            tonic::Code::Unimplemented => Self::WrongApi {
                address: address.to_owned(),
                api: api.name(),
                hint: api.hint(),
            },
            _ => Self::Server(error),
        }
    }

    /// Prints the error on stderr, as clap does for its own errors.
    pub(crate) fn report(&self) {
        use std::io::Write as _;
        match self {
            Self::ClosedPipe => {}
            Self::Arguments(e) => {
                let _ignored = e.print();
            }
            other => {
                let _ignored = writeln!(std::io::stderr(), "agentctl: {other}");
            }
        }
    }
}

/// Whether `error` is a status the client made from a failed connection (it has a cause).
fn transport_failure(error: &ClientError) -> bool {
    matches!(error, ClientError::Status(status) if std::error::Error::source(status).is_some())
}

/// The transport's own words for an unreachable server: the innermost cause (`Connection
/// refused`), which the outer layers only repeat.
fn transport_reason(error: &ClientError) -> String {
    let ClientError::Status(status) = error else {
        return error.to_string();
    };
    let mut reason = status.message().to_owned();
    let mut source = std::error::Error::source(status);
    while let Some(cause) = source {
        reason = cause.to_string();
        source = cause.source();
    }
    if reason.is_empty() {
        "unavailable".to_owned()
    } else {
        reason
    }
}

/// Which gRPC API a command called, for the message when the ports are swapped.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Api {
    Sessions,
    HarnessRegistry,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Self::Sessions => "Sessions",
            Self::HarnessRegistry => "HarnessRegistry",
        }
    }

    /// The daemon's flag that serves this API.
    fn flag(self) -> &'static str {
        match self {
            Self::Sessions => "--addr",
            Self::HarnessRegistry => "--registry-addr",
        }
    }

    fn hint(self) -> &'static str {
        match self {
            Self::Sessions => {
                "is this the registry port? give the daemon's --addr (harness commands take its --registry-addr)"
            }
            Self::HarnessRegistry => {
                "is this the Sessions port? harness commands take the daemon's --registry-addr"
            }
        }
    }
}

/// Documented in `agentctl --help` (`EXIT_CODES` in `args.rs`) and the README.
const INTERNAL: u8 = 1;
const USAGE: u8 = 2;
const NOT_FOUND: u8 = 3;
const REFUSED: u8 = 4;
const UNAVAILABLE: u8 = 5;
const CONFLICT: u8 = 6;
/// The turn parked awaiting an approval decision (not an error, not done either).
const PARKED: u8 = 7;
/// As a shell reports a process stopped by SIGINT.
const INTERRUPTED: u8 = 130;
/// As a shell reports a process killed by SIGPIPE (128 + 13): the reader of stdout went away.
const CLOSED_PIPE: u8 = 141;

impl From<CliError> for ExitCode {
    fn from(error: CliError) -> Self {
        use tonic::Code;
        let code = match &error {
            CliError::Arguments(e) if !e.use_stderr() => 0,
            CliError::Arguments(_)
            | CliError::Usage(_)
            | CliError::ReadFile { .. }
            | CliError::Stdin(_)
            | CliError::Spec(_)
            | CliError::Credentials(_)
            | CliError::Export(_) => USAGE,
            CliError::SessionNotFound { .. } | CliError::NoRecords { .. } => NOT_FOUND,
            CliError::Host(HostError::JournalMissing { .. }) => NOT_FOUND,
            CliError::Unreachable { .. }
            | CliError::Transport { .. }
            | CliError::WrongApi { .. } => UNAVAILABLE,
            CliError::AlreadyImported { .. }
            | CliError::SessionExists { .. }
            | CliError::NoPendingApproval { .. } => CONFLICT,
            CliError::Parked { .. } => PARKED,
            CliError::ClosedPipe => CLOSED_PIPE,
            CliError::Interrupted
            | CliError::Detached {
                interrupted: true, ..
            } => INTERRUPTED,
            CliError::Detached { .. } => UNAVAILABLE,
            CliError::Output(_)
            | CliError::Json(_)
            | CliError::Host(_)
            | CliError::Journal(_)
            | CliError::Embedded(_) => INTERNAL,
            CliError::Server(e)
            | CliError::Turn { error: e, .. }
            | CliError::ResumeAfterDecision { error: e, .. } => match e.code() {
                Code::Ok => 0,
                Code::InvalidArgument | Code::OutOfRange => USAGE,
                Code::NotFound => NOT_FOUND,
                Code::PermissionDenied | Code::Unauthenticated => REFUSED,
                Code::Unavailable | Code::Unimplemented | Code::DeadlineExceeded => UNAVAILABLE,
                Code::AlreadyExists | Code::Aborted | Code::FailedPrecondition => CONFLICT,
                Code::Cancelled
                | Code::Unknown
                | Code::ResourceExhausted
                | Code::Internal
                | Code::DataLoss => INTERNAL,
            },
        };
        Self::from(code)
    }
}

/// [`CliError::Parked`] when `session` waits for an approval decision: a turn that parked is
/// not a turn that completed, and a script tells them apart by the exit code.
pub(crate) fn parked(session: Option<&pb::Session>) -> Result<(), CliError> {
    let Some((session, pending)) =
        session.and_then(|s| s.pending_approval.as_ref().map(|p| (s, p)))
    else {
        return Ok(());
    };
    Err(CliError::Parked {
        session: uid_of(session).to_owned(),
        execution: pending.execution_id.clone(),
        tool_call: pending.tool_call_id.clone(),
        request_seq: pending.request_seq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_codes_land_in_their_exit_codes() {
        let exit = |code| ExitCode::from(CliError::from(tonic::Status::new(code, "x")));
        assert_eq!(exit(tonic::Code::NotFound), ExitCode::from(NOT_FOUND));
        assert_eq!(exit(tonic::Code::PermissionDenied), ExitCode::from(REFUSED));
        assert_eq!(exit(tonic::Code::Unauthenticated), ExitCode::from(REFUSED));
        assert_eq!(exit(tonic::Code::Aborted), ExitCode::from(CONFLICT));
        assert_eq!(exit(tonic::Code::InvalidArgument), ExitCode::from(USAGE));
        assert_eq!(exit(tonic::Code::Internal), ExitCode::from(INTERNAL));
    }

    #[test]
    fn scripts_tell_a_closed_pipe_a_parked_turn_and_nothing_pending_apart() {
        let broken = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(matches!(CliError::from(broken), CliError::ClosedPipe));
        assert_eq!(ExitCode::from(CliError::ClosedPipe), ExitCode::from(141));
        let parked = CliError::Parked {
            session: "s".into(),
            execution: "e".into(),
            tool_call: "t".into(),
            request_seq: 7,
        };
        assert_eq!(ExitCode::from(parked), ExitCode::from(PARKED));
        // No pending approval: the same code whether agentctl finds nothing to decide or the
        // server refuses a named request that is not pending.
        let nothing = CliError::NoPendingApproval {
            session: "s".into(),
        };
        let refused = CliError::from(tonic::Status::failed_precondition("x"));
        assert_eq!(ExitCode::from(nothing), ExitCode::from(CONFLICT));
        assert_eq!(ExitCode::from(refused), ExitCode::from(CONFLICT));
    }

    #[test]
    fn an_unreachable_server_names_its_address_and_the_daemon() {
        let refused = CliError::from(tonic::Status::unavailable("tcp connect error"))
            .at("127.0.0.1:9", Api::Sessions);
        let message = refused.to_string();
        assert!(message.contains("127.0.0.1:9"), "{message}");
        assert!(message.contains("agentsessionsd --addr"), "{message}");
        assert_eq!(ExitCode::from(refused), ExitCode::from(UNAVAILABLE));
    }
}
