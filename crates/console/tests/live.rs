//! The live records stream (`/api/v1/sessions/{uid}/events`) follows commits the way the Watch
//! RPC does: after catching up it reads nothing until a record commits, then pushes it; it
//! resumes after `Last-Event-ID`; it ends after the delete record; a caller who may not read
//! the session gets a plain 404 and no stream. Served on 127.0.0.1 over the in-memory journal
//! (everything on the test's runtime), wrapped to count the reads the console causes
//! (`agentsessions_testkit::Instrumented`).
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentsessions_api::{
    Action, Authorizer, CallerIdentity, OwnerAllowlistAuthorizer, RuntimeCapabilities,
};
use agentsessions_auth::{Authenticated, Authenticator, JwtVerifier};
use agentsessions_console::{CSRF_HEADER, Console, router};
use agentsessions_harnesses::EchoHarness;
use agentsessions_journal::{Journal, MemoryJournal};
use agentsessions_model::EchoModel;
use agentsessions_server::{ServerBuilder, SessionsService};
use agentsessions_testkit::Instrumented;
use agentsessions_wire::pb;
use agentsessions_wire::pb::sessions_server::Sessions as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::json;
use tokio_stream::StreamExt as _;

const ISSUER: &str = "https://idp.live.test";
const AUDIENCE: &str = "agentsessions-live";
const SECRET: &[u8] = b"live-test-secret-of-more-than-32-bytes!!";

struct Served {
    base: String,
    service: SessionsService,
    journal: Arc<Instrumented>,
    http: reqwest::Client,
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

/// A console over a fresh service on the counting journal; with `policy`, bearer tokens
/// authenticate callers and the policy decides.
async fn serve(policy: Option<Arc<dyn Authorizer>>) -> Served {
    let journal = Arc::new(Instrumented::new(Arc::new(MemoryJournal::new())));
    let mut builder = ServerBuilder::new(
        Arc::clone(&journal) as Arc<dyn Journal>,
        Arc::new(EchoModel::new()),
    )
    .harness(
        "echo",
        Arc::new(EchoHarness::new()),
        RuntimeCapabilities::default(),
    )
    .default_harness("echo");
    let mut authenticator = None;
    if let Some(policy) = policy {
        builder = builder.authorizer(policy);
        let mut verifier = JwtVerifier::new(vec![ISSUER.to_owned()], AUDIENCE.to_owned());
        verifier
            .add_hmac_secret(Path::new("test"), SECRET, Algorithm::HS256, None, None)
            .unwrap();
        authenticator = Some(Arc::new(
            Authenticator::anonymous()
                .with_jwt(verifier)
                .requiring_authentication(true),
        ));
    }
    let service = builder.build().unwrap();
    let console = Console::new(service.clone()).with_authenticator(authenticator);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router(console)).await.unwrap();
    });
    Served {
        base: format!("http://{addr}"),
        service,
        journal,
        http: reqwest::Client::new(),
    }
}

impl Served {
    /// A new session created as `who` ("" sends no token); its uid.
    async fn create(&self, who: &str) -> String {
        let mut request = self
            .http
            .post(format!("{}/api/v1/sessions", self.base))
            .header(CSRF_HEADER, "1")
            .header("content-type", "application/json")
            .body(json!({"harness": "echo"}).to_string());
        if !who.is_empty() {
            request = request.bearer_auth(token(who));
        }
        let made = request.send().await.unwrap();
        assert_eq!(made.status(), StatusCode::CREATED);
        let body: serde_json::Value = serde_json::from_str(&made.text().await.unwrap()).unwrap();
        body["session"]["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// One turn on `uid` as `who`, run through the service in-process.
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

    /// Opens the events of `uid` as `who`, with `Last-Event-ID` when `last` is set.
    async fn events(&self, uid: &str, who: &str, last: Option<i64>) -> reqwest::Response {
        let mut request = self
            .http
            .get(format!("{}/api/v1/sessions/{uid}/events", self.base));
        if !who.is_empty() {
            request = request.bearer_auth(token(who));
        }
        if let Some(seq) = last {
            request = request.header("last-event-id", seq.to_string());
        }
        request.send().await.unwrap()
    }
}

/// The text of a live stream read so far.
struct Seen(String);

impl Seen {
    /// Reads until `needle` has arrived, failing after a while.
    async fn until(&mut self, stream: &mut reqwest::Response, needle: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !self.0.contains(needle) {
            let chunk = tokio::time::timeout_at(deadline, stream.chunk())
                .await
                .unwrap_or_else(|_| panic!("no {needle:?} in {}", self.0))
                .unwrap()
                .unwrap_or_else(|| panic!("stream ended before {needle:?}: {}", self.0));
            self.0.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The seqs of the `record` events read so far.
    fn seqs(&self) -> Vec<i64> {
        self.0
            .lines()
            .filter_map(|line| line.strip_prefix("id: "))
            .map(|seq| seq.parse().unwrap())
            .collect()
    }
}

// Caught up, the stream waits for the next commit without touching the journal: a poller
// would read the session's row and head again and again while nothing happens.
#[tokio::test]
async fn the_stream_reads_nothing_while_idle_and_pushes_each_commit_then_ends_on_delete() {
    let served = serve(None).await;
    let uid = served.create("").await;
    served.exec(&uid, None, "first").await;
    let head = served.journal.inner().head(&uid).await.unwrap();
    let mut stream = served.events(&uid, "", None).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let mut seen = Seen(String::new());
    seen.until(&mut stream, &format!("id: {head}\n")).await;
    assert_eq!(seen.seqs(), (1..=head).collect::<Vec<_>>());

    // Idle for a minute of paused time (it passes at once, every timer firing on the way; the
    // server runs on this runtime): a poller would have read the journal hundreds of times.
    tokio::time::pause();
    // Paused time moves only once every task waits, so what the catch-up still had to do is
    // done by the end of this second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_from = served.journal.reads();
    tokio::time::sleep(Duration::from_secs(60)).await;
    tokio::time::resume();
    assert_eq!(
        served.journal.reads(),
        idle_from,
        "the journal was read while nothing committed"
    );

    // A commit is pushed as it lands.
    served.exec(&uid, None, "second").await;
    let after = served.journal.inner().head(&uid).await.unwrap();
    seen.until(&mut stream, &format!("id: {after}\n")).await;
    assert_eq!(seen.seqs(), (1..=after).collect::<Vec<_>>());

    // Deleting the session ends the stream after its delete record.
    let deleted = served
        .http
        .delete(format!("{}/api/v1/sessions/{uid}", served.base))
        .header(CSRF_HEADER, "1")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    seen.until(&mut stream, "event: end").await;
    assert!(seen.0.contains("LIFECYCLE_DELETE"), "{}", seen.0);
    let rest = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
        .await
        .unwrap()
        .unwrap();
    assert!(rest.is_none(), "the stream goes on after the end");
}

// A reconnecting client names the last record it saw and gets the ones after it.
#[tokio::test]
async fn last_event_id_resumes_after_that_record() {
    let served = serve(None).await;
    let uid = served.create("").await;
    served.exec(&uid, None, "hello").await;
    let head = served.journal.inner().head(&uid).await.unwrap();
    assert!(head > 3, "{head}");
    let mut stream = served.events(&uid, "", Some(2)).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let mut seen = Seen(String::new());
    seen.until(&mut stream, &format!("id: {head}\n")).await;
    assert_eq!(seen.seqs(), (3..=head).collect::<Vec<_>>());
}

// Under a policy, the stream of a session the caller may not read is a 404, the same as a
// session that does not exist, and nothing of it is sent; its owner follows it.
#[tokio::test]
async fn a_caller_who_may_not_read_the_session_gets_no_stream() {
    let policy = OwnerAllowlistAuthorizer::new()
        .allowing(Action::Create, CallerIdentity::new(ISSUER, "alice"))
        .allowing(Action::Create, CallerIdentity::new(ISSUER, "bob"));
    let served = serve(Some(Arc::new(policy))).await;
    let uid = served.create("alice").await;
    served
        .exec(&uid, Some(CallerIdentity::new(ISSUER, "alice")), "mine")
        .await;
    let refused = served.events(&uid, "bob", None).await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    let refused = refused.text().await.unwrap();
    let absent = served
        .events("sess-000000000000000000000000", "bob", None)
        .await;
    assert_eq!(absent.status(), StatusCode::NOT_FOUND);
    let absent: serde_json::Value = serde_json::from_str(&absent.text().await.unwrap()).unwrap();
    let refused: serde_json::Value = serde_json::from_str(&refused).unwrap();
    assert_eq!(refused["error"]["code"], absent["error"]["code"]);
    assert!(!refused.to_string().contains("mine"));
    assert_eq!(
        served.events(&uid, "", None).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let mut own = served.events(&uid, "alice", None).await;
    assert_eq!(own.status(), StatusCode::OK);
    let head = served.journal.inner().head(&uid).await.unwrap();
    let mut seen = Seen(String::new());
    seen.until(&mut own, &format!("id: {head}\n")).await;
    assert!(seen.0.contains("mine"), "{}", seen.0);
}
