//! A Rust client for the agentsessions `Sessions` API.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentsessions_client::ClientError> {
//! use agentsessions_client::{Client, ExecOptions};
//!
//! let mut client = Client::dial("127.0.0.1:8080")?;
//! let turn = client
//!     .exec(ExecOptions::new("hello"), |_event| {})
//!     .await
//!     .map_err(|failed| failed.error)?;
//! println!("{} said {}", turn.session_uid(), turn.output);
//! let records = client.replay(&turn.session_uid(), 0, 0).await?;
//! agentsessions_client::verify(&records)?;
//! # Ok(()) }
//! ```
//!
//! Every call sends an `x-request-id`; errors keep the server's gRPC code
//! ([`ClientError::code`]).
#![warn(missing_docs)]

use std::collections::BTreeMap;

use agentsessions_harnesswire::request_id;
use agentsessions_journal::{ChainSummary, LogRecord, verify_records};
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use agentsessions_wire::pb::sessions_client::SessionsClient;
use tonic::transport::Channel;

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
            Self::Dial { .. } => tonic::Code::InvalidArgument,
            Self::BadRecord { .. } => tonic::Code::DataLoss,
        }
    }
}

/// Results of the client.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// What [`Client::exec`] reports while the turn runs.
#[derive(Debug, Clone, Copy)]
pub enum ExecEvent<'a> {
    /// A session frame (the first frame, and a final one after a park or recovery).
    Session(&'a pb::Session),
    /// A committed record.
    Record(&'a pb::LogRecord),
    /// A streamed model chunk (transport only; never journaled).
    Delta(&'a pb::Delta),
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

    fn absorb(&mut self, update: &Update) {
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
            Update::Delta(_) => {}
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

/// The concatenated text parts of a message.
pub fn text_of(message: &pb::Message) -> String {
    message
        .parts
        .iter()
        .filter_map(|part| match &part.part {
            Some(pb::part::Part::Text(text)) => Some(text.text.as_str()),
            _ => None,
        })
        .collect()
}

/// A session's uid.
pub fn uid_of(session: &pb::Session) -> &str {
    session.metadata.as_ref().map_or("", |m| m.uid.as_str())
}

/// Recomputes every content hash and link of `records` (as returned by [`Client::replay`]).
///
/// # Errors
/// [`ClientError::BadRecord`] naming the first record that does not decode or verify.
pub fn verify(records: &[pb::LogRecord]) -> Result<ChainSummary> {
    let mut decoded = Vec::with_capacity(records.len());
    for record in records {
        let event = record.event.clone().ok_or_else(|| ClientError::BadRecord {
            seq: record.seq,
            reason: "no event".into(),
        })?;
        let event =
            agentsessions_api::Event::try_from(event).map_err(|e| ClientError::BadRecord {
                seq: record.seq,
                reason: e.to_string(),
            })?;
        decoded.push(LogRecord {
            seq: record.seq,
            prev_hash: record.prev_hash.clone(),
            hash: record.content_hash.clone(),
            fence: record.fence,
            event,
            // Not hashed: the chain verifies without it.
            committed_at: None,
        });
    }
    verify_records(&decoded).map_err(|fault| ClientError::BadRecord {
        seq: fault.seq(),
        reason: fault.to_string(),
    })
}

/// A connection to a Sessions server.
#[derive(Debug, Clone)]
pub struct Client {
    inner: SessionsClient<Channel>,
    project: String,
    bearer: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
}

impl Client {
    /// A request carrying a request id and, when set, the bearer token.
    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        let id = request_id::current_request_id()
            .unwrap_or_else(|| request_id::incoming(&tonic::metadata::MetadataMap::new()));
        request_id::attach(request.metadata_mut(), &id);
        if let Some(bearer) = &self.bearer {
            request
                .metadata_mut()
                .insert("authorization", bearer.clone());
        }
        request
    }

    /// A client for `target`: `host:port`, `http://host:port` or `unix:/path/to.sock`. The
    /// connection is made on first use.
    ///
    /// # Errors
    /// [`ClientError::Dial`] for a target that is not an address.
    pub fn dial(target: &str) -> Result<Self> {
        let channel =
            agentsessions_harnesswire::channel(target).map_err(|e| ClientError::Dial {
                target: target.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(Self::from_channel(channel))
    }

    /// A client for `host:port` over TLS configured by `tls` (server CA, and a client
    /// certificate for mTLS).
    ///
    /// # Errors
    /// [`ClientError::Dial`] for a target or TLS configuration tonic refuses.
    pub fn dial_tls(target: &str, tls: tonic::transport::ClientTlsConfig) -> Result<Self> {
        let dial = |reason: String| ClientError::Dial {
            target: target.to_owned(),
            reason,
        };
        let uri = if target.contains("://") {
            target.to_owned()
        } else {
            format!("https://{target}")
        };
        let channel = tonic::transport::Endpoint::from_shared(uri)
            .map_err(|e| dial(e.to_string()))?
            .tls_config(tls)
            .map_err(|e| dial(e.to_string()))?
            .connect_lazy();
        Ok(Self::from_channel(channel))
    }

    /// A client over an existing channel.
    pub fn from_channel(channel: Channel) -> Self {
        Self {
            inner: SessionsClient::new(channel)
                .max_decoding_message_size(64 * 1024 * 1024)
                .max_encoding_message_size(64 * 1024 * 1024),
            project: String::new(),
            bearer: None,
        }
    }

    /// Sends `token` as `authorization: Bearer <token>` on every call.
    ///
    /// # Errors
    /// [`ClientError::Dial`] for a token that cannot be a header value.
    pub fn with_bearer_token(mut self, token: &str) -> Result<Self> {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| ClientError::Dial {
                target: String::new(),
                reason: "the bearer token is not a valid header value".into(),
            })?;
        self.bearer = Some(value);
        Ok(self)
    }

    /// Uses `project` for creation and listing (empty: the server's default).
    #[must_use]
    pub fn with_project(mut self, project: impl Into<String>) -> Self {
        self.project = project.into();
        self
    }

    /// Creates a session.
    ///
    /// # Errors
    /// The server's status (INVALID_ARGUMENT for an unknown harness).
    pub async fn create(&mut self, name: &str, harness: &str, model: &str) -> Result<pb::Session> {
        let session = pb::Session {
            metadata: Some(pb::ResourceMetadata {
                project: self.project.clone(),
                name: name.to_owned(),
                ..pb::ResourceMetadata::default()
            }),
            harness: harness.to_owned(),
            model: model.to_owned(),
            ..pb::Session::default()
        };
        let request = self.request(pb::CreateSessionRequest {
            session: Some(session),
        });
        Ok(self.inner.create_session(request).await?.into_inner())
    }

    /// One session.
    ///
    /// # Errors
    /// NOT_FOUND for an unknown uid.
    pub async fn get(&mut self, uid: &str) -> Result<pb::Session> {
        let request = self.request(pb::GetSessionRequest {
            uid: uid.to_owned(),
        });
        Ok(self.inner.get_session(request).await?.into_inner())
    }

    /// Every session of the project, walking all pages of `page_size` (0: the server default).
    ///
    /// # Errors
    /// The server's status.
    pub async fn list(&mut self, page_size: i32) -> Result<Vec<pb::Session>> {
        let mut sessions = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .inner
                .list_sessions(self.request(pb::ListSessionsRequest {
                    project: self.project.clone(),
                    page_size,
                    page_token: token,
                }))
                .await?
                .into_inner();
            sessions.extend(page.sessions);
            if page.next_page_token.is_empty() {
                return Ok(sessions);
            }
            token = page.next_page_token;
        }
    }

    /// Every approval request of the project that waits for a decision and that the caller may
    /// see, oldest first, walking all pages (the `ListApprovals` extension).
    ///
    /// # Errors
    /// The status of the first page request that failed.
    pub async fn list_approvals(&mut self, page_size: i32) -> Result<Vec<pb::PendingApproval>> {
        let mut approvals = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .inner
                .list_approvals(self.request(pb::ListApprovalsRequest {
                    project: self.project.clone(),
                    page_size,
                    page_token: token,
                }))
                .await?
                .into_inner();
            approvals.extend(page.approvals);
            if page.next_page_token.is_empty() {
                return Ok(approvals);
            }
            token = page.next_page_token;
        }
    }

    /// Runs one turn, calling `on_event` for every frame as it arrives, and returns what the
    /// turn produced.
    ///
    /// # Errors
    /// [`TurnFailed`] with the status and everything received before it.
    pub async fn exec(
        &mut self,
        options: ExecOptions,
        mut on_event: impl FnMut(ExecEvent<'_>),
    ) -> Result<TurnResult, TurnFailed> {
        let mut result = TurnResult::default();
        let inputs = options
            .inputs
            .into_iter()
            .map(|text| pb::Message::from(agentsessions_api::Message::text_message("user", text)))
            .collect();
        let call = self.request(pb::ExecRequest {
            session: options.session,
            inputs,
            resume_from_seq: 0,
            harness: options.harness,
            config: Vec::new(),
            expected_last_seq: options.expected_last_seq,
            deadline_unix: options.deadline_unix,
        });
        let mut stream = match self.inner.exec(call).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                return Err(TurnFailed {
                    error: status.into(),
                    partial: result,
                });
            }
        };
        loop {
            match stream.message().await {
                Ok(Some(pb::ExecUpdate {
                    update: Some(update),
                })) => {
                    result.absorb(&update);
                    on_event(match &update {
                        Update::Session(s) => ExecEvent::Session(s),
                        Update::Record(r) => ExecEvent::Record(r),
                        Update::Delta(d) => ExecEvent::Delta(d),
                    });
                }
                Ok(Some(_)) => {}
                Ok(None) => return Ok(result),
                Err(status) => {
                    return Err(TurnFailed {
                        error: status.into(),
                        partial: result,
                    });
                }
            }
        }
    }

    /// Stored records with `from <= seq <= to` (0, 0: the whole log), verbatim.
    ///
    /// # Errors
    /// The server's status.
    pub async fn replay(&mut self, uid: &str, from: i64, to: i64) -> Result<Vec<pb::LogRecord>> {
        let mut stream = self
            .inner
            .replay(self.request(pb::ReplayRequest {
                session: uid.to_owned(),
                from_seq: from,
                to_seq: to,
            }))
            .await?
            .into_inner();
        let mut records = Vec::new();
        while let Some(record) = stream.message().await? {
            records.push(record);
        }
        Ok(records)
    }

    /// Forks `uid`.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a bad count or names, NOT_FOUND, FAILED_PRECONDITION.
    pub async fn fork(&mut self, uid: &str, options: ForkOptions) -> Result<Vec<pb::Session>> {
        let response = self
            .inner
            .fork(self.request(pb::ForkRequest {
                session: uid.to_owned(),
                at_seq: options.at_seq,
                count: options.count,
                identity: None,
                labels: options.labels.into_iter().collect(),
                child_names: options.names,
            }))
            .await?;
        Ok(response.into_inner().children)
    }

    /// Suspends `uid`.
    ///
    /// # Errors
    /// NOT_FOUND, ABORTED while another operation holds it.
    pub async fn suspend(&mut self, uid: &str) -> Result<pb::Session> {
        let call = self.request(pb::SuspendRequest {
            session: uid.to_owned(),
        });
        Ok(self.inner.suspend(call).await?.into_inner())
    }

    /// Resumes `uid` (re-driving an interrupted or decided turn).
    ///
    /// # Errors
    /// NOT_FOUND, ABORTED, FAILED_PRECONDITION.
    pub async fn resume(&mut self, uid: &str) -> Result<pb::Session> {
        let call = self.request(pb::ResumeRequest {
            session: uid.to_owned(),
            boot: false,
        });
        Ok(self.inner.resume(call).await?.into_inner())
    }

    /// Records an approval decision on `uid`.
    ///
    /// # Errors
    /// INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION for a decision that does not match.
    pub async fn approve(&mut self, uid: &str, decision: Decision) -> Result<pb::ApproveResponse> {
        let call = self.request(pb::ApproveRequest {
            session: uid.to_owned(),
            execution_id: decision.execution_id,
            tool_call_id: decision.tool_call_id,
            request_seq: decision.request_seq,
            approved: Some(decision.approved),
            reason: decision.reason,
            identity: decision.identity,
        });
        Ok(self.inner.approve(call).await?.into_inner())
    }

    /// Cancels the running execution of `uid` (`execution_id` empty: whichever runs).
    ///
    /// # Errors
    /// FAILED_PRECONDITION when nothing runs.
    pub async fn cancel(
        &mut self,
        uid: &str,
        execution_id: &str,
        reason: &str,
    ) -> Result<pb::Session> {
        let call = self.request(pb::CancelRequest {
            session: uid.to_owned(),
            execution_id: execution_id.to_owned(),
            reason: reason.to_owned(),
        });
        Ok(self.inner.cancel(call).await?.into_inner())
    }

    /// Marks `uid` for deletion.
    ///
    /// # Errors
    /// NOT_FOUND, ABORTED while busy.
    pub async fn delete(&mut self, uid: &str) -> Result<pb::Session> {
        let call = self.request(pb::DeleteSessionRequest {
            uid: uid.to_owned(),
        });
        Ok(self.inner.delete_session(call).await?.into_inner())
    }
}
