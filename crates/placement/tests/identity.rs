//! Delegated identity through placement: a turn's harness is handed the session's stored agent
//! principal and, when the host mints tokens, a minter bound to the session's owner.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use agentsessions_api::{
    CallerIdentity, Descriptor, EventSink, Harness, IdentityRef, Message, RuntimeCapabilities,
    Start, TokenMinter,
};
use agentsessions_controller::ExecRequest;
use agentsessions_journal::{Journal, MemoryJournal, SessionRow};
use agentsessions_model::EchoModel;
use agentsessions_placement::{Backend, ExecCall, Placer, Registry, TokenMinting};
use async_trait::async_trait;

/// Records every Start it is given and does nothing else.
#[derive(Default)]
struct Recording {
    starts: Mutex<Vec<Start>>,
}

#[async_trait]
impl Harness for Recording {
    async fn describe(&self) -> agentsessions_api::Result<Descriptor> {
        Ok(Descriptor {
            id: "recording".to_owned(),
            ..Descriptor::default()
        })
    }

    async fn run(&self, start: &Start, _sink: &dyn EventSink) -> agentsessions_api::Result<()> {
        self.starts.lock().unwrap().push(start.clone());
        Ok(())
    }
}

/// Mints `owner-subject@execution for audience`.
struct OwnerTokens;

impl TokenMinting for OwnerTokens {
    fn minter(
        &self,
        _session_uid: &str,
        execution_id: &str,
        owner: &CallerIdentity,
        _agent: &IdentityRef,
    ) -> TokenMinter {
        let prefix = format!("{}@{execution_id}", owner.subject);
        TokenMinter::new(move |audience: Vec<String>| {
            let token = format!("{prefix} for {}", audience.join(","));
            async move { Ok(token) }
        })
    }
}

fn agent() -> IdentityRef {
    IdentityRef {
        principal: "agent://triage".to_owned(),
        issuer: String::new(),
        subject: String::new(),
    }
}

async fn owned_session() -> (Arc<dyn Journal>, Arc<Recording>, Registry) {
    let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
    journal
        .put_session(SessionRow {
            uid: "s1".to_owned(),
            harness: "recording".to_owned(),
            identity: agent(),
            owner: CallerIdentity::new("https://idp.test", "alice"),
            ..SessionRow::default()
        })
        .await
        .unwrap();
    let harness = Arc::new(Recording::default());
    let registry = Registry::default();
    registry
        .add_static(
            "recording",
            Backend::attached(harness.clone(), RuntimeCapabilities::default()),
        )
        .unwrap();
    (journal, harness, registry)
}

fn turn() -> ExecCall {
    ExecCall {
        session: "s1".to_owned(),
        request: ExecRequest {
            inputs: vec![Message::text_message("user", "hi")],
            ..ExecRequest::default()
        },
        ..ExecCall::default()
    }
}

#[tokio::test]
async fn the_harness_gets_a_minter_for_the_sessions_owner_when_the_host_mints() {
    let (journal, harness, registry) = owned_session().await;
    let placer = Placer::new(journal, Arc::new(EchoModel::new()), registry)
        .with_token_minting(Arc::new(OwnerTokens));
    placer.exec(turn()).await.unwrap();
    let start = harness.starts.lock().unwrap().last().cloned().unwrap();
    assert_eq!(start.identity.principal, agent());
    let minter = start.identity.mint_token.unwrap();
    assert_eq!(
        minter.mint(vec!["https://mcp.test".into()]).await.unwrap(),
        format!("alice@{} for https://mcp.test", start.execution_id)
    );
}

#[tokio::test]
async fn without_minting_the_harness_gets_the_principal_and_no_minter() {
    let (journal, harness, registry) = owned_session().await;
    let placer = Placer::new(journal, Arc::new(EchoModel::new()), registry);
    placer.exec(turn()).await.unwrap();
    let start = harness.starts.lock().unwrap().last().cloned().unwrap();
    assert_eq!(start.identity.principal, agent());
    assert_eq!(start.identity.mint_token, None);
}
