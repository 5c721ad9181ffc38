//! A real third-party MCP server through the daemon: `@modelcontextprotocol/server-everything`
//! (npm, the version `.ci/run` pins) over stdio, its tools called by a local OpenAI-compatible
//! model that follows the same `/tool NAME {json}` directives as the offline directive model and
//! records every request. For each tool the test checks what the provider was sent (extensions
//! §10: images as image content, resource links as lines, an error's text once, separators), what
//! the journal keeps (the server's blocks, annotations included), and what `agentctl` and the
//! console's API show.
//!
//! The server's `dist/index.js` is found at `$AGENTSESSIONS_SERVER_EVERYTHING` (set by
//! `.ci/run`), else under `target/mcp-everything/`. Missing, the test is skipped with a note,
//! unless `AGENTSESSIONS_REQUIRE_MCP_FIXTURES` is set (as `.ci/run` does): then it fails.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use common::Daemon;
use serde_json::{Value, json};

const KEY_VARIABLE: &str = "EVERYTHING_TEST_MODEL_KEY";

/// Where the npm package puts the server, under the install prefix `.ci/run` uses.
const INSTALLED: &str =
    "mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// The server's entry point; `None` (after a note) when it is not installed and not required.
fn server_everything_or_skip() -> Option<PathBuf> {
    let path = std::env::var_os("AGENTSESSIONS_SERVER_EVERYTHING")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../target")
                .join(INSTALLED)
        });
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if path.exists() && node {
        return Some(path);
    }
    assert!(
        std::env::var_os("AGENTSESSIONS_REQUIRE_MCP_FIXTURES").is_none(),
        "server-everything is not at {} (or node is missing), and \
         AGENTSESSIONS_REQUIRE_MCP_FIXTURES requires it",
        path.display()
    );
    eprintln!(
        "skipped: server-everything is not installed (npm install --prefix target/mcp-everything \
         @modelcontextprotocol/server-everything)"
    );
    None
}

/// The model's answer to a chat-completions request: after tool results (a `tool` message since
/// the last directive), a text saying so; for a user directive `/tool NAME {json}`, that call;
/// otherwise a plain text.
fn answer(request: &Value) -> Value {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let usage = json!({"prompt_tokens": 3, "completion_tokens": 2});
    let text = |content: &str| {
        json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage,
        })
    };
    for message in messages.iter().rev() {
        if message["role"] == "tool" {
            return text("read the tool's answer");
        }
        let Some(directive) = message["content"]
            .as_str()
            .and_then(|c| c.strip_prefix("/tool "))
        else {
            continue;
        };
        let (name, arguments) = directive.split_once(' ').unwrap_or((directive, "{}"));
        return json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("call_{}", messages.len()), "type": "function", "function": {"name": name, "arguments": arguments}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": usage,
        });
    }
    text("no tool asked for")
}

/// The model server on 127.0.0.1, keeping every request body; stops with its runtime.
struct RecordingModel {
    base_url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    _runtime: tokio::runtime::Runtime,
}

impl RecordingModel {
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
                    let whole = answer(&request);
                    let streamed = request["stream"] == true;
                    kept.lock().unwrap().push(request);
                    if streamed {
                        (
                            [(header::CONTENT_TYPE, "text/event-stream")],
                            common::as_stream(&whole),
                        )
                            .into_response()
                    } else {
                        (
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

    /// The last request the model was sent (the one after the tool ran).
    fn last(&self) -> Value {
        self.requests.lock().unwrap().last().cloned().unwrap()
    }

    /// The first request, with the offered tools.
    fn first(&self) -> Value {
        self.requests.lock().unwrap().first().cloned().unwrap()
    }
}

/// The daemon in `dir` with server-everything at `server` and the recording model.
fn start(dir: &Path, server: &Path, model: &RecordingModel) -> Daemon {
    let config = common::write(
        dir,
        "agentsessionsd.toml",
        &format!(
            "journal = \"agents.db\"\n\
             model = \"stub-model\"\n\
             model_provider = \"openai\"\n\
             model_base_url = \"{base}\"\n\
             model_api_key_env = \"{KEY_VARIABLE}\"\n\
             [[mcp_servers]]\n\
             name = \"everything\"\n\
             command = \"node\"\n\
             args = [\"{server}\", \"stdio\"]\n",
            base = model.base_url,
            server = server.display(),
        ),
    );
    let mut command = Daemon::command();
    command
        .args([
            "--addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--config",
            &config,
        ])
        .current_dir(dir)
        .env(KEY_VARIABLE, "stub-key")
        .stderr(Stdio::null());
    let daemon = Daemon::spawn(command, false);
    daemon.wait_for_mcp(&["everything"]);
    daemon
}

fn session_of(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session line in {out}"))
        .to_owned()
}

/// One turn asking for `tool` with `args`: `agentctl exec`'s transcript and the session.
fn call(daemon: &Daemon, tool: &str, args: &Value) -> (String, String) {
    let out = daemon.ok(&[
        "exec",
        "--harness",
        "chat",
        &format!("/tool everything__{tool} {args}"),
    ]);
    let uid = session_of(&out);
    (out, uid)
}

/// The messages the provider was sent after the call ran, from the tool message on.
fn after_tool(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let at = messages
        .iter()
        .position(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("no tool message in {request}"));
    messages[at..].to_vec()
}

/// The session's TOOL_RESULT record, as `agentctl --json replay` prints it.
fn journaled_result(daemon: &Daemon, uid: &str) -> Value {
    let out = daemon.ok(&["--json", "replay", "--session", uid]);
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r.to_string().contains("EVENT_TOOL_RESULT"))
        .unwrap_or_else(|| panic!("no TOOL_RESULT in {out}"))
}

/// `GET path` on the HTTP listener: the head and the body.
fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.to_owned(), body.to_owned())
}

/// What failed, collected so one run reports every tool (each is a separate property).
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, what: &str, evidence: impl std::fmt::Display) {
        if !ok {
            let mut evidence = evidence.to_string();
            if evidence.len() > 1_500 {
                let mut end = 1_500;
                while !evidence.is_char_boundary(end) {
                    end -= 1;
                }
                evidence.truncate(end);
                evidence.push('…');
            }
            self.0.push(format!("{what}\n    {evidence}"));
        }
    }
}

// extensions §10 with the real server-everything: every tool the content mapping concerns,
// through the daemon, checked at the provider, in the journal, in agentctl and the console's API.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one tool after another, each a few checks"
)]
fn server_everything_tools_reach_the_model_the_journal_and_the_person_whole() {
    let Some(server) = server_everything_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = RecordingModel::start();
    let daemon = start(dir.path(), &server, &model);
    let mut failures = Failures::default();

    // get-tiny-image: text, image, text. The tool message keeps both texts apart and says where
    // the image went; a user message after it names the call and carries the PNG.
    let (out, tiny) = call(&daemon, "get-tiny-image", &json!({}));
    failures.check(
        out.contains("END  COMPLETED"),
        "tiny image: turn completes",
        &out,
    );
    let sent = after_tool(&model.last());
    let tool_text = sent[0]["content"].as_str().unwrap_or_default().to_owned();
    failures.check(
        tool_text.contains("Here's the image you requested:\n")
            && tool_text.contains("The image above is the MCP logo."),
        "tiny image: both texts reach the model, separated",
        &tool_text,
    );
    let call_id = sent[0]["tool_call_id"].as_str().unwrap_or_default();
    let shown = sent.iter().find(|m| m["role"] == "user");
    let parts = shown
        .and_then(|m| m["content"].as_array())
        .cloned()
        .unwrap_or_default();
    failures.check(
        parts.iter().any(|p| {
            p["type"] == "text" && p["text"].as_str().is_some_and(|t| t.contains(call_id))
        }),
        "tiny image: the user message names the call its image belongs to",
        Value::Array(sent.clone()),
    );
    failures.check(
        parts.iter().any(|p| {
            p["type"] == "image_url"
                && p["image_url"]["url"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("data:image/png;base64,iVBORw0KGgo"))
        }),
        "tiny image: the PNG reaches the model as an image_url part",
        Value::Array(sent.clone()),
    );
    let journaled = journaled_result(&daemon, &tiny).to_string();
    failures.check(
        journaled.contains("image/png"),
        "tiny image: the journal keeps the image",
        &journaled,
    );
    let line = out
        .lines()
        .find(|l| l.contains("TOOL_RESULT"))
        .unwrap_or_default();
    failures.check(
        line.contains("image") && !line.trim_end().ends_with(" ok"),
        "tiny image: agentctl's TOOL_RESULT line summarizes the content",
        line,
    );

    // gzip-file-as-resource with outputType=resourceLink: a result that is only a link reaches
    // the model as a line naming the name, URI and MIME type.
    let (out, _) = call(
        &daemon,
        "gzip-file-as-resource",
        &json!({"name": "hello.txt.gz", "data": "data:text/plain;base64,aGVsbG8gd29ybGQK", "outputType": "resourceLink"}),
    );
    failures.check(
        out.contains("END  COMPLETED"),
        "resource link: turn completes",
        &out,
    );
    let sent = after_tool(&model.last());
    let tool_text = sent[0]["content"].as_str().unwrap_or_default().to_owned();
    failures.check(
        tool_text.contains("hello.txt.gz")
            && tool_text.contains("application/gzip")
            && tool_text.contains("://"),
        "resource link: name, URI and MIME type reach the model",
        &tool_text,
    );

    // get-annotated-message: the annotations stay in the journal; the text and the image reach
    // the model.
    let (out, annotated) = call(
        &daemon,
        "get-annotated-message",
        &json!({"messageType": "error", "includeImage": true}),
    );
    failures.check(
        out.contains("END  COMPLETED"),
        "annotated: turn completes",
        &out,
    );
    let journaled = journaled_result(&daemon, &annotated).to_string();
    failures.check(
        journaled.contains("annotations")
            && journaled.contains("priority")
            && journaled.contains("audience"),
        "annotated: the journal keeps the annotations",
        &journaled,
    );
    let sent = after_tool(&model.last());
    failures.check(
        sent[0]["content"]
            .as_str()
            .is_some_and(|t| t.contains("Error: Operation failed")),
        "annotated: its text reaches the model",
        Value::Array(sent.clone()),
    );
    failures.check(
        sent.iter()
            .any(|m| m["role"] == "user" && m["content"].to_string().contains("image_url")),
        "annotated: its image reaches the model",
        Value::Array(sent.clone()),
    );

    // An error result (a URL scheme the tool refuses): its text reaches the model once.
    let (out, _) = call(
        &daemon,
        "gzip-file-as-resource",
        &json!({"name": "x.gz", "data": "ftp://example.invalid/x"}),
    );
    failures.check(
        out.contains("TOOL_RESULT"),
        "error: a result is recorded",
        &out,
    );
    let sent = after_tool(&model.last());
    let tool_text = sent[0]["content"].as_str().unwrap_or_default().to_owned();
    failures.check(
        tool_text.matches("Unsupported URL protocol").count() == 1,
        "error: its text reaches the model exactly once",
        &tool_text,
    );

    // get-structured-content: the text block (the JSON) reaches the model; the journal keeps the
    // structured output.
    let (out, structured) = call(
        &daemon,
        "get-structured-content",
        &json!({"location": "Chicago"}),
    );
    failures.check(
        out.contains("END  COMPLETED"),
        "structured: turn completes",
        &out,
    );
    let sent = after_tool(&model.last());
    let tool_text = sent[0]["content"].as_str().unwrap_or_default().to_owned();
    failures.check(
        tool_text.contains("Light rain / drizzle"),
        "structured: the content reaches the model",
        &tool_text,
    );
    failures.check(
        tool_text.matches("Light rain / drizzle").count() == 1,
        "structured: given text, the structured output is not sent again",
        &tool_text,
    );
    let journaled = journaled_result(&daemon, &structured).to_string();
    failures.check(
        journaled.contains("humidity") && journaled.contains("\"output\""),
        "structured: the journal keeps the structured output",
        &journaled,
    );
    let (head, body) = http_get(
        &daemon.http,
        &format!("/api/v1/sessions/{structured}/records"),
    );
    failures.check(
        head.starts_with("HTTP/1.1 200") && body.contains("humidity"),
        "structured: the console's API serves the structured output",
        format!("{head}\n{body}"),
    );

    // The long-running tool: its progress is shown while it runs, and its result arrives.
    let (out, _) = call(
        &daemon,
        "trigger-long-running-operation",
        &json!({"duration": 2, "steps": 2}),
    );
    failures.check(
        out.contains("Long running operation completed")
            || after_tool(&model.last())[0]["content"]
                .as_str()
                .is_some_and(|t| t.contains("Long running operation completed")),
        "long-running: its result reaches the model",
        &out,
    );
    failures.check(
        out.lines()
            .any(|l| l.contains("trigger-long-running-operation") && l.contains("2/2")),
        "long-running: agentctl exec shows its progress (2/2)",
        &out,
    );

    // simulate-research-query needs MCP tasks (taskSupport "required"): either it is not offered
    // to the model, or a call of it succeeds.
    let offered = model.first()["tools"].to_string();
    if offered.contains("simulate-research-query") {
        let (out, research) = call(
            &daemon,
            "simulate-research-query",
            &json!({"topic": "durable sessions"}),
        );
        let journaled = journaled_result(&daemon, &research).to_string();
        failures.check(
            !journaled.contains("-32601") && !journaled.contains("\"isError\":true"),
            "research: offered, so a call succeeds (MCP tasks)",
            format!("{out}\n{journaled}"),
        );
    }

    // The console: images from data parts are allowed by its CSP, and its API serves the image.
    let (head, _) = http_get(&daemon.http, "/");
    let csp = head
        .lines()
        .find(|l| {
            l.to_ascii_lowercase()
                .starts_with("content-security-policy:")
        })
        .unwrap_or_default()
        .to_owned();
    failures.check(
        csp.contains("img-src 'self' data:"),
        "console: its CSP allows data: images (for img only)",
        &csp,
    );
    failures.check(
        !csp.contains("default-src 'none' data:") && !csp.contains("script-src 'self' data:"),
        "console: data: is allowed for img only",
        &csp,
    );
    let (head, body) = http_get(&daemon.http, &format!("/api/v1/sessions/{tiny}/records"));
    failures.check(
        head.starts_with("HTTP/1.1 200") && body.contains("image/png"),
        "console: its API serves the image",
        format!("{head}\n{body}"),
    );

    assert!(
        failures.0.is_empty(),
        "{} of the checks failed:\n- {}",
        failures.0.len(),
        failures.0.join("\n- ")
    );
}
