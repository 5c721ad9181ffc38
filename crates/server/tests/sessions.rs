//! The Sessions service over real gRPC on 127.0.0.1, against a SQLite journal: every RPC's happy
//! path and the codes of the error table.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod fixtures;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentsessions_api::{
    ComputeState, Descriptor, EventSink, Harness, Message, RuntimeCapabilities, Start, ToolCall,
    ToolResult,
};
use agentsessions_controller::ToolExecutor;
use agentsessions_harnesses::{CounterHarness, EchoHarness};
use agentsessions_journal::Journal;
use agentsessions_model::EchoModel;
use agentsessions_server::{ServerBuilder, serve_tcp};
use agentsessions_sqlite::SqliteJournal;
use agentsessions_testkit::Instrumented;
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use agentsessions_wire::pb::sessions_client::SessionsClient;
use tokio::net::TcpListener;
use tonic::Code;
use tonic::transport::Channel;

use fixtures::{GatedHarness, descriptor};

type Client = SessionsClient<Channel>;

/// Waits far longer than any test: the turn Cancel stops.
#[derive(Debug)]
struct SlowHarness;

#[async_trait::async_trait]
impl Harness for SlowHarness {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Ok(descriptor("slow"))
    }

    async fn run(&self, _start: &Start, _sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(())
    }
}

#[derive(Debug, Default)]
struct CountingTool(AtomicU64);

#[async_trait::async_trait]
impl ToolExecutor for CountingTool {
    async fn execute(
        &self,
        _session: &str,
        call: &ToolCall,
    ) -> agentsessions_api::Result<ToolResult> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolResult {
            id: call.id.clone(),
            ..ToolResult::default()
        })
    }
}

struct Server {
    client: Client,
    journal: Arc<dyn Journal>,
    /// The same journal, counting what the server reads of it.
    counting: Arc<Instrumented>,
    tool: Arc<CountingTool>,
    _dir: tempfile::TempDir,
}

async fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let counting = Arc::new(Instrumented::new(Arc::new(
        SqliteJournal::open(dir.path().join("journal.db")).unwrap(),
    )));
    let journal: Arc<dyn Journal> = counting.clone();
    let tool = Arc::new(CountingTool::default());
    let none = RuntimeCapabilities::default();
    let service = ServerBuilder::new(Arc::clone(&journal), Arc::new(EchoModel::new()))
        .harness("echo", Arc::new(EchoHarness::new()), none)
        .harness("counter", Arc::new(CounterHarness::new()), none)
        .harness("gated", Arc::new(GatedHarness), none)
        .harness("slow", Arc::new(SlowHarness), none)
        .default_harness("echo")
        .tools(tool.clone())
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_tcp(listener, service, std::future::pending()));
    let client =
        SessionsClient::new(agentsessions_harnesswire::channel(&addr.to_string()).unwrap());
    Server {
        client,
        journal,
        counting,
        tool,
        _dir: dir,
    }
}

fn user(text: &str) -> pb::Message {
    pb::Message::from(Message::text_message("user", text))
}

fn exec_request(session: &str, text: &str) -> pb::ExecRequest {
    pb::ExecRequest {
        session: session.into(),
        inputs: vec![user(text)],
        ..pb::ExecRequest::default()
    }
}

/// Every frame of an Exec, and the status it ended with.
async fn exec(client: &mut Client, request: pb::ExecRequest) -> (Vec<Update>, tonic::Status) {
    let mut frames = Vec::new();
    let mut stream = match client.exec(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return (frames, status),
    };
    loop {
        match stream.message().await {
            Ok(Some(update)) => frames.extend(update.update),
            Ok(None) => return (frames, tonic::Status::ok("")),
            Err(status) => return (frames, status),
        }
    }
}

fn kinds(frames: &[Update]) -> Vec<String> {
    frames
        .iter()
        .map(|frame| match frame {
            Update::Session(_) => "SESSION".to_owned(),
            Update::Delta(_) => "DELTA".to_owned(),
            Update::Progress(_) => "PROGRESS".to_owned(),
            Update::Record(r) => pb::EventKind::try_from(r.event.as_ref().unwrap().kind)
                .unwrap()
                .as_str_name()
                .trim_start_matches("EVENT_")
                .to_owned(),
        })
        .filter(|k| k != "DELTA")
        .collect()
}

fn session_uid(frames: &[Update]) -> String {
    match &frames[0] {
        Update::Session(s) => s.metadata.as_ref().unwrap().uid.clone(),
        other => panic!("first frame is not the session: {other:?}"),
    }
}

/// `uid` as ListSessions shows it (the journal's state; no runtime asked).
async fn listed(client: &mut Client, uid: &str) -> pb::Session {
    client
        .list_sessions(pb::ListSessionsRequest {
            page_size: 500,
            ..pb::ListSessionsRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .sessions
        .into_iter()
        .find(|s| s.metadata.as_ref().is_some_and(|m| m.uid == uid))
        .unwrap()
}

async fn get(client: &mut Client, uid: &str) -> pb::Session {
    client
        .get_session(pb::GetSessionRequest { uid: uid.into() })
        .await
        .unwrap()
        .into_inner()
}

async fn replay(client: &mut Client, uid: &str, from: i64, to: i64) -> Vec<pb::LogRecord> {
    let mut stream = client
        .replay(pb::ReplayRequest {
            session: uid.into(),
            from_seq: from,
            to_seq: to,
        })
        .await
        .unwrap()
        .into_inner();
    let mut records = Vec::new();
    while let Some(record) = stream.message().await.unwrap() {
        records.push(record);
    }
    records
}

fn lifecycle_kind(record: &pb::LogRecord) -> i32 {
    match record.event.as_ref().and_then(|e| e.body.as_ref()) {
        Some(pb::event::Body::Lifecycle(l)) => l.kind,
        _ => 0,
    }
}

// semantics §2.1/§2.2: an empty session auto-creates; the session frame comes first, then the
// turn's records in order; the session then reads COMPLETED, and NONE in Get and in the listing
// alike: an attached harness keeps no incarnation once the turn ended (docs/extensions.md,
// "Compute state"). The session records the harness the host resolved and the model it calls.
#[tokio::test]
async fn exec_creates_a_session_and_streams_the_turn() {
    let mut s = start().await;
    let (frames, status) = exec(&mut s.client, exec_request("", "hello")).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    assert_eq!(
        kinds(&frames),
        [
            "SESSION",
            "EXECUTION_START",
            "INPUT",
            "MODEL_CALL",
            "OUTPUT",
            "END"
        ]
    );
    let uid = session_uid(&frames);
    assert!(uid.starts_with("sess-"));
    let session = get(&mut s.client, &uid).await;
    assert_eq!(session.last_seq, 5);
    assert_eq!(session.exec_state(), pb::ExecState::ExecCompleted);
    assert_eq!(session.compute_state(), pb::ComputeState::ComputeNone);
    assert_eq!(
        (session.harness.as_str(), session.model.as_str()),
        ("echo", "echo")
    );
    assert_eq!(session.metadata.unwrap().project, "default");
    let row = s.journal.session_info(&uid).await.unwrap();
    assert_eq!(
        (
            row.row.harness.as_str(),
            row.row.model.as_str(),
            row.compute_state
        ),
        ("echo", "echo", ComputeState::None),
        "stored in the session's row"
    );
    let in_list = listed(&mut s.client, &uid).await;
    assert_eq!(in_list.compute_state(), pb::ComputeState::ComputeNone);
    assert_eq!(in_list.harness, "echo");

    // A second turn at the right cursor; replay windows.
    let mut second = exec_request(&uid, "again");
    second.expected_last_seq = Some(5);
    let (_, status) = exec(&mut s.client, second).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    let all = replay(&mut s.client, &uid, 0, 0).await;
    assert_eq!(all.len(), 10);
    assert_eq!(all[5].prev_hash, all[4].content_hash);
    let window = replay(&mut s.client, &uid, 3, 6).await;
    assert_eq!(
        window.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [3, 4, 5, 6]
    );
    assert!(replay(&mut s.client, "sess-unknown", 0, 0).await.is_empty());
}

// semantics §1.4: a stale expected_last_seq is ABORTED and appends nothing.
#[tokio::test]
async fn a_stale_cursor_is_aborted_and_writes_nothing() {
    let mut s = start().await;
    let (frames, _) = exec(&mut s.client, exec_request("", "one")).await;
    let uid = session_uid(&frames);
    let mut stale = exec_request(&uid, "two");
    stale.expected_last_seq = Some(0);
    let (_, status) = exec(&mut s.client, stale).await;
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert_eq!(s.journal.head(&uid).await.unwrap(), 5);
}

// semantics §1.8: keyset pages cover every session once; a bad token is INVALID_ARGUMENT.
#[tokio::test]
async fn list_pages_through_every_session_once() {
    let mut s = start().await;
    let mut created = Vec::new();
    for i in 0..5 {
        let session = s
            .client
            .create_session(pb::CreateSessionRequest {
                session: Some(pb::Session {
                    metadata: Some(pb::ResourceMetadata {
                        name: format!("n{i}"),
                        ..pb::ResourceMetadata::default()
                    }),
                    ..pb::Session::default()
                }),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(session.exec_state(), pb::ExecState::ExecPending);
        assert_eq!(session.compute_state(), pb::ComputeState::ComputeNone);
        created.push(session.metadata.unwrap().uid);
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = s
            .client
            .list_sessions(pb::ListSessionsRequest {
                project: String::new(),
                page_size: 2,
                page_token: token,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.sessions.len() <= 2);
        seen.extend(page.sessions.into_iter().map(|s| s.metadata.unwrap().uid));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    seen.sort();
    created.sort();
    assert_eq!(seen, created);
    let other = s
        .client
        .list_sessions(pb::ListSessionsRequest {
            project: "elsewhere".into(),
            ..pb::ListSessionsRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(other.sessions.is_empty());
    let bad = s
        .client
        .list_sessions(pb::ListSessionsRequest {
            page_token: "not-a-token".into(),
            ..pb::ListSessionsRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
}

// semantics §4.4: children share the parent's prefix hashes, end with a FORK marker, carry the
// request's names and labels, and take turns of their own.
#[tokio::test]
async fn fork_makes_children_that_continue_on_their_own() {
    let mut s = start().await;
    let (frames, _) = exec(&mut s.client, exec_request("", "one")).await;
    let parent = session_uid(&frames);
    exec(&mut s.client, exec_request(&parent, "two")).await;
    let forked = s
        .client
        .fork(pb::ForkRequest {
            session: parent.clone(),
            at_seq: 5,
            count: 2,
            labels: [("k".to_owned(), "v".to_owned())].into(),
            child_names: vec!["a".into(), "b".into()],
            ..pb::ForkRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(forked.children.len(), 2);
    let parent_records = replay(&mut s.client, &parent, 0, 0).await;
    for (child, name) in forked.children.iter().zip(["a", "b"]) {
        let meta = child.metadata.as_ref().unwrap();
        assert_eq!(meta.name, name);
        assert_eq!(child.parent_uid, parent);
        assert_eq!(child.fork_seq, 5);
        assert_eq!(child.labels.get("k").map(String::as_str), Some("v"));
        assert_eq!(child.compute_state(), pb::ComputeState::ComputeCold);
        let records = replay(&mut s.client, &meta.uid, 0, 0).await;
        assert_eq!(records.len(), 6);
        for (c, p) in records.iter().zip(&parent_records).take(5) {
            assert_eq!(c.content_hash, p.content_hash);
        }
        assert_eq!(
            lifecycle_kind(&records[5]),
            pb::lifecycle::Kind::LifecycleFork as i32
        );
        assert_eq!(records[5].prev_hash, parent_records[4].content_hash);
    }
    let child = forked.children[0].metadata.as_ref().unwrap().uid.clone();
    let (frames, status) = exec(&mut s.client, exec_request(&child, "three")).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    assert_eq!(kinds(&frames).len(), 6);
    assert_eq!(get(&mut s.client, &child).await.last_seq, 11);
    assert_eq!(get(&mut s.client, &parent).await.last_seq, 10);
}

// semantics §4.4 step 1 and §8: fork request validation.
#[tokio::test]
async fn fork_refuses_bad_requests() {
    let mut s = start().await;
    let (frames, _) = exec(&mut s.client, exec_request("", "one")).await;
    let uid = session_uid(&frames);
    let cases = [
        (
            pb::ForkRequest {
                count: 129,
                ..pb::ForkRequest::default()
            },
            Code::InvalidArgument,
        ),
        (
            pb::ForkRequest {
                count: 2,
                child_names: vec!["only-one".into()],
                ..pb::ForkRequest::default()
            },
            Code::InvalidArgument,
        ),
        (
            pb::ForkRequest {
                identity: Some(pb::IdentityRef::default()),
                ..pb::ForkRequest::default()
            },
            Code::InvalidArgument,
        ),
        (
            pb::ForkRequest {
                at_seq: 99,
                ..pb::ForkRequest::default()
            },
            Code::InvalidArgument,
        ),
    ];
    for (mut request, code) in cases {
        request.session.clone_from(&uid);
        let err = s.client.fork(request).await.unwrap_err();
        assert_eq!(err.code(), code, "{err:?}");
    }
    let err = s
        .client
        .fork(pb::ForkRequest {
            session: "sess-nope".into(),
            ..pb::ForkRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(s.journal.head(&uid).await.unwrap(), 5);
}

// semantics §4.2/§4.3: suspend records SUSPEND (COLD), resume records RESUME; once resumed, an
// attached harness holds no incarnation, so Get and the listing read NONE.
#[tokio::test]
async fn suspend_then_resume() {
    let mut s = start().await;
    let (frames, _) = exec(&mut s.client, exec_request("", "one")).await;
    let uid = session_uid(&frames);
    let suspended = s
        .client
        .suspend(pb::SuspendRequest {
            session: uid.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(suspended.compute_state(), pb::ComputeState::ComputeCold);
    assert_eq!(suspended.last_seq, 6);
    assert_eq!(
        listed(&mut s.client, &uid).await.compute_state(),
        pb::ComputeState::ComputeCold
    );
    assert_eq!(
        get(&mut s.client, &uid).await.compute_state(),
        pb::ComputeState::ComputeCold
    );
    let resumed = s
        .client
        .resume(pb::ResumeRequest {
            session: uid.clone(),
            boot: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resumed.compute_state(), pb::ComputeState::ComputeNone);
    assert_eq!(
        listed(&mut s.client, &uid).await.compute_state(),
        pb::ComputeState::ComputeNone
    );
    let records = replay(&mut s.client, &uid, 6, 0).await;
    assert_eq!(
        records.iter().map(lifecycle_kind).collect::<Vec<_>>(),
        [
            pb::lifecycle::Kind::LifecycleSuspend as i32,
            pb::lifecycle::Kind::LifecycleResume as i32
        ]
    );
    let (_, status) = exec(&mut s.client, exec_request(&uid, "after")).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
}

/// A turn on a new session of the `gated` harness, which parks at its approval gate: its frames.
async fn park_new_gated_session(client: &mut Client) -> Vec<Update> {
    let mut request = exec_request("", "pay");
    request.harness = "gated".into();
    let (frames, status) = exec(client, request).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    frames
}

// semantics §5: park (OK with a final AWAITING frame), decide, inputless Exec recovers.
#[tokio::test]
async fn approval_parks_then_decision_and_recovery_complete_the_turn() {
    let mut s = start().await;
    let frames = park_new_gated_session(&mut s.client).await;
    let Some(Update::Session(last)) = frames.last() else {
        panic!("a parked Exec ends with a session frame")
    };
    assert_eq!(last.exec_state(), pb::ExecState::ExecAwaiting);
    let pending = last.pending_approval.clone().unwrap();
    let uid = session_uid(&frames);
    assert_eq!(s.tool.0.load(Ordering::SeqCst), 0);

    // New input is blocked while the gate is open.
    let (_, status) = exec(&mut s.client, exec_request(&uid, "more")).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");

    let mut approve = pb::ApproveRequest {
        session: uid.clone(),
        execution_id: pending.execution_id.clone(),
        tool_call_id: pending.tool_call_id.clone(),
        request_seq: pending.request_seq,
        approved: None,
        reason: "reviewed".into(),
        identity: None,
    };
    let err = s.client.approve(approve.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    approve.approved = Some(true);
    let decided = s
        .client
        .approve(approve.clone())
        .await
        .unwrap()
        .into_inner();
    let decision = decided.decision.unwrap();
    assert!(decided.session.unwrap().pending_approval.is_none());
    let again = s.client.approve(approve).await.unwrap().into_inner();
    assert_eq!(again.decision.unwrap().seq, decision.seq, "idempotent");

    let (frames, status) = exec(
        &mut s.client,
        pb::ExecRequest {
            session: uid.clone(),
            ..pb::ExecRequest::default()
        },
    )
    .await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    let kinds = kinds(&frames);
    assert_eq!(kinds.first().map(String::as_str), Some("SESSION"));
    assert_eq!(kinds.last().map(String::as_str), Some("SESSION"));
    assert!(kinds.contains(&"TOOL_RESULT".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"END".to_owned()), "{kinds:?}");
    assert_eq!(s.tool.0.load(Ordering::SeqCst), 1);
    assert_eq!(
        get(&mut s.client, &uid).await.exec_state(),
        pb::ExecState::ExecCompleted
    );
}

// Flat cost per turn: a session parked at an approval is shown from its tail and the kept state
// (which reads what was appended since), so showing it again and again never reads its whole log.
#[tokio::test]
async fn a_parked_session_is_shown_without_reading_its_whole_log() {
    let mut s = start().await;
    let frames = park_new_gated_session(&mut s.client).await;
    let uid = session_uid(&frames);
    // A longer history: approve, let the turn finish, and park on a new turn, a few times.
    for turn in 0..10 {
        let pending = get(&mut s.client, &uid).await.pending_approval.unwrap();
        s.client
            .approve(pb::ApproveRequest {
                session: uid.clone(),
                execution_id: pending.execution_id,
                tool_call_id: pending.tool_call_id,
                request_seq: pending.request_seq,
                approved: Some(true),
                reason: "fine".into(),
                identity: None,
            })
            .await
            .unwrap();
        let recover = pb::ExecRequest {
            session: uid.clone(),
            ..pb::ExecRequest::default()
        };
        let (_, status) = exec(&mut s.client, recover).await;
        assert_eq!(status.code(), Code::Ok, "{status:?}");
        let (_, status) = exec(&mut s.client, exec_request(&uid, &format!("pay {turn}"))).await;
        assert_eq!(status.code(), Code::Ok, "{status:?}");
    }
    // Read past the counter: the log's length and its newest approval request.
    let log = s.counting.inner().read(&uid, 1, 0).await.unwrap();
    let head = log.last().unwrap().seq;
    let newest_request = log
        .iter()
        .rev()
        .find(|r| r.event.kind == agentsessions_api::EventKind::ApprovalRequest)
        .unwrap()
        .seq;
    let before = s.counting.records_read();
    for _ in 0..3 {
        let shown = get(&mut s.client, &uid).await;
        assert_eq!(shown.exec_state(), pb::ExecState::ExecAwaiting);
        let pending = shown.pending_approval.unwrap();
        assert_eq!(pending.request_seq, newest_request);
    }
    let read = s.counting.records_read() - before;
    assert!(
        read < u64::try_from(head).unwrap(),
        "three GetSessions read {read} records of a {head}-record log"
    );
}

// semantics §2.2: an Exec reads its session's row once, to authorize it (or, for a new session,
// once it is created); placement runs the turn on that reading, with no second read to place it
// and none to settle its compute once it ended. A continuation reads it once more, for the
// final frame that shows the session as it now stands (step 10).
#[tokio::test]
async fn an_exec_reads_the_session_row_once() {
    let mut s = start().await;
    let before = s.counting.session_reads();
    let (frames, status) = exec(&mut s.client, exec_request("", "hello")).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    assert_eq!(
        s.counting.session_reads() - before,
        1,
        "a new session's Exec"
    );
    let uid = session_uid(&frames);

    let before = s.counting.session_reads();
    let (frames, status) = exec(&mut s.client, exec_request(&uid, "again")).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    assert_eq!(kinds(&frames).last().map(String::as_str), Some("END"));
    assert_eq!(s.counting.session_reads() - before, 1, "an Exec with input");

    let frames = park_new_gated_session(&mut s.client).await;
    let uid = session_uid(&frames);
    let pending = get(&mut s.client, &uid).await.pending_approval.unwrap();
    s.client
        .approve(pb::ApproveRequest {
            session: uid.clone(),
            execution_id: pending.execution_id,
            tool_call_id: pending.tool_call_id,
            request_seq: pending.request_seq,
            approved: Some(true),
            reason: "fine".into(),
            identity: None,
        })
        .await
        .unwrap();
    let before = s.counting.session_reads();
    let recover = pb::ExecRequest {
        session: uid.clone(),
        ..pb::ExecRequest::default()
    };
    let (frames, status) = exec(&mut s.client, recover).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    assert!(matches!(frames.last(), Some(Update::Session(_))));
    assert_eq!(
        s.counting.session_reads() - before,
        2,
        "a continuation: authorized, then shown as it now stands"
    );
}

// extensions §1: Cancel stops the running turn; the journal records LIFECYCLE_CANCEL and END.
#[tokio::test]
async fn cancel_stops_a_running_turn() {
    let mut s = start().await;
    let created = s
        .client
        .create_session(pb::CreateSessionRequest {
            session: Some(pb::Session {
                harness: "slow".into(),
                ..pb::Session::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let uid = created.metadata.unwrap().uid;
    let mut runner = s.client.clone();
    let request = exec_request(&uid, "wait");
    let turn = tokio::spawn(async move { exec(&mut runner, request).await });
    for _ in 0..500 {
        if get(&mut s.client, &uid).await.exec_state() == pb::ExecState::ExecRunning
            && s.journal.head(&uid).await.unwrap() >= 2
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = s
        .client
        .cancel(pb::CancelRequest {
            session: uid.clone(),
            execution_id: String::new(),
            reason: "user pressed stop".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(after.exec_state(), pb::ExecState::ExecRunning);
    let (_, status) = tokio::time::timeout(Duration::from_secs(10), turn)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    let records = replay(&mut s.client, &uid, 0, 0).await;
    assert!(
        records
            .iter()
            .any(|r| lifecycle_kind(r) == pb::lifecycle::Kind::LifecycleCancel as i32)
    );
    let last = records.last().unwrap().event.as_ref().unwrap();
    assert_eq!(last.kind, pb::EventKind::EventEnd as i32);
    // Nothing is running now.
    let err = s
        .client
        .cancel(pb::CancelRequest {
            session: uid,
            ..pb::CancelRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
}

// extensions §3: delete records the intent; the session refuses effects but stays readable.
#[tokio::test]
async fn delete_refuses_further_effects_and_stays_readable() {
    let mut s = start().await;
    let (frames, _) = exec(&mut s.client, exec_request("", "one")).await;
    let uid = session_uid(&frames);
    let deleted = s
        .client
        .delete_session(pb::DeleteSessionRequest { uid: uid.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.deletion_state(), pb::DeletionState::DeletionPending);
    let (_, status) = exec(&mut s.client, exec_request(&uid, "two")).await;
    assert_eq!(status.code(), Code::FailedPrecondition);
    for err in [
        s.client
            .suspend(pb::SuspendRequest {
                session: uid.clone(),
            })
            .await
            .unwrap_err(),
        s.client
            .resume(pb::ResumeRequest {
                session: uid.clone(),
                boot: false,
            })
            .await
            .unwrap_err(),
        s.client
            .fork(pb::ForkRequest {
                session: uid.clone(),
                ..pb::ForkRequest::default()
            })
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    }
    assert_eq!(
        get(&mut s.client, &uid).await.deletion_state(),
        pb::DeletionState::DeletionPending
    );
    assert_eq!(replay(&mut s.client, &uid, 0, 0).await.len(), 6);
    let again = s
        .client
        .delete_session(pb::DeleteSessionRequest { uid: uid.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.last_seq, 6, "a second delete writes nothing");
}

// semantics §8: malformed and unknown input, each with its code; the server keeps serving.
#[tokio::test]
async fn bad_input_gets_the_table_code() {
    let mut s = start().await;
    let c = &mut s.client;
    let code = |r: Result<tonic::Response<pb::Session>, tonic::Status>| r.unwrap_err().code();
    assert_eq!(
        code(c.get_session(pb::GetSessionRequest::default()).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            c.get_session(pb::GetSessionRequest {
                uid: "sess-none".into()
            })
            .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(c.suspend(pb::SuspendRequest::default()).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            c.suspend(pb::SuspendRequest {
                session: "sess-none".into()
            })
            .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(
            c.resume(pb::ResumeRequest {
                session: "sess-none".into(),
                boot: false
            })
            .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(c.delete_session(pb::DeleteSessionRequest::default()).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            c.create_session(pb::CreateSessionRequest {
                session: Some(pb::Session {
                    harness: "no-such-harness".into(),
                    ..pb::Session::default()
                })
            })
            .await
        ),
        Code::InvalidArgument
    );
    let (_, status) = exec(c, exec_request("sess-none", "x")).await;
    assert_eq!(status.code(), Code::NotFound);
    let approve = c
        .approve(pb::ApproveRequest {
            session: "sess-none".into(),
            ..pb::ApproveRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(approve.code(), Code::InvalidArgument);

    // A data part holding NaN cannot become an input.
    let nan = pb::Message {
        role: "user".into(),
        parts: vec![pb::Part {
            part: Some(pb::part::Part::Data(pb::DataPart {
                data: Some(prost_types::Struct {
                    fields: [(
                        "x".to_owned(),
                        prost_types::Value {
                            kind: Some(prost_types::value::Kind::NumberValue(f64::NAN)),
                        },
                    )]
                    .into(),
                }),
            })),
        }],
    };
    let (_, status) = exec(
        c,
        pb::ExecRequest {
            inputs: vec![nan],
            ..pb::ExecRequest::default()
        },
    )
    .await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    // A memory-snapshot harness on in-process compute is refused before anything is written.
    let mut counter = exec_request("", "x");
    counter.harness = "counter".into();
    let (frames, status) = exec(c, counter).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert_eq!(kinds(&frames), ["SESSION"], "only the session frame");
    let uid = session_uid(&frames);
    assert_eq!(get(c, &uid).await.last_seq, 0, "nothing journaled");

    // Still serving.
    let (_, status) = exec(c, exec_request("", "still here")).await;
    assert_eq!(status.code(), Code::Ok);
}

/// Echo on the first run, then fails: a turn interrupted after its model call.
#[derive(Debug, Default)]
struct BreaksOnce(std::sync::atomic::AtomicBool);

#[async_trait::async_trait]
impl Harness for BreaksOnce {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Ok(descriptor("breaks-once"))
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        let text = start.inputs.last().map(Message::text).unwrap_or_default();
        sink.model(agentsessions_api::ModelRequest {
            model: "echo".into(),
            messages: vec![Message::text_message("user", text)],
            ..agentsessions_api::ModelRequest::default()
        })
        .await?;
        if !self.0.swap(true, Ordering::SeqCst) {
            return Err(agentsessions_api::ApiError::status(
                agentsessions_api::StatusCode::Unavailable,
                "lost the harness mid-turn",
            ));
        }
        Ok(())
    }
}

// semantics §4.3 step 2: resume re-drives with the harness the pending turn recorded, even when
// that turn overrode the session's harness.
#[tokio::test]
async fn resume_uses_the_harness_the_turn_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let counting = Arc::new(Instrumented::new(Arc::new(
        SqliteJournal::open(dir.path().join("journal.db")).unwrap(),
    )));
    let journal: Arc<dyn Journal> = counting.clone();
    let none = RuntimeCapabilities::default();
    let service = ServerBuilder::new(Arc::clone(&journal), Arc::new(EchoModel::new()))
        .harness("echo", Arc::new(EchoHarness::new()), none)
        .harness("flaky", Arc::new(BreaksOnce::default()), none)
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_tcp(listener, service, std::future::pending()));
    let mut client =
        SessionsClient::new(agentsessions_harnesswire::channel(&addr.to_string()).unwrap());
    let created = client
        .create_session(pb::CreateSessionRequest { session: None })
        .await
        .unwrap()
        .into_inner();
    let uid = created.metadata.unwrap().uid;
    let mut request = exec_request(&uid, "one");
    request.harness = "flaky".into();
    let (_, status) = exec(&mut client, request).await;
    assert_ne!(status.code(), Code::Ok, "the first run breaks");
    assert_eq!(
        get(&mut client, &uid).await.harness,
        "echo",
        "the session keeps its default, recorded by name"
    );
    let resumed = client
        .resume(pb::ResumeRequest {
            session: uid.clone(),
            boot: false,
        })
        .await
        .unwrap()
        .into_inner();
    let records = replay(&mut client, &uid, 0, 0).await;
    let ends = records
        .iter()
        .filter(|r| r.event.as_ref().unwrap().kind == pb::EventKind::EventEnd as i32)
        .count();
    assert_eq!(
        ends, 1,
        "the interrupted turn completed on the harness it started on"
    );
    assert_eq!(resumed.compute_state(), pb::ComputeState::ComputeNone);
}

/// Asks the model once, then hangs (first life) or finishes (second life): a harness process
/// that dies mid-turn and comes back.
#[derive(Debug)]
struct HangsAfterModel {
    hang: bool,
}

#[async_trait::async_trait]
impl Harness for HangsAfterModel {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Ok(descriptor("echo"))
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        let text = start.inputs.last().map(Message::text).unwrap_or_default();
        sink.model(agentsessions_api::ModelRequest {
            model: "echo".into(),
            messages: vec![Message::text_message("user", text)],
            ..agentsessions_api::ModelRequest::default()
        })
        .await?;
        if self.hang {
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        sink.output("done".into()).await
    }
}

/// A TCP relay standing in for the harness process's sockets: aborting it drops every
/// connection at once, as the kernel does when a process dies.
fn relay(listener: TcpListener, target: std::net::SocketAddr) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut pipes = tokio::task::JoinSet::new();
        while let Ok((mut inbound, _)) = listener.accept().await {
            pipes.spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    })
}

async fn harness_server(harness: HangsAfterModel) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(agentsessions_harnesswire::serve_tcp_listener(
        listener,
        Arc::new(harness),
        std::future::pending(),
    ));
    addr
}

// A harness in another process killed mid-turn: the turn fails without losing what was
// recorded, and once the harness is back a Resume re-drives it without asking the model again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_harness_killed_mid_turn_is_re_driven_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let counting = Arc::new(Instrumented::new(Arc::new(
        SqliteJournal::open(dir.path().join("journal.db")).unwrap(),
    )));
    let journal: Arc<dyn Journal> = counting.clone();
    let first = harness_server(HangsAfterModel { hang: true }).await;
    let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let harness_addr = front.local_addr().unwrap();
    let first_life = relay(front, first);
    let model = Arc::new(agentsessions_model::CountingProvider::new(EchoModel::new()));
    let remote =
        agentsessions_harnesswire::RemoteHarness::connect_lazy(&harness_addr.to_string()).unwrap();
    let service = ServerBuilder::new(Arc::clone(&journal), model.clone())
        .harness("remote", Arc::new(remote), RuntimeCapabilities::default())
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_tcp(listener, service, std::future::pending()));
    let mut client =
        SessionsClient::new(agentsessions_harnesswire::channel(&addr.to_string()).unwrap());

    let mut runner = client.clone();
    let turn = tokio::spawn(async move { exec(&mut runner, exec_request("", "work")).await });
    for _ in 0..1000 {
        if model.calls() >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(model.calls(), 1);
    // The harness process dies: every socket it held closes.
    first_life.abort();
    let (frames, status) = tokio::time::timeout(Duration::from_secs(20), turn)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(
        status.code(),
        Code::Ok,
        "a stream that closes without END is a failed run"
    );
    let uid = session_uid(&frames);
    let before = replay(&mut client, &uid, 0, 0).await;
    assert!(
        before
            .iter()
            .any(|r| r.event.as_ref().unwrap().kind == pb::EventKind::EventModelCall as i32),
        "the model call stays recorded"
    );

    // The harness comes back on the same address.
    let second = harness_server(HangsAfterModel { hang: false }).await;
    let _second_life = relay(TcpListener::bind(harness_addr).await.unwrap(), second);
    client
        .resume(pb::ResumeRequest {
            session: uid.clone(),
            boot: false,
        })
        .await
        .unwrap();
    assert_eq!(
        model.calls(),
        1,
        "the recorded answer is served, not asked again"
    );
    let records = replay(&mut client, &uid, 0, 0).await;
    assert_eq!(&records[..before.len()], &before[..]);
    let last_kinds: Vec<i32> = records
        .iter()
        .rev()
        .take(2)
        .map(|r| r.event.as_ref().unwrap().kind)
        .collect();
    assert_eq!(
        last_kinds,
        [
            pb::EventKind::EventLifecycle as i32,
            pb::EventKind::EventEnd as i32
        ],
        "END, then the RESUME marker"
    );
}

// Forking or deleting a parent never changes what its children hold (issue: fork without
// copying): the children share the parent's stored prefix, so a delete intent on the parent and
// further forks of it leave every child's chain whole and its turns working.
#[tokio::test]
async fn deleting_or_forking_a_parent_never_corrupts_a_child() {
    let mut s = start().await;
    let (frames, _) = exec(&mut s.client, exec_request("", "one")).await;
    let parent = session_uid(&frames);
    let forked = s
        .client
        .fork(pb::ForkRequest {
            session: parent.clone(),
            count: 1,
            ..pb::ForkRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    let child = forked.children[0].metadata.as_ref().unwrap().uid.clone();
    let before = replay(&mut s.client, &child, 0, 0).await;

    // The parent goes on, is forked again, then deleted.
    exec(&mut s.client, exec_request(&parent, "two")).await;
    s.client
        .fork(pb::ForkRequest {
            session: parent.clone(),
            count: 2,
            ..pb::ForkRequest::default()
        })
        .await
        .unwrap();
    s.client
        .delete_session(pb::DeleteSessionRequest {
            uid: parent.clone(),
        })
        .await
        .unwrap();

    assert_eq!(replay(&mut s.client, &child, 0, 0).await, before);
    let (_, status) = exec(&mut s.client, exec_request(&child, "still mine")).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    let records = s.journal.read(&child, 1, 0).await.unwrap();
    agentsessions_journal::verify_records(&records).unwrap();
    assert_eq!(records.len(), before.len() + 5);
}

// ReadRecords (extension): pages of many records that together equal the streamed Replay,
// pinned to a range, bounded by max_records; an unknown session is an empty page.
#[tokio::test]
async fn read_records_pages_equal_the_replay() {
    let mut s = start().await;
    let (frames, _) = exec(&mut s.client, exec_request("", "one")).await;
    let uid = session_uid(&frames);
    for text in ["two", "three"] {
        let (_, status) = exec(&mut s.client, exec_request(&uid, text)).await;
        assert_eq!(status.code(), Code::Ok, "{status:?}");
    }
    let streamed = replay(&mut s.client, &uid, 0, 0).await;
    let head = streamed.last().unwrap().seq;
    assert!(head > 8, "three turns hold more than 8 records");

    let mut paged = Vec::new();
    let mut next = 0;
    let mut pages = 0;
    loop {
        let page = s
            .client
            .read_records(pb::ReadRecordsRequest {
                session: uid.clone(),
                from_seq: next,
                to_seq: 0,
                max_records: 4,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.head_seq, head);
        assert!(page.records.len() <= 4);
        pages += 1;
        paged.extend(page.records);
        if page.next_seq == 0 {
            break;
        }
        next = page.next_seq;
    }
    assert_eq!(paged, streamed);
    assert_eq!(pages, usize::try_from(head).unwrap().div_ceil(4));

    let middle = s
        .client
        .read_records(pb::ReadRecordsRequest {
            session: uid.clone(),
            from_seq: 3,
            to_seq: 5,
            max_records: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let seqs: Vec<i64> = middle.records.iter().map(|r| r.seq).collect();
    assert_eq!((seqs, middle.next_seq), (vec![3, 4, 5], 0));

    let unknown = s
        .client
        .read_records(pb::ReadRecordsRequest {
            session: "s-unknown".into(),
            ..pb::ReadRecordsRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (unknown.records.len(), unknown.next_seq, unknown.head_seq),
        (0, 0, 0)
    );

    let negative = s
        .client
        .read_records(pb::ReadRecordsRequest {
            session: uid,
            max_records: -1,
            ..pb::ReadRecordsRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(negative.code(), Code::InvalidArgument);
}
