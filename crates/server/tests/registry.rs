//! The HarnessRegistry service over real gRPC on 127.0.0.1: register, get (with observe), list,
//! retire, and what registration means for sessions (semantics §7.2, §7.3).
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::sync::Arc;

use agentsessions_api::{Message, RuntimeCapabilities};
use agentsessions_harnesses::EchoHarness;
use agentsessions_journal::Journal;
use agentsessions_model::EchoModel;
use agentsessions_server::{RegistryService, ServerBuilder, SessionsService};
use agentsessions_sqlite::SqliteJournal;
use agentsessions_wire::pb;
use agentsessions_wire::pb::harness_registry_client::HarnessRegistryClient;
use agentsessions_wire::pb::harness_spec::Placement;
use agentsessions_wire::pb::sessions_client::SessionsClient;
use tokio::net::TcpListener;
use tonic::Code;
use tonic::transport::Channel;

struct Host {
    registry: HarnessRegistryClient<Channel>,
    sessions: SessionsClient<Channel>,
    service: SessionsService,
}

fn service(journal: &Arc<dyn Journal>) -> SessionsService {
    ServerBuilder::new(Arc::clone(journal), Arc::new(EchoModel::new()))
        .harness(
            "echo",
            Arc::new(EchoHarness::new()),
            RuntimeCapabilities::default(),
        )
        .build()
        .unwrap()
}

async fn host(journal: &Arc<dyn Journal>) -> Host {
    let service = service(journal);
    let registry = RegistryService::new(&service);
    registry.load().await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let router = tonic::transport::Server::builder()
        .add_service(registry.into_server())
        .add_service(service.clone().into_server());
    tokio::spawn(
        router.serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let channel = agentsessions_harnesswire::channel(&addr).unwrap();
    Host {
        registry: HarnessRegistryClient::new(channel.clone()),
        sessions: SessionsClient::new(channel),
        service,
    }
}

/// An echo harness served over Harness.Connect on its own port.
async fn remote_echo() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(agentsessions_harnesswire::serve_tcp_listener(
        listener,
        Arc::new(EchoHarness::new()),
        std::future::pending(),
    ));
    addr
}

fn spec(address: &str, descriptor_id: &str) -> pb::HarnessSpec {
    pb::HarnessSpec {
        placement: Some(Placement::Remote(pb::RemotePlacement {
            address: address.into(),
        })),
        capabilities: Some(pb::Capabilities {
            resumability: pb::Resumability::StatelessReplay as i32,
            fork_safe: true,
            ..pb::Capabilities::default()
        }),
        descriptor_id: descriptor_id.into(),
    }
}

async fn register(
    host: &mut Host,
    name: &str,
    spec: pb::HarnessSpec,
) -> Result<pb::RegisterHarnessResponse, tonic::Status> {
    host.registry
        .register_harness(pb::RegisterHarnessRequest {
            name: name.into(),
            spec: Some(spec),
        })
        .await
        .map(tonic::Response::into_inner)
}

async fn exec_on(host: &mut Host, harness: &str) -> Result<i64, tonic::Status> {
    let session = host
        .sessions
        .create_session(pb::CreateSessionRequest {
            session: Some(pb::Session {
                harness: harness.into(),
                ..pb::Session::default()
            }),
        })
        .await?
        .into_inner();
    let uid = session.metadata.unwrap().uid;
    let mut stream = host
        .sessions
        .exec(pb::ExecRequest {
            session: uid.clone(),
            inputs: vec![pb::Message::from(Message::text_message("user", "hi"))],
            ..pb::ExecRequest::default()
        })
        .await?
        .into_inner();
    while stream.message().await?.is_some() {}
    Ok(host
        .sessions
        .get_session(pb::GetSessionRequest { uid })
        .await?
        .into_inner()
        .last_seq)
}

#[tokio::test]
async fn register_serve_list_retire() {
    let dir = tempfile::tempdir().unwrap();
    let journal: Arc<dyn Journal> = Arc::new(SqliteJournal::open(dir.path().join("j.db")).unwrap());
    let mut h = host(&journal).await;
    let address = remote_echo().await;

    let created = register(&mut h, "remote-echo", spec(&address, "echo"))
        .await
        .unwrap();
    assert_eq!(created.outcome, pb::RegisterOutcome::Created as i32);
    let digest = created.harness.as_ref().unwrap().spec_digest.clone();
    assert!(digest.starts_with("sha256:"));
    let again = register(&mut h, "remote-echo", spec(&address, "echo"))
        .await
        .unwrap();
    assert_eq!(again.outcome, pb::RegisterOutcome::Unchanged as i32);
    assert_eq!(again.harness.unwrap().spec_digest, digest);

    // Served at once: a session on it runs a turn over Harness.Connect.
    assert_eq!(exec_on(&mut h, "remote-echo").await.unwrap(), 5);

    // Pinning (semantics §7.3): no per-turn swap to or from a registered harness.
    for (stored, requested) in [("echo", "remote-echo"), ("remote-echo", "echo")] {
        let session = h
            .sessions
            .create_session(pb::CreateSessionRequest {
                session: Some(pb::Session {
                    harness: stored.into(),
                    ..pb::Session::default()
                }),
            })
            .await
            .unwrap()
            .into_inner();
        let mut stream = h
            .sessions
            .exec(pb::ExecRequest {
                session: session.metadata.unwrap().uid,
                inputs: vec![pb::Message::from(Message::text_message("user", "hi"))],
                harness: requested.into(),
                ..pb::ExecRequest::default()
            })
            .await
            .unwrap()
            .into_inner();
        let mut status = None;
        loop {
            match stream.message().await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    status = Some(e.code());
                    break;
                }
            }
        }
        assert_eq!(
            status,
            Some(Code::FailedPrecondition),
            "{stored} -> {requested}"
        );
    }

    // Refusals.
    let cases = [
        ("remote-echo", spec(&address, "other"), Code::AlreadyExists),
        ("echo", spec(&address, "echo"), Code::AlreadyExists),
        ("Bad_Name", spec(&address, "echo"), Code::InvalidArgument),
        ("no-address", spec("", "echo"), Code::InvalidArgument),
        (
            "url",
            spec("http://127.0.0.1:1", "echo"),
            Code::InvalidArgument,
        ),
        (
            "no-placement",
            pb::HarnessSpec {
                placement: None,
                ..spec(&address, "echo")
            },
            Code::InvalidArgument,
        ),
        (
            "no-resumability",
            pb::HarnessSpec {
                capabilities: None,
                ..spec(&address, "echo")
            },
            Code::InvalidArgument,
        ),
        (
            "substrate",
            pb::HarnessSpec {
                placement: Some(Placement::Substrate(pb::SubstratePlacement {
                    atespace: "a".into(),
                    template: "t".into(),
                })),
                ..spec(&address, "echo")
            },
            Code::FailedPrecondition,
        ),
    ];
    for (name, spec, code) in cases {
        let err = register(&mut h, name, spec).await.unwrap_err();
        assert_eq!(err.code(), code, "{name}: {err:?}");
    }

    // A harness that reports another descriptor id than registered is refused at admission.
    register(&mut h, "misdirected", spec(&address, "not-echo"))
        .await
        .unwrap();
    assert_eq!(
        exec_on(&mut h, "misdirected").await.unwrap_err().code(),
        Code::FailedPrecondition
    );

    // Get: static and registered, with observe.
    let echo = h
        .registry
        .get_harness(pb::GetHarnessRequest {
            name: "echo".into(),
            observe: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(echo.source, pb::HarnessSource::Static as i32);
    let observed = h
        .registry
        .get_harness(pb::GetHarnessRequest {
            name: "remote-echo".into(),
            observe: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(observed.observed.unwrap().id, "echo");
    assert_eq!(
        observed.spec.unwrap(),
        spec(&address, "echo"),
        "the stored canonical spec reads back"
    );
    let missing = h
        .registry
        .get_harness(pb::GetHarnessRequest {
            name: "nope".into(),
            observe: false,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);

    // List pages through static and registered names in order.
    let mut names = Vec::new();
    let mut token = String::new();
    loop {
        let page = h
            .registry
            .list_harnesses(pb::ListHarnessesRequest {
                page_size: 1,
                page_token: token,
                include_retired: true,
            })
            .await
            .unwrap()
            .into_inner();
        names.extend(page.harnesses.into_iter().map(|r| r.metadata.unwrap().name));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(names, ["echo", "misdirected", "remote-echo"]);
    for (size, token) in [(-1, String::new()), (0, "!!".to_owned())] {
        let err = h
            .registry
            .list_harnesses(pb::ListHarnessesRequest {
                page_size: size,
                page_token: token,
                include_retired: false,
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
    }

    // Retire: idempotent, static refused, unknown not found; new sessions refused.
    let retired = h
        .registry
        .retire_harness(pb::RetireHarnessRequest {
            name: "remote-echo".into(),
            reason: "replaced".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(retired.state, pb::HarnessState::Retired as i32);
    assert_eq!(retired.retire_reason, "replaced");
    let twice = h
        .registry
        .retire_harness(pb::RetireHarnessRequest {
            name: "remote-echo".into(),
            reason: "again".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(twice.retire_reason, "replaced", "the first reason is kept");
    for (name, code) in [("echo", Code::FailedPrecondition), ("nope", Code::NotFound)] {
        let err = h
            .registry
            .retire_harness(pb::RetireHarnessRequest {
                name: name.into(),
                reason: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), code, "{name}");
    }
    assert_eq!(
        exec_on(&mut h, "remote-echo").await.unwrap_err().code(),
        Code::FailedPrecondition
    );

    // Another host on the same journal loads the registrations at startup.
    let other = service(&journal);
    let loaded = RegistryService::new(&other).load().await.unwrap();
    assert_eq!(loaded, 2);
    assert!(other.harness_names().0.contains(&"remote-echo".to_owned()));
    drop(h.service);
}
