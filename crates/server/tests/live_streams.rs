//! Exec and Watch are live (extensions §11): each record of a slow turn reaches both streams
//! within 100 ms of its commit time, the ones the turn appends without waiting for durability
//! (its OUTPUTs) included, not at the turn's end.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod fixtures;

use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{Descriptor, EventSink, Harness, Message, RuntimeCapabilities, Start};
use agentsessions_model::EchoModel;
use agentsessions_server::{ServerBuilder, SessionsService};
use agentsessions_sqlite::SqliteJournal;
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use agentsessions_wire::pb::sessions_server::Sessions;
use tokio_stream::StreamExt;
use tonic::Request;

use fixtures::{descriptor, uid_of};

/// Outputs a slow turn writes, one every [`EVERY`].
const OUTPUTS: usize = 12;
const EVERY: Duration = Duration::from_millis(100);
/// How late a record may reach a stream after its commit time: the bound the streams promise.
const BOUND: Duration = Duration::from_millis(100);

/// Writes an output every 100 ms and nothing else: every OUTPUT is a deferred append, so only
/// the END makes them durable through the turn itself.
#[derive(Debug)]
struct Slow;

#[async_trait::async_trait]
impl Harness for Slow {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Ok(descriptor("slow"))
    }

    async fn run(&self, _start: &Start, sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        for i in 0..OUTPUTS {
            tokio::time::sleep(EVERY).await;
            sink.output(format!("tick {i}")).await?;
        }
        Ok(())
    }
}

fn service(journal: Arc<SqliteJournal>) -> SessionsService {
    ServerBuilder::new(journal, Arc::new(EchoModel::new()))
        .harness("slow", Arc::new(Slow), RuntimeCapabilities::default())
        .default_harness("slow")
        .build()
        .unwrap()
}

/// How late `record` arrived (now) after its commit time.
fn lateness(record: &pb::LogRecord) -> Duration {
    let committed = record.commit_time.as_ref().unwrap();
    let committed = Duration::new(
        u64::try_from(committed.seconds).unwrap(),
        u32::try_from(committed.nanos).unwrap(),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    now.saturating_sub(committed)
}

fn kind(record: &pb::LogRecord) -> String {
    pb::EventKind::try_from(record.event.as_ref().unwrap().kind)
        .unwrap()
        .as_str_name()
        .to_owned()
}

// extensions §11: records stream at commit. A slow harness's records each reach the Exec
// stream, a Watch and a WatchUpdates of the session within 100 ms of their commit time; the
// EXECUTION_START (the execution id) comes at once, not with the END.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_record_of_a_slow_turn_reaches_exec_and_watch_within_100_ms_of_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(SqliteJournal::open(dir.path().join("journal.db")).unwrap());
    let service = service(journal);
    let created = service
        .create_session(Request::new(pb::CreateSessionRequest {
            session: Some(pb::Session {
                harness: "slow".into(),
                ..pb::Session::default()
            }),
        }))
        .await
        .unwrap()
        .into_inner();
    let uid = uid_of(&created);
    let watch_request = || {
        Request::new(pb::WatchRequest {
            session: uid.clone(),
            from_seq: 1,
        })
    };
    let mut watch = service.watch(watch_request()).await.unwrap().into_inner();
    let mut updates = service
        .watch_updates(watch_request())
        .await
        .unwrap()
        .into_inner();
    let watched = tokio::spawn(async move {
        let mut late = Vec::new();
        while let Some(record) = watch.next().await {
            let record = record.unwrap();
            late.push((record.seq, kind(&record), lateness(&record)));
            if kind(&record) == "EVENT_END" {
                break;
            }
        }
        late
    });
    let updated = tokio::spawn(async move {
        let mut late = Vec::new();
        while let Some(update) = updates.next().await {
            if let Some(pb::watch_update::Update::Record(record)) = update.unwrap().update {
                late.push((record.seq, kind(&record), lateness(&record)));
                if kind(&record) == "EVENT_END" {
                    break;
                }
            }
        }
        late
    });
    let mut exec = service
        .exec(Request::new(pb::ExecRequest {
            session: uid.clone(),
            inputs: vec![pb::Message::from(Message::text_message("user", "go"))],
            ..pb::ExecRequest::default()
        }))
        .await
        .unwrap()
        .into_inner();
    let mut exec_late = Vec::new();
    while let Some(frame) = exec.next().await {
        if let Some(Update::Record(record)) = frame.unwrap().update {
            exec_late.push((record.seq, kind(&record), lateness(&record)));
        }
    }
    let watch_late = tokio::time::timeout(Duration::from_secs(10), watched)
        .await
        .unwrap()
        .unwrap();
    let updates_late = tokio::time::timeout(Duration::from_secs(10), updated)
        .await
        .unwrap()
        .unwrap();
    for (stream, late) in [
        ("Exec", &exec_late),
        ("Watch", &watch_late),
        ("WatchUpdates", &updates_late),
    ] {
        // EXECUTION_START, INPUT, the outputs, END.
        assert_eq!(late.len(), OUTPUTS + 3, "{stream}: {late:?}");
        assert_eq!(late[0].1, "EVENT_EXECUTION_START", "{stream}: {late:?}");
        let seqs: Vec<i64> = late.iter().map(|(seq, ..)| *seq).collect();
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "{stream}: {seqs:?}"
        );
        for (seq, kind, lateness) in late {
            assert!(
                *lateness <= BOUND,
                "{stream}: record {seq} ({kind}) arrived {lateness:?} after its commit"
            );
        }
    }
}
