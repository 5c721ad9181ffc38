//! A model answer's usage is journaled with the answer, in the same append (semantics §2.5), so
//! no crash can keep one without the other: it costs an echo-shaped turn no extra sync, a harness
//! reporting that usage adds no second record, a harness that never reports it still has it
//! journaled, and replay reproduces every one of these byte for byte with no model call.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentsessions_api::{
    DeltaSink, EventBody, Message, ModelProvider, ModelRequest, ModelResponse, Result as ApiResult,
    Usage,
};
use agentsessions_controller::ExecRequest;
use agentsessions_journal::Journal;
use agentsessions_sqlite::{Durability, SqliteJournal, SqliteOptions};
use async_trait::async_trait;
use support::*;

/// A model whose every answer counts tokens.
#[derive(Debug, Default)]
struct TokenModel {
    calls: AtomicU64,
}

fn counted() -> Usage {
    Usage {
        model: "tokens".into(),
        input_tokens: 4,
        output_tokens: 2,
        ..Usage::default()
    }
}

#[async_trait]
impl ModelProvider for TokenModel {
    fn name(&self) -> &str {
        "test-tokens"
    }

    fn default_model(&self) -> &str {
        "tokens"
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: Option<&dyn DeltaSink>,
    ) -> ApiResult<ModelResponse> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let last = request
            .messages
            .last()
            .map(Message::text)
            .unwrap_or_default();
        Ok(ModelResponse {
            message: Message::text_message("assistant", format!("answer to {last}")),
            usage: counted(),
        })
    }
}

fn exec(text: &str) -> ExecRequest {
    ExecRequest {
        inputs: vec![user(text)],
        ..ExecRequest::default()
    }
}

fn usages(records: &[agentsessions_journal::LogRecord]) -> Vec<Usage> {
    records
        .iter()
        .filter_map(|r| match &r.event.body {
            Some(EventBody::Usage(usage)) => Some(usage.clone()),
            _ => None,
        })
        .collect()
}

// semantics §2.5: answer and usage in one append; the echo-shaped turn still waits for two syncs
// (MODEL_CALL and END), and OUTPUT and USAGE committed in the same transaction.
#[tokio::test]
async fn an_answer_and_its_usage_commit_together_at_no_extra_sync() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        durability: Durability::Pipelined,
        deferred_sync_delay: Duration::from_secs(60),
        ..SqliteOptions::default()
    };
    let sqlite = Arc::new(SqliteJournal::open_with(dir.path().join("j.db"), options).unwrap());
    let journal: Arc<dyn Journal> = sqlite.clone();
    let c = controller(
        &journal,
        Arc::new(EchoHarness::default()),
        Arc::new(TokenModel::default()),
    );
    let before = sqlite.wal_syncs();
    c.exec(exec("hi")).await.unwrap();
    assert_eq!(sqlite.wal_syncs() - before, 2, "MODEL_CALL and END only");
    let records = read(&journal).await;
    assert_eq!(
        kinds(&records),
        [
            "EXECUTION_START",
            "INPUT",
            "MODEL_CALL",
            "OUTPUT",
            "USAGE",
            "END"
        ]
    );
    assert_eq!(
        records[3].committed_at, records[4].committed_at,
        "one transaction"
    );
    assert_eq!(usages(&records), [counted()]);
}

// A harness that reports the usage it was handed adds no second record; one that never reports
// it (as a harness SDK dropping it would) still has it journaled; replay of both makes no model
// call and reproduces every effect.
#[tokio::test]
async fn a_reported_usage_is_not_journaled_twice_and_an_unreported_one_is_not_lost() {
    for (steps, label) in [
        (
            vec![
                Step::Model("a".into()),
                Step::Usage(counted()),
                Step::Model("b".into()),
                Step::Usage(counted()),
            ],
            "reported",
        ),
        (
            vec![Step::Model("a".into()), Step::Model("b".into())],
            "never reported",
        ),
    ] {
        let journal = memory();
        let model = Arc::new(TokenModel::default());
        let c = controller(
            &journal,
            Arc::new(ScriptHarness::new(steps.clone())),
            model.clone(),
        );
        c.exec(exec("go")).await.unwrap();
        let records = read(&journal).await;
        assert_eq!(
            kinds(&records),
            [
                "EXECUTION_START",
                "INPUT",
                "MODEL_CALL",
                "OUTPUT",
                "USAGE",
                "MODEL_CALL",
                "OUTPUT",
                "USAGE",
                "END"
            ],
            "{label}"
        );
        assert_eq!(usages(&records), [counted(), counted()], "{label}");

        let replay_model = Arc::new(TokenModel::default());
        let r = controller(
            &journal,
            Arc::new(ScriptHarness::new(steps)),
            replay_model.clone(),
        );
        let report = r.replay().await.unwrap();
        assert_eq!(replay_model.calls.load(Ordering::SeqCst), 0, "{label}");
        assert_eq!(report.effects, 6, "{label}");
        assert_eq!(report.reproduced, report.effects, "{label}");
        assert_eq!(
            read(&journal).await,
            records,
            "{label}: replay writes nothing"
        );
    }
}

// A harness reporting a usage of its own (not its answer's) gets it journaled as before.
#[tokio::test]
async fn a_usage_the_harness_counts_itself_is_journaled_apart() {
    let journal = memory();
    let own = Usage {
        model: "local".into(),
        output_tokens: 9,
        ..Usage::default()
    };
    let c = controller(
        &journal,
        Arc::new(ScriptHarness::new(vec![
            Step::Model("a".into()),
            Step::Usage(own.clone()),
        ])),
        Arc::new(TokenModel::default()),
    );
    c.exec(exec("go")).await.unwrap();
    assert_eq!(usages(&read(&journal).await), [counted(), own]);
}
