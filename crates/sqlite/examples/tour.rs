//! A tour of the journal on the embedded defaults: records one agent turn in
//! `./agentsessions.db` (created if missing), reads it back, verifies the hash chain, and prints
//! every record with its hash so any other implementation can check them.
//!
//! `cargo run --release -p agentsessions-sqlite --example tour [PATH]`
#![allow(clippy::print_stdout)]

use agentsessions_api::{
    Event, EventBody, EventKind, ExecutionStart, HarnessEnd, Message, ModelCall, ModelRequest,
};
use agentsessions_journal::rules::{new_execution_id, new_session_uid};
use agentsessions_journal::{AppendRequest, FenceUse, LogExt as _};
use agentsessions_journal::{Catalog as _, Log as _};
use agentsessions_journal::{SessionRow, verify_raw};
use agentsessions_sqlite::SqliteJournal;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "agentsessions.db".to_owned());
    let journal = SqliteJournal::open(&path)?;
    let session = new_session_uid();
    journal
        .put_session(SessionRow {
            uid: session.clone(),
            name: "tour".into(),
            harness: "echo".into(),
            model: "echo".into(),
            ..SessionRow::default()
        })
        .await?;
    let fence = journal.new_fence(&session).await?;
    let exec = new_execution_id();
    let request = ModelRequest {
        model: "echo".into(),
        messages: vec![Message::text_message("user", "hello")],
        ..ModelRequest::default()
    };
    let turn = vec![
        Event::new(
            EventKind::ExecutionStart,
            EventBody::ExecutionStart(ExecutionStart {
                input_count: Some(1),
                harness: "echo".into(),
                harness_version: "1".into(),
                ..ExecutionStart::default()
            }),
        ),
        Event::new(
            EventKind::Input,
            EventBody::Message(Message::text_message("user", "hello")),
        ),
        Event::new(
            EventKind::ModelCall,
            EventBody::ModelCall(ModelCall {
                model: "echo".into(),
                input_hash: agentsessions_wire::model_input_hash(&request),
                id: new_execution_id(),
                ..ModelCall::default()
            }),
        ),
        Event::new(
            EventKind::Output,
            EventBody::Message(Message::text_message("assistant", "echo:hello")),
        ),
        Event::new(
            EventKind::End,
            EventBody::End(HarnessEnd {
                state: "COMPLETED".into(),
                error: None,
            }),
        ),
    ];
    let turn: Vec<Event> = turn.into_iter().map(|e| e.with_execution(&exec)).collect();
    println!("journal {path}: session {session}, fence {fence}, execution {exec}");
    let records = journal
        .append_records(AppendRequest::new(&session, 0, FenceUse::Hold(fence), turn))
        .await?;
    for r in &records {
        println!(
            "  seq {:>2}  {:<16} hash {}  prev {}",
            r.seq,
            r.event.kind.as_str(),
            r.hash,
            if r.prev_hash.is_empty() {
                "\"\""
            } else {
                &r.prev_hash[..16]
            }
        );
    }
    let summary = verify_raw(&journal.read_raw(&session).await?)?;
    println!(
        "verified {} records from storage; head hash {}",
        summary.records, summary.head_hash
    );
    let info = journal.session_info(&session).await?;
    println!(
        "session {}: last_seq {}, compute {}",
        info.row.uid,
        info.last_seq,
        info.compute_state.as_str()
    );
    Ok(())
}
