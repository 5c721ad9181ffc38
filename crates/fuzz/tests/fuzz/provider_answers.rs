//! Model providers' answers: the OpenAI and Anthropic clients, over real HTTP on 127.0.0.1,
//! read any body (event streams and whole JSON answers, valid, mutated or cut off mid-stream)
//! as a completion or an error, never a panic.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentsessions_api::{DeltaSink, Message, ModelProvider, ModelRequest};
use agentsessions_fuzz::{Corpus, bytes_or_mutation, config_scaled, run};
use agentsessions_model::{
    AnthropicConfig, AnthropicProvider, OpenAiConfig, OpenAiProvider, RetryPolicy,
};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the stub answers next: the body, its content type, and where the connection is cut.
#[derive(Debug, Clone, Default)]
struct Answer {
    body: Vec<u8>,
    event_stream: bool,
    cut_at: Option<usize>,
}

/// Answers every request with the current [`Answer`], announcing the whole length even when it
/// cuts the body short (a reset mid-stream).
async fn serve(listener: TcpListener, answer: Arc<Mutex<Answer>>) {
    while let Ok((mut socket, _)) = listener.accept().await {
        let answer = answer.lock().unwrap().clone();
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut buf = [0u8; 8192];
            // Read the head and as much body as the request announces.
            loop {
                let Ok(n) = socket.read(&mut buf).await else {
                    return;
                };
                if n == 0 {
                    return;
                }
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request);
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let kind = if answer.event_stream {
                "text/event-stream"
            } else {
                "application/json"
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                answer.body.len()
            );
            let sent = answer
                .cut_at
                .map_or(answer.body.len(), |cut| cut.min(answer.body.len()));
            let _written = socket.write_all(head.as_bytes()).await;
            let _written = socket.write_all(&answer.body[..sent]).await;
            let _closed = socket.shutdown().await;
        });
    }
}

struct Collect;

impl DeltaSink for Collect {
    fn chunk(&self, _part_index: i32, _text: &str) {}
}

fn no_retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 1,
        initial_backoff: Duration::from_millis(1),
        max_wait: Duration::from_millis(1),
    }
}

#[test]
fn provider_answers_are_completions_or_errors() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let answer = Arc::new(Mutex::new(Answer::default()));
    let base = runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(serve(listener, Arc::clone(&answer)));
        base
    });
    let mut openai = OpenAiConfig::new("gpt-test");
    openai.base_url.clone_from(&base);
    openai.api_key = "k".into();
    openai.timeout = Duration::from_secs(5);
    openai.retry = no_retries();
    let mut anthropic = AnthropicConfig::new("claude-test");
    anthropic.base_url.clone_from(&base);
    anthropic.api_key = "k".into();
    anthropic.timeout = Duration::from_secs(5);
    anthropic.retry = no_retries();
    let providers: Vec<Arc<dyn ModelProvider>> = {
        let _entered = runtime.enter();
        vec![
            Arc::new(OpenAiProvider::new(openai).unwrap()),
            Arc::new(AnthropicProvider::new(anthropic).unwrap()),
        ]
    };
    let request = ModelRequest {
        messages: vec![Message::text_message("user", "hi")],
        ..ModelRequest::default()
    };
    let inputs = (
        bytes_or_mutation(Corpus::load("sse").unwrap().bytes()),
        any::<bool>(),
        proptest::option::weighted(0.2, any::<usize>()),
        0..providers.len(),
        any::<bool>(),
    );
    run(
        "model/provider_answers",
        config_scaled(1, 2),
        &inputs,
        |(body, event_stream, cut, provider, streamed)| {
            let cut_at = cut.map(|c| if body.is_empty() { 0 } else { c % body.len() });
            *answer.lock().unwrap() = Answer {
                body,
                event_stream,
                cut_at,
            };
            let deltas: Option<&dyn DeltaSink> = if streamed { Some(&Collect) } else { None };
            let _completion_or_error =
                runtime.block_on(providers[provider].complete(&request, deltas));
            Ok(())
        },
    );
}
