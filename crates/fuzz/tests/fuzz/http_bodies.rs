//! The HTTP API's bodies and paths: the daemon's HTTP router (console JSON API, metrics,
//! health), served on 127.0.0.1, answers any body on any route with a status, never a panic or
//! a dropped connection, and a 5xx only for a failure of the host itself.

use std::sync::Arc;

use agentsessions_api::RuntimeCapabilities;
use agentsessions_cli::http::{HttpParts, router, serve_http};
use agentsessions_fuzz::{Corpus, bytes_or_mutation, config_scaled, run};
use agentsessions_harnesses::EchoHarness;
use agentsessions_journal::{Journal, MemoryJournal};
use agentsessions_model::EchoModel;
use agentsessions_server::ServerBuilder;
use proptest::prelude::*;

const ROUTES: [&str; 9] = [
    "/api/v1/sessions",
    "/api/v1/sessions/{uid}/cancel",
    "/api/v1/sessions/{uid}/suspend",
    "/api/v1/sessions/{uid}/resume",
    "/api/v1/sessions/{uid}/fork",
    "/api/v1/sessions/{uid}/decision",
    "/api/v1/sessions/{uid}/records?from_seq=1",
    "/api/v1/approvals?page_size=3",
    "/api/v1/sessions/%ff%00/verify",
];

#[test]
fn http_bodies_are_answered_with_a_status() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (base, uid) = runtime.block_on(async {
        let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        let service = ServerBuilder::new(Arc::clone(&journal), Arc::new(EchoModel::new()))
            .harness(
                "echo",
                Arc::new(EchoHarness::new()),
                RuntimeCapabilities::default(),
            )
            .build()
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = router(HttpParts {
            service,
            authenticator: None,
            journal,
            project: "default".into(),
        });
        tokio::spawn(serve_http(listener, app, None, std::future::pending()));
        let created: serde_json::Value = reqwest::Client::new()
            .post(format!("{base}/api/v1/sessions"))
            .header("x-agentsessions-csrf", "1")
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let uid = created["uid"]
            .as_str()
            .or_else(|| created["metadata"]["uid"].as_str())
            .unwrap_or_default()
            .to_owned();
        (base, uid)
    });
    let client = reqwest::Client::new();
    let inputs = (
        0..ROUTES.len(),
        bytes_or_mutation(Corpus::load("http_bodies").unwrap().bytes()),
        any::<bool>(),
    );
    run(
        "cli/http_bodies",
        config_scaled(1, 1),
        &inputs,
        |(route, body, json)| {
            let url = format!("{base}{}", ROUTES[route].replace("{uid}", &uid));
            let mut call = if route >= 6 {
                client.get(&url)
            } else {
                client.post(&url).header("x-agentsessions-csrf", "1")
            };
            if json {
                call = call.header("content-type", "application/json");
            }
            let answered = runtime.block_on(call.body(body).send());
            let response = answered.map_err(|e| TestCaseError::fail(e.to_string()))?;
            let status = response.status();
            prop_assert!(
                !status.is_server_error() || status.as_u16() == 503,
                "{} answered {}",
                ROUTES[route],
                status
            );
            Ok(())
        },
    );
}
