//! [`Client`], a connection to a Sessions server.

use agentsessions_harnesswire::request_id;
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use agentsessions_wire::pb::sessions_client::SessionsClient;
use tonic::transport::Channel;

use crate::error::{ClientError, Result};
use crate::options::{Decision, ExecEvent, ExecOptions, ForkOptions, TurnFailed, TurnResult};
use crate::watch::Watch;

/// Records asked for per `ReadRecords` page. Once the first page names the head, the rest of
/// the range is read as pages of this size several at a time, so the server renders and the
/// client decodes them on all cores (one 10,000-record page is one core's work on each side).
const READ_PAGE_RECORDS: i32 = 1_000;
/// Pages of one read in flight at once.
const READ_PAGES_IN_FLIGHT: usize = 4;

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
            abandon_unfinished: options.abandon_unfinished,
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
                        Update::Progress(p) => ExecEvent::Progress(p),
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

    /// Stored records with `from <= seq <= to` (0, 0: the whole log as of the first page), read
    /// a page of many records at a time (the `ReadRecords` extension): for a long log, far fewer
    /// messages than [`Self::replay`].
    ///
    /// # Errors
    /// The server's status.
    pub async fn read_records(
        &mut self,
        uid: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<pb::LogRecord>> {
        let first = self.read_page(uid, from, to).await?;
        let mut records = first.records;
        if first.next_seq == 0 {
            return Ok(records);
        }
        // Pin the end at the first page's head, so a session that grows meanwhile ends.
        let end = if to <= 0 {
            first.head_seq
        } else {
            to.min(first.head_seq)
        };
        let ranges = page_ranges(first.next_seq, end);
        let id = request_id::current_request_id()
            .unwrap_or_else(|| request_id::incoming(&tonic::metadata::MetadataMap::new()));
        // Owned here: dropping the set (an error returned early) aborts the pages still read.
        let mut pages = tokio::task::JoinSet::new();
        let mut read = vec![Vec::new(); ranges.len()];
        let mut queued = ranges.into_iter().enumerate();
        loop {
            while pages.len() < READ_PAGES_IN_FLIGHT
                && let Some((index, (from, to))) = queued.next()
            {
                let mut client = self.clone();
                let (uid, id) = (uid.to_owned(), id.clone());
                pages.spawn(request_id::with_request_id(id, async move {
                    client.read_range(&uid, from, to).await.map(|r| (index, r))
                }));
            }
            let Some(done) = pages.join_next().await else {
                break;
            };
            let (index, range) = done.map_err(|e| ClientError::PageLost {
                session: uid.to_owned(),
                reason: e.to_string(),
            })??;
            read[index] = range;
        }
        records.extend(read.into_iter().flatten());
        Ok(records)
    }

    /// One `ReadRecords` page of `uid` from `from` (`to` 0: to the head).
    async fn read_page(
        &mut self,
        uid: &str,
        from: i64,
        to: i64,
    ) -> Result<pb::ReadRecordsResponse> {
        Ok(self
            .inner
            .read_records(self.request(pb::ReadRecordsRequest {
                session: uid.to_owned(),
                from_seq: from,
                to_seq: to,
                max_records: READ_PAGE_RECORDS,
            }))
            .await?
            .into_inner())
    }

    /// Every record of `from..=to`, page after page (a page ends early at the server's byte cap).
    async fn read_range(&mut self, uid: &str, from: i64, to: i64) -> Result<Vec<pb::LogRecord>> {
        let mut records = Vec::new();
        let mut next = from;
        loop {
            let page = self.read_page(uid, next, to).await?;
            records.extend(page.records);
            // A `next_seq` that does not move forward ends the range rather than looping.
            if page.next_seq == 0 || page.next_seq > to || page.next_seq <= next {
                return Ok(records);
            }
            next = page.next_seq;
        }
    }

    /// Follows `uid` like `tail -f` (extension): its records from `from` on (0: all), then each
    /// new one as it commits, on whichever host shares the journal, until it is deleted.
    ///
    /// # Errors
    /// The server's status: NOT_FOUND, PERMISSION_DENIED.
    pub async fn watch(&mut self, uid: &str, from: i64) -> Result<Watch> {
        let stream = self
            .inner
            .watch(self.request(pb::WatchRequest {
                session: uid.to_owned(),
                from_seq: from,
            }))
            .await?
            .into_inner();
        Ok(Watch::new(stream, uid, from))
    }

    /// [`Client::watch`] with the progress of the session's running tools between the records
    /// (WatchUpdates, extensions §11); read them with [`Watch::next_item`].
    ///
    /// # Errors
    /// As [`Client::watch`]; UNIMPLEMENTED from a server without WatchUpdates.
    pub async fn watch_updates(&mut self, uid: &str, from: i64) -> Result<Watch> {
        let stream = self
            .inner
            .watch_updates(self.request(pb::WatchRequest {
                session: uid.to_owned(),
                from_seq: from,
            }))
            .await?
            .into_inner();
        Ok(Watch::with_progress(stream, uid, from))
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

/// `from..=to` cut into consecutive ranges of at most [`READ_PAGE_RECORDS`] seqs.
fn page_ranges(from: i64, to: i64) -> Vec<(i64, i64)> {
    let step = i64::from(READ_PAGE_RECORDS);
    let mut ranges = Vec::new();
    let mut start = from;
    while start <= to {
        let end = to.min(start.saturating_add(step - 1));
        ranges.push((start, end));
        start = end.saturating_add(1);
    }
    ranges
}
