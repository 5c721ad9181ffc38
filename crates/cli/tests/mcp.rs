//! The real `agentsessionsd` with an MCP server from its config file: the third-party
//! `mcp-server-time` (PyPI). `.ci/run` installs it and sets `AGENTSESSIONS_REQUIRE_MCP_FIXTURES=1`,
//! under which a missing server fails this test; otherwise it is skipped with a note.
#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::print_stderr
)]

mod common;

use std::io::{BufRead, BufReader, Read as _};
use std::process::{Command, Stdio};

use common::{DAEMON, time_server_or_skip};

#[test]
fn the_daemon_starts_its_mcp_servers_and_stops_them_with_itself() {
    if !time_server_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentsessionsd.toml");
    std::fs::write(
        &config,
        "journal = \"agents.db\"\n\
         [[mcp_servers]]\n\
         name = \"time\"\n\
         command = \"python3\"\n\
         args = [\"-m\", \"mcp_server_time\", \"--local-timezone\", \"UTC\"]\n\
         approval = [\"convert_time\"]\n",
    )
    .unwrap();
    let mut child = Command::new(DAEMON)
        .args(["--addr", "127.0.0.1:0", "--config"])
        .arg(&config)
        .current_dir(dir.path())
        .env_remove("MODEL_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("agentsessionsd listening on ")
        .unwrap_or_else(|| panic!("{line:?}"));
    // The daemon serves at once; the server connects in the background.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(common::mcp_up(format!("http://{addr}"), None, &["time"]));
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(exit.success(), "{exit:?}\n{logs}");
    assert!(logs.contains("MCP server up"), "{logs}");
    assert!(logs.contains("MCP servers stopped"), "{logs}");
    // The ledger defaults to a file beside the journal (the config's directory).
    assert!(dir.path().join("agents.db.tools.db").exists());
}
