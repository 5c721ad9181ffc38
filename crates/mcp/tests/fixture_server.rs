//! The hub against real MCP server processes: the crate's fixture server over stdio.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentsessions_api::{Mediation, Part, ToolCall, ToolCatalog as _, ToolResult};
use agentsessions_controller::ToolExecutor as _;
use agentsessions_mcp::{
    ApprovalRule, Claim, McpHub, McpHubOptions, McpServerConfig, ServerStatus, ToolLedger,
};

fn fixture(name: &str, count_file: &Path) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        command: env!("CARGO_BIN_EXE_mcp-fixture-server").to_owned(),
        env: [(
            "MCP_FIXTURE_COUNT_FILE".to_owned(),
            count_file.display().to_string(),
        )]
        .into(),
        ..McpServerConfig::default()
    }
}

fn fast() -> McpHubOptions {
    McpHubOptions {
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        connect_timeout: Duration::from_secs(20),
    }
}

fn call(tool: &str, key: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        id: format!("call-{key}"),
        tool: tool.to_owned(),
        args: args.as_object().cloned(),
        mediation: Mediation::ControllerMediated,
        idempotency_key: key.to_owned(),
    }
}

fn count(file: &Path) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

fn text(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

struct Setup {
    _dir: tempfile::TempDir,
    count_file: PathBuf,
    ledger_path: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    Setup {
        count_file: dir.path().join("count"),
        ledger_path: dir.path().join("tools.db"),
        _dir: dir,
    }
}

async fn wait_until(hub: &McpHub, what: &str, ok: impl Fn(&ServerStatus) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if hub.health().iter().all(|h| ok(&h.status)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {what}: {:?}",
            hub.health()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn discovers_tools_with_server_prefixed_names_and_approval_mediations() {
    let s = setup();
    let mut first = fixture("one", &s.count_file);
    first.approval = ApprovalRule::Tools(vec!["crash".into()]);
    let mut second = fixture("two", &s.count_file);
    second.approval = toml::from_str::<McpServerConfig>("approval = \"always\"")
        .unwrap()
        .approval;
    let hub = McpHub::start(
        vec![first, second],
        ToolLedger::in_memory().unwrap(),
        fast(),
    )
    .await
    .unwrap();
    let offered = hub.offered();
    let names: Vec<&str> = offered.iter().map(|t| t.definition.name.as_str()).collect();
    // Both servers offer `add`; the prefix keeps them apart.
    assert!(
        names.contains(&"one__add") && names.contains(&"two__add"),
        "{names:?}"
    );
    let mediation = |name: &str| {
        offered
            .iter()
            .find(|t| t.definition.name == name)
            .unwrap()
            .mediation
    };
    assert_eq!(mediation("one__add"), Mediation::ControllerMediated);
    assert_eq!(mediation("one__crash"), Mediation::RequiresApproval);
    assert_eq!(mediation("two__add"), Mediation::RequiresApproval);
    let add = offered
        .iter()
        .find(|t| t.definition.name == "one__add")
        .unwrap();
    assert_eq!(add.definition.description, "Adds a and b");
    assert!(
        add.definition
            .input_schema
            .as_ref()
            .unwrap()
            .contains_key("properties")
    );
    assert!(
        hub.health()
            .iter()
            .all(|h| h.status == ServerStatus::Up && h.tools == 11)
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn a_list_changed_notification_refreshes_the_catalog() {
    let s = setup();
    let hub = McpHub::start(
        vec![fixture("fx", &s.count_file)],
        ToolLedger::in_memory().unwrap(),
        fast(),
    )
    .await
    .unwrap();
    assert!(
        !hub.offered()
            .iter()
            .any(|t| t.definition.name == "fx__extra")
    );
    let grown = hub
        .execute("s1", &call("fx__grow", "k1", serde_json::json!({})))
        .await
        .unwrap();
    assert!(!grown.is_error, "{grown:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !hub
        .offered()
        .iter()
        .any(|t| t.definition.name == "fx__extra")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the catalog never saw `extra`"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let extra = hub
        .execute("s1", &call("fx__extra", "k2", serde_json::json!({})))
        .await
        .unwrap();
    assert_eq!(text(&extra), "extra");
    hub.shutdown().await;
}

#[tokio::test]
async fn calls_map_structured_content_errors_and_unknown_tools() {
    let s = setup();
    let hub = McpHub::start(
        vec![fixture("fx", &s.count_file)],
        ToolLedger::in_memory().unwrap(),
        fast(),
    )
    .await
    .unwrap();
    let sum = hub
        .execute(
            "s1",
            &call("fx__add", "k1", serde_json::json!({"a": 2, "b": 3})),
        )
        .await
        .unwrap();
    assert!(!sum.is_error);
    assert_eq!(sum.output.as_ref().unwrap()["sum"], 5.0);
    assert_eq!(text(&sum), "5");
    let failed = hub
        .execute("s1", &call("fx__fail", "k2", serde_json::json!({})))
        .await
        .unwrap();
    assert!(failed.is_error);
    assert_eq!(failed.error, "the fixture failed on purpose");
    for unknown in ["fx__nope", "nobody__add", "add"] {
        let refused = hub
            .execute("s1", &call(unknown, unknown, serde_json::json!({})))
            .await
            .unwrap();
        assert!(
            refused.is_error && refused.error.contains("unknown tool"),
            "{refused:?}"
        );
    }
    hub.shutdown().await;
}

#[tokio::test]
async fn a_call_past_its_tool_timeout_is_an_error_result() {
    let s = setup();
    let mut config = fixture("fx", &s.count_file);
    config.tool_timeouts.insert("sleep".into(), 1);
    let hub = McpHub::start(vec![config], ToolLedger::in_memory().unwrap(), fast())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let slow = hub
        .execute(
            "s1",
            &call("fx__sleep", "k1", serde_json::json!({"ms": 10_000})),
        )
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        slow.is_error && slow.error.contains("timed out after 1s"),
        "{slow:?}"
    );
    // The server keeps serving.
    let quick = hub
        .execute("s1", &call("fx__add", "k2", serde_json::json!({"a": 1})))
        .await
        .unwrap();
    assert!(!quick.is_error);
    hub.shutdown().await;
}

#[tokio::test]
async fn a_crashed_server_is_reported_refused_and_restarted() {
    let s = setup();
    let hub = McpHub::start(
        vec![fixture("fx", &s.count_file)],
        ToolLedger::in_memory().unwrap(),
        fast(),
    )
    .await
    .unwrap();
    let crashed = hub
        .execute("s1", &call("fx__crash", "k1", serde_json::json!({})))
        .await
        .unwrap();
    assert!(
        crashed.is_error && crashed.error.contains("outcome is unknown"),
        "{crashed:?}"
    );
    wait_until(&hub, "reported down", |s| {
        matches!(s, ServerStatus::Down { .. })
    })
    .await;
    let health = hub.health();
    assert!(health[0].failures >= 1);
    wait_until(&hub, "restarted", |s| *s == ServerStatus::Up).await;
    let counted = hub
        .execute("s1", &call("fx__count", "k2", serde_json::json!({})))
        .await
        .unwrap();
    assert_eq!(text(&counted), "1", "{counted:?}");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_is_down_and_its_tools_are_refused() {
    let s = setup();
    let mut broken = fixture("broken", &s.count_file);
    broken.command = "/nonexistent/mcp-server".into();
    let hub = McpHub::start(
        vec![broken, fixture("fx", &s.count_file)],
        ToolLedger::open(&s.ledger_path).unwrap(),
        fast(),
    )
    .await
    .unwrap();
    let health = hub.health();
    assert!(
        matches!(&health[0].status, ServerStatus::Down { reason } if reason.contains("cannot start")),
        "{health:?}"
    );
    assert_eq!(health[1].status, ServerStatus::Up);
    let refused = hub
        .execute("s1", &call("broken__add", "k1", serde_json::json!({})))
        .await
        .unwrap();
    assert!(
        refused.is_error && refused.error.contains("unavailable"),
        "{refused:?}"
    );
    // Nothing was sent, so a later retry with the same key may run.
    let ledger = ToolLedger::open(&s.ledger_path).unwrap();
    assert_eq!(
        ledger.claim("s1", "k1", "broken__add").await.unwrap(),
        Claim::Fresh
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn garbage_on_stdout_is_a_clear_error_and_the_hub_keeps_serving() {
    let s = setup();
    let mut config = fixture("fx", &s.count_file);
    config.tool_timeouts.insert("garbage".into(), 1);
    let hub = McpHub::start(vec![config], ToolLedger::in_memory().unwrap(), fast())
        .await
        .unwrap();
    let garbage = hub
        .execute("s1", &call("fx__garbage", "k1", serde_json::json!({})))
        .await
        .unwrap();
    // The bad line is skipped; the answer that never comes is a timeout, not a hang.
    assert!(
        garbage.is_error && garbage.error.contains("timed out after 1s"),
        "{garbage:?}"
    );
    assert_eq!(hub.health()[0].status, ServerStatus::Up);
    let sum = hub
        .execute(
            "s1",
            &call("fx__add", "k2", serde_json::json!({"a": 1, "b": 1})),
        )
        .await
        .unwrap();
    assert!(!sum.is_error, "{sum:?}");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_redriven_call_with_a_stored_result_is_not_called_again() {
    // semantics §3.7: the executor deduplicates durably on (session_uid, idempotency_key)
    let s = setup();
    let ledger = ToolLedger::open(&s.ledger_path).unwrap();
    let hub = McpHub::start(vec![fixture("fx", &s.count_file)], ledger, fast())
        .await
        .unwrap();
    let first = hub
        .execute("s1", &call("fx__count", "k1", serde_json::json!({})))
        .await
        .unwrap();
    assert_eq!(text(&first), "1");
    hub.shutdown().await;
    drop(hub);
    // A restarted host with the same ledger file.
    let hub = McpHub::start(
        vec![fixture("fx", &s.count_file)],
        ToolLedger::open(&s.ledger_path).unwrap(),
        fast(),
    )
    .await
    .unwrap();
    let again = hub
        .execute("s1", &call("fx__count", "k1", serde_json::json!({})))
        .await
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(count(&s.count_file), 1);
    // Another session's key is its own namespace.
    let other = hub
        .execute("s2", &call("fx__count", "k1", serde_json::json!({})))
        .await
        .unwrap();
    assert_eq!(text(&other), "2");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_call_sent_before_a_crash_is_reported_unknown_and_not_sent_again() {
    // semantics §3.7: "sent" without a result means the tool may have run: never re-send
    let s = setup();
    let ledger = ToolLedger::open(&s.ledger_path).unwrap();
    assert_eq!(
        ledger.claim("s1", "k1", "fx__count").await.unwrap(),
        Claim::Fresh
    );
    drop(ledger);
    let hub = McpHub::start(
        vec![fixture("fx", &s.count_file)],
        ToolLedger::open(&s.ledger_path).unwrap(),
        fast(),
    )
    .await
    .unwrap();
    let redriven = hub
        .execute("s1", &call("fx__count", "k1", serde_json::json!({})))
        .await
        .unwrap();
    assert!(redriven.is_error, "{redriven:?}");
    assert!(
        redriven.error.contains("outcome is unknown"),
        "{redriven:?}"
    );
    assert_eq!(count(&s.count_file), 0);
    hub.shutdown().await;
}

/// Collects the progress a hub reports.
#[derive(Default)]
struct Collected(std::sync::Mutex<Vec<agentsessions_controller::ToolProgress>>);

impl agentsessions_controller::ProgressSink for Collected {
    fn progress(&self, progress: agentsessions_controller::ToolProgress) {
        self.0.lock().unwrap().push(progress);
    }
}

// extensions §11: a call's notifications/progress are reported with the session, execution and
// call they belong to, in order, while the call runs; the result is the tool's as before.
#[tokio::test]
async fn a_calls_progress_is_reported_with_its_session_execution_and_call() {
    let s = setup();
    let hub = McpHub::start(
        vec![fixture("fx", &s.count_file)],
        ToolLedger::in_memory().unwrap(),
        fast(),
    )
    .await
    .unwrap();
    let collected = std::sync::Arc::new(Collected::default());
    hub.report_progress(collected.clone());
    let result = hub
        .execute_for(
            &agentsessions_controller::ToolCallContext::new("s1", "e1"),
            &call(
                "fx__slow",
                "k1",
                serde_json::json!({"steps": 3, "step_ms": 20}),
            ),
        )
        .await
        .unwrap();
    assert!(!result.is_error, "{result:?}");
    let reports = collected.0.lock().unwrap().clone();
    let steps: Vec<(f64, Option<f64>, String)> = reports
        .iter()
        .map(|p| (p.progress, p.total, p.message.clone()))
        .collect();
    assert_eq!(
        steps,
        [
            (1.0, Some(3.0), "step 1".to_owned()),
            (2.0, Some(3.0), "step 2".to_owned()),
            (3.0, Some(3.0), "step 3".to_owned()),
        ]
    );
    for report in &reports {
        assert_eq!(report.session_uid, "s1");
        assert_eq!(report.execution_id, "e1");
        assert_eq!(report.tool_call_id, "call-k1");
        assert_eq!(report.tool, "fx__slow");
    }
    hub.shutdown().await;
}
