//! A scripted HTTP/1.1 server on 127.0.0.1:0 for the provider tests: it records every request,
//! answers each with the next scripted reply, and reports when a client hangs up on a reply it
//! held open. Hand-written so the tests exercise reqwest against real sockets without another
//! HTTP stack.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentsessions_api::DeltaSink;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinSet;

/// One scripted answer.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A whole response with `Content-Length`.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// A body without length that ends when the server closes the connection, written piece by
    /// piece with a pause between pieces. With `hold_open` the server keeps the connection after
    /// the last piece until the client closes it.
    Stream {
        content_type: String,
        pieces: Vec<Vec<u8>>,
        pause: Duration,
        hold_open: bool,
    },
}

impl Reply {
    /// A JSON response.
    pub(crate) fn json(status: u16, body: &Value) -> Self {
        Self::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    /// A JSON response with extra headers.
    pub(crate) fn json_with(status: u16, body: &Value, headers: &[(&str, &str)]) -> Self {
        let mut reply = Self::json(status, body);
        if let Self::Full { headers: h, .. } = &mut reply {
            h.extend(headers.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        }
        reply
    }

    /// A complete SSE stream, one piece per event, ended by closing the connection.
    pub(crate) fn sse(events: &[String]) -> Self {
        Self::Stream {
            content_type: "text/event-stream".into(),
            pieces: events.iter().map(|e| e.clone().into_bytes()).collect(),
            pause: Duration::from_millis(5),
            hold_open: false,
        }
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    pub(crate) path: String,
    /// Header names lowercased.
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
}

impl Recorded {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("request body is json")
    }
}

struct State {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    hung_up: Notify,
}

/// The running server; dropping it stops it and every connection it holds.
pub(crate) struct TestServer {
    addr: SocketAddr,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

impl TestServer {
    /// Serves `replies` in order; the last one answers every later request too.
    pub(crate) async fn start(replies: Vec<Reply>) -> Self {
        assert!(!replies.is_empty(), "script at least one reply");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
            hung_up: Notify::new(),
        });
        let accept_state = Arc::clone(&state);
        let accept = tokio::spawn(async move {
            // Connection tasks live in this set, so aborting the accept task ends them all.
            let mut connections = JoinSet::new();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                connections.spawn(serve(socket, Arc::clone(&accept_state)));
                while connections.try_join_next().is_some() {}
            }
        });
        Self {
            addr,
            state,
            accept,
        }
    }

    /// `http://127.0.0.1:port`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Waits until a client closes a connection the server held open.
    pub(crate) async fn hung_up(&self) {
        self.state.hung_up.notified().await;
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn serve(mut socket: TcpStream, state: Arc<State>) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    state.requests.lock().unwrap().push(request);
    let reply = {
        let mut replies = state.replies.lock().unwrap();
        if replies.len() > 1 {
            replies.pop_front()
        } else {
            replies.front().cloned()
        }
    }
    .expect("a scripted reply");
    match reply {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-length: {}\r\nconnection: close\r\n",
                reason(status),
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            // The client may hang up early (body cap tests); that is not the server's problem.
            if socket.write_all(head.as_bytes()).await.is_ok() {
                let _ = socket.write_all(&body).await;
            }
            let _ = socket.shutdown().await;
        }
        Reply::Stream {
            content_type,
            pieces,
            pause,
            hold_open,
        } => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
            );
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for piece in pieces {
                if socket.write_all(&piece).await.is_err() {
                    return;
                }
                tokio::time::sleep(pause).await;
            }
            if hold_open {
                // The request was read whole, so the next read ends only when the client closes.
                let mut buf = [0u8; 1024];
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                state.hung_up.notify_one();
            } else {
                let _ = socket.shutdown().await;
            }
        }
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).ok()?;
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// A [`DeltaSink`] that keeps every chunk and wakes a waiter on the first one.
#[derive(Default)]
pub(crate) struct RecordingSink {
    chunks: Mutex<Vec<(i32, String)>>,
    first: Notify,
}

impl RecordingSink {
    pub(crate) fn chunks(&self) -> Vec<(i32, String)> {
        self.chunks.lock().unwrap().clone()
    }

    pub(crate) async fn first_chunk(&self) {
        self.first.notified().await;
    }
}

impl DeltaSink for RecordingSink {
    fn chunk(&self, part_index: i32, text: &str) {
        self.chunks
            .lock()
            .unwrap()
            .push((part_index, text.to_owned()));
        self.first.notify_one();
    }
}

/// A port nothing listens on (bound, then released).
pub(crate) async fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    format!("http://{addr}")
}
