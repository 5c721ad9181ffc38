//! A real tool-using agent through the real binaries on 127.0.0.1: `agentsessionsd` runs the chat
//! harness against a local HTTP server speaking the OpenAI chat-completions format (it answers
//! with tool calls, then with text), with tools from MCP servers — the rmcp fixture server of the
//! mcp crate (which counts its calls in a file) and the third-party `mcp-server-time` — and a
//! person approves or denies through `agentctl`.
//!
//! The fixture server is a binary of the `agentsessions-mcp` package; `cargo test --workspace`
//! builds it next to this package's binaries.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use common::{CTL, Daemon, fixture_server, time_server_or_skip};
use serde_json::{Value, json};

const KEY_VARIABLE: &str = "AGENT_TEST_MODEL_KEY";

/// The stub model: its answer to a chat-completions request. A request whose last message is a
/// tool result is answered in text quoting it; otherwise the user's last text picks the tool
/// call: `call NAME {json}`.
fn answer(request: &Value) -> Value {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let usage = json!({
        "prompt_tokens": 11,
        "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 3},
        "completion_tokens_details": {"reasoning_tokens": 2}
    });
    if last["role"] == "tool" {
        let said = match &last["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        return json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("the tool said: {said}")}, "finish_reason": "stop"}],
            "usage": usage,
        });
    }
    let text = last["content"].as_str().unwrap_or_default().to_owned();
    let Some(directive) = text.strip_prefix("call ") else {
        return json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "no tool needed"}, "finish_reason": "stop"}],
            "usage": usage,
        });
    };
    let (name, arguments) = directive.split_once(' ').unwrap_or((directive, "{}"));
    json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{}", messages.len()), "type": "function", "function": {"name": name, "arguments": arguments}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": usage,
    })
}

/// The stub model server on 127.0.0.1, counting requests; stops with its runtime.
struct StubModel {
    base_url: String,
    calls: Arc<AtomicUsize>,
    _runtime: tokio::runtime::Runtime,
}

impl StubModel {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move |body: Bytes| {
                let counter = Arc::clone(&counter);
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let asked = request["messages"]
                        .as_array()
                        .and_then(|m| m.last())
                        .and_then(|m| m["content"].as_str())
                        .unwrap_or_default()
                        .to_owned();
                    // Provider failures on request: a rate limit, or an answer that never comes.
                    if asked == "rate limit me" {
                        let error =
                            json!({"error": {"message": "slow down", "type": "rate_limit"}});
                        return (
                            StatusCode::TOO_MANY_REQUESTS,
                            [(header::CONTENT_TYPE, "application/json")],
                            error.to_string(),
                        )
                            .into_response();
                    }
                    if asked == "never answer" {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    }
                    let whole = answer(&request);
                    let response: Response = if request["stream"] == true {
                        (
                            StatusCode::OK,
                            [(header::CONTENT_TYPE, "text/event-stream")],
                            common::as_stream(&whole),
                        )
                            .into_response()
                    } else {
                        (
                            StatusCode::OK,
                            [(header::CONTENT_TYPE, "application/json")],
                            whole.to_string(),
                        )
                            .into_response()
                    };
                    response
                }
            }),
        );
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            calls,
            _runtime: runtime,
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// The daemon in `dir` with `config`, the stub model's key in its environment.
fn start(dir: &Path, config: &Path) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--config"])
        .arg(config)
        .current_dir(dir)
        .env(KEY_VARIABLE, "stub-key")
        .stderr(Stdio::null());
    let daemon = Daemon::spawn(command, false);
    daemon.wait_for_mcp(&["fixture"]);
    daemon
}

/// A daemon config: the stub model, and the fixture server with `approval`.
fn write_config(dir: &Path, model: &StubModel, approval: &str, extra: &str) -> PathBuf {
    let config = dir.join("agentsessionsd.toml");
    let count_file = dir.join("count");
    std::fs::write(
        &config,
        format!(
            "journal = \"agents.db\"\n\
             model = \"stub-model\"\n\
             model_provider = \"openai\"\n\
             model_base_url = \"{base}\"\n\
             model_api_key_env = \"{KEY_VARIABLE}\"\n\
             [[mcp_servers]]\n\
             name = \"fixture\"\n\
             command = \"{server}\"\n\
             env = {{ MCP_FIXTURE_COUNT_FILE = \"{count}\" }}\n\
             approval = {approval}\n\
             {extra}",
            base = model.base_url,
            server = fixture_server().display(),
            count = count_file.display(),
        ),
    )
    .unwrap();
    config
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
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_else(|| panic!("no session line in {out}"))
}

fn kinds(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|line| {
            let after = line.split("seq=").nth(1)?;
            after.split_whitespace().nth(1).map(str::to_owned)
        })
        .collect()
}

// The agent loop end to end: the model calls a real MCP tool, the turn parks for a person, the
// person approves through agentctl, the tool runs once, the model answers; usage and commit times
// show; replay calls neither the model nor the tool; the chain verifies. A denial never runs the
// tool.
#[test]
fn a_person_approves_and_denies_mcp_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = StubModel::start();
    let config = write_config(d, &model, "[\"count\"]", "");
    let daemon = start(d, &config);

    let out = daemon.parked(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]);
    let uid = session_of(&out);
    assert!(
        out.contains("OUTPUT  assistant: -> calls fixture__count"),
        "{out}"
    );
    let seen = kinds(&out);
    assert!(seen.contains(&"APPROVAL_REQUEST".to_owned()), "{out}");
    assert!(
        !seen.contains(&"END".to_owned()),
        "a parked turn has not ended: {out}"
    );
    assert_eq!(count(d), 0, "nothing runs before the decision");
    let got = daemon.ok(&["get", "--session", &uid]);
    assert!(got.contains("AWAITING"), "{got}");

    let pending = daemon.ok(&["approvals"]);
    assert!(pending.contains(&uid), "{pending}");
    assert!(pending.contains("fixture__count"), "{pending}");

    let approved = daemon.ok(&["approve", "--session", &uid, "--reason", "fine"]);
    assert!(
        approved.contains("approved") && approved.contains("resumed"),
        "{approved}"
    );
    let approved = daemon.ok(&["replay", "--session", &uid]);
    assert!(approved.contains("APPROVAL_RESULT"), "{approved}");
    assert!(approved.contains("TOOL_RESULT"), "{approved}");
    assert!(approved.contains("the tool said: 1"), "{approved}");
    assert!(approved.contains("END  COMPLETED"), "{approved}");
    assert_eq!(count(d), 1, "the approved tool ran once");
    assert!(!daemon.ok(&["approvals"]).contains(&uid));

    let got = daemon.ok(&["get", "--session", &uid]);
    assert!(got.contains("COMPLETED"), "{got}");
    assert!(
        got.contains("input=22"),
        "usage totals of two answers: {got}"
    );

    // Replay reads the journal: no model call and no tool call; every line carries its time.
    let model_calls = model.calls();
    let replay = daemon.ok(&["replay", "--session", &uid]);
    assert!(
        replay.contains("TOOL_CALL") && replay.contains("USAGE"),
        "{replay}"
    );
    assert!(
        replay.lines().all(|l| l.starts_with("20")),
        "commit times: {replay}"
    );
    assert_eq!(model.calls(), model_calls);
    assert_eq!(count(d), 1);
    let verified = daemon.ok(&["verify", "--session", &uid]);
    assert!(verified.starts_with("verified"), "{verified}");

    // A denial: the tool never runs, the model is told, the turn completes.
    let out = daemon.parked(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]);
    let denied_uid = session_of(&out);
    daemon.ok(&["deny", "--session", &denied_uid, "--reason", "not now"]);
    let denied = daemon.ok(&["replay", "--session", &denied_uid]);
    assert!(denied.contains("APPROVAL_RESULT"), "{denied}");
    assert!(denied.contains("END  COMPLETED"), "{denied}");
    assert_eq!(count(d), 1, "a denied tool never runs");
}

// At-most-once tool effects across a crash: SIGKILL the daemon after TOOL_CALL is durable and while
// the tool runs; restart, resume: the tool ran at most once, the turn completes, replay calls
// nothing.
#[test]
fn a_host_killed_mid_call_runs_the_tool_at_most_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = StubModel::start();
    let config = write_config(d, &model, "\"never\"", "");
    let daemon = start(d, &config);

    let addr = daemon.addr.clone();
    let turn = std::thread::spawn(move || {
        Command::new(CTL)
            .args(["--server", &addr, "exec", "--harness", "chat"])
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
    let interrupted = turn.join().unwrap();
    assert!(!interrupted.status.success());

    let daemon = start(d, &config);
    let listed = daemon.ok(&["list"]);
    let uid = listed
        .lines()
        .find_map(|l| {
            l.split_whitespace()
                .next()
                .filter(|w| w.starts_with("sess-"))
        })
        .unwrap_or_else(|| panic!("{listed}"))
        .to_owned();
    let got = daemon.ok(&["get", "--session", &uid]);
    assert!(got.contains("INTERRUPTED"), "{got}");
    let resumed = daemon.ok(&["resume", "--session", &uid]);
    assert!(resumed.contains("resume"), "{resumed}");
    assert_eq!(count(d), 1, "the tool ran at most once");
    let replay = daemon.ok(&["replay", "--session", &uid]);
    assert!(replay.contains("TOOL_RESULT"), "{replay}");
    assert!(replay.contains("outcome"), "the model is told: {replay}");
    assert!(replay.contains("COMPLETED"), "{replay}");
    let verified = daemon.ok(&["verify", "--session", &uid]);
    assert!(verified.starts_with("verified"), "{verified}");
}

// MCP faults: an MCP server that crashes or answers garbage gives a clear error to the model, and
// the daemon keeps serving.
#[test]
fn a_broken_mcp_server_gives_a_clear_error_and_the_daemon_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = StubModel::start();
    let config = write_config(d, &model, "\"never\"", "timeout_secs = 2\n");
    let daemon = start(d, &config);

    // Each broken call ends in a result the model reads and the turn completes; then the
    // (restarted) server serves again.
    for tool in ["fixture__crash", "fixture__garbage"] {
        let out = daemon.ok(&["exec", "--harness", "chat", "call", tool, "{}"]);
        assert!(out.contains("TOOL_RESULT"), "{tool}: {out}");
        assert!(out.contains("the tool said:"), "{tool}: {out}");
        assert!(out.contains("END  COMPLETED"), "{tool}: {out}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = daemon.ok(&["exec", "--harness", "chat", "call", "fixture__count", "{}"]);
            if out.contains("TOOL_RESULT") {
                break;
            }
            // While the server restarts its tools are not offered, and the model is told so.
            assert!(out.contains("not offered"), "{out}");
            assert!(
                Instant::now() < deadline,
                "the server never came back: {out}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

// Provider failures keep their codes: the model from configuration; a provider's 429 reaches the
// client as RESOURCE_EXHAUSTED and a timeout as DEADLINE_EXCEEDED, each an ERROR record in the
// journal.
#[test]
fn provider_failures_reach_the_client_with_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = StubModel::start();
    let config = write_config(d, &model, "\"never\"", "");
    // The settings go before the first table of the file.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("model_retries = 0\nmodel_timeout_secs = 1\n{text}"),
    )
    .unwrap();
    let daemon = start(d, &config);
    for (ask, code) in [
        ("rate limit me", "RESOURCE_EXHAUSTED"),
        ("never answer", "DEADLINE_EXCEEDED"),
    ] {
        let out = daemon.ctl(&["exec", "--harness", "chat", ask]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{ask}");
        assert!(stderr.contains(code), "{ask}: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("ERROR"), "{ask}: {stdout}");
    }
    // The daemon serves on.
    let out = daemon.ok(&["exec", "--harness", "chat", "hello"]);
    assert!(out.contains("END  COMPLETED"), "{out}");
}

/// The `grpc.health.v1` status of `service` at `addr`.
fn health_of(addr: &str, service: &str) -> i32 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
        client
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .map_or(-1, |answer| answer.into_inner().status)
    })
}

// MCP health: an MCP server that fails to start is reported on grpc.health.v1 (and its tools are
// not offered) while the others serve.
#[test]
fn mcp_servers_are_reported_on_grpc_health() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = StubModel::start();
    let missing = "[[mcp_servers]]\n\
                   name = \"missing\"\n\
                   command = \"/nonexistent/mcp-server\"\n";
    let config = write_config(d, &model, "\"never\"", missing);
    let daemon = start(d, &config);
    let serving = tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
    let not_serving = tonic_health::pb::health_check_response::ServingStatus::NotServing as i32;
    let deadline = Instant::now() + Duration::from_secs(10);
    while health_of(&daemon.addr, "agentsessions.mcp.missing") != not_serving
        || health_of(&daemon.addr, "agentsessions.mcp.fixture") != serving
    {
        assert!(Instant::now() < deadline, "MCP health never reported");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = daemon.ok(&[
        "exec",
        "--harness",
        "chat",
        "call",
        "missing__anything",
        "{}",
    ]);
    assert!(out.contains("not offered"), "{out}");
    assert!(out.contains("END  COMPLETED"), "{out}");
}

// Interoperability: a real third-party MCP server from a package registry through the whole loop.
#[test]
fn a_third_party_mcp_server_answers_the_model() {
    if !time_server_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = StubModel::start();
    let time = "[[mcp_servers]]\n\
                name = \"time\"\n\
                command = \"python3\"\n\
                args = [\"-m\", \"mcp_server_time\", \"--local-timezone\", \"UTC\"]\n\
                approval = \"never\"\n";
    let config = write_config(d, &model, "\"never\"", time);
    let daemon = start(d, &config);
    daemon.wait_for_mcp(&["time"]);
    let out = daemon.ok(&[
        "exec",
        "--harness",
        "chat",
        "call",
        "time__get_current_time",
        r#"{"timezone": "UTC"}"#,
    ]);
    assert!(out.contains("TOOL_RESULT"), "{out}");
    assert!(
        out.contains("the tool said:") && out.contains("UTC"),
        "{out}"
    );
    assert!(out.contains("COMPLETED"), "{out}");
}
