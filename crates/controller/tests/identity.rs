//! Delegated identity: each live turn's harness gets a minter bound to that turn when the host
//! mints tokens, and none otherwise.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::sync::{Arc, Mutex};

use agentsessions_api::{CallerIdentity, IdentityContext, IdentityRef, TokenMinter};
use agentsessions_controller::{ExecRequest, TokenMinting, TurnSettings};
use support::*;

/// Mints `session/execution/owner-subject/audience` and remembers every binding it made.
#[derive(Default)]
struct FakeMinting {
    bound: Mutex<Vec<(String, String, CallerIdentity, IdentityRef)>>,
}

impl TokenMinting for FakeMinting {
    fn minter(
        &self,
        session_uid: &str,
        execution_id: &str,
        owner: &CallerIdentity,
        agent: &IdentityRef,
    ) -> TokenMinter {
        self.bound.lock().unwrap().push((
            session_uid.to_owned(),
            execution_id.to_owned(),
            owner.clone(),
            agent.clone(),
        ));
        let prefix = format!("{session_uid}/{execution_id}/{}", owner.subject);
        TokenMinter::new(move |audience: Vec<String>| {
            let token = format!("{prefix}/{}", audience.join(","));
            async move { Ok(token) }
        })
    }
}

fn owner() -> CallerIdentity {
    CallerIdentity::new("https://idp.test", "alice")
}

fn agent() -> IdentityRef {
    IdentityRef {
        principal: "agent://triage".to_owned(),
        ..IdentityRef::default()
    }
}

fn turn() -> ExecRequest {
    ExecRequest {
        inputs: vec![user("hi")],
        ..ExecRequest::default()
    }
}

#[tokio::test]
async fn a_live_turn_gets_a_minter_bound_to_its_execution_and_principal() {
    let journal = memory();
    let harness = Arc::new(ScriptHarness::new(vec![]));
    let minting = Arc::new(FakeMinting::default());
    let settings = TurnSettings {
        minting: Some(minting.clone()),
        ..TurnSettings::default()
    };
    let c = controller(&journal, harness.clone(), Arc::new(EchoModel::default()))
        .with_settings(settings)
        .with_owner(owner())
        .with_identity(IdentityContext {
            principal: agent(),
            mint_token: None,
        });
    c.exec(turn()).await.unwrap();
    c.exec(turn()).await.unwrap();

    let start = harness.last_start().unwrap();
    assert_eq!(start.identity.principal, agent());
    let minter = start.identity.mint_token.unwrap();
    let token = minter.mint(vec!["https://mcp.test".into()]).await.unwrap();
    assert_eq!(
        token,
        format!("s/{}/alice/https://mcp.test", start.execution_id)
    );
    let bound = minting.bound.lock().unwrap().clone();
    assert_eq!(bound.len(), 2, "one binding per turn");
    assert_ne!(bound[0].1, bound[1].1);
    assert_eq!(
        bound[1],
        ("s".to_owned(), start.execution_id.clone(), owner(), agent())
    );
}

#[tokio::test]
async fn without_identity_configured_the_harness_gets_no_minter() {
    let journal = memory();
    let harness = Arc::new(ScriptHarness::new(vec![]));
    let c =
        controller(&journal, harness.clone(), Arc::new(EchoModel::default())).with_owner(owner());
    c.exec(turn()).await.unwrap();
    assert_eq!(harness.last_start().unwrap().identity.mint_token, None);
}

// A read-only replay re-runs recorded turns: it mints nothing new.
#[tokio::test]
async fn a_replay_binds_no_minter() {
    let journal = memory();
    let harness = Arc::new(ScriptHarness::new(vec![]));
    let minting = Arc::new(FakeMinting::default());
    let settings = TurnSettings {
        minting: Some(minting.clone()),
        ..TurnSettings::default()
    };
    let c = controller(&journal, harness.clone(), Arc::new(EchoModel::default()))
        .with_settings(settings);
    c.exec(turn()).await.unwrap();
    c.replay().await.unwrap();
    assert_eq!(minting.bound.lock().unwrap().len(), 1);
    assert_eq!(harness.last_start().unwrap().identity.mint_token, None);
}
