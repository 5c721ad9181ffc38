//! The hub over streamable HTTP: an rmcp server on 127.0.0.1:0 that requires a header whose
//! value the hub's configuration names by environment variable.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{Mediation, Part, ToolCall, ToolCatalog as _};
use agentsessions_controller::ToolExecutor as _;
use agentsessions_mcp::{McpHub, McpHubOptions, McpServerConfig, ServerStatus, ToolLedger};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};

/// Cargo sets this for every test process, so the test needs no `set_var` (unsafe in 2024).
const KEY_VARIABLE: &str = "CARGO_PKG_NAME";
const KEY: &str = env!("CARGO_PKG_NAME");

#[derive(Debug, Clone)]
struct Ping;

impl ServerHandler for Ping {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = serde_json::json!({"type": "object"});
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "ping",
            "Answers pong",
            schema.as_object().cloned().unwrap_or_default(),
        )]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text("pong"),
        ])))
    }
}

async fn require_key(request: Request, next: Next) -> Result<Response, StatusCode> {
    match request.headers().get("x-api-key") {
        Some(value) if value.as_bytes() == KEY.as_bytes() => Ok(next.run(request).await),
        _ => Err(StatusCode::UNAUTHORIZED),
    }
}

fn web(name: &str, url: &str, variable: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        url: url.to_owned(),
        headers_from_env: [("x-api-key".to_owned(), variable.to_owned())].into(),
        ..McpServerConfig::default()
    }
}

#[tokio::test]
async fn a_streamable_http_server_gets_its_header_from_the_environment_and_is_reconnected() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app()).await });

    let options = McpHubOptions {
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
        connect_timeout: Duration::from_secs(10),
    };
    let hub = McpHub::start(
        vec![
            web("web", &url, KEY_VARIABLE),
            web("nokey", &url, "AGENTSESSIONS_MCP_TEST_UNSET_VARIABLE"),
        ],
        ToolLedger::in_memory().unwrap(),
        options,
    )
    .await
    .unwrap();
    let health = hub.health();
    assert_eq!(health[0].status, ServerStatus::Up, "{health:?}");
    assert!(
        matches!(&health[1].status, ServerStatus::Down { reason }
            if reason.contains("AGENTSESSIONS_MCP_TEST_UNSET_VARIABLE is not set")),
        "{health:?}"
    );
    let offered = hub.offered();
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0].definition.name, "web__ping");
    assert_eq!(offered[0].mediation, Mediation::ControllerMediated);
    let call = ToolCall {
        id: "c1".into(),
        tool: "web__ping".into(),
        idempotency_key: "k1".into(),
        mediation: Mediation::ControllerMediated,
        ..ToolCall::default()
    };
    let pong = hub.execute("s1", &call).await.unwrap();
    assert!(!pong.is_error, "{pong:?}");
    assert!(matches!(&pong.content[..], [Part::Text(t)] if t.text == "pong"));
    // semantics: a server that goes away is reported down and reconnected once it is back.
    let address = server_address(&url);
    server.abort();
    let _stopped = server.await;
    let lost = hub
        .execute(
            "s1",
            &ToolCall {
                idempotency_key: "k2".into(),
                ..call.clone()
            },
        )
        .await
        .unwrap();
    assert!(lost.is_error, "{lost:?}");
    wait_for(&hub, |s| matches!(s, ServerStatus::Down { .. })).await;
    let listener = tokio::net::TcpListener::bind(address).await.unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app()).await });
    wait_for(&hub, |s| *s == ServerStatus::Up).await;
    let again = hub
        .execute(
            "s1",
            &ToolCall {
                idempotency_key: "k3".into(),
                ..call
            },
        )
        .await
        .unwrap();
    assert!(!again.is_error, "{again:?}");
    hub.shutdown().await;
    server.abort();
}

fn server_address(url: &str) -> String {
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned()
}

async fn wait_for(hub: &McpHub, ok: impl Fn(&ServerStatus) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !ok(&hub.health()[0].status) {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", hub.health());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn app() -> axum::Router {
    let service = StreamableHttpService::new(
        || Ok(Ping),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(require_key))
}
