//! The MCP server the `mcp/server_answers` fuzz target starts over stdio: it answers
//! `initialize`, `tools/list` and `tools/call` with the bytes of the files named by its three
//! arguments, whatever they hold, and any other request with a JSON-RPC error. `$ID` in an
//! answer stands for the id of the request it answers, so a seed fits any request (a second
//! page, a refresh after `list_changed`) and a mutation may break it.
//!
//! It closes its side (exits, so the client reads EOF) as soon as the client could not go on:
//! after an answer holding no response to the request just read, since rmcp skips what it
//! cannot decode and would wait for the response until its timeout; and after the
//! `tools/call` answer, the last step of the script. So a malformed answer costs a process's
//! exit, not the hub's per-call timeout.

use std::io::{BufRead as _, Write as _};
use std::process::ExitCode;

use rmcp::model::{JsonRpcMessage, ServerJsonRpcMessage};
use serde_json::Value;

fn main() -> ExitCode {
    let answers: Result<Vec<Vec<u8>>, _> = std::env::args_os().skip(1).map(std::fs::read).collect();
    let answers = match answers {
        Ok(answers) if answers.len() == 3 => answers,
        Ok(_) => return usage("three answer files: initialize, tools/list, tools/call"),
        Err(e) => return usage(&format!("cannot read an answer file: {e}")),
    };
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return ExitCode::SUCCESS,
            Ok(_) => {}
        }
        // Notifications and the client's own answers (to pings a fuzzed answer sent) need none.
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (
            message.get("id"),
            message.get("method").and_then(Value::as_str),
        ) else {
            continue;
        };
        let answer = match method {
            "initialize" => with_id(&answers[0], id),
            "tools/list" => with_id(&answers[1], id),
            "tools/call" => with_id(&answers[2], id),
            _ => format!(
                "{}\n",
                serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {"code": -32601, "message": "method not found"},
                })
            )
            .into_bytes(),
        };
        let answer = answer.as_slice();
        if output
            .write_all(answer)
            .and_then(|()| output.flush())
            .is_err()
        {
            return ExitCode::SUCCESS;
        }
        if method == "tools/call" || !answers_request(answer, id) {
            return ExitCode::SUCCESS;
        }
    }
}

/// `answer` with every `$ID` replaced by `id`.
fn with_id(answer: &[u8], id: &Value) -> Vec<u8> {
    const PLACEHOLDER: &[u8] = b"$ID";
    let id = id.to_string().into_bytes();
    let mut out = Vec::with_capacity(answer.len());
    let mut rest = answer;
    while let Some(at) = rest
        .windows(PLACEHOLDER.len())
        .position(|w| w == PLACEHOLDER)
    {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(&id);
        rest = &rest[at + PLACEHOLDER.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Whether a complete line of `answer` is a response or error that rmcp decodes and that
/// names `id`, and nothing follows its last newline: bytes after it would run into the next
/// answer's first line, which rmcp would then skip as garbage.
fn answers_request(answer: &[u8], id: &Value) -> bool {
    if answer.last() != Some(&b'\n') {
        return false;
    }
    answer.split(|b| *b == b'\n').any(|line| {
        let named = match serde_json::from_slice::<ServerJsonRpcMessage>(line) {
            Ok(JsonRpcMessage::Response(response)) => serde_json::to_value(&response.id).ok(),
            Ok(JsonRpcMessage::Error(error)) => {
                error.id.and_then(|id| serde_json::to_value(&id).ok())
            }
            Ok(_) | Err(_) => None,
        };
        named.as_ref() == Some(id)
    })
}

fn usage(why: &str) -> ExitCode {
    let _told = writeln!(std::io::stderr(), "mcp_peer: {why}");
    ExitCode::from(2)
}
