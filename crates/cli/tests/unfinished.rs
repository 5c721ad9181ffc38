//! Unfinished turns through the real binaries on 127.0.0.1 (extensions §9): `agentsessionsd`
//! runs the chat harness against a stub OpenAI-compatible model with the MCP fixture server's
//! tools, and every dead end a parked or interrupted turn could reach has a way out through
//! `agentctl` and the console.
//!
//! The fixture server is a binary of the `agentsessions-mcp` package; `cargo test --workspace`
//! builds it next to this package's binaries.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use common::{CTL, Daemon, fixture_server};
use serde_json::{Value, json};

const KEY_VARIABLE: &str = "UNFINISHED_TEST_MODEL_KEY";
/// `agentctl`'s exit code for FAILED_PRECONDITION (and the other conflicts).
const CONFLICT: i32 = 6;

/// The stub model's answer: text quoting a tool result that came last; otherwise the user's
/// `call NAME {json}` asks for that tool, and anything else is answered in text.
fn answer(request: &Value) -> Value {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let text = last["content"].as_str().unwrap_or_default().to_owned();
    let message = if last["role"] == "tool" {
        json!({"role": "assistant", "content": format!("the tool said: {text}")})
    } else if let Some(directive) = text.strip_prefix("call ") {
        let (name, arguments) = directive.split_once(' ').unwrap_or((directive, "{}"));
        json!({"role": "assistant", "content": null, "tool_calls": [{"id":
            format!("call_{}", messages.len()), "type": "function",
            "function": {"name": name, "arguments": arguments}}]})
    } else {
        json!({"role": "assistant", "content": "noted"})
    };
    let finish = if message["tool_calls"].is_array() {
        "tool_calls"
    } else {
        "stop"
    };
    json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
}

/// `whole` as a chat-completions event stream.
fn as_stream(whole: &Value) -> String {
    let choice = &whole["choices"][0];
    let mut delta = choice["message"].clone();
    if let Some(calls) = delta["tool_calls"].as_array_mut() {
        for (i, call) in calls.iter_mut().enumerate() {
            call["index"] = json!(i);
        }
    }
    let chunk = json!({"choices": [{"index": 0, "delta": delta,
        "finish_reason": choice["finish_reason"]}]});
    let usage = json!({"choices": [], "usage": whole["usage"]});
    format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n")
}

/// The stub model on 127.0.0.1, keeping every request body it was sent.
struct StubModel {
    base_url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    _runtime: tokio::runtime::Runtime,
}

impl StubModel {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&requests);
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move |body: Bytes| {
                let kept = Arc::clone(&kept);
                async move {
                    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    kept.lock().unwrap().push(request.clone());
                    let whole = answer(&request);
                    if request["stream"] == true {
                        (
                            StatusCode::OK,
                            [(header::CONTENT_TYPE, "text/event-stream")],
                            as_stream(&whole),
                        )
                            .into_response()
                    } else {
                        (
                            StatusCode::OK,
                            [(header::CONTENT_TYPE, "application/json")],
                            whole.to_string(),
                        )
                            .into_response()
                    }
                }
            }),
        );
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            requests,
            _runtime: runtime,
        }
    }

    fn last_request(&self) -> Value {
        self.requests.lock().unwrap().last().cloned().unwrap()
    }
}

/// A daemon config: the stub model and, when `approval` is given, the fixture server with it.
fn write_config(dir: &Path, model: &StubModel, approval: Option<&str>) -> PathBuf {
    let config = dir.join(match approval {
        Some(_) => "with-tools.toml",
        None => "without-tools.toml",
    });
    let mut text = format!(
        "journal = \"agents.db\"\n\
         model = \"stub-model\"\n\
         model_provider = \"openai\"\n\
         model_base_url = \"{}\"\n\
         model_api_key_env = \"{KEY_VARIABLE}\"\n",
        model.base_url
    );
    if let Some(approval) = approval {
        text.push_str(&format!(
            "[[mcp_servers]]\n\
             name = \"fixture\"\n\
             command = \"{}\"\n\
             env = {{ MCP_FIXTURE_COUNT_FILE = \"{}\" }}\n\
             approval = {approval}\n",
            fixture_server().display(),
            dir.join("count").display(),
        ));
    }
    std::fs::write(&config, text).unwrap();
    config
}

/// The daemon in `dir` with `config`; once its MCP server (if any) is up.
fn start(dir: &Path, config: &Path, http: bool) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--config"])
        .arg(config)
        .current_dir(dir)
        .env(KEY_VARIABLE, "stub-key")
        .stderr(Stdio::null());
    if http {
        command.args(["--http-addr", "127.0.0.1:0"]);
    }
    let daemon = Daemon::spawn(command, false);
    if std::fs::read_to_string(config).is_ok_and(|text| text.contains("[[mcp_servers]]")) {
        daemon.wait_for_mcp(&["fixture"]);
    }
    daemon
}

fn count(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("count"))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

fn session_of(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session line in {out}"))
        .to_owned()
}

/// A refusal: exit code 6 and the words a person needs on stderr.
fn refused(out: &Output, words: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(CONFLICT),
        "{}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    for word in words {
        assert!(stderr.contains(word), "{word:?} not in {stderr}");
    }
}

/// GET (or POST with `body`) on the console API at `base`; the status and JSON answer.
fn console(base: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let url = format!("{base}/api/v1{path}");
        let request = match body {
            Some(body) => http
                .post(url)
                .header("x-agentsessions-csrf", "1")
                .header("content-type", "application/json")
                .body(body.to_string()),
            None => http.get(url),
        };
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    })
}

// extensions §9: kill -9 of the daemon while a tool call is in flight;
// after the restart, new input on the session is refused (exit 6) naming resume and --abandon,
// and the console says INTERRUPTED with resume as the way on. `exec --abandon` closes the old
// turn first — its call answered "outcome unknown, not retried" (never re-run), END CANCELED —
// and the model's next request carries that answer for the call it made. A resume then has
// nothing to do, and the chain verifies.
#[test]
fn a_turn_killed_mid_call_refuses_new_input_until_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = StubModel::start();
    let config = write_config(d, &model, Some("\"never\""));
    let daemon = start(d, &config, false);
    let out = daemon.ok(&["exec", "--harness", "chat", "hello"]);
    let uid = session_of(&out);
    let addr = daemon.addr.clone();
    let held = uid.clone();
    let turn = std::thread::spawn(move || {
        Command::new(CTL)
            .args(["--server", &addr, "exec", "--session", &held])
            .args(["call", "fixture__count", r#"{"hold_ms": 60000}"#])
            .output()
            .unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(d) == 0 {
        assert!(Instant::now() < deadline, "the tool never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    daemon.sigkill();
    assert!(!turn.join().unwrap().status.success());

    let daemon = start(d, &config, true);
    let got = daemon.ok(&["get", "--session", &uid]);
    assert!(got.contains("INTERRUPTED"), "{got}");
    let (status, shown) = console(
        &format!("http://{}", daemon.http),
        &format!("/sessions/{uid}"),
        None,
    );
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["next_step"]["state"], "INTERRUPTED", "{shown}");
    assert_eq!(shown["next_step"]["action"], "resume", "{shown}");
    assert_eq!(shown["next_step"]["instead"], "abandon", "{shown}");

    let before = daemon.ok(&["replay", "--session", &uid]);
    refused(
        &daemon.ctl(&["exec", "--session", &uid, "a new message"]),
        &["agentctl resume", "--abandon"],
    );
    assert_eq!(daemon.ok(&["replay", "--session", &uid]), before);

    let out = daemon.ok(&["exec", "--session", &uid, "--abandon", "a new message"]);
    assert!(out.contains("outcome unknown, not retried"), "{out}");
    assert!(out.contains("END  CANCELED"), "{out}");
    assert!(out.contains("END  COMPLETED"), "{out}");
    assert_eq!(count(d), 1, "the abandoned call is never run again");
    // The model is told: its call has an answer, right after it.
    let request = model.last_request();
    let messages = request["messages"].as_array().unwrap();
    let asked = messages
        .iter()
        .position(|m| m["tool_calls"].is_array())
        .unwrap_or_else(|| panic!("the call is not in the history: {request}"));
    let call_id = &messages[asked]["tool_calls"][0]["id"];
    let answer = &messages[asked + 1];
    assert_eq!(answer["role"], "tool", "{request}");
    assert_eq!(&answer["tool_call_id"], call_id, "{request}");
    assert!(
        answer["content"]
            .as_str()
            .unwrap()
            .contains("outcome unknown, not retried"),
        "{request}"
    );

    let resumed = daemon.ok(&["resume", "--session", &uid]);
    assert!(resumed.contains(&uid), "{resumed}");
    assert_eq!(count(d), 1);
    let got = daemon.ok(&["get", "--session", &uid]);
    assert!(got.contains("COMPLETED"), "{got}");
    let (_, shown) = console(
        &format!("http://{}", daemon.http),
        &format!("/sessions/{uid}"),
        None,
    );
    assert!(shown.get("next_step").is_none(), "{shown}");
    let verified = daemon.ok(&["verify", "--session", &uid]);
    assert!(verified.starts_with("verified"), "{verified}");
}

/// The request seq of `uid`'s pending approval, from `agentctl approvals`.
fn request_seq(daemon: &Daemon, uid: &str) -> String {
    let pending = daemon.ok(&["approvals"]);
    pending
        .lines()
        .find(|line| line.contains(uid))
        .and_then(|line| line.split("request_seq=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no request of {uid} in {pending}"))
        .to_owned()
}

// extensions §9: a turn parked at an approval, on a host that has no
// tool executor for the call: approve is refused naming what is missing, and nothing is
// journaled; new input is refused naming the decision; cancel closes the turn (the call "not
// run", END CANCELED) and new input runs. Back on a host with the tool, deny needs no
// execution id: the pending approval names it.
#[test]
fn a_parked_turn_on_a_host_without_the_tool_has_ways_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = StubModel::start();
    let with_tools = write_config(d, &model, Some("[\"count\"]"));
    let without_tools = write_config(d, &model, None);
    let daemon = start(d, &with_tools, false);
    let cancelled =
        session_of(&daemon.parked(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]));
    let denied =
        session_of(&daemon.parked(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]));
    daemon.sigkill();

    let daemon = start(d, &without_tools, false);
    let before = daemon.ok(&["replay", "--session", &cancelled]);
    refused(
        &daemon.ctl(&["approve", "--session", &cancelled]),
        &["cannot carry out", "no tool executor", "fixture__count"],
    );
    assert_eq!(
        daemon.ok(&["replay", "--session", &cancelled]),
        before,
        "nothing journaled"
    );
    refused(
        &daemon.ctl(&["exec", "--session", &cancelled, "more"]),
        &["agentctl approve", "--abandon"],
    );
    daemon.ok(&[
        "cancel",
        "--session",
        &cancelled,
        "--reason",
        "no tool here",
    ]);
    let closed = daemon.ok(&["replay", "--session", &cancelled]);
    assert!(closed.contains("not run"), "{closed}");
    assert!(closed.contains("END  CANCELED"), "{closed}");
    assert!(!closed.contains("APPROVAL_RESULT"), "{closed}");
    // Nothing is left to cancel.
    refused(
        &daemon.ctl(&["cancel", "--session", &cancelled]),
        &["no unfinished turn"],
    );
    let out = daemon.ok(&["exec", "--session", &cancelled, "more"]);
    assert!(out.contains("END  COMPLETED"), "{out}");
    daemon.sigkill();

    let daemon = start(d, &with_tools, false);
    let seq = request_seq(&daemon, &denied);
    daemon.ok(&[
        "deny",
        "--session",
        &denied,
        "--request-seq",
        &seq,
        "--reason",
        "not now",
    ]);
    let out = daemon.ok(&["replay", "--session", &denied]);
    assert!(out.contains("denied"), "{out}");
    assert!(out.contains("END  COMPLETED"), "{out}");
    assert_eq!(count(d), 0, "no call ran");
}

// extensions §9: `agentctl ui` over a stopped daemon's journal serves
// neither the daemon's tools nor its harnesses: approving there answers 409 naming what is
// missing and journals nothing. The console shows the parked turn as AWAITING with decide as
// the way on, and its abandon button (a Cancel) closes it.
#[test]
fn approving_from_agentctl_ui_over_a_daemons_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = StubModel::start();
    let config = write_config(d, &model, Some("[\"count\"]"));
    let daemon = start(d, &config, false);
    let uid =
        session_of(&daemon.parked(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]));
    daemon.sigkill();

    let journal = d.join("agents.db");
    let mut ui = Command::new(CTL)
        .current_dir(d)
        .args(["--journal", journal.to_str().unwrap()])
        .args(["ui", "--addr", "127.0.0.1:0"])
        .env_remove("AGENTCTL_SERVER")
        .env_remove("AGENTSESSIONS_JOURNAL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(ui.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .trim_end_matches('/')
        .to_owned();
    let session = format!("/sessions/{uid}");
    let (status, shown) = console(&base, &session, None);
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["next_step"]["state"], "AWAITING", "{shown}");
    assert_eq!(shown["next_step"]["action"], "decide", "{shown}");
    let last_seq = shown["session"]["last_seq"].clone();

    let (status, answer) = console(
        &base,
        &format!("{session}/decision"),
        Some(&json!({"approved": true, "reason": "from the ui"})),
    );
    assert_eq!(status, 409, "{answer}");
    assert!(answer.to_string().contains("cannot carry out"), "{answer}");
    let (_, shown) = console(&base, &session, None);
    assert_eq!(shown["session"]["last_seq"], last_seq, "nothing journaled");
    assert_eq!(shown["next_step"]["state"], "AWAITING", "{shown}");

    let (status, closed) = console(
        &base,
        &format!("{session}/cancel"),
        Some(&json!({"reason": "abandoned from the console"})),
    );
    let _ = ui.kill();
    let _ = ui.wait();
    assert_eq!(status, 200, "{closed}");
    assert_eq!(closed["session"]["exec_state"], "EXEC_CANCELED", "{closed}");
    assert!(closed.get("next_step").is_none(), "{closed}");
    let records = common::stdout(&common::ctl(
        d,
        &[
            "--journal",
            journal.to_str().unwrap(),
            "replay",
            "--session",
            &uid,
        ],
    ));
    assert!(records.contains("not run"), "{records}");
    assert!(records.contains("END  CANCELED"), "{records}");
    assert_eq!(count(d), 0);
}
