//! Delegated tokens over streamable HTTP: an rmcp server on 127.0.0.1:0 records the
//! `Authorization` header of every request, and the tool call each `tools/call` was for; the hub
//! mints with a real ES256 issuer, and the test verifies each token as the audience would, with
//! the issuer's JWKS.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::assertions_on_result_states
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentsessions_api::{
    ApiError, AuthorizationRequest, Authorizer, CallerIdentity, IdentityRef, Mediation, StatusCode,
    ToolCall,
};
use agentsessions_auth::{
    DelegatedTokens, PrincipalSource, SessionPrincipal, SessionTokens, SigningKey, TokenIssuer,
};
use agentsessions_controller::{ToolCallContext, ToolExecutor as _};
use agentsessions_mcp::{
    Claim, DelegatedTokenConfig, McpError, McpHub, McpHubOptions, McpServerConfig, ServerStatus,
    ToolLedger,
};
use async_trait::async_trait;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Validation};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

const HOST: &str = "https://agents.test";
const AUDIENCE: &str = "https://tools.test/mcp";
const KID: &str = "mint-1";

/// What the server saw: per `tools/call`, the `call` argument and the `Authorization` header;
/// per HTTP request, its `Authorization` header (if any).
#[derive(Debug, Default)]
struct Seen {
    calls: Mutex<Vec<(String, Option<String>)>>,
    requests: Mutex<Vec<Option<String>>>,
}

impl Seen {
    fn calls(&self) -> Vec<(String, Option<String>)> {
        self.calls.lock().unwrap().clone()
    }

    fn authorized_requests(&self) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|auth| auth.is_some())
            .count()
    }
}

#[derive(Debug, Clone)]
struct Recorder {
    seen: Arc<Seen>,
}

impl ServerHandler for Recorder {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object"});
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "whoami",
            "Records who called",
            schema.as_object().cloned().unwrap_or_default(),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let auth = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("authorization"))
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let call = request
            .arguments
            .as_ref()
            .and_then(|args| args.get("call"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // Concurrent calls overlap on the connection: each must still carry its own token.
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.seen.calls.lock().unwrap().push((call, auth));
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text("ok"),
        ])))
    }
}

async fn record_authorization(
    State(seen): State<Arc<Seen>>,
    request: Request,
    next: Next,
) -> Response {
    let auth = request
        .headers()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    seen.requests.lock().unwrap().push(auth);
    next.run(request).await
}

async fn serve(seen: Arc<Seen>) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let handler = Recorder {
        seen: Arc::clone(&seen),
    };
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service).layer(
        axum::middleware::from_fn_with_state(seen, record_authorization),
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    (url, server)
}

fn alice() -> CallerIdentity {
    CallerIdentity::new("https://idp.test", "alice")
}

/// Session `s1` is owned by alice, through the agent principal `agent://triage`.
struct Principals;

#[async_trait]
impl PrincipalSource for Principals {
    async fn principal(&self, session_uid: &str) -> agentsessions_api::Result<SessionPrincipal> {
        if session_uid != "s1" {
            return Err(ApiError::status(StatusCode::NotFound, "no such session"));
        }
        Ok(SessionPrincipal {
            owner: alice(),
            agent: IdentityRef {
                principal: "agent://triage".to_owned(),
                ..IdentityRef::default()
            },
        })
    }
}

struct DenyAll;

#[async_trait]
impl Authorizer for DenyAll {
    async fn authorize(&self, _request: &AuthorizationRequest) -> agentsessions_api::Result<()> {
        Err(ApiError::PermissionDenied)
    }
}

fn issuer() -> TokenIssuer {
    let pem = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .unwrap()
        .serialize_pem();
    TokenIssuer::new(
        HOST,
        SigningKey {
            algorithm: Algorithm::ES256,
            key: EncodingKey::from_ec_pem(pem.as_bytes()).unwrap(),
            kid: Some(KID.to_owned()),
        },
    )
}

fn tokens(issuer: &Arc<TokenIssuer>) -> Arc<dyn DelegatedTokens> {
    Arc::new(SessionTokens::new(Arc::clone(issuer), Arc::new(Principals)))
}

fn delegating(url: &str) -> McpServerConfig {
    McpServerConfig {
        name: "tools".to_owned(),
        url: url.to_owned(),
        delegated_token: Some(DelegatedTokenConfig {
            audience: AUDIENCE.to_owned(),
        }),
        ..McpServerConfig::default()
    }
}

fn options() -> McpHubOptions {
    McpHubOptions {
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
        connect_timeout: Duration::from_secs(10),
    }
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        tool: "tools__whoami".to_owned(),
        args: json!({"call": id}).as_object().cloned(),
        idempotency_key: format!("key-{id}"),
        mediation: Mediation::ControllerMediated,
    }
}

/// Checks `header` as the audience would: a bearer token signed by the issuer's published key,
/// for this audience and issuer, unexpired. Returns its claims.
fn verify(issuer: &TokenIssuer, header: Option<&str>) -> Value {
    let token = header
        .and_then(|h| h.strip_prefix("Bearer "))
        .unwrap_or_else(|| panic!("no bearer token in {header:?}"));
    let jwks: JwkSet = serde_json::from_str(&issuer.jwks_json().unwrap()).unwrap();
    let key = DecodingKey::from_jwk(jwks.find(KID).unwrap()).unwrap();
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_issuer(&[HOST]);
    validation.set_audience(&[AUDIENCE]);
    validation.set_required_spec_claims(&["iss", "aud", "exp", "sub"]);
    jsonwebtoken::decode::<Value>(token, &key, &validation)
        .unwrap()
        .claims
}

// extensions §2: each tools/call to a delegated_token server carries its own token, minted for
// the configured audience, the session's principal, and that execution and tool call; discovery
// carries none.
#[tokio::test]
async fn every_tools_call_carries_its_own_token_for_the_audience_and_the_call() {
    let seen = Arc::new(Seen::default());
    let (url, server) = serve(Arc::clone(&seen)).await;
    let issuer = Arc::new(issuer());
    let hub = McpHub::start_with_tokens(
        vec![delegating(&url)],
        ToolLedger::in_memory().unwrap(),
        options(),
        Some(tokens(&issuer)),
    )
    .await
    .unwrap();
    assert_eq!(
        hub.health()[0].status,
        ServerStatus::Up,
        "{:?}",
        hub.health()
    );
    let context = ToolCallContext::new("s1", "x1");
    for id in ["c1", "c2"] {
        let result = hub.execute_for(&context, &call(id)).await.unwrap();
        assert!(!result.is_error, "{result:?}");
    }
    // Two calls in flight on one connection at once: each still gets its own token.
    let (c3, c4) = (call("c3"), call("c4"));
    let (a, b) = tokio::join!(
        hub.execute_for(&context, &c3),
        hub.execute_for(&context, &c4)
    );
    assert!(!a.unwrap().is_error);
    assert!(!b.unwrap().is_error);

    let calls = seen.calls();
    assert_eq!(calls.len(), 4, "{calls:?}");
    let mut ids = Vec::new();
    for (tool_call, header) in &calls {
        let claims = verify(&issuer, header.as_deref());
        assert_eq!(claims["aud"], AUDIENCE);
        assert_eq!(claims["sub"], "alice");
        assert_eq!(claims["sub_iss"], "https://idp.test");
        assert_eq!(claims["act"]["sub"], "agent://triage");
        assert_eq!(claims["txn"], "x1");
        assert_eq!(claims["tctx"]["session_uid"], "s1");
        assert_eq!(claims["tctx"]["execution_id"], "x1");
        assert_eq!(&claims["tctx"]["tool_call_id"], tool_call.as_str());
        ids.push(claims["jti"].as_str().unwrap().to_owned());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "each call has its own token");
    assert_ne!(calls[0].1, calls[1].1);
    // initialize, notifications and tools/list went out without a delegated token.
    assert_eq!(seen.authorized_requests(), calls.len());
    hub.shutdown().await;
    server.abort();
}

// extensions §2: a mint the policy refuses fails the call before anything is sent, and leaves
// no "sent" claim behind (a later retry is not reported as of unknown outcome).
#[tokio::test]
async fn a_refused_mint_fails_the_call_without_calling_the_tool() {
    let seen = Arc::new(Seen::default());
    let (url, server) = serve(Arc::clone(&seen)).await;
    let issuer = Arc::new(issuer().with_policy(Arc::new(DenyAll)));
    let ledger = ToolLedger::in_memory().unwrap();
    let hub = McpHub::start_with_tokens(
        vec![delegating(&url)],
        ledger.clone(),
        options(),
        Some(tokens(&issuer)),
    )
    .await
    .unwrap();
    assert_eq!(
        hub.health()[0].status,
        ServerStatus::Up,
        "{:?}",
        hub.health()
    );
    let refused = hub
        .execute_for(&ToolCallContext::new("s1", "x1"), &call("c1"))
        .await
        .unwrap();
    assert!(refused.is_error, "{refused:?}");
    assert!(refused.error.contains("refused"), "{}", refused.error);
    assert!(
        refused.error.contains("was not called"),
        "{}",
        refused.error
    );
    // A call with no known execution has nothing to mint for: refused the same way.
    let unbound = hub.execute("s1", &call("c2")).await.unwrap();
    assert!(unbound.is_error, "{unbound:?}");
    assert!(seen.calls().is_empty(), "{:?}", seen.calls());
    assert_eq!(seen.authorized_requests(), 0);
    assert_eq!(
        ledger.claim("s1", "key-c1", "tools__whoami").await.unwrap(),
        Claim::Fresh
    );
    hub.shutdown().await;
    server.abort();
}

// A delegated_token server on a host that mints nothing, or with its own Authorization header,
// refuses startup.
#[tokio::test]
async fn delegated_tokens_without_identity_or_beside_an_authorization_header_refuse_startup() {
    let url = "http://127.0.0.1:9/mcp";
    let without = McpHub::start(
        vec![delegating(url)],
        ToolLedger::in_memory().unwrap(),
        options(),
    )
    .await;
    let Err(McpError::Config { server, reason }) = without else {
        panic!("started without identity: {without:?}");
    };
    assert_eq!(server, "tools");
    assert!(reason.contains("[identity]"), "{reason}");

    let mut both = delegating(url);
    both.headers_from_env = [("Authorization".to_owned(), "TOOLS_TOKEN".to_owned())].into();
    let both = McpHub::start_with_tokens(
        vec![both],
        ToolLedger::in_memory().unwrap(),
        options(),
        Some(tokens(&Arc::new(issuer()))),
    )
    .await;
    let Err(McpError::Config { reason, .. }) = both else {
        panic!("started with two credentials: {both:?}");
    };
    assert!(reason.contains("Authorization"), "{reason}");
}
