//! The JSON HTTP API under `/api/v1` over a real Sessions service (SQLite journal, the echo
//! harness and a harness whose tool call needs approval), served on 127.0.0.1 and called over
//! HTTP: every endpoint, its errors, CSRF and Host checks, authentication with bearer tokens and
//! the owner rules of a policy (a session the caller may not read is a plain 404).
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentsessions_api::{
    Action, Authorizer, CallerIdentity, Capabilities, Descriptor, EventSink, Harness, Mediation,
    OwnerAllowlistAuthorizer, Resumability, RuntimeCapabilities, Start, ToolCall, ToolResult,
};
use agentsessions_auth::{Authenticated, Authenticator, JwtVerifier};
use agentsessions_console::{CONTENT_SECURITY_POLICY, CSRF_HEADER, Console, router};
use agentsessions_controller::ToolExecutor;
use agentsessions_harnesses::EchoHarness;
use agentsessions_journal::Journal;
use agentsessions_model::EchoModel;
use agentsessions_server::{ServerBuilder, SessionsService};
use agentsessions_sqlite::SqliteJournal;
use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_server::Sessions as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_stream::StreamExt as _;

const ISSUER: &str = "https://idp.console.test";
const AUDIENCE: &str = "agentsessions-console";
const SECRET: &[u8] = b"console-test-secret-of-more-than-32-bytes!";
/// The name of alice's session under a policy: nothing bob receives may contain it.
const SECRET_NAME: &str = "quarterly-numbers";

/// A tool call that needs approval, then an output: the approval flow's harness.
#[derive(Debug)]
struct GatedHarness;

#[async_trait::async_trait]
impl Harness for GatedHarness {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Ok(Descriptor {
            id: "gated".into(),
            version: "1".into(),
            capabilities: Capabilities {
                resumability: Resumability::StatelessReplay,
                ..Capabilities::default()
            },
            ..Descriptor::default()
        })
    }

    async fn run(&self, _start: &Start, sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        sink.tool_call(ToolCall {
            id: "call-1".into(),
            tool: "charge".into(),
            args: serde_json::from_value(
                json!({"amount": 42, "note": "<img src=x onerror=alert(1)>"}),
            )
            .ok(),
            mediation: Mediation::RequiresApproval,
            idempotency_key: "k".into(),
        })
        .await?;
        sink.output("continued".into()).await
    }
}

/// Runs approved calls, counting them.
#[derive(Debug, Default)]
struct CountingTool(AtomicU64);

#[async_trait::async_trait]
impl ToolExecutor for CountingTool {
    async fn execute(
        &self,
        _session: &str,
        call: &ToolCall,
    ) -> agentsessions_api::Result<ToolResult> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolResult {
            id: call.id.clone(),
            ..ToolResult::default()
        })
    }
}

/// A console over a fresh service, served on 127.0.0.1, and a client for it.
struct Served {
    base: String,
    service: SessionsService,
    tool: Arc<CountingTool>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

fn token(subject: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"iss": ISSUER, "sub": subject, "aud": AUDIENCE, "iat": now, "nbf": now, "exp": now + 600});
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET).unwrap(),
    )
    .unwrap()
}

fn caller(subject: &str) -> CallerIdentity {
    CallerIdentity::new(ISSUER, subject)
}

async fn serve(policy: Option<Arc<dyn Authorizer>>, hosts: Vec<String>) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let journal: Arc<dyn Journal> =
        Arc::new(SqliteJournal::open(dir.path().join("journal.db")).unwrap());
    let none = RuntimeCapabilities::default();
    let tool = Arc::new(CountingTool::default());
    let mut builder = ServerBuilder::new(journal, Arc::new(EchoModel::new()))
        .tools(Arc::clone(&tool) as Arc<dyn ToolExecutor>)
        .harness("echo", Arc::new(EchoHarness::new()), none)
        .harness("gated", Arc::new(GatedHarness), none)
        .default_harness("echo");
    let authenticator = if let Some(policy) = policy {
        builder = builder.authorizer(policy);
        let mut verifier = JwtVerifier::new(vec![ISSUER.to_owned()], AUDIENCE.to_owned());
        verifier
            .add_hmac_secret(Path::new("test"), SECRET, Algorithm::HS256, None, None)
            .unwrap();
        Some(Arc::new(
            Authenticator::anonymous()
                .with_jwt(verifier)
                .requiring_authentication(true),
        ))
    } else {
        None
    };
    let service = builder.build().unwrap();
    let console = Console::new(service.clone())
        .with_authenticator(authenticator)
        .with_allowed_hosts(hosts);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router(console)).await.unwrap();
    });
    Served {
        base: format!("http://{addr}"),
        service,
        tool,
        http: reqwest::Client::new(),
        _dir: dir,
    }
}

/// One answer: its status, headers and body (JSON when it is JSON, else a string value).
struct Answer {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    text: String,
    json: Value,
}

impl Served {
    /// `method path` with `body`, as `who` (a token subject; "" sends none), with the CSRF
    /// header on every state-changing request.
    async fn call(&self, method: Method, path: &str, who: &str, body: Option<Value>) -> Answer {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        if !who.is_empty() {
            request = request.bearer_auth(token(who));
        }
        if method != Method::GET {
            request = request.header(CSRF_HEADER, "1");
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        answer(request.send().await.unwrap()).await
    }

    async fn get(&self, path: &str, who: &str) -> Answer {
        self.call(Method::GET, path, who, None).await
    }

    async fn post(&self, path: &str, who: &str, body: Value) -> Answer {
        self.call(Method::POST, path, who, Some(body)).await
    }

    /// A new session (named `name`, on `harness`) created as `who`; its uid.
    async fn create(&self, who: &str, name: &str, harness: &str) -> String {
        let made = self
            .post(
                "/api/v1/sessions",
                who,
                json!({"name": name, "harness": harness}),
            )
            .await;
        assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
        made.json["session"]["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// One turn on `uid` as `who`, run through the service in-process (the API offers no exec).
    async fn exec(&self, uid: &str, who: Option<CallerIdentity>, text: &str) {
        let mut request = tonic::Request::new(pb::ExecRequest {
            session: uid.to_owned(),
            inputs: vec![pb::Message {
                role: "user".into(),
                parts: vec![pb::Part {
                    part: Some(pb::part::Part::Text(pb::TextPart { text: text.into() })),
                }],
            }],
            ..pb::ExecRequest::default()
        });
        request
            .extensions_mut()
            .insert(Authenticated { caller: who });
        let mut stream = self.service.exec(request).await.unwrap().into_inner();
        while let Some(update) = stream.next().await {
            update.unwrap();
        }
    }
}

async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
    Answer {
        status,
        headers,
        text,
        json,
    }
}

/// Whether `html` has an attribute like ` onclick=`.
fn has_inline_handler(html: &str) -> bool {
    html.match_indices(" on").any(|(at, _)| {
        let rest = &html[at + 3..];
        let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
        !name.is_empty() && rest[name.len()..].starts_with('=')
    })
}

fn kinds(records: &Value) -> Vec<String> {
    records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["event"]["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn uids(page: &Value) -> Vec<String> {
    page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["metadata"]["uid"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_page_and_its_assets_come_with_a_strict_content_security_policy() {
    let served = serve(None, Vec::new()).await;
    let page = served.get("/", "").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert_eq!(
        page.headers["content-security-policy"],
        CONTENT_SECURITY_POLICY
    );
    assert_eq!(page.headers["x-content-type-options"], "nosniff");
    assert_eq!(page.headers["x-frame-options"], "DENY");
    // No inline script and no inline handlers: the policy would refuse them anyway.
    assert!(!page.text.contains("<script>"), "{}", page.text);
    assert!(
        !has_inline_handler(&page.text),
        "inline handler in {}",
        page.text
    );
    assert!(!CONTENT_SECURITY_POLICY.contains("unsafe-inline"));
    let script = served.get("/assets/console.js", "").await;
    assert_eq!(script.status, StatusCode::OK);
    assert!(
        script.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(
        !script.text.contains(".innerHTML"),
        "the script builds the DOM from text only"
    );
    let style = served.get("/assets/console.css", "").await;
    assert_eq!(style.status, StatusCode::OK);
    assert_eq!(
        served.get("/assets/other.js", "").await.status,
        StatusCode::NOT_FOUND
    );
    let me = served.get("/api/v1/me", "").await;
    assert_eq!(me.json, json!({"authenticated": false, "enforcing": false}));
}

#[tokio::test]
async fn sessions_list_newest_first_with_filters_and_pages() {
    let served = serve(None, Vec::new()).await;
    let mut made = Vec::new();
    for name in ["alpha", "beta", "gamma", "delta", "epsilon"] {
        made.push(served.create("", name, "echo").await);
        // Creation times order the list; keep them apart.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let gated = served.create("", "gated-one", "gated").await;
    served.exec(&made[1], None, "hello").await;

    let all = served.get("/api/v1/sessions", "").await;
    assert_eq!(all.status, StatusCode::OK);
    let mut newest_first: Vec<String> = made.iter().rev().cloned().collect();
    newest_first.insert(0, gated.clone());
    assert_eq!(uids(&all.json), newest_first);

    // Pages of two walk the same order without gaps or repeats.
    let mut paged = Vec::new();
    let mut token = String::new();
    loop {
        let page = served
            .get(
                &format!("/api/v1/sessions?page_size=2&page_token={token}"),
                "",
            )
            .await;
        assert!(uids(&page.json).len() <= 2);
        paged.extend(uids(&page.json));
        token = page.json["next_page_token"].as_str().unwrap().to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(paged, newest_first);

    let by_name = served.get("/api/v1/sessions?q=GAM", "").await;
    assert_eq!(uids(&by_name.json), vec![made[2].clone()]);
    let by_uid = served
        .get(&format!("/api/v1/sessions?q={}", &made[3][5..]), "")
        .await;
    assert_eq!(uids(&by_uid.json), vec![made[3].clone()]);
    let by_harness = served.get("/api/v1/sessions?harness=gated", "").await;
    assert_eq!(uids(&by_harness.json), vec![gated]);
    let by_state = served.get("/api/v1/sessions?state=completed", "").await;
    assert_eq!(uids(&by_state.json), vec![made[1].clone()]);
    // A filtered page of one still pages exactly.
    let first = served
        .get("/api/v1/sessions?harness=echo&page_size=1", "")
        .await;
    assert_eq!(uids(&first.json), vec![made[4].clone()]);
    let token = first.json["next_page_token"].as_str().unwrap();
    let second = served
        .get(
            &format!("/api/v1/sessions?harness=echo&page_size=1&page_token={token}"),
            "",
        )
        .await;
    assert_eq!(uids(&second.json), vec![made[3].clone()]);
    let none = served.get("/api/v1/sessions?project=elsewhere", "").await;
    assert!(uids(&none.json).is_empty());

    for bad in ["state=sleeping", "page_size=-1", "color=red"] {
        let refused = served.get(&format!("/api/v1/sessions?{bad}"), "").await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            refused.text
        );
        assert_eq!(refused.json["error"]["code"], "INVALID_ARGUMENT", "{bad}");
    }
}

#[tokio::test]
async fn a_session_shows_its_records_chain_audit_bundle_and_fork_tree() {
    let served = serve(None, Vec::new()).await;
    let uid = served.create("", "notes", "echo").await;
    served.exec(&uid, None, "hello").await;
    served.exec(&uid, None, "<script>alert('x')</script>").await;

    let shown = served.get(&format!("/api/v1/sessions/{uid}"), "").await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(shown.json["session"]["metadata"]["name"], "notes");
    assert_eq!(shown.json["session"]["exec_state"], "EXEC_COMPLETED");
    // The echo harness keeps no incarnation once a turn ended; the session names the harness
    // and the model its turns ran (docs/extensions.md, "Compute state" and "Harness and model").
    assert_eq!(shown.json["session"]["compute_state"], "COMPUTE_NONE");
    assert_eq!(shown.json["session"]["harness"], "echo");
    assert_eq!(shown.json["session"]["model"], "echo");
    let listed = served.get("/api/v1/sessions", "").await;
    let row = listed.json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metadata"]["uid"] == json!(uid))
        .cloned()
        .unwrap();
    assert_eq!(row["compute_state"], "COMPUTE_NONE", "{row}");
    assert_eq!(row["model"], "echo", "{row}");
    let permissions = shown.json["permissions"].as_array().unwrap();
    for action in [
        "read", "approve", "cancel", "suspend", "resume", "fork", "delete",
    ] {
        assert!(
            permissions.contains(&json!(action)),
            "{action}: {permissions:?}"
        );
    }

    let all = served
        .get(&format!("/api/v1/sessions/{uid}/records"), "")
        .await;
    assert_eq!(all.json["head_seq"], 10);
    assert_eq!(all.json["next_seq"], 0);
    let records = &all.json["records"];
    assert_eq!(
        kinds(records)[..5],
        [
            "EVENT_EXECUTION_START",
            "EVENT_INPUT",
            "EVENT_MODEL_CALL",
            "EVENT_OUTPUT",
            "EVENT_END"
        ]
    );
    assert!(
        records[0]["commit_time"]
            .as_str()
            .unwrap()
            .starts_with("20")
    );
    assert_eq!(records[1]["hash"], records[2]["prev_hash"]);
    // Content comes back as data, exactly as stored.
    assert_eq!(
        records[6]["event"]["message"]["parts"][0]["text"]["text"],
        "<script>alert('x')</script>"
    );

    let page = served
        .get(
            &format!("/api/v1/sessions/{uid}/records?from=3&limit=4"),
            "",
        )
        .await;
    let seqs: Vec<i64> = page.json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [3, 4, 5, 6]);
    assert_eq!(page.json["next_seq"], 7);
    let tail = served
        .get(&format!("/api/v1/sessions/{uid}/records?from=9&to=20"), "")
        .await;
    assert_eq!(tail.json["records"].as_array().unwrap().len(), 2);
    assert_eq!(tail.json["next_seq"], 0);
    let past = served
        .get(&format!("/api/v1/sessions/{uid}/records?from=11"), "")
        .await;
    assert!(past.json["records"].as_array().unwrap().is_empty());
    let negative = served
        .get(&format!("/api/v1/sessions/{uid}/records?from=-1"), "")
        .await;
    assert_eq!(negative.status, StatusCode::BAD_REQUEST);

    let verified = served
        .get(&format!("/api/v1/sessions/{uid}/verify"), "")
        .await;
    assert_eq!(verified.json["verified"], true, "{}", verified.text);
    assert_eq!(verified.json["records"], 10);
    assert_eq!(
        verified.json["head_hash"], records[9]["hash"],
        "the head is the last record's hash"
    );

    let audit = served
        .get(&format!("/api/v1/sessions/{uid}/audit"), "")
        .await;
    assert_eq!(audit.status, StatusCode::OK);
    assert_eq!(
        audit.headers["content-disposition"],
        format!("attachment; filename=\"{uid}.audit.json\"").as_str()
    );
    assert!(audit.text.contains(&uid), "{}", audit.text);
    assert!(
        audit.text.contains(records[9]["hash"].as_str().unwrap()),
        "the bundle carries the chain"
    );

    let forked = served
        .post(
            &format!("/api/v1/sessions/{uid}/fork"),
            "",
            json!({"at_seq": 5, "count": 2, "names": ["left", "right"]}),
        )
        .await;
    assert_eq!(forked.status, StatusCode::CREATED, "{}", forked.text);
    let children: Vec<String> = forked.json["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["uid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(children.len(), 2);
    let grandchild = served
        .post(
            &format!("/api/v1/sessions/{}/fork", children[0]),
            "",
            json!({}),
        )
        .await;
    let grandchild = grandchild.json["children"][0]["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    // The tree of a grandchild climbs to the root and shows the whole family.
    let tree = served
        .get(&format!("/api/v1/sessions/{grandchild}/tree"), "")
        .await;
    assert_eq!(tree.json["uid"], grandchild.as_str());
    let root = &tree.json["root"];
    assert_eq!(root["uid"], uid.as_str());
    let below: Vec<&str> = root["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["uid"].as_str().unwrap())
        .collect();
    assert_eq!(below.len(), 2);
    assert!(below.contains(&children[0].as_str()) && below.contains(&children[1].as_str()));
    let left = root["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["uid"] == children[0].as_str())
        .unwrap();
    assert_eq!(left["fork_seq"], 5);
    assert_eq!(left["name"], "left");
    assert_eq!(left["children"][0]["uid"], grandchild.as_str());

    let bad_fork = served
        .post(
            &format!("/api/v1/sessions/{uid}/fork"),
            "",
            json!({"count": 2, "names": ["one"]}),
        )
        .await;
    assert_eq!(
        bad_fork.status,
        StatusCode::BAD_REQUEST,
        "{}",
        bad_fork.text
    );
    let unknown_field = served
        .post(
            &format!("/api/v1/sessions/{uid}/fork"),
            "",
            json!({"identity": "me"}),
        )
        .await;
    assert_eq!(unknown_field.status, StatusCode::BAD_REQUEST);

    for path in ["", "/records", "/verify", "/audit", "/tree", "/events"] {
        let missing = served
            .get(
                &format!("/api/v1/sessions/sess-000000000000000000000000{path}"),
                "",
            )
            .await;
        assert_eq!(
            missing.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            missing.text
        );
        assert_eq!(missing.json["error"]["code"], "NOT_FOUND", "{path}");
    }
}

#[tokio::test]
async fn lifecycle_actions_suspend_resume_cancel_and_delete() {
    let served = serve(None, Vec::new()).await;
    let uid = served.create("", "", "echo").await;
    served.exec(&uid, None, "hello").await;
    let base = format!("/api/v1/sessions/{uid}");

    let suspended = served.post(&format!("{base}/suspend"), "", json!({})).await;
    assert_eq!(suspended.status, StatusCode::OK, "{}", suspended.text);
    assert_eq!(suspended.json["session"]["compute_state"], "COMPUTE_COLD");
    let resumed = served.post(&format!("{base}/resume"), "", json!({})).await;
    // Resumed, an attached harness still holds no incarnation: nothing runs.
    assert_eq!(
        resumed.json["session"]["compute_state"], "COMPUTE_NONE",
        "{}",
        resumed.text
    );
    // Nothing runs: there is nothing to cancel.
    let cancel = served
        .post(&format!("{base}/cancel"), "", json!({"reason": "stop"}))
        .await;
    assert_eq!(cancel.status, StatusCode::CONFLICT, "{}", cancel.text);
    assert_eq!(cancel.json["error"]["code"], "FAILED_PRECONDITION");
    // A decision with nothing pending names the problem.
    let decision = served
        .post(&format!("{base}/decision"), "", json!({"approved": true}))
        .await;
    assert_eq!(
        decision.status,
        StatusCode::BAD_REQUEST,
        "{}",
        decision.text
    );

    // An empty body is fine for actions without options.
    let empty = served
        .http
        .post(format!("{}{base}/suspend", served.base))
        .header(CSRF_HEADER, "1")
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), StatusCode::OK);
    let malformed = served
        .http
        .post(format!("{}{base}/cancel", served.base))
        .header(CSRF_HEADER, "1")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);

    let deleted = served.call(Method::DELETE, &base, "", None).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert_eq!(
        deleted.json["session"]["deletion_state"],
        "DELETION_PENDING"
    );
    let refused = served.post(&format!("{base}/fork"), "", json!({})).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
}

#[tokio::test]
async fn state_changing_requests_need_the_csrf_header_and_the_same_origin() {
    let served = serve(None, Vec::new()).await;
    let url = format!("{}/api/v1/sessions", served.base);
    let host = served.base.trim_start_matches("http://").to_owned();
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, StatusCode);
    let cases: [Case<'_>; 6] = [
        ("no header", vec![], StatusCode::FORBIDDEN),
        (
            "empty header",
            vec![(CSRF_HEADER, String::new())],
            StatusCode::FORBIDDEN,
        ),
        (
            "another origin",
            vec![
                (CSRF_HEADER, "1".into()),
                ("origin", "http://evil.example".into()),
            ],
            StatusCode::FORBIDDEN,
        ),
        (
            "a cross-site fetch",
            vec![
                (CSRF_HEADER, "1".into()),
                ("sec-fetch-site", "cross-site".into()),
            ],
            StatusCode::FORBIDDEN,
        ),
        (
            "same origin",
            vec![
                (CSRF_HEADER, "1".into()),
                ("origin", format!("http://{host}")),
                ("sec-fetch-site", "same-origin".into()),
            ],
            StatusCode::CREATED,
        ),
        (
            "a script with the header",
            vec![(CSRF_HEADER, "1".into())],
            StatusCode::CREATED,
        ),
    ];
    for (what, headers, expected) in cases {
        let mut request = served
            .http
            .post(&url)
            .header("content-type", "application/json")
            .body("{}");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let got = answer(request.send().await.unwrap()).await;
        assert_eq!(got.status, expected, "{what}: {}", got.text);
        if expected == StatusCode::FORBIDDEN {
            assert_eq!(got.json["error"]["code"], "PERMISSION_DENIED", "{what}");
        }
    }
    let listed = served.get("/api/v1/sessions", "").await;
    assert_eq!(
        uids(&listed.json).len(),
        2,
        "only the two allowed requests created sessions"
    );
    let uid = uids(&listed.json)[0].clone();
    let delete = served
        .http
        .delete(format!("{url}/{uid}"))
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), StatusCode::FORBIDDEN);
    let still = served.get(&format!("/api/v1/sessions/{uid}"), "").await;
    assert_eq!(still.json["session"]["deletion_state"], "DELETION_ACTIVE");
}

#[tokio::test]
async fn a_console_answers_only_its_own_host_names() {
    let served = serve(None, vec!["console.test:80".into()]).await;
    let wrong = served.get("/api/v1/sessions", "").await;
    assert_eq!(
        wrong.status,
        StatusCode::MISDIRECTED_REQUEST,
        "{}",
        wrong.text
    );
    let right = served
        .http
        .get(format!("{}/api/v1/sessions", served.base))
        .header("host", "Console.Test:80")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), StatusCode::OK);
}

#[tokio::test]
async fn approvals_are_listed_and_decided_and_the_turn_resumes() {
    let served = serve(None, Vec::new()).await;
    let approved = served.create("", "", "gated").await;
    served.exec(&approved, None, "pay").await;
    let denied = served.create("", "", "gated").await;
    served.exec(&denied, None, "pay").await;

    let pending = served.get("/api/v1/approvals", "").await;
    assert_eq!(pending.status, StatusCode::OK);
    let list = pending.json["approvals"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{}", pending.text);
    let first = list
        .iter()
        .find(|a| a["session_uid"] == approved.as_str())
        .unwrap();
    assert_eq!(first["tool"], "charge");
    assert_eq!(first["args"]["amount"], 42);
    assert_eq!(first["can_decide"], true);
    assert!(first["request_seq"].as_i64().unwrap() > 0);

    let unset = served
        .post(
            &format!("/api/v1/sessions/{approved}/decision"),
            "",
            json!({"reason": "?"}),
        )
        .await;
    assert_eq!(unset.status, StatusCode::BAD_REQUEST, "{}", unset.text);

    let decided = served
        .post(
            &format!("/api/v1/sessions/{approved}/decision"),
            "",
            json!({"approved": true, "reason": "fine"}),
        )
        .await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.text);
    assert_eq!(
        decided.json["decision"]["event"]["kind"],
        "EVENT_APPROVAL_RESULT"
    );
    assert_eq!(
        decided.json["decision"]["event"]["approval_result"]["approved"],
        true
    );
    assert_eq!(
        decided.json["session"]["exec_state"], "EXEC_COMPLETED",
        "{}",
        decided.text
    );
    let records = served
        .get(&format!("/api/v1/sessions/{approved}/records"), "")
        .await;
    let seen = kinds(&records.json["records"]);
    assert!(
        seen.contains(&"EVENT_APPROVAL_RESULT".to_owned()),
        "{seen:?}"
    );
    assert!(seen.contains(&"EVENT_END".to_owned()), "{seen:?}");
    assert_eq!(
        served.tool.0.load(Ordering::SeqCst),
        1,
        "the approved call ran once"
    );

    let by_request = &list
        .iter()
        .find(|a| a["session_uid"] == denied.as_str())
        .unwrap();
    let refused = served
        .post(
            &format!("/api/v1/sessions/{denied}/decision"),
            "",
            json!({
                "approved": false,
                "reason": "not now",
                "execution_id": by_request["execution_id"],
                "tool_call_id": by_request["tool_call_id"],
                "request_seq": by_request["request_seq"],
            }),
        )
        .await;
    assert_eq!(refused.status, StatusCode::OK, "{}", refused.text);
    // Canonical JSON leaves false out: a denial has no `approved`.
    let result = &refused.json["decision"]["event"]["approval_result"];
    assert_eq!(result["reason"], "not now", "{}", refused.text);
    assert!(result.get("approved").is_none(), "{result}");
    let records = served
        .get(&format!("/api/v1/sessions/{denied}/records"), "")
        .await;
    let result = records.json["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["event"]["kind"] == "EVENT_TOOL_RESULT")
        .cloned()
        .unwrap();
    assert_eq!(result["event"]["result"]["is_error"], true, "{result}");
    assert_eq!(
        result["event"]["result"]["code"], "APPROVAL_DENIED",
        "{result}"
    );
    assert_eq!(
        served.tool.0.load(Ordering::SeqCst),
        1,
        "a denied call never runs"
    );
    let again = served.get("/api/v1/approvals", "").await;
    assert!(
        again.json["approvals"].as_array().unwrap().is_empty(),
        "{}",
        again.text
    );
}

// A session's page asks for that session's approvals: found in the session's own project and
// however many others wait; the queue itself pages; a hidden session is a plain 404.
#[tokio::test]
async fn approvals_of_one_session_are_found_in_its_project_and_the_queue_pages() {
    let served = serve(None, Vec::new()).await;
    let made = served
        .post(
            "/api/v1/sessions",
            "",
            json!({"harness": "gated", "project": "elsewhere"}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let elsewhere = made.json["session"]["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    served.exec(&elsewhere, None, "pay").await;
    let mut here = Vec::new();
    for _ in 0..3 {
        let uid = served.create("", "", "gated").await;
        served.exec(&uid, None, "pay").await;
        here.push(uid);
    }
    let idle = served.create("", "", "echo").await;

    // The default project's queue does not hold it; the session's own does.
    let default = served.get("/api/v1/approvals", "").await;
    let sessions: Vec<&str> = default.json["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["session_uid"].as_str().unwrap())
        .collect();
    assert_eq!(sessions.len(), 3, "{}", default.text);
    assert!(!sessions.contains(&elsewhere.as_str()));
    let own = served
        .get(&format!("/api/v1/approvals?session={elsewhere}"), "")
        .await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.text);
    let list = own.json["approvals"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{}", own.text);
    assert_eq!(list[0]["session_uid"], elsewhere.as_str());
    assert_eq!(list[0]["project"], "elsewhere");
    assert_eq!(list[0]["tool"], "charge");
    assert_eq!(list[0]["can_decide"], true);
    assert_eq!(own.json["next_page_token"], "");
    let last = served
        .get(&format!("/api/v1/approvals?session={}", here[2]), "")
        .await;
    let list = last.json["approvals"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{}", last.text);
    assert_eq!(list[0]["session_uid"], here[2].as_str());
    let none = served
        .get(&format!("/api/v1/approvals?session={idle}"), "")
        .await;
    assert_eq!(none.status, StatusCode::OK);
    assert!(none.json["approvals"].as_array().unwrap().is_empty());
    let missing = served
        .get(
            "/api/v1/approvals?session=sess-000000000000000000000000",
            "",
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);

    // The queue pages: two and then one, each approval once.
    let first = served.get("/api/v1/approvals?page_size=2", "").await;
    assert_eq!(first.json["approvals"].as_array().unwrap().len(), 2);
    let token = first.json["next_page_token"].as_str().unwrap();
    assert!(!token.is_empty(), "{}", first.text);
    let second = served
        .get(
            &format!("/api/v1/approvals?page_size=2&page_token={token}"),
            "",
        )
        .await;
    assert_eq!(second.json["approvals"].as_array().unwrap().len(), 1);
    assert_eq!(second.json["next_page_token"], "");
    let mut paged: Vec<String> = first.json["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second.json["approvals"].as_array().unwrap())
        .map(|a| a["session_uid"].as_str().unwrap().to_owned())
        .collect();
    paged.sort();
    here.sort();
    assert_eq!(paged, here);
}

#[tokio::test]
async fn events_stream_the_records_then_new_commits_then_the_deletion() {
    let served = serve(None, Vec::new()).await;
    let uid = served.create("", "", "echo").await;
    served.exec(&uid, None, "first").await;
    let mut stream = served
        .http
        .get(format!(
            "{}/api/v1/sessions/{uid}/events?from=2",
            served.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut seen = String::new();
    // Reads until `needle` has arrived, or fails after a while.
    async fn until(stream: &mut reqwest::Response, seen: &mut String, needle: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !seen.contains(needle) {
            let chunk = tokio::time::timeout_at(deadline, stream.chunk())
                .await
                .unwrap_or_else(|_| panic!("no {needle:?} in {seen}"))
                .unwrap()
                .unwrap_or_else(|| panic!("stream ended before {needle:?}: {seen}"));
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
    until(&mut stream, &mut seen, "id: 5\n").await;
    assert!(!seen.contains("id: 1\n"), "from=2 starts at seq 2: {seen}");
    assert!(seen.contains("event: record"), "{seen}");
    served.exec(&uid, None, "second").await;
    until(&mut stream, &mut seen, "id: 10\n").await;
    assert!(seen.contains("\"EVENT_END\""), "{seen}");
    let deleted = served
        .call(Method::DELETE, &format!("/api/v1/sessions/{uid}"), "", None)
        .await;
    assert_eq!(deleted.status, StatusCode::OK);
    until(&mut stream, &mut seen, "event: end").await;
    assert!(seen.contains("LIFECYCLE_DELETE"), "{seen}");
    // The stream is over.
    let rest = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
        .await
        .unwrap()
        .unwrap();
    assert!(rest.is_none());
}

#[tokio::test]
async fn under_a_policy_callers_see_and_change_only_what_they_may() {
    let policy = OwnerAllowlistAuthorizer::new()
        .allowing(Action::Create, caller("alice"))
        .allowing(Action::Approve, caller("alice"))
        .allowing(Action::Create, caller("bob"));
    let served = serve(Some(Arc::new(policy)), Vec::new()).await;

    // No token, or a token that does not verify: 401 with the scheme to use.
    let anonymous = served.get("/api/v1/sessions", "").await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anonymous.headers["www-authenticate"], "Bearer");
    assert_eq!(anonymous.json["error"]["code"], "UNAUTHENTICATED");
    let forged = served
        .http
        .get(format!("{}/api/v1/sessions", served.base))
        .bearer_auth(format!("{}x", token("alice")))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    // The page itself loads without a token (it holds nothing); the data does not.
    assert_eq!(served.get("/", "").await.status, StatusCode::OK);

    let me = served.get("/api/v1/me", "alice").await;
    assert_eq!(me.json["subject"], "alice");
    assert_eq!(me.json["enforcing"], true);

    let secret = served.create("alice", SECRET_NAME, "gated").await;
    served.exec(&secret, Some(caller("alice")), "pay").await;
    let own = served.create("bob", "bobs", "gated").await;
    served.exec(&own, Some(caller("bob")), "pay").await;

    // Bob sees neither alice's session nor her approval; every path says "not found", exactly
    // as for a session that does not exist, and nothing he gets names it.
    let missing = "sess-000000000000000000000000";
    for path in ["", "/records", "/verify", "/audit", "/tree", "/events"] {
        let hidden = served
            .get(&format!("/api/v1/sessions/{secret}{path}"), "bob")
            .await;
        let absent = served
            .get(&format!("/api/v1/sessions/{missing}{path}"), "bob")
            .await;
        assert_eq!(
            hidden.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            hidden.text
        );
        assert_eq!(absent.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(hidden.json["error"]["code"], absent.json["error"]["code"]);
        assert!(
            !hidden.text.contains(SECRET_NAME),
            "{path}: {}",
            hidden.text
        );
    }
    for (method, path, body) in [
        (Method::POST, "/suspend", json!({})),
        (Method::POST, "/resume", json!({})),
        (Method::POST, "/cancel", json!({})),
        (Method::POST, "/fork", json!({})),
        (Method::POST, "/decision", json!({"approved": true})),
        (Method::DELETE, "", json!({})),
    ] {
        let refused = served
            .call(
                method,
                &format!("/api/v1/sessions/{secret}{path}"),
                "bob",
                Some(body),
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            refused.text
        );
        assert!(!refused.text.contains(SECRET_NAME));
    }
    let listed = served.get("/api/v1/sessions", "bob").await;
    assert_eq!(uids(&listed.json), vec![own.clone()]);
    let searched = served
        .get(&format!("/api/v1/sessions?q={SECRET_NAME}"), "bob")
        .await;
    assert!(uids(&searched.json).is_empty());
    let hers_to_bob = served
        .get(&format!("/api/v1/approvals?session={secret}"), "bob")
        .await;
    assert_eq!(
        hers_to_bob.status,
        StatusCode::NOT_FOUND,
        "{}",
        hers_to_bob.text
    );
    assert!(!hers_to_bob.text.contains(SECRET_NAME));
    let bobs_approvals = served.get("/api/v1/approvals", "bob").await;
    let list = bobs_approvals.json["approvals"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{}", bobs_approvals.text);
    assert_eq!(list[0]["session_uid"], own.as_str());
    // Bob may read his own session but is not allowed to approve: no button, and a refusal
    // that says so (he knows the session exists).
    assert_eq!(list[0]["can_decide"], false);
    let his = served.get(&format!("/api/v1/sessions/{own}"), "bob").await;
    assert!(
        !his.json["permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("approve"))
    );
    assert!(
        his.json["permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("read"))
    );
    let not_his_to_decide = served
        .post(
            &format!("/api/v1/sessions/{own}/decision"),
            "bob",
            json!({"approved": true}),
        )
        .await;
    assert_eq!(
        not_his_to_decide.status,
        StatusCode::FORBIDDEN,
        "{}",
        not_his_to_decide.text
    );
    assert_eq!(not_his_to_decide.json["error"]["code"], "PERMISSION_DENIED");

    // Alice decides her own; the decision's actor is the verified caller.
    let hers = served
        .get(&format!("/api/v1/sessions/{secret}"), "alice")
        .await;
    assert!(
        hers.json["permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("approve"))
    );
    let decided = served
        .post(
            &format!("/api/v1/sessions/{secret}/decision"),
            "alice",
            json!({"approved": true}),
        )
        .await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.text);
    let actor = &decided.json["decision"]["event"]["actor"];
    assert_eq!(actor["subject"], "alice", "{}", decided.text);
    assert_eq!(actor["issuer"], ISSUER);
    assert_eq!(decided.json["session"]["exec_state"], "EXEC_COMPLETED");
}
