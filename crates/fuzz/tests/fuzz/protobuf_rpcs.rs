//! Protobuf messages at every RPC: bytes from outside decode into each Sessions and
//! HarnessRegistry request, or fail; what decodes encodes back to the same message; and the
//! in-process service answers every decoded request with a response or a status, never a panic
//! (in the handler or in any task it spawns).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentsessions_api::{Message as ApiMessage, RuntimeCapabilities};
use agentsessions_fuzz::{bytes_or_mutation, config_scaled, run};
use agentsessions_harnesses::EchoHarness;
use agentsessions_journal::MemoryJournal;
use agentsessions_model::EchoModel;
use agentsessions_server::{RegistryService, ServerBuilder, SessionsService};
use agentsessions_wire::pb;
use agentsessions_wire::pb::harness_registry_server::HarnessRegistry;
use agentsessions_wire::pb::sessions_server::Sessions;
use proptest::prelude::*;
use prost::Message;
use tokio_stream::{Stream, StreamExt};
use tonic::Request;

/// Worker threads of the service's runtime, told apart by the panic hook.
const WORKER: &str = "rpc-fuzz-worker";

/// Panics on the service's worker threads: a spawned task's panic is caught by tokio and would
/// otherwise go unseen.
static WORKER_PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_worker_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() == Some(WORKER) {
            WORKER_PANICS.fetch_add(1, Ordering::SeqCst);
        }
        previous(info);
    }));
}

/// Reads a response stream for a moment (a Watch never ends by itself); how many items came.
async fn drain<S, T>(stream: S) -> usize
where
    S: Stream<Item = Result<T, tonic::Status>> + Unpin,
{
    let mut stream = stream;
    let mut items = 0;
    let deadline = tokio::time::sleep(Duration::from_millis(200));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            item = stream.next() => match item {
                Some(_) => items += 1,
                None => return items,
            },
            () = &mut deadline => return items,
        }
    }
}

/// The RPCs, by index into the seeds and the dispatcher.
const RPCS: [&str; 18] = [
    "CreateSession",
    "GetSession",
    "ListSessions",
    "DeleteSession",
    "Exec",
    "Replay",
    "Approve",
    "ReadRecords",
    "ListApprovals",
    "Cancel",
    "Suspend",
    "Resume",
    "Watch",
    "Fork",
    "RegisterHarness",
    "GetHarness",
    "ListHarnesses",
    "RetireHarness",
];

/// Decodes `bytes` as `M`; what decodes must encode back to bytes that decode the same.
fn decoded<M: Message + Default + PartialEq + std::fmt::Debug>(
    bytes: &[u8],
) -> Result<Option<M>, TestCaseError> {
    let Ok(message) = M::decode(bytes) else {
        return Ok(None);
    };
    let again = M::decode(message.encode_to_vec().as_slice())
        .map_err(|e| TestCaseError::fail(format!("re-encoded message does not decode: {e}")))?;
    prop_assert_eq!(&again, &message);
    Ok(Some(message))
}

struct Host {
    sessions: SessionsService,
    registry: RegistryService,
}

/// Calls RPC `rpc` with `bytes` decoded as its request.
async fn dispatch(host: &Host, rpc: usize, bytes: &[u8]) -> Result<(), TestCaseError> {
    let s = &host.sessions;
    let r = &host.registry;
    macro_rules! unary {
        ($service:expr, $method:ident, $ty:ty) => {
            if let Some(m) = decoded::<$ty>(bytes)? {
                let _answer = $service.$method(Request::new(m)).await;
            }
        };
    }
    macro_rules! streamed {
        ($method:ident, $ty:ty) => {
            if let Some(m) = decoded::<$ty>(bytes)?
                && let Ok(stream) = s.$method(Request::new(m)).await
            {
                let _items = drain(stream.into_inner()).await;
            }
        };
    }
    match rpc {
        0 => unary!(s, create_session, pb::CreateSessionRequest),
        1 => unary!(s, get_session, pb::GetSessionRequest),
        2 => unary!(s, list_sessions, pb::ListSessionsRequest),
        3 => unary!(s, delete_session, pb::DeleteSessionRequest),
        4 => streamed!(exec, pb::ExecRequest),
        5 => streamed!(replay, pb::ReplayRequest),
        6 => unary!(s, approve, pb::ApproveRequest),
        7 => unary!(s, read_records, pb::ReadRecordsRequest),
        8 => unary!(s, list_approvals, pb::ListApprovalsRequest),
        9 => unary!(s, cancel, pb::CancelRequest),
        10 => unary!(s, suspend, pb::SuspendRequest),
        11 => unary!(s, resume, pb::ResumeRequest),
        12 => streamed!(watch, pb::WatchRequest),
        13 => unary!(s, fork, pb::ForkRequest),
        14 => {
            if let Some(m) = decoded::<pb::RegisterHarnessRequest>(bytes)? {
                // Registration may dial the harness it names: bounded here, not by the test.
                let _answer = tokio::time::timeout(
                    Duration::from_millis(300),
                    r.register_harness(Request::new(m)),
                )
                .await;
            }
        }
        15 => unary!(r, get_harness, pb::GetHarnessRequest),
        16 => unary!(r, list_harnesses, pb::ListHarnessesRequest),
        _ => unary!(r, retire_harness, pb::RetireHarnessRequest),
    }
    Ok(())
}

/// Valid requests naming real sessions, as seeds for the mutations.
fn seeds(uid: &str, other: &str) -> Vec<Vec<u8>> {
    let input = pb::Message::from(ApiMessage::text_message("user", "hello"));
    let session = || uid.to_owned();
    vec![
        pb::CreateSessionRequest {
            session: Some(pb::Session {
                harness: "echo".into(),
                ..pb::Session::default()
            }),
        }
        .encode_to_vec(),
        pb::GetSessionRequest { uid: session() }.encode_to_vec(),
        pb::ListSessionsRequest {
            project: String::new(),
            page_size: 2,
            page_token: String::new(),
        }
        .encode_to_vec(),
        pb::DeleteSessionRequest {
            uid: other.to_owned(),
        }
        .encode_to_vec(),
        pb::ExecRequest {
            session: session(),
            inputs: vec![input],
            expected_last_seq: Some(0),
            ..pb::ExecRequest::default()
        }
        .encode_to_vec(),
        pb::ReplayRequest {
            session: session(),
            from_seq: 1,
            to_seq: 0,
        }
        .encode_to_vec(),
        pb::ApproveRequest {
            session: session(),
            execution_id: "e".into(),
            tool_call_id: "c".into(),
            request_seq: 2,
            approved: Some(true),
            ..pb::ApproveRequest::default()
        }
        .encode_to_vec(),
        pb::ReadRecordsRequest {
            session: session(),
            from_seq: 1,
            to_seq: 0,
            max_records: 10,
        }
        .encode_to_vec(),
        pb::ListApprovalsRequest {
            page_size: 5,
            ..pb::ListApprovalsRequest::default()
        }
        .encode_to_vec(),
        pb::CancelRequest {
            session: session(),
            ..pb::CancelRequest::default()
        }
        .encode_to_vec(),
        pb::SuspendRequest { session: session() }.encode_to_vec(),
        pb::ResumeRequest {
            session: session(),
            boot: false,
        }
        .encode_to_vec(),
        pb::WatchRequest {
            session: session(),
            from_seq: 1,
        }
        .encode_to_vec(),
        pb::ForkRequest {
            session: session(),
            at_seq: 1,
            count: 2,
            child_names: vec!["a".into(), "b".into()],
            ..pb::ForkRequest::default()
        }
        .encode_to_vec(),
        pb::RegisterHarnessRequest {
            name: "remote".into(),
            spec: Some(pb::HarnessSpec::default()),
        }
        .encode_to_vec(),
        pb::GetHarnessRequest {
            name: "echo".into(),
            observe: true,
        }
        .encode_to_vec(),
        pb::ListHarnessesRequest {
            page_size: 3,
            include_retired: true,
            ..pb::ListHarnessesRequest::default()
        }
        .encode_to_vec(),
        pb::RetireHarnessRequest {
            name: "remote".into(),
            reason: "fuzz".into(),
        }
        .encode_to_vec(),
    ]
}

#[test]
fn every_rpc_answers_any_request_without_panicking() {
    count_worker_panics();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(WORKER)
        .enable_all()
        .build()
        .unwrap();
    let (host, seeds) = runtime.block_on(async {
        let sessions =
            ServerBuilder::new(Arc::new(MemoryJournal::new()), Arc::new(EchoModel::new()))
                .harness(
                    "echo",
                    Arc::new(EchoHarness::new()),
                    RuntimeCapabilities::default(),
                )
                .build()
                .unwrap();
        let registry = RegistryService::new(&sessions);
        registry.load().await.unwrap();
        let mut uids = Vec::new();
        for _ in 0..2 {
            let created = sessions
                .create_session(Request::new(pb::CreateSessionRequest::default()))
                .await
                .unwrap()
                .into_inner();
            uids.push(created.metadata.unwrap_or_default().uid);
        }
        let host = Host { sessions, registry };
        // One turn, so the seeds' sessions have records to replay, read and fork.
        dispatch(&host, 4, &seeds(&uids[0], &uids[1])[4])
            .await
            .unwrap();
        let seeds = seeds(&uids[0], &uids[1]);
        (host, seeds)
    });
    assert_eq!(seeds.len(), RPCS.len());
    let inputs = (0..RPCS.len(), bytes_or_mutation(seeds));
    run(
        "server/protobuf_rpcs",
        config_scaled(4, 1),
        &inputs,
        |(rpc, bytes)| {
            let before = WORKER_PANICS.load(Ordering::SeqCst);
            runtime.block_on(dispatch(&host, rpc, &bytes))?;
            prop_assert_eq!(
                WORKER_PANICS.load(Ordering::SeqCst),
                before,
                "a task spawned by {} panicked",
                RPCS[rpc]
            );
            Ok(())
        },
    );
    runtime.block_on(host.sessions.shutdown());
}

// Regression (found by inspection while writing this target, then by this test): a Replay whose
// range ends at i64::MAX overflowed the page arithmetic in the replay task (a panic in debug
// builds, a wrapped range in release).
#[test]
fn a_replay_ending_at_the_largest_seq_does_not_overflow() {
    count_worker_panics();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(WORKER)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let sessions =
            ServerBuilder::new(Arc::new(MemoryJournal::new()), Arc::new(EchoModel::new()))
                .harness(
                    "echo",
                    Arc::new(EchoHarness::new()),
                    RuntimeCapabilities::default(),
                )
                .build()
                .unwrap();
        let before = WORKER_PANICS.load(Ordering::SeqCst);
        for from_seq in [i64::MAX - 1, i64::MAX - 999, 1] {
            let stream = sessions
                .replay(Request::new(pb::ReplayRequest {
                    session: "nobody".into(),
                    from_seq,
                    to_seq: i64::MAX,
                }))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(drain(stream).await, 0);
        }
        assert_eq!(WORKER_PANICS.load(Ordering::SeqCst), before);
    });
}
