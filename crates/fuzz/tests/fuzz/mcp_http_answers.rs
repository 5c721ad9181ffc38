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
//! A seed (`corpus/mcp_http/<step>-*.http`) is one HTTP response: a status line, header lines,
//! a blank line, the body. In the body, `$ID` stands for the id of the request answered, `$HUGE`
//! for [`HUGE`] bytes (once per answer, so the fuzz budget bounds what a case sends), `$CUT` for
//! "the connection breaks here" and `$HOLD` for "the stream stays open, silent, from here".
//! The peer acts as a stateful server would: once `initialize` handed out a session id, a
//! request without it (or with another) gets `404`, which is rmcp's cue to initialize again.

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
/// Largest request body the peer reads (the hub's requests are small).
const MAX_REQUEST: usize = 1024 * 1024;
/// The whole run's resident memory may not exceed this: each case's answers are bounded (at
/// most one [`HUGE`] per answer), so growth past it is a leak or an unbounded buffer.
const MAX_RSS_KIB: u64 = 1024 * 1024;

/// The answers of one conversation: `initialize`, `tools/list`, `tools/call`.
type Answers = [Vec<u8>; 3];

const STEPS: [&str; 3] = ["initialize", "tools_list", "call_"];

/// The seeds of one step. As the valid neighbours of a fuzzed step only well-formed answers
/// serve (`call_result*` for the call), so that the fuzzed step's deep paths are reached; a
/// fuzzed step draws on every seed of its step.
fn seeds(corpus: &Corpus, step: usize, fuzzed: bool) -> Vec<Vec<u8>> {
    let prefix = if step == 2 && !fuzzed {
        "call_result"
    } else {
        STEPS[step]
    };
    let seeds: Vec<Vec<u8>> = corpus
        .seeds
        .iter()
        .filter(|(name, _)| name.starts_with(prefix) && (fuzzed || !name.contains("-found-")))
        .map(|(_, bytes)| bytes.clone())
        .collect();
    assert!(
        !seeds.is_empty(),
        "no corpus/mcp_http seeds named {prefix}*"
    );
    seeds
}

fn answers() -> BoxedStrategy<Answers> {
    let corpus = Corpus::load("mcp_http").unwrap();
    let valid = |step: usize| proptest::sample::select(seeds(&corpus, step, false)).boxed();
    let fuzzed = |step: usize| bytes_or_mutation(seeds(&corpus, step, true));
    prop_oneof![
        (fuzzed(0), valid(1), valid(2)).prop_map(|(a, b, c)| [a, b, c]),
        (valid(0), fuzzed(1), valid(2)).prop_map(|(a, b, c)| [a, b, c]),
        (valid(0), valid(1), fuzzed(2)).prop_map(|(a, b, c)| [a, b, c]),
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
            Ending::Cut => Body::from_stream(tokio_stream::iter([
                Ok(body),
                Err(std::io::Error::other("cut")),
            ])),
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

/// What the peer of one case knows.
struct Peer {
    answers: Answers,
    /// The session id its `initialize` answer handed out, if any.
    session: Mutex<Option<HeaderValue>>,
}

fn status(code: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = code;
    response
}

async fn answer(State(peer): State<Arc<Peer>>, request: Request) -> Response {
    // No standalone stream (the spec's answer for a server that offers none); DELETE ends
    // nothing to speak of.
    match *request.method() {
        Method::POST => {}
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
    {
        let mut session = peer.session.lock().unwrap_or_else(PoisonError::into_inner);
        if step > 0 && session.is_some() && *session != presented {
            return status(StatusCode::NOT_FOUND);
        }
        let answer = Answer::parse(&peer.answers[step], id);
        if step == 0 {
            *session = answer.session().cloned();
        }
        drop(session);
        answer.into_response()
    }
}

/// How far a conversation went.
struct Reached {
    listed: bool,
    answered: bool,
    /// The call's result or error, as text.
    text: String,
}

async fn converse(case: usize, answers: Answers, ledger: ToolLedger) -> Reached {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let peer = Arc::new(Peer {
        answers,
        session: Mutex::new(None),
    });
    let app = axum::Router::new().fallback(answer).with_state(peer);
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
        "mcp/http_answers: {} cases in {:?}, {} listed tools, {} calls answered, slowest case \
         {:?}, RSS {rss} KiB (peak {peak} KiB)",
        cases.load(Ordering::Relaxed),
        started.elapsed(),
        listed.load(Ordering::Relaxed),
        answered.load(Ordering::Relaxed),
        slowest.lock().unwrap_or_else(PoisonError::into_inner),
    );
    // Not vacuous: the valid steps around the fuzzed one reach the listing and the call.
    assert!(
        listed.load(Ordering::Relaxed) > 0 && answered.load(Ordering::Relaxed) > 0,
        "no case got past the handshake"
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
    let mut case = 0;
    let mut failed = Vec::new();
    for init in seeds(&corpus, 0, false) {
        for list in seeds(&corpus, 1, false) {
            for call in seeds(&corpus, 2, false) {
                let answers = [init.clone(), list.clone(), call.clone()];
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
