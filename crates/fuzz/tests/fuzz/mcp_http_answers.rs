//! MCP servers' answers over Streamable HTTP: the hub connects to a server by URL (rmcp's
//! streamable-HTTP client, as the daemon configures it), lists its tools and calls one through
//! the ledger, while a peer on 127.0.0.1 answers each POST with fuzzed HTTP responses:
//! `application/json` bodies and `text/event-stream` framing (mutated `event:`/`data:`/`id:`/
//! `retry:` lines, comments, split data lines), wrong content types and statuses, bad or
//! missing `Mcp-Session-Id` headers, streams cut mid-event or held open, and lines past rmcp's
//! 16 MiB limits. Every case ends in tools or an error, never a panic, within the hub's own
//! timeouts (shortened here so a held stream costs one second), and the process's memory stays
//! bounded.
//!
//! The call's stream can also be resumed. When a POST's event stream has carried an `id:` and
//! then breaks (or ends, after waiting what its `retry:` asked) before the JSON-RPC response,
//! rmcp asks again with a `GET` carrying `Last-Event-ID` and reads the events of that answer as
//! the rest of the stream; it keeps asking (at once after a break, with a growing pause after a
//! failed `GET`) until the response arrives, a `405` says the server offers no streams, or the
//! call's timeout ends the wait. The peer answers every such `GET` with the conversation's fourth
//! answer, fuzzed like the others: the rest of the stream with the response, replayed or
//! duplicate ids, a stream cut or held again, `405`, `404`, `503`, wrong content types, `$HUGE`.
//! A `GET` without `Last-Event-ID` (rmcp's standalone stream) is refused with `405`.
//!
//! A seed (`corpus/mcp_http/<step>-*.http`, the steps being `initialize`, `tools_list`,
//! `call_` and `resume_`) is one HTTP response: a status line, header lines, a blank line, the
//! body. In the body, `$ID` stands for the id of the request answered (for a resumed stream,
//! the call's), `$HUGE` for [`HUGE`] bytes (once per answer, so the fuzz budget bounds what a
//! case sends), `$CUT` for "the connection breaks here" and `$HOLD` for "the stream stays open,
//! silent, from here". The peer acts as a stateful server would: once `initialize` handed out a
//! session id, a request without it (or with another) gets `404`, which is rmcp's cue to
//! initialize again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agentsessions_api::{Mediation, ToolCall, ToolCatalog as _};
use agentsessions_controller::{ToolCallContext, ToolExecutor as _};
use agentsessions_fuzz::{Corpus, bytes_or_mutation, config, run};
use agentsessions_mcp::{McpHub, McpHubOptions, McpServerConfig, ToolLedger};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::Value;
use tokio_stream::StreamExt as _;

/// How long connecting and listing may take: a local peer answers in milliseconds.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The call's timeout, in seconds (the least a server entry allows).
const CALL_TIMEOUT_SECS: u64 = 1;
/// A case over this is a hang: the connect and call timeouts, plus shutdown and slack.
const CASE_LIMIT: Duration = Duration::from_secs(6);
/// What `$HUGE` expands to: just over rmcp's per-event and per-JSON-body limits (16 MiB).
const HUGE: usize = 16 * 1024 * 1024 + 1024;
/// How long after the bytes before `$CUT` the connection breaks: time for hyper to write them.
const CUT_DELAY: Duration = Duration::from_millis(20);
/// Largest request body the peer reads (the hub's requests are small).
const MAX_REQUEST: usize = 1024 * 1024;
/// The whole run's resident memory may not exceed this: each case's answers are bounded (at
/// most one [`HUGE`] per answer), so growth past it is a leak or an unbounded buffer.
const MAX_RSS_KIB: u64 = 1024 * 1024;

/// The answers of one conversation: `initialize`, `tools/list`, `tools/call`, and the `GET`
/// that resumes the call's stream.
type Answers = [Vec<u8>; 4];

const STEPS: [&str; 4] = ["initialize", "tools_list", "call_", "resume_"];

/// Index of the resumed stream's answer in [`Answers`].
const RESUME: usize = 3;

/// The seeds named `prefix*`; the inputs that once found a bug (`-found-`) only if
/// `with_found`, since those are no valid neighbours.
fn seeds_named(corpus: &Corpus, prefix: &str, with_found: bool) -> Vec<Vec<u8>> {
    let seeds: Vec<Vec<u8>> = corpus
        .seeds
        .iter()
        .filter(|(name, _)| name.starts_with(prefix) && (with_found || !name.contains("-found-")))
        .map(|(_, bytes)| bytes.clone())
        .collect();
    assert!(
        !seeds.is_empty(),
        "no corpus/mcp_http seeds named {prefix}*"
    );
    seeds
}

/// The seeds of one step. As the valid neighbours of a fuzzed step only well-formed answers
/// serve (`call_result*` for the call, `resume_result*` for the resumed stream), so that the
/// fuzzed step's deep paths are reached; a fuzzed step draws on every seed of its step.
fn seeds(corpus: &Corpus, step: usize, fuzzed: bool) -> Vec<Vec<u8>> {
    let prefix = match (step, fuzzed) {
        (2, false) => "call_result",
        (RESUME, false) => "resume_result",
        _ => STEPS[step],
    };
    seeds_named(corpus, prefix, fuzzed)
}

/// One step fuzzed per case, the others valid. A fuzzed resume follows a call whose stream
/// carried an event id and broke before the result (`call_cut*`), or no `GET` would be sent.
fn answers() -> BoxedStrategy<Answers> {
    let corpus = Corpus::load("mcp_http").unwrap();
    let valid = |step: usize| proptest::sample::select(seeds(&corpus, step, false)).boxed();
    let fuzzed = |step: usize| bytes_or_mutation(seeds(&corpus, step, true));
    let cut_call = proptest::sample::select(seeds_named(&corpus, "call_cut", false));
    prop_oneof![
        (fuzzed(0), valid(1), valid(2), valid(3)).prop_map(|(a, b, c, d)| [a, b, c, d]),
        (valid(0), fuzzed(1), valid(2), valid(3)).prop_map(|(a, b, c, d)| [a, b, c, d]),
        (valid(0), valid(1), fuzzed(2), valid(3)).prop_map(|(a, b, c, d)| [a, b, c, d]),
        (valid(0), valid(1), cut_call, fuzzed(3)).prop_map(|(a, b, c, d)| [a, b, c, d]),
    ]
    .boxed()
}

/// How an answer's body ends.
enum Ending {
    /// Sent whole.
    Whole,
    /// The connection breaks after the bytes before `$CUT`.
    Cut,
    /// The stream stays open after the bytes before `$HOLD`.
    Hold,
}

/// One seed as the response to the request with `id`.
struct Answer {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Vec<u8>,
    ending: Ending,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `bytes` with every `$ID` replaced by `id` and the first `$HUGE` by [`HUGE`] bytes (later
/// ones dropped).
fn expand(bytes: &[u8], id: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    let mut huge_left = true;
    loop {
        let next_id = find(rest, b"$ID");
        let next_huge = find(rest, b"$HUGE");
        let (at, len, is_huge) = match (next_id, next_huge) {
            (None, None) => break,
            (Some(i), Some(h)) if h < i => (h, 5, true),
            (None, Some(h)) => (h, 5, true),
            (Some(i), _) => (i, 3, false),
        };
        out.extend_from_slice(&rest[..at]);
        if !is_huge {
            out.extend_from_slice(id);
        } else if std::mem::take(&mut huge_left) {
            out.resize(out.len() + HUGE, b'x');
        }
        rest = &rest[at + len..];
    }
    out.extend_from_slice(rest);
    out
}

impl Answer {
    fn parse(seed: &[u8], id: &Value) -> Self {
        let (head, body) = match find(seed, b"\n\n") {
            Some(at) => (&seed[..at], &seed[at + 2..]),
            None => (&[][..], seed),
        };
        let mut lines = head.split(|b| *b == b'\n');
        // An unreadable status stays 200, so the body and headers are still exercised; 1xx
        // are not final answers hyper could send.
        let status = lines
            .next()
            .and_then(|line| std::str::from_utf8(line).ok())
            .and_then(|line| line.trim().parse::<u16>().ok())
            .filter(|code| *code >= 200)
            .and_then(|code| StatusCode::from_u16(code).ok())
            .unwrap_or(StatusCode::OK);
        let headers = lines
            .filter_map(|line| {
                let colon = line.iter().position(|b| *b == b':')?;
                let name = HeaderName::from_bytes(line[..colon].trim_ascii()).ok()?;
                let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii()).ok()?;
                // hyper frames the body itself.
                let framing = ["content-length", "transfer-encoding", "connection"];
                (!framing.contains(&name.as_str())).then_some((name, value))
            })
            .collect();
        let cut = find(body, b"$CUT");
        let hold = find(body, b"$HOLD");
        let (end, ending) = match (cut, hold) {
            (Some(c), Some(h)) if h < c => (h, Ending::Hold),
            (Some(c), _) => (c, Ending::Cut),
            (None, Some(h)) => (h, Ending::Hold),
            (None, None) => (body.len(), Ending::Whole),
        };
        Self {
            status,
            headers,
            body: expand(&body[..end], id.to_string().as_bytes()),
            ending,
        }
    }

    fn session(&self) -> Option<&HeaderValue> {
        self.headers
            .iter()
            .find(|(name, _)| name == "mcp-session-id")
            .map(|(_, value)| value)
    }

    fn into_response(self) -> Response {
        let body = Bytes::from(self.body);
        let body = match self.ending {
            Ending::Whole => Body::from(body),
            // The break waits a moment: an error right behind the bytes would have hyper drop
            // the connection before it wrote the response head, a failed request rather than a
            // stream cut mid-event (and no event id for rmcp to resume after).
            Ending::Cut => Body::from_stream(tokio_stream::iter([Ok(body)]).chain(
                tokio_stream::iter([()]).then(|()| async {
                    tokio::time::sleep(CUT_DELAY).await;
                    Err(std::io::Error::other("cut"))
                }),
            )),
            Ending::Hold => Body::from_stream(
                tokio_stream::iter([Ok::<_, std::io::Error>(body)]).chain(tokio_stream::pending()),
            ),
        };
        let mut response = Response::new(body);
        *response.status_mut() = self.status;
        for (name, value) in self.headers {
            response.headers_mut().append(name, value);
        }
        response
    }
}

/// How many resumptions a peer remembers the `Last-Event-ID` of: a stream cut again on every
/// resumption is asked for again at once, until the call's timeout, so the count is not bounded
/// by the script.
const RESUMES_KEPT: usize = 16;

/// What the peer of one case knows.
struct Peer {
    answers: Answers,
    /// The session id its `initialize` answer handed out, if any.
    session: Mutex<Option<HeaderValue>>,
    /// The id of the last `tools/call`: a resumed stream carries that call's response.
    call_id: Mutex<Value>,
    /// The `Last-Event-ID` of each resuming `GET` (the first [`RESUMES_KEPT`]).
    resumed_after: Mutex<Vec<String>>,
}

fn status(code: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = code;
    response
}

/// Whether a request presenting `presented` belongs to the peer's session (any request does
/// while no session was handed out).
fn in_session(peer: &Peer, presented: Option<&HeaderValue>) -> bool {
    let session = peer.session.lock().unwrap_or_else(PoisonError::into_inner);
    session.is_none() || session.as_ref() == presented
}

/// A `GET`: with `Last-Event-ID`, rmcp resuming the call's stream, answered with the script's
/// resume answer; without, its standalone stream, which this server does not offer.
fn resume(peer: &Peer, request: &Request) -> Response {
    let Some(last_event_id) = request.headers().get("last-event-id") else {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    };
    {
        let mut resumed_after = peer
            .resumed_after
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if resumed_after.len() < RESUMES_KEPT {
            resumed_after.push(String::from_utf8_lossy(last_event_id.as_bytes()).into_owned());
        }
    }
    if !in_session(peer, request.headers().get("mcp-session-id")) {
        return status(StatusCode::NOT_FOUND);
    }
    let call_id = peer
        .call_id
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    Answer::parse(&peer.answers[RESUME], &call_id).into_response()
}

async fn answer(State(peer): State<Arc<Peer>>, request: Request) -> Response {
    // DELETE ends nothing to speak of.
    match *request.method() {
        Method::POST => {}
        Method::GET => return resume(&peer, &request),
        Method::DELETE => return status(StatusCode::OK),
        _ => return status(StatusCode::METHOD_NOT_ALLOWED),
    }
    let presented = request.headers().get("mcp-session-id").cloned();
    let Ok(body) = axum::body::to_bytes(request.into_body(), MAX_REQUEST).await else {
        return status(StatusCode::PAYLOAD_TOO_LARGE);
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST);
    };
    let (Some(id), Some(method)) = (
        message.get("id"),
        message.get("method").and_then(Value::as_str),
    ) else {
        // Notifications, and the hub's answers to requests a fuzzed answer made.
        return status(StatusCode::ACCEPTED);
    };
    let step = match method {
        "initialize" => 0,
        "tools/list" => 1,
        "tools/call" => 2,
        _ => {
            let error = serde_json::json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"},
            });
            let mut response = Response::new(Body::from(error.to_string()));
            response
                .headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            return response;
        }
    };
    if step > 0 && !in_session(&peer, presented.as_ref()) {
        return status(StatusCode::NOT_FOUND);
    }
    if step == 2 {
        *peer.call_id.lock().unwrap_or_else(PoisonError::into_inner) = id.clone();
    }
    let answer = Answer::parse(&peer.answers[step], id);
    if step == 0 {
        *peer.session.lock().unwrap_or_else(PoisonError::into_inner) = answer.session().cloned();
    }
    answer.into_response()
}

/// How far a conversation went.
struct Reached {
    listed: bool,
    answered: bool,
    /// The call's result or error, as text.
    text: String,
    /// The `Last-Event-ID` of each `GET` that resumed the call's stream (the first
    /// [`RESUMES_KEPT`]).
    resumed_after: Vec<String>,
}

async fn converse(case: usize, answers: Answers, ledger: ToolLedger) -> Reached {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let peer = Arc::new(Peer {
        answers,
        session: Mutex::new(None),
        call_id: Mutex::new(Value::Null),
        resumed_after: Mutex::new(Vec::new()),
    });
    let app = axum::Router::new()
        .fallback(answer)
        .with_state(Arc::clone(&peer));
    // Aborted below: held streams would keep it serving.
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let config = McpServerConfig {
        name: "fuzz".into(),
        url,
        timeout_secs: Some(CALL_TIMEOUT_SECS),
        ..McpServerConfig::default()
    };
    let options = McpHubOptions {
        // No reconnection within a case: the script is played once.
        initial_backoff: Duration::from_secs(600),
        connect_timeout: CONNECT_TIMEOUT,
        ..McpHubOptions::default()
    };
    let hub = McpHub::start(vec![config], ledger, options).await.unwrap();
    let offered = hub.offered();
    let tool = offered
        .first()
        .map_or_else(|| "fuzz__count".to_owned(), |t| t.definition.name.clone());
    let call = ToolCall {
        id: format!("call-{case}"),
        tool,
        args: Some(serde_json::Map::new()),
        mediation: Mediation::default(),
        idempotency_key: String::new(),
    };
    let outcome = hub
        .execute_for(&ToolCallContext::new(&format!("s-{case}"), "e"), &call)
        .await;
    hub.shutdown().await;
    server.abort();
    drop(server.await);
    Reached {
        listed: !offered.is_empty(),
        answered: outcome.as_ref().is_ok_and(|result| !result.is_error),
        text: match outcome {
            Ok(result) => format!("{result:?}"),
            Err(e) => e.to_string(),
        },
        resumed_after: std::mem::take(
            &mut *peer
                .resumed_after
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        ),
    }
}

/// The process's resident set and its peak, in KiB (0 where `/proc` has none).
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[test]
fn mcp_http_server_answers_are_tools_results_or_errors() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ledger = ToolLedger::in_memory().unwrap();
    let cases = AtomicUsize::new(0);
    let listed = AtomicUsize::new(0);
    let answered = AtomicUsize::new(0);
    let resumed = AtomicUsize::new(0);
    let answered_after_resuming = AtomicUsize::new(0);
    let slowest = Mutex::new(Duration::ZERO);
    let started = Instant::now();
    run("mcp/http_answers", config(), &answers(), |answers| {
        let case = cases.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
        let ended = runtime.block_on(async {
            tokio::time::timeout(CASE_LIMIT, converse(case, answers, ledger.clone())).await
        });
        let Ok(reached) = ended else {
            return Err(TestCaseError::fail(format!(
                "the hub took more than {CASE_LIMIT:?} on a server's answers"
            )));
        };
        let took = began.elapsed();
        let mut slowest = slowest.lock().unwrap_or_else(PoisonError::into_inner);
        *slowest = (*slowest).max(took);
        listed.fetch_add(usize::from(reached.listed), Ordering::Relaxed);
        answered.fetch_add(usize::from(reached.answered), Ordering::Relaxed);
        let resumed_here = !reached.resumed_after.is_empty();
        resumed.fetch_add(usize::from(resumed_here), Ordering::Relaxed);
        answered_after_resuming.fetch_add(
            usize::from(resumed_here && reached.answered),
            Ordering::Relaxed,
        );
        let (rss, _) = rss_kib();
        prop_assert!(rss < MAX_RSS_KIB, "resident memory grew to {rss} KiB");
        Ok(())
    });
    // Every case shut its hub down and stopped its peer: tasks left alive would be the hub's
    // (a transport worker or SSE reconnection outliving `shutdown`), growing with the cases.
    let alive = runtime.block_on(async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    });
    let (rss, peak) = rss_kib();
    eprintln!("mcp/http_answers: {alive} tasks alive after the run");
    assert!(alive < 8, "{alive} tasks outlived their cases");
    eprintln!(
        "mcp/http_answers: {} cases in {:?}, {} listed tools, {} calls answered, {} calls \
         resumed by GET ({} of them answered), slowest case {:?}, RSS {rss} KiB (peak {peak} \
         KiB)",
        cases.load(Ordering::Relaxed),
        started.elapsed(),
        listed.load(Ordering::Relaxed),
        answered.load(Ordering::Relaxed),
        resumed.load(Ordering::Relaxed),
        answered_after_resuming.load(Ordering::Relaxed),
        slowest.lock().unwrap_or_else(PoisonError::into_inner),
    );
    // Not vacuous: the valid steps around the fuzzed one reach the listing and the call, and
    // the cut calls before a fuzzed resume reach the resuming `GET`.
    assert!(
        listed.load(Ordering::Relaxed) > 0 && answered.load(Ordering::Relaxed) > 0,
        "no case got past the handshake"
    );
    assert!(
        resumed.load(Ordering::Relaxed) > 0,
        "no case resumed the call's stream"
    );
}

// The seeds themselves: every conversation of well-formed answers (each initialize seed, each
// tools/list seed, each call_result seed) lists the tool and gets the call answered, so the
// fuzzed cases mutate conversations that work.
#[test]
fn every_conversation_of_valid_seeds_lists_and_answers() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let corpus = Corpus::load("mcp_http").unwrap();
    let ledger = ToolLedger::in_memory().unwrap();
    // The call_result answers are whole: nothing resumes them.
    let resume = seeds(&corpus, RESUME, false).swap_remove(0);
    let mut case = 0;
    let mut failed = Vec::new();
    for init in seeds(&corpus, 0, false) {
        for list in seeds(&corpus, 1, false) {
            for call in seeds(&corpus, 2, false) {
                let answers = [init.clone(), list.clone(), call.clone(), resume.clone()];
                let reached = runtime.block_on(async {
                    tokio::time::timeout(CASE_LIMIT, converse(case, answers, ledger.clone()))
                        .await
                        .expect("bounded time")
                });
                if !(reached.listed && reached.answered) {
                    failed.push(format!(
                        "{}\n{}\n{}\n=> {}",
                        String::from_utf8_lossy(&init)
                            .lines()
                            .nth(1)
                            .unwrap_or_default(),
                        String::from_utf8_lossy(&list)
                            .lines()
                            .nth(1)
                            .unwrap_or_default(),
                        String::from_utf8_lossy(&call)
                            .lines()
                            .nth(1)
                            .unwrap_or_default(),
                        reached.text
                    ));
                }
                case += 1;
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// The id of the last `id:` line `seed`'s body sends before it breaks: what rmcp must present
/// as `Last-Event-ID` when it resumes.
fn last_event_id_sent(seed: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(seed);
    let sent = text.split("$CUT").next().unwrap_or_default();
    sent.lines()
        .rev()
        .find_map(|line| line.strip_prefix("id:"))
        .map(|id| id.strip_prefix(' ').unwrap_or(id).to_owned())
}

// The resume path itself: a call whose event stream carried an id and broke (or ended) before
// its result is finished by the `GET` that presents that id as `Last-Event-ID`, with and
// without a session, for every cut call seed and every valid resume seed. The same call with a
// `405` for the `GET` fails, so the result really came from the resumed stream.
#[test]
fn a_call_stream_cut_after_an_event_id_is_resumed_by_get_and_answered() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let corpus = Corpus::load("mcp_http").unwrap();
    let ledger = ToolLedger::in_memory().unwrap();
    let list = seeds(&corpus, 1, false).swap_remove(0);
    let refused = seeds_named(&corpus, "resume_not-supported-405", false).swap_remove(0);
    let mut case = 0;
    let mut failed = Vec::new();
    for init in seeds(&corpus, 0, false) {
        for call in seeds_named(&corpus, "call_cut", false) {
            let expected = last_event_id_sent(&call).expect("a call_cut seed sends an id");
            for resume in seeds(&corpus, RESUME, false) {
                let answers = [init.clone(), list.clone(), call.clone(), resume.clone()];
                let reached = runtime.block_on(async {
                    tokio::time::timeout(CASE_LIMIT, converse(case, answers, ledger.clone()))
                        .await
                        .expect("bounded time")
                });
                case += 1;
                let resumed_right = reached.resumed_after.first() == Some(&expected);
                if !(reached.listed && reached.answered && resumed_right) {
                    failed.push(format!(
                        "{}\n{}\n{}\n=> resumed after {:?} (expected {expected:?}): {}",
                        String::from_utf8_lossy(&init),
                        String::from_utf8_lossy(&call),
                        String::from_utf8_lossy(&resume),
                        reached.resumed_after,
                        reached.text
                    ));
                }
            }
            let answers = [init.clone(), list.clone(), call.clone(), refused.clone()];
            let reached = runtime.block_on(async {
                tokio::time::timeout(CASE_LIMIT, converse(case, answers, ledger.clone()))
                    .await
                    .expect("bounded time")
            });
            case += 1;
            if reached.answered || reached.resumed_after.first() != Some(&expected) {
                failed.push(format!(
                    "{}\n{}\n=> with the GET refused: resumed after {:?}, answered {}: {}",
                    String::from_utf8_lossy(&init),
                    String::from_utf8_lossy(&call),
                    reached.resumed_after,
                    reached.answered,
                    reached.text
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
