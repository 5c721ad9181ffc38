//! A model answer's usage survives the host's death (semantics §2.5: an answer and its usage are
//! one append). The chat harness runs in `harnessnode` with its test hook holding each usage
//! report; the daemon is killed (SIGKILL) once the answer is in the journal and before the
//! harness reports its usage; restarted on the same journal, the session holds the answer with
//! its usage, and its usage totals count it.
//!
//! `harnessnode` is a binary of the `agentsessions-harnessnode` package; `cargo test --workspace`
//! builds it next to this package's binaries.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentsessions_conformance::fixtures::CountingEndpoint;
use common::{CTL, DAEMON, Daemon};

const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"the answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":13,"completion_tokens":5}}"#;
const STREAMED: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"the answer\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":13,\"completion_tokens\":5}}\n\n",
    "data: [DONE]\n\n",
);

/// A process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `harnessnode` serving chat on a free port, every usage report held a minute; its address.
fn harnessnode() -> (Killed, String) {
    let path = Path::new(DAEMON).with_file_name("harnessnode");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test --workspace` (or `cargo build -p agentsessions-harnessnode`)",
        path.display()
    );
    let mut child = Command::new(path)
        .args([
            "--harness",
            "chat",
            "--model",
            "m",
            "--listen",
            "127.0.0.1:0",
            "--answer-delay-ms",
            "60000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(line.contains("serving chat on"), "{line}");
    (Killed(child), address)
}

/// The daemon on `journal`, the stub model as its provider, with its registry listener.
fn daemon(journal: &Path, model: &CountingEndpoint) -> Daemon {
    let mut command = Daemon::command();
    command
        .args(["--addr", "127.0.0.1:0", "--registry-addr", "127.0.0.1:0"])
        .arg("--journal")
        .arg(journal)
        .args(["--model", "m", "--model-base-url", &model.base_url])
        .env("MODEL_API_KEY", "k")
        .stderr(Stdio::null());
    Daemon::spawn(command, true)
}

fn replay(daemon: &Daemon, uid: &str) -> String {
    daemon.ok(&["replay", "--session", uid])
}

// semantics §2.5: the host dies after the answer is journaled and before the harness reports its
// usage; the usage is journaled with the answer all the same.
#[test]
fn usage_is_journaled_with_its_answer_when_the_host_dies_before_the_harness_reports_it() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let model = runtime.block_on(CountingEndpoint::start_full(ANSWER, Some(STREAMED), 0));
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.db");
    let (_harness, harness_addr) = harnessnode();
    let host = daemon(&journal, &model);
    let spec = common::write(
        dir.path(),
        "spec.json",
        &format!(
            r#"{{"remote":{{"address":"{harness_addr}"}},"capabilities":{{"resumability":"RESUMABILITY_STATELESS_REPLAY"}},"descriptor_id":"chat"}}"#
        ),
    );
    let registered = Command::new(CTL)
        .args(["--server", &host.registry, "harness", "register"])
        .args(["--name", "held-chat", "--spec", &spec])
        .output()
        .unwrap();
    assert!(
        registered.status.success(),
        "{}",
        String::from_utf8_lossy(&registered.stderr)
    );

    let mut exec = Killed(
        Command::new(CTL)
            .args(["--server", &host.addr, "exec", "--harness", "held-chat"])
            .arg("what is the answer")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(exec.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let uid = first
        .strip_prefix("session ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session line: {first:?}"))
        .to_owned();

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let records = replay(&host, &uid);
        if records.contains("OUTPUT") && records.contains("the answer") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the answer was never journaled:\n{records}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    host.sigkill();
    drop(exec);

    let host = daemon(&journal, &model);
    let records = replay(&host, &uid);
    let output = records
        .lines()
        .position(|l| l.contains("OUTPUT") && l.contains("the answer"))
        .unwrap_or_else(|| panic!("the answer is lost:\n{records}"));
    let usage = records
        .lines()
        .position(|l| l.contains("USAGE"))
        .unwrap_or_else(|| panic!("the answer is journaled without its usage:\n{records}"));
    assert_eq!(
        usage,
        output + 1,
        "the usage follows its answer:\n{records}"
    );
    let details = host.ok(&["get", "--session", &uid]);
    assert!(details.contains("input=13"), "{details}");
    assert!(details.contains("output=5"), "{details}");
}
