//! The recording host sink (shared, from the harnesses crate) and a start frame.

use agentsessions_api::{Message, Start};

pub(crate) use agentsessions_harnesses::testsink::RecordingSink;

pub(crate) fn start(session: &str, text: &str) -> Start {
    Start {
        execution_id: format!("exec-{session}"),
        session_uid: session.to_owned(),
        inputs: vec![Message::text_message("user", text)],
        ..Start::default()
    }
}
