//! The daemon's HTTP listener: off unless `--http-addr` is set; when set it prints its address,
//! answers `/healthz`, and refuses to share a port with the Sessions listener.

#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;

use common::Daemon;

/// One HTTP/1.1 GET on a fresh connection; the whole answer as text.
fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_http_listener_serves_healthz_when_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Daemon::command();
    command.current_dir(dir.path()).args([
        "--addr",
        "127.0.0.1:0",
        "--journal",
        "sessions.db",
        "--http-addr",
        "127.0.0.1:0",
    ]);
    let daemon = Daemon::spawn(command, false);
    assert!(daemon.http.starts_with("127.0.0.1:"), "{}", daemon.http);
    assert_ne!(daemon.http, daemon.addr);
    let answer = get(&daemon.http, "/healthz");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok\n"), "{answer}");
    let missing = get(&daemon.http, "/no-such-page");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
}

#[test]
fn the_http_listener_may_not_share_the_sessions_port() {
    let dir = tempfile::tempdir().unwrap();
    let output = Daemon::command()
        .current_dir(dir.path())
        .args([
            "--addr",
            "127.0.0.1:47011",
            "--journal",
            "sessions.db",
            "--http-addr",
            "127.0.0.1:47011",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--http-addr"), "{stderr}");
}
