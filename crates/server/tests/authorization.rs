//! Authorization over real gRPC on 127.0.0.1 (extensions §2): callers authenticated with bearer
//! tokens signed per run, every Sessions and HarnessRegistry RPC × {owner, other caller,
//! allowlisted caller, anonymous} × {OwnerAuthorizer, OwnerAllowlistAuthorizer}, with proof that
//! a denial discloses nothing and changes nothing; the exact actions each RPC asks a policy
//! for; owner-filtered listing across pages.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod fixtures;
#[path = "../../placement/tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::sync::{Arc, Mutex};

use agentsessions_api::{
    Action, AuthorizationRequest, Authorizer, CallerIdentity, Message, OwnerAllowlistAuthorizer,
    OwnerAuthorizer, Runtime, RuntimeCapabilities,
};
use agentsessions_auth::{Authenticator, BearerToken, JwtVerifier};
use agentsessions_harnesses::EchoHarness;
use agentsessions_journal::{Journal, ListQuery, SessionRow};
use agentsessions_model::EchoModel;
use agentsessions_placement::DescriptorSource;
use agentsessions_server::{RegistryService, ServerBuilder, SessionsService};
use agentsessions_sqlite::SqliteJournal;
use agentsessions_wire::pb;
use agentsessions_wire::pb::harness_registry_client::HarnessRegistryClient;
use agentsessions_wire::pb::sessions_client::SessionsClient;
use fixtures::{GatedHarness, uid_of};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use support::{InMemoryTestRuntime, Probe, TestDialer};
use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Status};

const ISSUER: &str = "https://idp.authz.test";
const AUDIENCE: &str = "agentsessions";
/// The name every test session carries: a denial must never echo it.
const SECRET_NAME: &str = "quarterly-numbers";

fn alice() -> CallerIdentity {
    CallerIdentity::new(ISSUER, "alice")
}
fn bob() -> CallerIdentity {
    CallerIdentity::new(ISSUER, "bob")
}
fn ops() -> CallerIdentity {
    CallerIdentity::new(ISSUER, "ops")
}

/// Allows everything and keeps every request it was asked to decide.
#[derive(Debug, Default)]
struct RecordingAuthorizer {
    asked: Mutex<Vec<AuthorizationRequest>>,
}

impl RecordingAuthorizer {
    fn take(&self) -> Vec<AuthorizationRequest> {
        std::mem::take(&mut *self.asked.lock().unwrap())
    }
}

#[async_trait::async_trait]
impl Authorizer for RecordingAuthorizer {
    async fn authorize(&self, request: &AuthorizationRequest) -> agentsessions_api::Result<()> {
        self.asked.lock().unwrap().push(request.clone());
        Ok(())
    }
}

/// Fails without deciding, with a reason that must stay in the server.
#[derive(Debug)]
struct BrokenAuthorizer;

#[async_trait::async_trait]
impl Authorizer for BrokenAuthorizer {
    async fn authorize(&self, _request: &AuthorizationRequest) -> agentsessions_api::Result<()> {
        Err(agentsessions_api::ApiError::status(
            agentsessions_api::StatusCode::Unavailable,
            "policy store at 10.0.0.7 unreachable",
        ))
    }
}

struct Signer {
    key: EncodingKey,
}

impl Signer {
    fn token(&self, subject: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims = serde_json::json!({
            "iss": ISSUER, "sub": subject, "aud": AUDIENCE,
            "iat": now, "nbf": now, "exp": now + 600,
        });
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.key).unwrap()
    }
}

struct Served {
    journal: Arc<dyn Journal>,
    addr: std::net::SocketAddr,
    signer: Signer,
    memory: Arc<InMemoryTestRuntime>,
    _dir: tempfile::TempDir,
}

/// A server on SQLite with the echo, gated and a memory-snapshot route, authenticating bearer
/// tokens (HS256, a secret drawn per run) and enforcing `authorizer`.
async fn serve(authorizer: Arc<dyn Authorizer>) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let journal: Arc<dyn Journal> =
        Arc::new(SqliteJournal::open(dir.path().join("journal.db")).unwrap());
    let mut secret = vec![0_u8; 48];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut secret);
    let mut verifier = JwtVerifier::new(vec![ISSUER.to_owned()], AUDIENCE.to_owned());
    verifier
        .add_hmac_secret(Path::new("test"), &secret, Algorithm::HS256, None, None)
        .unwrap();
    let authenticator = Arc::new(
        Authenticator::anonymous()
            .with_jwt(verifier)
            .requiring_authentication(true),
    );
    let memory = Arc::new(InMemoryTestRuntime::new(true, true));
    let none = RuntimeCapabilities::default();
    let service: SessionsService =
        ServerBuilder::new(Arc::clone(&journal), Arc::new(EchoModel::new()))
            .harness("echo", Arc::new(EchoHarness::new()), none)
            .harness("gated", Arc::new(GatedHarness), none)
            .runtime_harness(
                "vm",
                Arc::clone(&memory) as Arc<dyn Runtime>,
                Arc::new(TestDialer {
                    runtime: Arc::clone(&memory),
                }),
                DescriptorSource::Declared(Probe::descriptor(true)),
            )
            .default_harness("echo")
            .authorizer(authorizer)
            .build()
            .unwrap();
    let registry = RegistryService::new(&service);
    registry.load().await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let router = tonic::transport::Server::builder()
        .add_service(InterceptedService::new(
            service.into_server(),
            authenticator.interceptor(),
        ))
        .add_service(InterceptedService::new(
            registry.into_server(),
            authenticator.interceptor(),
        ));
    tokio::spawn(router.serve_with_incoming(incoming));
    Served {
        journal,
        addr,
        signer: Signer {
            key: EncodingKey::from_secret(&secret).unwrap(),
        },
        memory,
        _dir: dir,
    }
}

type Sessions = SessionsClient<InterceptedService<Channel, BearerToken>>;
type Registry = HarnessRegistryClient<InterceptedService<Channel, BearerToken>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Owner,
    Other,
    Allowlisted,
    Anonymous,
}

impl Served {
    /// Clients calling as `who`. The anonymous one presents no token this server can verify
    /// (a placeholder that is not a JWT), so every call it makes is unauthenticated.
    fn clients(&self, who: Who) -> (Sessions, Registry) {
        let channel = agentsessions_harnesswire::channel(&self.addr.to_string()).unwrap();
        let subject = match who {
            Who::Owner => "alice",
            Who::Other => "bob",
            Who::Allowlisted => "ops",
            Who::Anonymous => "",
        };
        let token = if subject.is_empty() {
            // Not a bearer token this server issued: the call is unauthenticated.
            "anonymous".to_owned()
        } else {
            self.signer.token(subject)
        };
        let bearer = BearerToken::new(&token).unwrap();
        (
            SessionsClient::with_interceptor(channel.clone(), bearer.clone()),
            HarnessRegistryClient::with_interceptor(channel, bearer),
        )
    }

    /// A fresh session owned by alice with one committed turn on `harness`.
    async fn owned_session(&self, harness: &str) -> String {
        let (mut owner_client, _) = self.clients(Who::Owner);
        let uid = format!("s-{}", agentsessions_journal::rules::new_session_uid());
        self.journal
            .put_session(SessionRow {
                uid: uid.clone(),
                name: SECRET_NAME.into(),
                harness: harness.into(),
                owner: alice(),
                ..SessionRow::default()
            })
            .await
            .unwrap();
        turn(&mut owner_client, &uid).await.unwrap();
        uid
    }

    /// Everything a denial must leave as it was: every session's row, head, fence and deletion
    /// state, and the harness registrations.
    async fn state(&self) -> String {
        let mut rows = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .journal
                .list_sessions(ListQuery {
                    page_size: 500,
                    page_token: token.clone(),
                    ..ListQuery::default()
                })
                .await
                .unwrap();
            for info in page.sessions {
                rows.push(format!(
                    "{} seq={} fence={} del={:?} owner={:?}",
                    info.row.uid, info.last_seq, info.fence, info.deletion, info.row.owner
                ));
            }
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        rows.sort();
        let harnesses = self.journal.list_harnesses("", 1000, true).await.unwrap();
        format!(
            "{rows:?} {:?}",
            harnesses.iter().map(|h| &h.name).collect::<Vec<_>>()
        )
    }
}

async fn turn(client: &mut Sessions, uid: &str) -> Result<Vec<pb::ExecUpdate>, Status> {
    let mut stream = client
        .exec(pb::ExecRequest {
            session: uid.into(),
            inputs: vec![pb::Message::from(Message::text_message("user", "go"))],
            ..pb::ExecRequest::default()
        })
        .await?
        .into_inner();
    let mut updates = Vec::new();
    while let Some(update) = stream.message().await? {
        updates.push(update);
    }
    Ok(updates)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rpc {
    Create,
    Get,
    List,
    ListApprovals,
    Delete,
    Exec,
    ExecCreating,
    Replay,
    ReadRecords,
    Watch,
    Approve,
    Cancel,
    Suspend,
    Resume,
    Fork,
    RegisterHarness,
    GetHarness,
    ListHarnesses,
    RetireHarness,
}

const RPCS: [Rpc; 19] = [
    Rpc::Create,
    Rpc::Get,
    Rpc::List,
    Rpc::ListApprovals,
    Rpc::Delete,
    Rpc::Exec,
    Rpc::ExecCreating,
    Rpc::Replay,
    Rpc::ReadRecords,
    Rpc::Watch,
    Rpc::Approve,
    Rpc::Cancel,
    Rpc::Suspend,
    Rpc::Resume,
    Rpc::Fork,
    Rpc::RegisterHarness,
    Rpc::GetHarness,
    Rpc::ListHarnesses,
    Rpc::RetireHarness,
];

/// What one call returned: its status, and what its responses disclosed.
struct Outcome {
    status: Result<(), Status>,
    /// Session uids the response named.
    disclosed: Vec<String>,
}

async fn call(rpc: Rpc, sessions: &mut Sessions, registry: &mut Registry, uid: &str) -> Outcome {
    let mut disclosed = Vec::new();
    let status: Result<(), Status> = async {
        match rpc {
            Rpc::Create => {
                let s = sessions
                    .create_session(pb::CreateSessionRequest::default())
                    .await?;
                disclosed.push(uid_of(s.get_ref()));
            }
            Rpc::Get => {
                let s = sessions
                    .get_session(pb::GetSessionRequest { uid: uid.into() })
                    .await?;
                disclosed.push(uid_of(s.get_ref()));
            }
            Rpc::List => {
                let page = sessions
                    .list_sessions(pb::ListSessionsRequest::default())
                    .await?;
                disclosed.extend(page.get_ref().sessions.iter().map(uid_of));
            }
            Rpc::ListApprovals => {
                let page = sessions
                    .list_approvals(pb::ListApprovalsRequest::default())
                    .await?;
                disclosed.extend(
                    page.get_ref()
                        .approvals
                        .iter()
                        .map(|a| a.session_uid.clone()),
                );
            }
            Rpc::Delete => {
                sessions
                    .delete_session(pb::DeleteSessionRequest { uid: uid.into() })
                    .await?;
            }
            Rpc::Exec => {
                turn(sessions, uid).await?;
            }
            Rpc::ExecCreating => {
                let updates = turn(sessions, "").await?;
                for update in updates {
                    if let Some(pb::exec_update::Update::Session(s)) = update.update {
                        disclosed.push(uid_of(&s));
                    }
                }
            }
            Rpc::Replay => {
                let mut stream = sessions
                    .replay(pb::ReplayRequest {
                        session: uid.into(),
                        ..pb::ReplayRequest::default()
                    })
                    .await?
                    .into_inner();
                while stream.message().await?.is_some() {}
            }
            Rpc::ReadRecords => {
                sessions
                    .read_records(pb::ReadRecordsRequest {
                        session: uid.into(),
                        ..pb::ReadRecordsRequest::default()
                    })
                    .await?;
            }
            Rpc::Watch => {
                // Authorized when it opens; the live stream itself never ends on its own, so an
                // allowed one is dropped once open.
                drop(
                    sessions
                        .watch(pb::WatchRequest {
                            session: uid.into(),
                            from_seq: 1,
                        })
                        .await?,
                );
            }
            Rpc::Approve => {
                sessions
                    .approve(pb::ApproveRequest {
                        session: uid.into(),
                        execution_id: "e".into(),
                        tool_call_id: "call".into(),
                        request_seq: 1,
                        approved: Some(true),
                        ..pb::ApproveRequest::default()
                    })
                    .await?;
            }
            Rpc::Cancel => {
                sessions
                    .cancel(pb::CancelRequest {
                        session: uid.into(),
                        ..pb::CancelRequest::default()
                    })
                    .await?;
            }
            Rpc::Suspend => {
                sessions
                    .suspend(pb::SuspendRequest {
                        session: uid.into(),
                    })
                    .await?;
            }
            Rpc::Resume => {
                sessions
                    .resume(pb::ResumeRequest {
                        session: uid.into(),
                        ..pb::ResumeRequest::default()
                    })
                    .await?;
            }
            Rpc::Fork => {
                let children = sessions
                    .fork(pb::ForkRequest {
                        session: uid.into(),
                        count: 2,
                        ..pb::ForkRequest::default()
                    })
                    .await?;
                disclosed.extend(children.get_ref().children.iter().map(uid_of));
            }
            Rpc::RegisterHarness => {
                registry
                    .register_harness(pb::RegisterHarnessRequest {
                        name: "newcomer".into(),
                        ..pb::RegisterHarnessRequest::default()
                    })
                    .await?;
            }
            Rpc::GetHarness => {
                registry
                    .get_harness(pb::GetHarnessRequest {
                        name: "echo".into(),
                        ..pb::GetHarnessRequest::default()
                    })
                    .await?;
            }
            Rpc::ListHarnesses => {
                registry
                    .list_harnesses(pb::ListHarnessesRequest::default())
                    .await?;
            }
            Rpc::RetireHarness => {
                registry
                    .retire_harness(pb::RetireHarnessRequest {
                        name: "echo".into(),
                        reason: "r".into(),
                    })
                    .await?;
            }
        }
        Ok(())
    }
    .await;
    Outcome { status, disclosed }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Owner,
    Allowlist,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Allowed,
    Denied,
    Unauthenticated,
}

/// The matrix of extensions §2. Under the allowlist policy alice may create and approve, ops
/// may create, list every owner's sessions, approve, and run the registry.
fn expected(policy: Policy, who: Who, rpc: Rpc) -> Expect {
    use Expect::{Allowed, Denied};
    if who == Who::Anonymous {
        return Expect::Unauthenticated;
    }
    let owner = who == Who::Owner;
    let allowlist = policy == Policy::Allowlist;
    match rpc {
        // Ordinary owner actions: the owner only, whatever the allowlists say.
        Rpc::Get
        | Rpc::Delete
        | Rpc::Exec
        | Rpc::Replay
        | Rpc::ReadRecords
        | Rpc::Watch
        | Rpc::Cancel
        | Rpc::Suspend
        | Rpc::Resume
        | Rpc::Fork => {
            if owner {
                Allowed
            } else {
                Denied
            }
        }
        // Everyone may list; what they see is filtered (checked separately).
        Rpc::List | Rpc::ListApprovals => Allowed,
        // Create and approve need an allowlist entry; approve also needs read (ownership).
        Rpc::Create | Rpc::ExecCreating => {
            if allowlist && who != Who::Other {
                Allowed
            } else {
                Denied
            }
        }
        Rpc::Approve => {
            if allowlist && owner {
                Allowed
            } else {
                Denied
            }
        }
        Rpc::RegisterHarness | Rpc::GetHarness | Rpc::ListHarnesses | Rpc::RetireHarness => {
            if allowlist && who == Who::Allowlisted {
                Allowed
            } else {
                Denied
            }
        }
    }
}

fn allowlist_policy() -> OwnerAllowlistAuthorizer {
    let mut policy = OwnerAllowlistAuthorizer::new()
        .allowing(Action::Create, alice())
        .allowing(Action::Create, ops())
        .allowing(Action::Approve, alice())
        .allowing(Action::Approve, ops())
        .allowing(Action::List, ops());
    for action in [
        Action::RegistryRead,
        Action::RegistryList,
        Action::RegistryRegister,
        Action::RegistryRetire,
    ] {
        policy = policy.allowing(action, ops());
    }
    policy
}

async fn run_matrix(policy: Policy) {
    let authorizer: Arc<dyn Authorizer> = match policy {
        Policy::Owner => Arc::new(OwnerAuthorizer),
        Policy::Allowlist => Arc::new(allowlist_policy()),
    };
    let served = serve(authorizer).await;
    let mut checked = 0;
    for who in [Who::Owner, Who::Other, Who::Allowlisted, Who::Anonymous] {
        let (mut sessions, mut registry) = served.clients(who);
        for rpc in RPCS {
            let uid = served.owned_session("echo").await;
            let before = served.state().await;
            let outcome = call(rpc, &mut sessions, &mut registry, &uid).await;
            let want = expected(policy, who, rpc);
            let case = format!("{policy:?} policy, {who:?} caller, {rpc:?}");
            match (want, &outcome.status) {
                (Expect::Allowed, Err(status)) => assert!(
                    !matches!(
                        status.code(),
                        Code::PermissionDenied | Code::Unauthenticated
                    ),
                    "{case}: expected to be allowed, got {status:?}"
                ),
                (Expect::Allowed, Ok(())) => {}
                (Expect::Denied | Expect::Unauthenticated, Ok(())) => {
                    panic!("{case}: expected {want:?}, the call succeeded")
                }
                (Expect::Denied | Expect::Unauthenticated, Err(status)) => {
                    let code = if want == Expect::Denied {
                        Code::PermissionDenied
                    } else {
                        Code::Unauthenticated
                    };
                    assert_eq!(status.code(), code, "{case}: {status:?}");
                    // Nothing disclosed: not the session, its name or owner; nothing written.
                    for secret in [uid.as_str(), SECRET_NAME, "alice"] {
                        assert!(
                            !status.message().contains(secret),
                            "{case}: the refusal discloses {secret:?}: {}",
                            status.message()
                        );
                    }
                    assert!(outcome.disclosed.is_empty(), "{case}");
                    assert_eq!(
                        served.state().await,
                        before,
                        "{case}: a denial changed state"
                    );
                }
            }
            if rpc == Rpc::List && want == Expect::Allowed {
                let mine_only = !(policy == Policy::Allowlist && who == Who::Allowlisted);
                if mine_only {
                    assert!(
                        who == Who::Owner || !outcome.disclosed.contains(&uid),
                        "{case}: listed another owner's session"
                    );
                } else {
                    assert!(outcome.disclosed.contains(&uid), "{case}: lister sees all");
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 76);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_policy_matrix() {
    run_matrix(Policy::Owner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_allowlist_policy_matrix() {
    run_matrix(Policy::Allowlist).await;
}

// A denied caller cannot tell someone else's session from a missing one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_is_the_same_for_missing_and_foreign_sessions() {
    let served = serve(Arc::new(OwnerAuthorizer)).await;
    let uid = served.owned_session("echo").await;
    let (mut bob, _) = served.clients(Who::Other);
    let foreign = bob
        .get_session(pb::GetSessionRequest { uid: uid.clone() })
        .await
        .unwrap_err();
    let missing = bob
        .get_session(pb::GetSessionRequest {
            uid: "s-does-not-exist".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), Code::PermissionDenied);
    assert_eq!(
        (foreign.code(), foreign.message()),
        (missing.code(), missing.message())
    );
    // Replay of a missing session is an empty stream without a policy (semantics §3.1); with
    // one, a refused caller gets the same denial.
    let replay = bob
        .replay(pb::ReplayRequest {
            session: "s-does-not-exist".into(),
            ..pb::ReplayRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(replay.code(), Code::PermissionDenied);
    let read = bob
        .read_records(pb::ReadRecordsRequest {
            session: "s-does-not-exist".into(),
            ..pb::ReadRecordsRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(read.code(), Code::PermissionDenied);
}

// Sessions created through the API are owned by their verified caller, never by a request
// field; fork children take their parent's owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_sessions_and_fork_children_are_owned() {
    let served = serve(Arc::new(allowlist_policy())).await;
    let (mut alice_client, _) = served.clients(Who::Owner);
    let created = alice_client
        .create_session(pb::CreateSessionRequest {
            session: Some(pb::Session {
                owner: Some(pb::CallerIdentity {
                    issuer: ISSUER.into(),
                    subject: "mallory".into(),
                }),
                ..pb::Session::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let uid = uid_of(&created);
    let owner = created.owner.clone().unwrap();
    assert_eq!(
        (owner.issuer.as_str(), owner.subject.as_str()),
        (ISSUER, "alice")
    );
    assert_eq!(
        served.journal.session_info(&uid).await.unwrap().row.owner,
        alice()
    );
    turn(&mut alice_client, &uid).await.unwrap();
    let children = alice_client
        .fork(pb::ForkRequest {
            session: uid.clone(),
            count: 2,
            ..pb::ForkRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .children;
    for child in &children {
        assert_eq!(
            served
                .journal
                .session_info(&uid_of(child))
                .await
                .unwrap()
                .row
                .owner,
            alice()
        );
        // The owner keeps working on the children; another caller is refused.
        turn(&mut alice_client, &uid_of(child)).await.unwrap();
    }
    let (mut bob_client, _) = served.clients(Who::Other);
    let refused = turn(&mut bob_client, &uid_of(&children[0]))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
}

// Listing under a policy is an owner-filtered query: two owners' sessions never mix, across
// page boundaries, and page sizes stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_two_owners_across_pages() {
    let served = serve(Arc::new(allowlist_policy())).await;
    let mut expected_alice = Vec::new();
    let mut expected_bob = Vec::new();
    for i in 0..7 {
        for (owner, list) in [(alice(), &mut expected_alice), (bob(), &mut expected_bob)] {
            let uid = format!("{}-{i}", owner.subject);
            served
                .journal
                .put_session(SessionRow {
                    uid: uid.clone(),
                    owner,
                    ..SessionRow::default()
                })
                .await
                .unwrap();
            list.push(uid);
        }
    }
    for (who, expected) in [(Who::Owner, &expected_alice), (Who::Other, &expected_bob)] {
        let (mut client, _) = served.clients(who);
        let mut seen = Vec::new();
        let mut token = String::new();
        let mut sizes = Vec::new();
        loop {
            let page = client
                .list_sessions(pb::ListSessionsRequest {
                    page_size: 3,
                    page_token: token.clone(),
                    ..pb::ListSessionsRequest::default()
                })
                .await
                .unwrap()
                .into_inner();
            sizes.push(page.sessions.len());
            seen.extend(page.sessions.iter().map(uid_of));
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        assert_eq!(
            sizes,
            [3, 3, 1],
            "{who:?}: full pages of the caller's own sessions"
        );
        let mut sorted = seen.clone();
        sorted.sort();
        let mut want = expected.clone();
        want.sort();
        assert_eq!(sorted, want, "{who:?} sees exactly their own sessions");
    }
    // The allowlisted lister sees both owners.
    let (mut ops_client, _) = served.clients(Who::Allowlisted);
    let all = ops_client
        .list_sessions(pb::ListSessionsRequest {
            page_size: 100,
            ..pb::ListSessionsRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.sessions.len(), 14);
}

fn summary(asked: &[AuthorizationRequest]) -> Vec<(Action, String, String, String)> {
    asked
        .iter()
        .map(|r| {
            (
                r.action,
                r.session_uid.clone(),
                r.owner.subject.clone(),
                r.method.rsplit('/').next().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

// The actions each RPC asks for, with the session, its stored owner and the RPC name, including
// the compound ones: Approve (approve + read), an auto-creating Exec (create + exec), a Resume
// that runs a decided approval on (resume + exec), a fork that checkpoints memory (fork +
// suspend).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rpc_asks_for_its_actions() {
    let recorder = Arc::new(RecordingAuthorizer::default());
    let served = serve(Arc::clone(&recorder) as Arc<dyn Authorizer>).await;
    let (mut client, mut registry) = served.clients(Who::Owner);
    let a = "alice".to_owned();
    let e = String::new();

    let created = client
        .create_session(pb::CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner();
    let uid = uid_of(&created);
    assert_eq!(
        summary(&recorder.take()),
        [(Action::Create, e.clone(), e.clone(), "CreateSession".into())]
    );

    turn(&mut client, &uid).await.unwrap();
    assert_eq!(
        summary(&recorder.take()),
        [(Action::Exec, uid.clone(), a.clone(), "Exec".into())]
    );

    let updates = turn(&mut client, "").await.unwrap();
    let new_uid = updates
        .iter()
        .find_map(|u| match &u.update {
            Some(pb::exec_update::Update::Session(s)) => Some(uid_of(s)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        summary(&recorder.take()),
        [
            (Action::Create, e.clone(), e.clone(), "Exec".into()),
            (Action::Exec, new_uid.clone(), a.clone(), "Exec".into()),
        ]
    );

    for (rpc, action, name) in [
        (Rpc::Get, Action::Read, "GetSession"),
        (Rpc::Replay, Action::Read, "Replay"),
        (Rpc::ReadRecords, Action::Read, "ReadRecords"),
        (Rpc::Watch, Action::Read, "Watch"),
        (Rpc::Suspend, Action::Suspend, "Suspend"),
        (Rpc::Resume, Action::Resume, "Resume"),
        (Rpc::Cancel, Action::Cancel, "Cancel"),
        (Rpc::Fork, Action::Fork, "Fork"),
        (Rpc::Delete, Action::Delete, "DeleteSession"),
    ] {
        call(rpc, &mut client, &mut registry, &uid).await;
        assert_eq!(
            summary(&recorder.take()),
            [(action, uid.clone(), a.clone(), name.into())],
            "{rpc:?}"
        );
    }

    call(Rpc::List, &mut client, &mut registry, "").await;
    assert_eq!(
        summary(&recorder.take()),
        [(Action::List, e.clone(), e.clone(), "ListSessions".into())],
        "an unfiltered listing the policy allows"
    );
    call(Rpc::ListApprovals, &mut client, &mut registry, "").await;
    assert_eq!(
        summary(&recorder.take()),
        [(Action::List, e.clone(), e.clone(), "ListApprovals".into())],
        "pending approvals are listed like sessions"
    );

    for (rpc, action, name) in [
        (
            Rpc::RegisterHarness,
            Action::RegistryRegister,
            "RegisterHarness",
        ),
        (Rpc::GetHarness, Action::RegistryRead, "GetHarness"),
        (Rpc::ListHarnesses, Action::RegistryList, "ListHarnesses"),
        (Rpc::RetireHarness, Action::RegistryRetire, "RetireHarness"),
    ] {
        call(rpc, &mut client, &mut registry, "").await;
        assert_eq!(
            summary(&recorder.take()),
            [(action, e.clone(), e.clone(), name.into())],
            "{rpc:?}"
        );
    }

    // Approval: a parked turn, the decision (approve + read), then the Resume that runs the
    // decided call on (resume + exec). A denial: this host has no tool executor, so an approval
    // would be refused before anything is journaled (extensions §9).
    let gated = served.owned_session("gated").await;
    recorder.take();
    let parked = client
        .get_session(pb::GetSessionRequest { uid: gated.clone() })
        .await
        .unwrap()
        .into_inner()
        .pending_approval
        .unwrap();
    recorder.take();
    client
        .approve(pb::ApproveRequest {
            session: gated.clone(),
            execution_id: parked.execution_id.clone(),
            tool_call_id: parked.tool_call_id.clone(),
            request_seq: parked.request_seq,
            approved: Some(false),
            ..pb::ApproveRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(
        summary(&recorder.take()),
        [
            (Action::Approve, gated.clone(), a.clone(), "Approve".into()),
            (Action::Read, gated.clone(), a.clone(), "Approve".into()),
        ]
    );
    // Whatever the turn then does, the checks came first.
    let _resumed = client
        .resume(pb::ResumeRequest {
            session: gated.clone(),
            ..pb::ResumeRequest::default()
        })
        .await;
    assert_eq!(
        summary(&recorder.take()),
        [
            (Action::Resume, gated.clone(), a.clone(), "Resume".into()),
            (Action::Exec, gated.clone(), a.clone(), "Resume".into()),
        ]
    );

    // A memory-snapshot session's fork checkpoints the parent: fork + suspend.
    let vm = served.owned_session("vm").await;
    recorder.take();
    let forked = client
        .fork(pb::ForkRequest {
            session: vm.clone(),
            count: 1,
            ..pb::ForkRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(forked.into_inner().children.len(), 1);
    assert_eq!(
        summary(&recorder.take()),
        [
            (Action::Fork, vm.clone(), a.clone(), "Fork".into()),
            (Action::Suspend, vm.clone(), a.clone(), "Fork".into()),
        ]
    );
    assert!(served.memory.probe(&vm).is_some());
}

// A policy that fails without deciding is a host failure: the call is not performed and the
// caller never sees the policy's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_policy_is_sanitized_and_performs_nothing() {
    let served = serve(Arc::new(BrokenAuthorizer)).await;
    served
        .journal
        .put_session(SessionRow {
            uid: "s1".into(),
            owner: alice(),
            ..SessionRow::default()
        })
        .await
        .unwrap();
    let before = served.state().await;
    let (mut client, _) = served.clients(Who::Owner);
    let status = turn(&mut client, "s1").await.unwrap_err();
    assert_eq!(status.code(), Code::Internal);
    assert!(
        !status.message().contains("10.0.0.7"),
        "{}",
        status.message()
    );
    assert!(
        !status.message().contains("unreachable"),
        "{}",
        status.message()
    );
    assert_eq!(served.state().await, before);
}

// extensions §7 (pending approvals): ListApprovals shows each caller the requests on the sessions
// it may list; a decision records the verified caller as its actor, whatever the request claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_approvals_are_listed_by_owner_and_decided_by_the_verified_caller() {
    let served = serve(Arc::new(allowlist_policy())).await;
    let gated = served.owned_session("gated").await;
    let listed = |who: Who| {
        let (mut client, _) = served.clients(who);
        async move {
            client
                .list_approvals(pb::ListApprovalsRequest::default())
                .await
                .unwrap()
                .into_inner()
                .approvals
        }
    };
    let mine = listed(Who::Owner).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].session_uid, gated);
    assert!(
        listed(Who::Other).await.is_empty(),
        "bob sees none of alice's"
    );
    assert_eq!(
        listed(Who::Allowlisted).await.len(),
        1,
        "ops lists every owner"
    );

    let (mut client, _) = served.clients(Who::Owner);
    let pending = &mine[0];
    let decided = client
        .approve(pb::ApproveRequest {
            session: gated.clone(),
            execution_id: pending.execution_id.clone(),
            tool_call_id: pending.tool_call_id.clone(),
            request_seq: pending.request_seq,
            approved: Some(false),
            reason: "no".into(),
            identity: Some(pb::IdentityRef {
                principal: "someone-else".into(),
                issuer: "https://forged.test".into(),
                subject: "mallory".into(),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let actor = decided.decision.unwrap().event.unwrap().actor.unwrap();
    assert_eq!(
        (actor.issuer.as_str(), actor.subject.as_str()),
        (alice().issuer.as_str(), "alice")
    );
    assert!(listed(Who::Owner).await.is_empty(), "a decision closes it");
}
