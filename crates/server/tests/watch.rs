//! Watch (extension): a session's records from a seq, then each one as it commits, ending after
//! the delete record; bounded for a client that does not read; UNAVAILABLE when the server
//! stops; the request's errors.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod fixtures;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use agentsessions_api::{Descriptor, EventSink, Harness, Message, RuntimeCapabilities, Start};
use agentsessions_journal::MemoryJournal;
use agentsessions_model::EchoModel;
use agentsessions_server::streams::{STREAM_CAPACITY, WatchStream};
use agentsessions_server::{ServerBuilder, SessionsService};
use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_server::Sessions;
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Request};

use agentsessions_journal::Log as _;
use fixtures::{descriptor, uid_of};

/// Outputs one turn of [`Chatty`] writes: far more than a stream holds.
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
        .harness(
            "echo",
            Arc::new(agentsessions_harnesses::EchoHarness::new()),
            RuntimeCapabilities::default(),
        )
        .default_harness("echo")
        .build()
        .unwrap()
}

async fn create(service: &SessionsService, harness: &str) -> String {
    let session = service
        .create_session(Request::new(pb::CreateSessionRequest {
            session: Some(pb::Session {
                harness: harness.into(),
                ..pb::Session::default()
            }),
        }))
        .await
        .unwrap()
        .into_inner();
    uid_of(&session)
}

/// Runs one turn on `uid` to its end.
async fn turn(service: &SessionsService, uid: &str, text: &str) {
    let mut stream = service
        .exec(Request::new(pb::ExecRequest {
            session: uid.into(),
            inputs: vec![pb::Message::from(Message::text_message("user", text))],
            ..pb::ExecRequest::default()
        }))
        .await
        .unwrap()
        .into_inner();
    while let Some(update) = stream.next().await {
        update.unwrap();
    }
}

async fn watch(service: &SessionsService, uid: &str, from: i64) -> WatchStream {
    service
        .watch(Request::new(pb::WatchRequest {
            session: uid.into(),
            from_seq: from,
        }))
        .await
        .unwrap()
        .into_inner()
}

/// The next record of `stream`, which must come.
async fn next(stream: &mut WatchStream) -> pb::LogRecord {
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("no record came")
        .expect("the stream ended")
        .unwrap()
}

/// Reads records up to and including `last`.
async fn read_to(stream: &mut WatchStream, last: i64) -> Vec<i64> {
    let mut seqs = Vec::new();
    while seqs.last().copied().unwrap_or(0) < last {
        seqs.push(next(stream).await.seq);
    }
    seqs
}

fn is_delete(record: &pb::LogRecord) -> bool {
    matches!(
        record.event.as_ref().and_then(|e| e.body.as_ref()),
        Some(pb::event::Body::Lifecycle(l)) if l.kind == pb::lifecycle::Kind::LifecycleDelete as i32
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_from_a_seq_then_each_commit_and_ends_after_the_delete() {
    let journal = Arc::new(MemoryJournal::new());
    let service = service(Arc::clone(&journal));
    let uid = create(&service, "echo").await;
    turn(&service, &uid, "one").await;
    let first_head = journal.head(&uid).await.unwrap();
    assert!(first_head >= 3, "{first_head}");

    let mut stream = watch(&service, &uid, 2).await;
    assert_eq!(
        read_to(&mut stream, first_head).await,
        (2..=first_head).collect::<Vec<_>>()
    );
    // Nothing more until something commits.
    let quiet = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(quiet.is_err(), "{quiet:?}");

    turn(&service, &uid, "two").await;
    let second_head = journal.head(&uid).await.unwrap();
    let live = read_to(&mut stream, second_head).await;
    assert_eq!(live, (first_head + 1..=second_head).collect::<Vec<_>>());
    // The records are the journal's, verbatim.
    let stored = journal.read(&uid, first_head + 1, 0).await.unwrap();
    assert_eq!(live.len(), stored.len());

    service
        .delete_session(Request::new(pb::DeleteSessionRequest { uid: uid.clone() }))
        .await
        .unwrap();
    let last = next(&mut stream).await;
    assert!(is_delete(&last), "{last:?}");
    assert_eq!(last.seq, journal.head(&uid).await.unwrap());
    let end = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("the stream did not end after the delete record");
    assert!(end.is_none(), "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_streams_what_is_left_and_ends() {
    let journal = Arc::new(MemoryJournal::new());
    let service = service(Arc::clone(&journal));
    let uid = create(&service, "echo").await;
    turn(&service, &uid, "one").await;
    service
        .delete_session(Request::new(pb::DeleteSessionRequest { uid: uid.clone() }))
        .await
        .unwrap();
    let head = journal.head(&uid).await.unwrap();
    let all: Vec<pb::LogRecord> = watch(&service, &uid, 0)
        .await
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(all.len(), usize::try_from(head).unwrap());
    assert!(is_delete(all.last().unwrap()));
    let past: Vec<_> = watch(&service, &uid, head + 1).await.collect().await;
    assert!(past.is_empty(), "{past:?}");
}

#[tokio::test]
async fn unknown_and_malformed_watches_get_the_table_code() {
    let service = service(Arc::new(MemoryJournal::new()));
    let unknown = service
        .watch(Request::new(pb::WatchRequest {
            session: "s-nobody".into(),
            from_seq: 1,
        }))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    let empty = service
        .watch(Request::new(pb::WatchRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument, "{empty:?}");
}

/// Items `stream` has ready now, taken without letting the server run again.
fn held<S: Stream + Unpin>(stream: &mut S) -> Vec<S::Item> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut items = Vec::new();
    while let Poll::Ready(Some(item)) = Pin::new(&mut *stream).poll_next(&mut cx) {
        items.push(item);
    }
    items
}

// A watcher that does not read costs the server one stream's capacity, however much commits;
// when it reads again it gets every record, in order.
#[tokio::test(start_paused = true)]
async fn a_slow_watcher_holds_a_bounded_stream_and_misses_nothing() {
    let journal = Arc::new(MemoryJournal::new());
    let service = service(Arc::clone(&journal));
    let uid = create(&service, "chatty").await;
    let mut stream = watch(&service, &uid, 1).await;
    turn(&service, &uid, "go").await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let head = journal.head(&uid).await.unwrap();
    assert!(head > i64::try_from(OUTPUTS).unwrap(), "{head}");
    let first = held(&mut stream);
    assert!(
        first.len() <= STREAM_CAPACITY,
        "the server held {} records for a watcher that did not read",
        first.len()
    );
    let mut seqs: Vec<i64> = first.into_iter().map(|r| r.unwrap().seq).collect();
    while seqs.last().copied().unwrap_or(0) < head {
        seqs.push(stream.next().await.unwrap().unwrap().seq);
    }
    assert_eq!(seqs, (1..=head).collect::<Vec<_>>());
}

// A server that stops ends a watch with UNAVAILABLE (not OK, which means "deleted").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_a_watch_with_unavailable() {
    let service = service(Arc::new(MemoryJournal::new()));
    let uid = create(&service, "echo").await;
    let mut stream = watch(&service, &uid, 1).await;
    tokio::time::timeout(Duration::from_secs(20), service.shutdown())
        .await
        .expect("shutdown waited for the watch");
    let status = stream.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(stream.next().await.is_none());
}
