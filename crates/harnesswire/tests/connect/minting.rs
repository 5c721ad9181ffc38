//! Delegated tokens across `Harness.Connect` (the `mint_request` / `mint_result` extension): a
//! served harness mints through the minter the host bound to the execution, and through nothing
//! else.

use std::sync::{Arc, Mutex};

use agentsessions_api::{
    ApiError, Descriptor, EventSink, Harness, IdentityContext, Message, Result, Start, TokenMinter,
};
use agentsessions_harnesswire::status_code_of;
use agentsessions_wire::pb;
use agentsessions_wire::pb::event::Body;
use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::support::{Call, ScriptedSink, TestServer, serve_raw_service, start, wire_event};

/// Mints one token per audience listed (comma-separated) in its config, all at once, and outputs
/// `audience=token` or `audience!CODE: error` per audience, in config order; outputs `no minter`
/// when its start has none.
#[derive(Debug)]
struct Minting;

#[async_trait]
impl Harness for Minting {
    async fn describe(&self) -> Result<Descriptor> {
        Ok(Descriptor {
            id: "minting".into(),
            ..Descriptor::default()
        })
    }

    async fn run(&self, start: &Start, sink: &dyn EventSink) -> Result<()> {
        let Some(minter) = &start.identity.mint_token else {
            return sink.output("no minter".into()).await;
        };
        let config = String::from_utf8_lossy(&start.config).into_owned();
        let mints: Vec<_> = config
            .split(',')
            .map(|audience| {
                let (minter, audience) = (minter.clone(), audience.to_owned());
                tokio::spawn(async move { minter.mint(vec![audience]).await })
            })
            .collect();
        for (audience, mint) in config.split(',').zip(mints) {
            let line = match mint.await {
                Ok(Ok(token)) => format!("{audience}={token}"),
                Ok(Err(err)) => format!("{audience}!{}: {err}", status_code_of(&err).as_str()),
                Err(join) => format!("{audience}!panicked: {join}"),
            };
            sink.output(line).await?;
        }
        Ok(())
    }
}

/// A host minter that answers `tok:<audience>` (or fails with `refuse`) and records what it was
/// asked for.
fn host_minter(asked: &Arc<Mutex<Vec<Vec<String>>>>, refuse: Option<ApiError>) -> TokenMinter {
    let asked = Arc::clone(asked);
    TokenMinter::new(move |audience: Vec<String>| {
        asked.lock().unwrap().push(audience.clone());
        let refuse = refuse.clone();
        async move {
            match refuse {
                Some(err) => Err(err),
                None => Ok(format!("tok:{}", audience.join(","))),
            }
        }
    })
}

fn minting_start(audiences: &str, minter: Option<TokenMinter>) -> Start {
    Start {
        config: audiences.as_bytes().to_vec(),
        identity: IdentityContext {
            mint_token: minter,
            ..IdentityContext::default()
        },
        ..start()
    }
}

fn outputs(sink: &ScriptedSink) -> Vec<String> {
    sink.calls()
        .into_iter()
        .filter_map(|call| match call {
            Call::Output(text) => Some(text),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_remote_harness_mints_through_the_hosts_minter() {
    let asked = Arc::default();
    let server = TestServer::serve(Arc::new(Minting)).await;
    let sink = ScriptedSink::new();
    let start = minting_start("api", Some(host_minter(&asked, None)));
    server.remote().run(&start, &sink).await.unwrap();
    assert_eq!(outputs(&sink), ["api=tok:api"]);
    assert_eq!(*asked.lock().unwrap(), [vec!["api".to_owned()]]);
}

#[tokio::test]
async fn concurrent_mints_each_get_their_own_token() {
    let asked = Arc::default();
    let server = TestServer::serve(Arc::new(Minting)).await;
    let sink = ScriptedSink::new();
    let start = minting_start("api,db,mail", Some(host_minter(&asked, None)));
    server.remote().run(&start, &sink).await.unwrap();
    assert_eq!(
        outputs(&sink),
        ["api=tok:api", "db=tok:db", "mail=tok:mail"]
    );
    assert_eq!(asked.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_refused_mint_fails_the_harnesss_mint_with_the_hosts_error() {
    let asked = Arc::default();
    let server = TestServer::serve(Arc::new(Minting)).await;
    let sink = ScriptedSink::new();
    let minter = host_minter(&asked, Some(ApiError::PermissionDenied));
    server
        .remote()
        .run(&minting_start("api", Some(minter)), &sink)
        .await
        .unwrap();
    let outputs = outputs(&sink);
    assert_eq!(outputs.len(), 1);
    assert!(
        outputs[0].starts_with("api!PERMISSION_DENIED: "),
        "{outputs:?}"
    );
    assert!(
        outputs[0].contains("host refused to mint a token: api: permission denied"),
        "{outputs:?}"
    );
}

#[tokio::test]
async fn without_can_mint_tokens_the_harness_has_no_minter() {
    let server = TestServer::serve(Arc::new(Minting)).await;
    let sink = ScriptedSink::new();
    server
        .remote()
        .run(&minting_start("api", None), &sink)
        .await
        .unwrap();
    assert_eq!(outputs(&sink), ["no minter"]);
}

/// A remote harness that asks for a token although its start said `can_mint_tokens = false`,
/// and outputs the host's answer as `token` or `CODE description`.
#[derive(Debug, Clone)]
struct MintsAnyway;

type EventStream = ReceiverStream<std::result::Result<pb::Event, tonic::Status>>;

#[async_trait]
impl pb::harness_server::Harness for MintsAnyway {
    async fn describe(
        &self,
        _request: tonic::Request<pb::DescribeRequest>,
    ) -> std::result::Result<tonic::Response<pb::HarnessDescriptor>, tonic::Status> {
        Ok(tonic::Response::new(pb::HarnessDescriptor::default()))
    }

    type ConnectStream = EventStream;

    async fn connect(
        &self,
        request: tonic::Request<tonic::Streaming<pb::ControllerFrame>>,
    ) -> std::result::Result<tonic::Response<EventStream>, tonic::Status> {
        let mut inbound = request.into_inner();
        let (events, stream) = mpsc::channel(4);
        tokio::spawn(async move {
            let start = inbound.message().await.unwrap().unwrap();
            let Some(pb::controller_frame::Frame::Start(start)) = start.frame else {
                panic!("first frame is not start");
            };
            assert!(!start.identity.unwrap_or_default().can_mint_tokens);
            let request = pb::MintRequest {
                request_id: "m-1".into(),
                audience: vec!["api".into()],
            };
            let ask = wire_event(pb::EventKind::Unspecified, Body::MintRequest(request));
            events.send(Ok(ask)).await.unwrap();
            let answer = inbound.message().await.unwrap().unwrap();
            let Some(pb::controller_frame::Frame::MintResult(result)) = answer.frame else {
                panic!("expected a mint result, got {answer:?}");
            };
            assert_eq!(result.request_id, "m-1");
            let text = match result.error {
                Some(error) => format!("{} {}", error.code, error.description),
                None => result.token,
            };
            let output = Body::Message(Message::text_message("assistant", &text).into());
            let end = Body::End(pb::HarnessEnd {
                state: "COMPLETED".into(),
                error: None,
            });
            for event in [
                wire_event(pb::EventKind::EventOutput, output),
                wire_event(pb::EventKind::EventEnd, end),
            ] {
                events.send(Ok(event)).await.unwrap();
            }
        });
        Ok(tonic::Response::new(ReceiverStream::new(stream)))
    }
}

#[tokio::test]
async fn a_host_without_a_minter_refuses_a_mint_request() {
    let remote = serve_raw_service(MintsAnyway).await;
    let sink = ScriptedSink::new();
    remote.run(&start(), &sink).await.unwrap();
    let outputs = outputs(&sink);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    // 9 is FAILED_PRECONDITION.
    assert!(outputs[0].starts_with("9 "), "{outputs:?}");
    assert!(
        outputs[0].contains("no token minter for this execution"),
        "{outputs:?}"
    );
}
