//! The tool executor learns which execution made each call, live and when a resume re-drives a
//! lost result (an executor acting for the turn, such as one attaching delegated tokens, needs
//! it).
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::sync::{Arc, Mutex};

use agentsessions_api::{Result as ApiResult, ToolCall, ToolResult};
use agentsessions_controller::{ExecRequest, ToolCallContext, ToolExecutor};
use async_trait::async_trait;
use support::*;

/// Remembers `(session, execution, call id)` of every call it gets through `execute_for`.
#[derive(Debug, Default)]
struct ContextRecorder {
    seen: Mutex<Vec<(String, String, String)>>,
}

impl ContextRecorder {
    fn seen(&self) -> Vec<(String, String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl ToolExecutor for ContextRecorder {
    async fn execute(&self, _session: &str, _call: &ToolCall) -> ApiResult<ToolResult> {
        panic!("the controller calls execute_for, which this executor overrides")
    }

    async fn execute_for(
        &self,
        call_context: &ToolCallContext<'_>,
        call: &ToolCall,
    ) -> ApiResult<ToolResult> {
        self.seen.lock().unwrap().push((
            call_context.session_uid.to_owned(),
            call_context.execution_id.to_owned(),
            call.id.clone(),
        ));
        Ok(ToolResult::default())
    }
}

fn exec(text: &str) -> ExecRequest {
    ExecRequest {
        inputs: vec![user(text)],
        ..ExecRequest::default()
    }
}

// semantics §2.5: a controller-mediated call runs for its execution; the executor sees the same
// execution id the journal stamps on the turn, on the live run and on the resume that re-drives it.
#[tokio::test]
async fn the_executor_sees_the_execution_that_made_the_call() {
    let tools = Arc::new(ContextRecorder::default());
    let harness = || {
        Arc::new(ScriptHarness::new(vec![Step::Tool(mediated_call(
            "t1", "k1",
        ))]))
    };
    let journal = memory();
    controller(&journal, harness(), Arc::new(CountModel::default()))
        .with_tools(tools.clone())
        .exec(exec("go"))
        .await
        .unwrap();
    let records = read(&journal).await;
    let execution = records[0].event.execution_id.clone();
    assert!(!execution.is_empty());
    assert_eq!(
        tools.seen(),
        [("s".to_owned(), execution.clone(), "t1".to_owned())]
    );

    let crashed = truncated(&journal, 4).await; // keep the intent, lose the result
    let resumed = controller(&crashed, harness(), Arc::new(CountModel::default()))
        .with_tools(tools.clone())
        .resume()
        .await
        .unwrap();
    assert!(resumed.resumed);
    let seen = tools.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1], ("s".to_owned(), execution, "t1".to_owned()));
}
