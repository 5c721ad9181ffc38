//! The hub against a real third-party MCP server from a package registry: `mcp-server-time`
//! (PyPI), run as `python3 -m mcp_server_time`. `.ci/run` installs it and sets
//! `AGENTSESSIONS_REQUIRE_MCP_FIXTURES=1`, under which a missing server fails this test; without
//! that variable a missing server skips it with a note.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::time::Duration;

use agentsessions_api::{Mediation, Part, ToolCall, ToolCatalog as _};
use agentsessions_controller::ToolExecutor as _;
use agentsessions_mcp::{McpHub, McpHubOptions, McpServerConfig, ServerStatus, ToolLedger};

fn time_server_installed() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import mcp_server_time"])
        .output()
        .is_ok_and(|out| out.status.success())
}

#[tokio::test]
async fn mcp_server_time_is_discovered_and_called() {
    if !time_server_installed() {
        assert!(
            std::env::var_os("AGENTSESSIONS_REQUIRE_MCP_FIXTURES").is_none(),
            "mcp-server-time is not installed (pip install mcp-server-time), and \
             AGENTSESSIONS_REQUIRE_MCP_FIXTURES requires it"
        );
        eprintln!("skipped: mcp-server-time is not installed (pip install mcp-server-time)");
        return;
    }
    let config = McpServerConfig {
        name: "time".into(),
        command: "python3".into(),
        args: vec![
            "-m".into(),
            "mcp_server_time".into(),
            "--local-timezone".into(),
            "UTC".into(),
        ],
        ..McpServerConfig::default()
    };
    let options = McpHubOptions {
        connect_timeout: Duration::from_secs(60),
        ..McpHubOptions::default()
    };
    let hub = McpHub::start(vec![config], ToolLedger::in_memory().unwrap(), options)
        .await
        .unwrap();
    assert_eq!(
        hub.health()[0].status,
        ServerStatus::Up,
        "{:?}",
        hub.health()
    );
    let names: Vec<String> = hub
        .offered()
        .into_iter()
        .map(|t| t.definition.name)
        .collect();
    assert!(
        names.iter().any(|n| n == "time__get_current_time"),
        "{names:?}"
    );
    let call = ToolCall {
        id: "c1".into(),
        tool: "time__get_current_time".into(),
        args: serde_json::json!({"timezone": "UTC"}).as_object().cloned(),
        mediation: Mediation::ControllerMediated,
        idempotency_key: "k1".into(),
    };
    let now = hub.execute("s1", &call).await.unwrap();
    assert!(!now.is_error, "{now:?}");
    let text: String = now
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    assert!(text.contains("UTC"), "{text}");
    hub.shutdown().await;
}
