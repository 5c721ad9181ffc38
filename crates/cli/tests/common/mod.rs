//! What the end-to-end tests share: the two binaries, a daemon they start on 127.0.0.1 and stop,
//! and `agentctl` runs. Each test binary uses a different part of it.
#![allow(dead_code)]

pub(crate) mod ca;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

pub(crate) const DAEMON: &str = env!("CARGO_BIN_EXE_agentsessionsd");
pub(crate) const CTL: &str = env!("CARGO_BIN_EXE_agentctl");

/// The MCP fixture server binary (`crates/mcp/src/bin/mcp-fixture-server.rs`), built by
/// `cargo test --workspace` beside ours.
pub(crate) fn fixture_server() -> std::path::PathBuf {
    let path = Path::new(DAEMON).with_file_name("mcp-fixture-server");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test --workspace` (or `cargo build -p agentsessions-mcp`)",
        path.display()
    );
    path
}

/// Writes `text` as `dir/name`; its path.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// A running `agentsessionsd`, killed when dropped.
pub(crate) struct Daemon {
    child: Child,
    /// The Sessions address it printed.
    pub(crate) addr: String,
    /// The HarnessRegistry address it printed, when it serves one.
    pub(crate) registry: String,
    /// The HTTP listener's address it printed, when started with `--http-addr`.
    pub(crate) http: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// The daemon's command with no model key or address inherited from the environment and
    /// stdout captured; add arguments, a directory and stderr, then [`Daemon::spawn`] it.
    pub(crate) fn command() -> Command {
        let mut command = Command::new(DAEMON);
        command
            .env_remove("MODEL_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env_remove("AGENTSESSIONS_ADDR")
            .stdout(Stdio::piped());
        command
    }

    /// Starts `command` and waits for the address lines it prints when ready (the registry's
    /// too when `with_registry`, the HTTP listener's when the command has `--http-addr`).
    pub(crate) fn spawn(mut command: Command, with_registry: bool) -> Self {
        let with_http = command.get_args().any(|arg| arg == "--http-addr");
        let mut child = command.spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut read = |prefix: &str| {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            line.trim()
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("unexpected line {line:?}"))
                .to_owned()
        };
        let addr = read("agentsessionsd listening on ");
        let registry = if with_registry {
            read("agentsessionsd registry on ")
        } else {
            String::new()
        };
        let http = if with_http {
            read("agentsessionsd http on ")
        } else {
            String::new()
        };
        Self {
            child,
            addr,
            registry,
            http,
        }
    }

    /// Starts `command` (which has `--http-addr`); the daemon and its HTTP address.
    pub(crate) fn spawn_with_http(command: Command) -> (Self, String) {
        let daemon = Self::spawn(command, false);
        let http = daemon.http.clone();
        (daemon, http)
    }

    /// Kills the daemon at once (no shutdown of any kind).
    pub(crate) fn sigkill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (`TERM`, `INT`, …) to the daemon.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The daemon's stderr, when the command piped it (once).
    pub(crate) fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
    }

    /// How the daemon exited, once it has (`None` while it runs).
    pub(crate) fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Waits until each MCP server in `servers` is up ([`mcp_up`]) on this plaintext daemon.
    pub(crate) fn wait_for_mcp(&self, servers: &[&str]) {
        // On a thread of its own: a caller may itself run inside a tokio runtime, where
        // blocking on another one would panic.
        let uri = format!("http://{}", self.addr);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(mcp_up(uri, None, servers));
                })
                .join()
                .unwrap();
        });
    }

    /// `agentctl --server <addr> args`.
    pub(crate) fn ctl(&self, args: &[&str]) -> Output {
        Command::new(CTL)
            .args(["--server", &self.addr])
            .args(args)
            .output()
            .unwrap()
    }

    /// [`Daemon::ctl`] of a turn that must park awaiting an approval; its stdout.
    pub(crate) fn parked(&self, args: &[&str]) -> String {
        parked(&self.ctl(args))
    }

    /// [`Daemon::ctl`] that must succeed; its stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert!(
            out.status.success(),
            "agentctl {args:?} failed ({:?}): {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Waits until each MCP server in `servers` is up (`grpc.health.v1` SERVING for
/// `agentsessions.mcp.<name>`) at `uri` (`http://…`, or `https://…` with `tls`): the daemon
/// serves before its MCP servers have connected, and their tools are offered only from then on.
pub(crate) async fn mcp_up(
    uri: String,
    tls: Option<tonic::transport::ClientTlsConfig>,
    servers: &[&str],
) {
    let serving = tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut endpoint = tonic::transport::Endpoint::from_shared(uri).unwrap();
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls).unwrap();
    }
    let channel = endpoint.connect().await.unwrap();
    let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
    for server in servers {
        loop {
            let status = client
                .check(tonic_health::pb::HealthCheckRequest {
                    service: format!("agentsessions.mcp.{server}"),
                })
                .await
                .map_or(-1, |answer| answer.into_inner().status);
            if status == serving {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "MCP server {server} never came up"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// `agentctl args` in `dir`, with no server or journal taken from the environment.
pub(crate) fn ctl(dir: &Path, args: &[&str]) -> Output {
    Command::new(CTL)
        .current_dir(dir)
        .args(args)
        .env_remove("AGENTCTL_SERVER")
        .env_remove("AGENTSESSIONS_JOURNAL")
        .output()
        .unwrap()
}

/// The stdout of an `agentctl` run that must have succeeded.
pub(crate) fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "agentctl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `agentctl`'s exit code for a turn parked awaiting an approval decision.
pub(crate) const PARKED: i32 = 7;

/// The stdout of an `agentctl` turn that must have parked awaiting an approval (exit
/// [`PARKED`], the request named on stderr).
pub(crate) fn parked(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(PARKED),
        "agentctl did not park: {}{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(stderr.contains("awaits approval"), "{stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Whether the third-party `mcp-server-time` can run. Missing, the calling test is skipped with
/// a note, unless `AGENTSESSIONS_REQUIRE_MCP_FIXTURES` is set (as `.ci/run` does): then it fails.
pub(crate) fn time_server_or_skip() -> bool {
    let installed = Command::new("python3")
        .args(["-c", "import mcp_server_time"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed {
        assert!(
            std::env::var_os("AGENTSESSIONS_REQUIRE_MCP_FIXTURES").is_none(),
            "mcp-server-time is not installed, and AGENTSESSIONS_REQUIRE_MCP_FIXTURES requires it"
        );
        #[allow(clippy::print_stderr)]
        {
            eprintln!("skipped: mcp-server-time is not installed (pip install mcp-server-time)");
        }
    }
    installed
}

/// A whole chat-completions answer as a chat-completions event stream: one chunk with the whole message, then usage.
pub(crate) fn as_stream(whole: &serde_json::Value) -> String {
    let choice = &whole["choices"][0];
    let message = &choice["message"];
    let mut delta = serde_json::json!({"role": "assistant"});
    if let Some(text) = message["content"].as_str() {
        delta["content"] = serde_json::json!(text);
    }
    if let Some(calls) = message["tool_calls"].as_array() {
        let indexed: Vec<serde_json::Value> = calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                let mut call = call.clone();
                call["index"] = serde_json::json!(i);
                call
            })
            .collect();
        delta["tool_calls"] = serde_json::json!(indexed);
    }
    let chunk = serde_json::json!({"choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}]});
    let usage = serde_json::json!({"choices": [], "usage": whole["usage"]});
    format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n")
}
