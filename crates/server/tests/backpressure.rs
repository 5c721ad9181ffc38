//! Bounded response streams: a client that stops reading an Exec or a Replay makes the server
//! hold at most `STREAM_CAPACITY` items for it, however many records the turn or the replay
//! has; the records it missed still arrive, in order, once it reads again. Time is paused, so
//! "the server has done all it can" is when the runtime is idle.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod fixtures;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use agentsessions_api::{Descriptor, EventSink, Harness, Message, RuntimeCapabilities, Start};
use agentsessions_journal::MemoryJournal;
use agentsessions_model::EchoModel;
use agentsessions_server::streams::STREAM_CAPACITY;
use agentsessions_server::{ServerBuilder, SessionsService};
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use agentsessions_wire::pb::sessions_server::Sessions;
use tokio_stream::{Stream, StreamExt};
use tonic::Request;

use agentsessions_journal::Log as _;
use fixtures::{descriptor, uid_of};

/// Outputs one turn writes: far more than a stream holds.
const OUTPUTS: usize = 300;

/// Writes [`OUTPUTS`] outputs in one turn.
#[derive(Debug)]
struct Chatty;

#[async_trait::async_trait]
impl Harness for Chatty {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Ok(descriptor("chatty"))
    }

    async fn run(&self, _start: &Start, sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        for i in 0..OUTPUTS {
            sink.output(format!("line {i}")).await?;
        }
        Ok(())
    }
}

fn service(journal: Arc<MemoryJournal>) -> SessionsService {
    ServerBuilder::new(journal, Arc::new(EchoModel::new()))
        .harness("chatty", Arc::new(Chatty), RuntimeCapabilities::default())
        .build()
        .unwrap()
}

fn exec_request() -> pb::ExecRequest {
    pb::ExecRequest {
        inputs: vec![pb::Message::from(Message::text_message("user", "go"))],
        ..pb::ExecRequest::default()
    }
}

/// Items `stream` has ready now, taken without letting the server run again: what the server
/// holds for a client that has not read. (tokio's cooperative budget stops this at 128 items,
/// still twice `STREAM_CAPACITY`, so an unbounded stream is caught.)
fn held<S: Stream + Unpin>(stream: &mut S) -> Vec<S::Item> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut items = Vec::new();
    while let Poll::Ready(Some(item)) = Pin::new(&mut *stream).poll_next(&mut cx) {
        items.push(item);
    }
    items
}

/// Lets every task run until all of them wait (time is paused).
async fn settle() {
    tokio::time::sleep(Duration::from_secs(60)).await;
}

fn seq_of(update: &pb::ExecUpdate) -> Option<i64> {
    match &update.update {
        Some(Update::Record(record)) => Some(record.seq),
        _ => None,
    }
}

// STYLE rule 8 / semantics §2.2 step 6: a turn runs to its end while its client does not read,
// and the server holds no more than the stream's capacity for that client.
#[tokio::test(start_paused = true)]
async fn a_slow_exec_client_holds_a_bounded_stream_and_still_gets_every_record() {
    let journal = Arc::new(MemoryJournal::new());
    let service = service(Arc::clone(&journal));
    let mut stream = service
        .exec(Request::new(exec_request()))
        .await
        .unwrap()
        .into_inner();
    settle().await;

    let first = held(&mut stream);
    let Some(Ok(pb::ExecUpdate {
        update: Some(Update::Session(session)),
    })) = first.first()
    else {
        panic!("the session frame comes first: {first:?}");
    };
    let uid = uid_of(session);
    // The turn ended without waiting for the client: EXECUTION_START, INPUT, the outputs, END.
    let head = journal.head(&uid).await.unwrap();
    assert_eq!(head, i64::try_from(OUTPUTS + 3).unwrap());
    assert!(
        first.len() <= STREAM_CAPACITY,
        "the server held {} items for a client that did not read",
        first.len()
    );

    let mut seqs: Vec<i64> = first
        .iter()
        .filter_map(|item| seq_of(item.as_ref().unwrap()))
        .collect();
    while let Some(item) = stream.next().await {
        seqs.extend(seq_of(&item.unwrap()));
    }
    assert_eq!(seqs, (1..=head).collect::<Vec<_>>());
}

// A Replay's producer waits for its client: it never reads ahead of it by more than the stream.
#[tokio::test(start_paused = true)]
async fn a_slow_replay_client_holds_a_bounded_stream() {
    let journal = Arc::new(MemoryJournal::new());
    let service = service(Arc::clone(&journal));
    let mut exec = service
        .exec(Request::new(exec_request()))
        .await
        .unwrap()
        .into_inner();
    let mut uid = String::new();
    while let Some(item) = exec.next().await {
        if let Some(Update::Session(session)) = item.unwrap().update {
            uid = uid_of(&session);
        }
    }
    let head = journal.head(&uid).await.unwrap();

    let mut stream = service
        .replay(Request::new(pb::ReplayRequest {
            session: uid,
            ..pb::ReplayRequest::default()
        }))
        .await
        .unwrap()
        .into_inner();
    settle().await;
    let first = held(&mut stream);
    assert!(
        first.len() <= STREAM_CAPACITY,
        "the server held {} of {head} records for a client that did not read",
        first.len()
    );

    let mut seqs: Vec<i64> = first.into_iter().map(|r| r.unwrap().seq).collect();
    while let Some(record) = stream.next().await {
        seqs.push(record.unwrap().seq);
    }
    assert_eq!(seqs, (1..=head).collect::<Vec<_>>());
}

// STYLE rule 8: every task an RPC leaves running has an owner; shutdown stops the streams that
// wait for clients and returns once the turns have ended.
#[tokio::test(start_paused = true)]
async fn shutdown_ends_the_tasks_of_clients_that_stopped_reading() {
    let journal = Arc::new(MemoryJournal::new());
    let service = service(Arc::clone(&journal));
    let mut exec = service
        .exec(Request::new(exec_request()))
        .await
        .unwrap()
        .into_inner();
    let replay = service
        .replay(Request::new(pb::ReplayRequest::default()))
        .await
        .unwrap()
        .into_inner();
    settle().await;
    tokio::time::timeout(Duration::from_secs(5), service.shutdown())
        .await
        .unwrap();
    // The task is gone, so the stream ends after what it already held.
    let held = held(&mut exec).len();
    assert!(held <= STREAM_CAPACITY);
    assert!(exec.next().await.is_none());
    drop(replay);
}
