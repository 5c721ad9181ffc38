//! Wall-clock jumps under the real daemon (order and deadlines never follow the wall clock):
//! `agentsessionsd` runs under libfaketime
//! (`LD_PRELOAD`), whose offset the test rewrites in a file the library re-reads on every
//! reading (`FAKETIME_TIMESTAMP_FILE`, `FAKETIME_NO_CACHE=1`). The clock jumps back an hour and
//! forward a day between turns and while a turn waits on its model. Turns complete, every chain
//! verifies, seq order is the log's order whatever the commit times say, a deadline and a
//! cancel still end a turn on time, and listing returns every session once; on the SQLite and
//! the Postgres journal. With `[auth]`, a bearer token's `exp` and `nbf` are judged on the
//! daemon's clock at each call.
//!
//! Only the wall clock (`CLOCK_REALTIME`) is faked (`FAKETIME_DONT_FAKE_MONOTONIC=1`): that is
//! the clock NTP steps, an operator sets and a restored VM resumes with. The kernel never steps
//! `CLOCK_MONOTONIC` back, and every timer in the daemon (tokio's, hence deadlines once a turn
//! has started, timeouts, back-off) runs on it, so faking it would test a clock no host has.
//!
//! Without libfaketime (Debian's `faketime` package) the test is skipped with a note, unless
//! `AGENTSESSIONS_REQUIRE_FAULT_TOOLS` is set (as `.ci/run` does): then it fails.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentsessions_client::{Client, ExecOptions, uid_of, verify};
use agentsessions_conformance::fixtures::CountingEndpoint;
use common::Daemon;
use common::ca::Ca;

const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
const STREAMED: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"done\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;

/// libfaketime's multi-threaded build where Debian puts it (any architecture).
fn libfaketime() -> Option<PathBuf> {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("faketime/libfaketimeMT.so.1"))
        .chain([PathBuf::from("/usr/lib/faketime/libfaketimeMT.so.1")])
        .find(|path| path.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("AGENTSESSIONS_REQUIRE_FAULT_TOOLS").is_none(),
            "libfaketime is not installed (apt-get install faketime), and \
             AGENTSESSIONS_REQUIRE_FAULT_TOOLS requires it"
        );
        eprintln!("skipped: libfaketime is not installed (apt-get install faketime)");
    }
    found
}

/// The daemon's clock, as an offset from the real one in seconds.
struct Clock {
    file: PathBuf,
    offset: std::cell::Cell<i64>,
}

impl Clock {
    fn new(dir: &Path) -> Self {
        let clock = Self {
            file: dir.join("faketime"),
            offset: std::cell::Cell::new(0),
        };
        clock.jump_to(0);
        clock
    }

    /// Sets the daemon's clock to the real one plus `offset` seconds, from its next reading on.
    fn jump_to(&self, offset: i64) {
        // Written whole then renamed, so a reading never sees a half-written offset.
        let next = self.file.with_extension("next");
        std::fs::write(&next, format!("{offset:+}\n")).unwrap();
        std::fs::rename(&next, &self.file).unwrap();
        self.offset.set(offset);
    }

    /// The daemon's "now", in Unix seconds.
    fn now(&self) -> i64 {
        let real = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        i64::try_from(real.as_secs()).unwrap() + self.offset.get()
    }
}

/// Where the daemon's journal is.
enum Store {
    /// `journal.db` in the test's directory.
    Sqlite,
    /// A fresh schema of the test server (`AGENTSESSIONS_TEST_POSTGRES_URL`), dropped on drop.
    Postgres(String),
}

fn pg_url() -> String {
    std::env::var("AGENTSESSIONS_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

impl Store {
    fn postgres() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Self::Postgres(format!("clock_{}_{nanos}", std::process::id()))
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Self::Postgres(schema) = self {
            let _ = std::process::Command::new("psql")
                .args([
                    &pg_url(),
                    "-q",
                    "-c",
                    &format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"),
                ])
                .output();
        }
    }
}

/// The daemon under libfaketime on `store`, with the configuration file `config` when given.
fn start_with(
    dir: &Path,
    faketime: &Path,
    clock: &Clock,
    model: &CountingEndpoint,
    store: &Store,
    config: Option<&Path>,
) -> Daemon {
    let mut command = Daemon::command();
    command.args(["--addr", "127.0.0.1:0", "--journal"]);
    match store {
        Store::Sqlite => command.arg(dir.join("journal.db")),
        Store::Postgres(schema) => command.args([pg_url().as_str(), "--journal-schema", schema]),
    };
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    command
        .args(["--model", "m", "--model-base-url", &model.base_url])
        .env("MODEL_API_KEY", "k")
        .env("LD_PRELOAD", faketime)
        .env("FAKETIME_TIMESTAMP_FILE", &clock.file)
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null());
    Daemon::spawn(command, false)
}

fn start(
    dir: &Path,
    faketime: &Path,
    clock: &Clock,
    model: &CountingEndpoint,
    store: &Store,
) -> Daemon {
    start_with(dir, faketime, clock, model, store, None)
}

async fn turn(
    client: &mut Client,
    session: &str,
    harness: &str,
    deadline_unix: i64,
) -> Result<(), String> {
    run_turn(client, session, harness, deadline_unix, false).await
}

/// A turn that first closes the session's unfinished turn when `abandon` (a turn the deadline
/// cut has an ERROR but no END, and new input is refused until it is closed: extensions §9).
async fn run_turn(
    client: &mut Client,
    session: &str,
    harness: &str,
    deadline_unix: i64,
    abandon: bool,
) -> Result<(), String> {
    let options = ExecOptions {
        session: session.to_owned(),
        harness: harness.to_owned(),
        deadline_unix,
        abandon_unfinished: abandon,
        ..ExecOptions::new("hello")
    };
    client
        .exec(options, |_| {})
        .await
        .map(|_| ())
        .map_err(|failed| failed.error.to_string())
}

/// The seconds of each record's commit time, in seq order, after checking the chain and that
/// seqs run 1, 2, 3… without a gap.
async fn commit_times(client: &mut Client, session: &str) -> Vec<i64> {
    let records = client.replay(session, 0, 0).await.unwrap();
    verify(&records).unwrap();
    let seqs: Vec<i64> = records.iter().map(|r| r.seq).collect();
    let expected: Vec<i64> = (1..=i64::try_from(records.len()).unwrap()).collect();
    assert_eq!(
        seqs, expected,
        "session {session}: seq order is the log's order"
    );
    records
        .iter()
        .map(|r| r.commit_time.as_ref().map_or(0, |t| t.seconds))
        .collect()
}

// Clock jumps: wall-clock jumps between and during turns break nothing.
#[tokio::test]
async fn wall_clock_jumps_between_and_during_turns_break_nothing() {
    jumps_break_nothing(&Store::Sqlite).await;
}

// The same on the Postgres journal, whose commit times and create times are the daemon's
// clock too (not the database server's), and whose listing pages by create time.
#[tokio::test]
async fn wall_clock_jumps_break_nothing_on_postgres() {
    jumps_break_nothing(&Store::postgres()).await;
}

async fn jumps_break_nothing(store: &Store) {
    let Some(faketime) = libfaketime() else {
        return;
    };
    // The first three model calls are held until released: a deadline, a cancel, a jump.
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 3).await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(dir.path());
    let daemon = start(dir.path(), &faketime, &clock, &model, store);
    let mut client = Client::dial(&daemon.addr).unwrap();
    let mut sessions = Vec::new();

    // Between turns: the same session's turns at +0, −1 h, +1 day, and one new session at each.
    let echo = uid_of(&client.create("echo", "echo", "").await.unwrap()).to_owned();
    for offset in [0, -HOUR, DAY, -HOUR] {
        clock.jump_to(offset);
        turn(&mut client, &echo, "echo", 0).await.unwrap();
        let created = client
            .create(&format!("at{offset}"), "echo", "")
            .await
            .unwrap();
        let uid = uid_of(&created).to_owned();
        turn(&mut client, &uid, "echo", 0).await.unwrap();
        let session = client.get(&uid).await.unwrap();
        let created_at = session.metadata.unwrap().create_time.unwrap().seconds;
        assert!(
            (created_at - clock.now()).abs() < 60,
            "a session's create time is the daemon's clock ({created_at} vs {})",
            clock.now()
        );
        sessions.push(uid);
    }
    sessions.push(echo.clone());
    let times = commit_times(&mut client, &echo).await;
    // The records carry the clock as it was: it went back, forward a day, back again.
    assert!(
        times.windows(2).any(|w| w[1] < w[0] - HOUR / 2),
        "no commit time went back: {times:?}"
    );
    assert!(
        times.iter().any(|&t| t > clock.now() + DAY / 2),
        "no commit time a day ahead: {times:?}"
    );

    // During a turn: a deadline (on the daemon's clock, 3 s ahead) still ends a turn whose
    // model never answers, though the clock jumps back an hour meanwhile.
    let chat = uid_of(&client.create("chat", "chat", "").await.unwrap()).to_owned();
    sessions.push(chat.clone());
    clock.jump_to(DAY);
    let began = Instant::now();
    let addr = daemon.addr.clone();
    let (session, deadline) = (chat.clone(), clock.now() + 3);
    let bounded = tokio::spawn(async move {
        let mut client = Client::dial(&addr).unwrap();
        turn(&mut client, &session, "chat", deadline).await
    });
    let waiting = Instant::now();
    while model.requests() < 1 {
        assert!(
            !bounded.is_finished(),
            "the turn ended before its model call"
        );
        assert!(waiting.elapsed() < Duration::from_secs(30), "no model call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    clock.jump_to(-HOUR);
    let ended = tokio::time::timeout(Duration::from_secs(30), bounded)
        .await
        .expect("the deadline ends the turn")
        .unwrap()
        .unwrap_err();
    assert!(ended.contains("DEADLINE_EXCEEDED"), "{ended}");
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "the deadline took {:?}",
        began.elapsed()
    );

    // A cancel ends a held turn across a jump forward (the turn the deadline cut is abandoned
    // by this one's opening).
    let addr = daemon.addr.clone();
    let session = chat.clone();
    let held = tokio::spawn(async move {
        let mut client = Client::dial(&addr).unwrap();
        run_turn(&mut client, &session, "chat", 0, true).await
    });
    let waiting = Instant::now();
    while model.requests() < 2 {
        assert!(!held.is_finished(), "the turn ended before its model call");
        assert!(
            waiting.elapsed() < Duration::from_secs(30),
            "no second model call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    clock.jump_to(DAY);
    client.cancel(&chat, "", "stop").await.unwrap();
    let cancelled = tokio::time::timeout(Duration::from_secs(15), held)
        .await
        .expect("the cancelled turn ends")
        .unwrap()
        .unwrap_err();
    assert!(cancelled.contains("CANCELLED"), "{cancelled}");

    // A turn whose model call spans a jump back completes: its records are committed a day
    // ahead, then an hour behind, in seq order.
    let addr = daemon.addr.clone();
    let session = chat.clone();
    let spanning = tokio::spawn(async move {
        let mut client = Client::dial(&addr).unwrap();
        turn(&mut client, &session, "chat", 0).await
    });
    let waiting = Instant::now();
    while model.requests() < 3 {
        assert!(
            !spanning.is_finished(),
            "the turn ended before its model call"
        );
        assert!(waiting.elapsed() < Duration::from_secs(30), "no model call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    clock.jump_to(-HOUR);
    model.release_held();
    tokio::time::timeout(Duration::from_secs(15), spanning)
        .await
        .expect("the turn completes")
        .unwrap()
        .unwrap();
    let times = commit_times(&mut client, &chat).await;
    assert!(
        times.windows(2).any(|w| w[1] < w[0] - HOUR / 2),
        "no commit time went back within the chat session: {times:?}"
    );

    // Listing walks every page and names every session once, whatever their create times.
    for page_size in [1, 2, 0] {
        let mut listed: Vec<String> = client
            .list(page_size)
            .await
            .unwrap()
            .iter()
            .map(|s| uid_of(s).to_owned())
            .collect();
        listed.sort();
        let mut expected = sessions.clone();
        expected.sort();
        assert_eq!(listed, expected, "page size {page_size}");
    }

    // A restart on the real clock reads the same journal: every chain verifies, turns go on.
    daemon.sigkill();
    clock.jump_to(0);
    let daemon = start(dir.path(), &faketime, &clock, &model, store);
    let mut client = Client::dial(&daemon.addr).unwrap();
    for session in &sessions {
        commit_times(&mut client, session).await;
    }
    turn(&mut client, &echo, "echo", 0).await.unwrap();
    turn(&mut client, &chat, "chat", 0).await.unwrap();
    commit_times(&mut client, &chat).await;
}

const ISSUER: &str = "https://idp.clock.test";
const AUDIENCE: &str = "agentsessions-clock";
const SECRET: &str = "clock-jump-test-secret-of-more-than-32-bytes";

/// An HS256 token for `sub` valid (on the clock whose "now" is `now`) from `now − 5 s` to
/// `now + lifetime`.
fn token(sub: &str, now: i64, lifetime: i64) -> String {
    let claims = serde_json::json!({
        "iss": ISSUER, "sub": sub, "aud": AUDIENCE,
        "iat": now, "nbf": now - 5, "exp": now + lifetime,
    });
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

fn as_bearer(addr: &str, token: &str) -> Client {
    Client::dial(addr)
        .unwrap()
        .with_bearer_token(token)
        .unwrap()
}

// Clock jumps: with `[auth]`, a token's validity is judged on the daemon's clock as it is at each
// call (libfaketime moves it, the test's clock stays real): a small step back (within the 60 s
// leeway) does not invalidate a valid token; a day forward makes a token that the real clock
// still holds valid expired, and it is refused with UNAUTHENTICATED before anything is written;
// a token valid on the jumped clock works meanwhile; and once the clock is back, the first token
// works again (nothing about it was cached).
#[tokio::test]
async fn token_expiry_is_judged_on_the_daemons_clock_across_jumps() {
    let Some(faketime) = libfaketime() else {
        return;
    };
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 0).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hmac.key"), SECRET).unwrap();
    let config = dir.path().join("agentsessionsd.toml");
    let key = dir.path().join("hmac.key");
    std::fs::write(
        &config,
        format!(
            "[auth]\nrequire_authentication = true\n[auth.jwt]\nissuers = [\"{ISSUER}\"]\n\
             audience = \"{AUDIENCE}\"\nleeway_secs = 60\n\
             [[auth.jwt.hmac_keys]]\nsecret_file = \"{}\"\n",
            key.display()
        ),
    )
    .unwrap();
    let clock = Clock::new(dir.path());
    let store = Store::Sqlite;
    let daemon = start_with(dir.path(), &faketime, &clock, &model, &store, Some(&config));
    // Valid for an hour on the real clock.
    let hour_token = token("alice", clock.now(), HOUR);
    let mut alice = as_bearer(&daemon.addr, &hour_token);
    let session = uid_of(&alice.create("tok", "echo", "").await.unwrap()).to_owned();
    turn(&mut alice, &session, "echo", 0).await.unwrap();

    // Back 30 s: `nbf` (5 s ago on the real clock) is now 25 s ahead of the daemon, within the
    // leeway, and `exp` further away than ever.
    clock.jump_to(-30);
    turn(&mut alice, &session, "echo", 0).await.unwrap();
    alice.get(&session).await.unwrap();

    // Forward a day: the hour token expired 23 h ago on the daemon's clock.
    clock.jump_to(DAY);
    let mut day_token_holder = as_bearer(&daemon.addr, &token("alice", clock.now(), 600));
    let records_before = day_token_holder.replay(&session, 0, 0).await.unwrap().len();
    let sessions_before = day_token_holder.list(0).await.unwrap().len();
    let refused = turn(&mut alice, &session, "echo", 0).await.unwrap_err();
    assert!(
        refused.contains("UNAUTHENTICATED") && refused.contains("expired"),
        "an expired token ran a turn: {refused}"
    );
    let refused = alice
        .create("late", "echo", "")
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("UNAUTHENTICATED"), "{refused}");
    let refused = alice.get(&session).await.unwrap_err().to_string();
    assert!(refused.contains("UNAUTHENTICATED"), "{refused}");
    // Nothing the refused calls asked for happened.
    assert_eq!(
        day_token_holder.replay(&session, 0, 0).await.unwrap().len(),
        records_before,
        "a refused turn wrote records"
    );
    assert_eq!(
        day_token_holder.list(0).await.unwrap().len(),
        sessions_before,
        "a refused create made a session"
    );
    // A token valid on the daemon's clock is admitted there.
    turn(&mut day_token_holder, &session, "echo", 0)
        .await
        .unwrap();

    // Back to the real clock: the hour token is valid again, the day token not yet (`nbf` a
    // day ahead).
    clock.jump_to(0);
    turn(&mut alice, &session, "echo", 0).await.unwrap();
    let early = turn(&mut day_token_holder, &session, "echo", 0)
        .await
        .unwrap_err();
    assert!(early.contains("UNAUTHENTICATED"), "{early}");
    let records = commit_times(&mut alice, &session).await;
    assert!(
        records.len() > records_before,
        "the later turns were written"
    );
}

// Clock jumps: with mTLS, a client certificate's validity is judged on the daemon's clock at each
// handshake (libfaketime moves it; the client's clock stays real, so the server's certificate
// stays valid to it). A certificate valid for an hour either side of the real now is admitted,
// refused a day ahead (expired) and a day behind (not yet valid), and admitted again once the
// clock is back: nothing about the certificate was cached.
#[tokio::test]
async fn client_certificate_validity_is_judged_on_the_daemons_clock_across_jumps() {
    let Some(faketime) = libfaketime() else {
        return;
    };
    let model = CountingEndpoint::start_full(ANSWER, Some(STREAMED), 0).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |name: &str, text: &str| common::write(d, name, text);
    let ca = Ca::new("Clock CA");
    let (server_cert, server_key) = ca.server();
    let real_now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let hour = HOUR.unsigned_abs();
    let (client_cert, client_key) =
        ca.client_valid("spiffe://example/clock", real_now - hour, real_now + hour);
    let ca_pem = write("ca.pem", &ca.pem);
    let config = write(
        "agentsessionsd.toml",
        &format!(
            "[auth]\nrequire_authentication = true\n[auth.tls]\ncert = \"{}\"\nkey = \"{}\"\n\
             client_ca = \"{ca_pem}\"\n",
            write("server.pem", &server_cert),
            write("server.key", &server_key),
        ),
    );
    let (client_cert, client_key) = (
        write("client.pem", &client_cert),
        write("client.key", &client_key),
    );
    let clock = Clock::new(d);
    let daemon = start_with(
        d,
        &faketime,
        &clock,
        &model,
        &Store::Sqlite,
        Some(Path::new(&config)),
    );
    let list = || {
        common::ctl(
            d,
            &[
                "--server",
                &daemon.addr,
                "--tls-ca",
                &ca_pem,
                "--tls-cert",
                &client_cert,
                "--tls-key",
                &client_key,
                "list",
            ],
        )
    };
    let admitted = list();
    assert!(
        admitted.status.success(),
        "refused on the real clock: {}",
        String::from_utf8_lossy(&admitted.stderr)
    );
    for (offset, what) in [(DAY, "expired"), (-DAY, "not yet valid")] {
        clock.jump_to(offset);
        let refused = list();
        assert!(
            !refused.status.success(),
            "a certificate {what} on the daemon's clock was admitted"
        );
        // The server's refusal comes after the client's handshake (TLS 1.3), so the client reads
        // either its alert or a broken pipe; either way agentctl names the connection's failure
        // instead of a bare "transport error".
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(
            said.contains("the connection to") && !said.contains("transport error"),
            "{said}"
        );
        eprintln!("{what}: {}", said.trim());
    }
    clock.jump_to(0);
    let again = list();
    assert!(
        again.status.success(),
        "refused once the clock was back: {}",
        String::from_utf8_lossy(&again.stderr)
    );
}
