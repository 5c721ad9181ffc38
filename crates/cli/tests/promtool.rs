//! `GET /metrics` as a real Prometheus reads it: after a turn with an MCP tool call, a turn
//! parked for an approval and its decision, and a failed tool call, the daemon's scrape passes
//! `promtool check metrics` (Debian's `prometheus` package) with nothing to report, and the
//! format follows the request's `Accept` header.
//!
//! Without `promtool` the test is skipped with a note, unless `AGENTSESSIONS_REQUIRE_PROMTOOL`
//! is set (as `.ci/run` does): then it fails.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{Daemon, fixture_server};

/// Whether `promtool` runs; see the module docs for when its absence fails the test.
fn promtool_or_skip() -> bool {
    let installed = Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed {
        assert!(
            std::env::var_os("AGENTSESSIONS_REQUIRE_PROMTOOL").is_none(),
            "promtool is not installed, and AGENTSESSIONS_REQUIRE_PROMTOOL requires it"
        );
        eprintln!("skipped: promtool is not installed (apt-get install prometheus)");
    }
    installed
}

/// The daemon in `dir`: the directive model, the fixture MCP server whose `count` needs
/// approval, an HTTP listener.
fn start(dir: &Path) -> Daemon {
    let config = common::write(
        dir,
        "agentsessionsd.toml",
        &format!(
            "journal = \"agents.db\"\n\
             model = \"directive\"\n\
             model_provider = \"directive\"\n\
             [[mcp_servers]]\n\
             name = \"fixture\"\n\
             command = \"{server}\"\n\
             env = {{ MCP_FIXTURE_COUNT_FILE = \"{count}\" }}\n\
             approval = [\"count\"]\n",
            server = fixture_server().display(),
            count = dir.join("count").display(),
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
        .stderr(Stdio::null());
    let daemon = Daemon::spawn(command, false);
    daemon.wait_for_mcp(&["fixture"]);
    daemon
}

/// `GET /metrics` with `accept` (no header when `None`): the content type and the body.
fn scrape(http: &str, accept: Option<&str>) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(http).unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {http}\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no content type in {head}"));
    (content_type, body.to_owned())
}

/// `promtool check metrics` on `body` (its stdin): exit status and everything it said.
fn promtool_check(body: &str) -> (Option<i32>, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), said)
}

fn session_of(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session line in {out}"))
        .to_owned()
}

// A scrape after real work — a tool call, an approval requested and decided, a failed tool
// call — is one promtool accepts with no complaint, in the Prometheus text format the daemon
// answers by default and for `Accept: text/plain`; Prometheus' own Accept header gets
// OpenMetrics.
#[test]
fn promtool_accepts_a_scrape_taken_after_tools_and_an_approval() {
    if !promtool_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let daemon = start(d);

    let out = daemon.ok(&[
        "exec",
        "--harness",
        "chat",
        "/tool fixture__add {\"a\": 2, \"b\": 3}",
    ]);
    assert!(out.contains("END  COMPLETED"), "{out}");
    let out = daemon.ok(&["exec", "--harness", "chat", "/tool fixture__fail {}"]);
    assert!(out.contains("TOOL_RESULT"), "{out}");
    let uid = session_of(&daemon.parked(&["exec", "--harness", "chat", "/tool fixture__count {}"]));
    let approved = daemon.ok(&["approve", "--session", &uid, "--reason", "fine"]);
    assert!(approved.contains("resumed"), "{approved}");

    for accept in [None, Some("text/plain"), Some("text/plain; version=0.0.4")] {
        let (content_type, body) = scrape(&daemon.http, accept);
        assert!(
            content_type.starts_with("text/plain; version=0.0.4"),
            "{accept:?}: {content_type}"
        );
        // The work this test did is in the scrape it checks.
        for sample in [
            "agentsessions_tool_calls_total{tool=\"fixture__add\",outcome=\"success\"} 1",
            "agentsessions_approvals_requested_total 1",
            "agentsessions_approvals_decided_total{decision=\"approved\"} 1",
        ] {
            assert!(body.contains(sample), "{sample} missing:\n{body}");
        }
        let (status, said) = promtool_check(&body);
        assert_eq!(
            (status, said.trim()),
            (Some(0), ""),
            "promtool check metrics ({accept:?}):\n{body}"
        );
    }

    let prometheus_accept = "application/openmetrics-text;version=1.0.0;q=0.5,\
        application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    let (content_type, body) = scrape(&daemon.http, Some(prometheus_accept));
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(
        body.contains("# TYPE agentsessions_approvals_requested counter"),
        "{body}"
    );
}
