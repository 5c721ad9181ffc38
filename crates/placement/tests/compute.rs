//! A session's compute state as the placer settles it with the runtime (semantics §1.7,
//! docs/extensions.md "Compute state"), and the model a new session records (extensions §4),
//! against both journals.
#![allow(clippy::tests_outside_test_module, clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentsessions_api::{ComputeState, Message, ModelPolicy, RuntimeCapabilities};
use agentsessions_controller::ExecRequest;
use agentsessions_journal::{Journal, ListQuery};
use agentsessions_model::EchoModel;
use agentsessions_placement::{Backend, DescriptorSource, ExecCall, Placer, Registry, ResumeCall};
use support::{InMemoryTestRuntime, Probe, journals, placer, session};
use tokio::sync::Notify;

fn turn(uid: &str) -> ExecCall {
    ExecCall {
        session: uid.to_owned(),
        request: ExecRequest {
            inputs: vec![Message::text_message("user", "hi")],
            ..ExecRequest::default()
        },
        ..ExecCall::default()
    }
}

/// A placer with one route `probe` serving `probe` as an attached harness object.
fn attached(journal: Arc<dyn Journal>, probe: Arc<Probe>) -> Placer {
    let registry = Registry::default();
    registry
        .add_static(
            "probe",
            Backend::attached(probe, RuntimeCapabilities::default()),
        )
        .unwrap();
    Placer::new(journal, Arc::new(EchoModel::new()), registry)
}

/// The journal's projection, as listings and the sessions gauge read it.
async fn stored(journal: &Arc<dyn Journal>, uid: &str) -> ComputeState {
    let listed = journal
        .list_sessions(ListQuery {
            project: "p".into(),
            page_size: 500,
            ..ListQuery::default()
        })
        .await
        .unwrap()
        .sessions
        .into_iter()
        .find(|s| s.row.uid == uid)
        .unwrap()
        .compute_state;
    assert_eq!(
        journal.session_info(uid).await.unwrap().compute_state,
        listed
    );
    listed
}

/// What a Get shows: the journal's projection checked with the runtime.
async fn shown(placer: &Placer, journal: &Arc<dyn Journal>, uid: &str) -> ComputeState {
    let info = journal.session_info(uid).await.unwrap();
    placer.session_compute(&info).await.state
}

// A harness object in this process keeps no incarnation between turns: LIVE while its turn
// runs, NONE once it ended (in Get, and in the journal once settled), COLD once suspended, and
// NONE again after a resume that ran nothing.
#[tokio::test]
async fn an_attached_harness_holds_compute_only_while_its_turn_runs() {
    for (journal, _dir) in journals().await {
        let gate = Arc::new(Notify::new());
        let mut probe = Probe::new(false, 0);
        probe.gate = Some(Arc::clone(&gate));
        let probe = Arc::new(probe);
        let placer = attached(Arc::clone(&journal), Arc::clone(&probe));
        session(&journal, "s").await;
        assert_eq!(shown(&placer, &journal, "s").await, ComputeState::None);

        let running = tokio::spawn({
            let placer = placer.clone();
            async move { placer.exec(turn("s")).await }
        });
        while probe.running.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(shown(&placer, &journal, "s").await, ComputeState::Live);
        assert!(
            !placer.settle_compute("s").await.unwrap(),
            "a running turn's state is its own to move"
        );
        assert!(!placer.settle_idle_compute("s").await.unwrap());
        assert_eq!(stored(&journal, "s").await, ComputeState::Live);
        gate.notify_one();
        running.await.unwrap().unwrap();

        assert_eq!(shown(&placer, &journal, "s").await, ComputeState::None);
        assert_eq!(stored(&journal, "s").await, ComputeState::Live);
        // Another host (or one that restarted) settles an ended turn the same way.
        let other = attached(Arc::clone(&journal), Arc::new(Probe::new(false, 0)));
        assert!(other.settle_idle_compute("s").await.unwrap());
        assert_eq!(stored(&journal, "s").await, ComputeState::None);
        assert!(!placer.settle_compute("s").await.unwrap());

        placer.suspend("s").await.unwrap();
        assert!(!placer.settle_compute("s").await.unwrap());
        assert_eq!(stored(&journal, "s").await, ComputeState::Cold);
        assert_eq!(shown(&placer, &journal, "s").await, ComputeState::Cold);

        placer
            .resume(ResumeCall {
                session: "s".into(),
                ..ResumeCall::default()
            })
            .await
            .unwrap();
        assert!(placer.settle_compute("s").await.unwrap());
        assert_eq!(stored(&journal, "s").await, ComputeState::None);
        assert_eq!(shown(&placer, &journal, "s").await, ComputeState::None);
    }
}

// A runtime that keeps a session's incarnation between turns leaves it LIVE; once that
// incarnation is gone, settling brings the listing down to what the runtime reports.
#[tokio::test]
async fn a_kept_incarnation_stays_live_and_a_lost_one_settles_to_none() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        placer.exec(turn("s")).await.unwrap();
        assert!(!placer.settle_compute("s").await.unwrap());
        assert_eq!(stored(&journal, "s").await, ComputeState::Live);

        runtime.stop_session_for_test("s");
        assert!(placer.settle_compute("s").await.unwrap());
        assert_eq!(stored(&journal, "s").await, ComputeState::None);

        placer.exec(turn("s")).await.unwrap();
        assert_eq!(stored(&journal, "s").await, ComputeState::Live);
        let unknown = placer.settle_compute("nope").await;
        assert!(unknown.is_err(), "{unknown:?}");
    }
}

// The model a session records: the model policy's default (what every turn journals in its
// EXECUTION_START), else the one model the harness declares, else none.
#[tokio::test]
async fn a_sessions_model_is_the_policy_default_else_the_one_declared() {
    let journal: Arc<dyn Journal> = Arc::new(agentsessions_journal::MemoryJournal::new());
    let route_declaring = |models: &[&str]| {
        let registry = Registry::default();
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let mut descriptor = Probe::descriptor(false);
        descriptor.models = models.iter().map(|m| (*m).to_owned()).collect();
        registry
            .add_static(
                "probe",
                Backend::new(
                    Arc::clone(&runtime) as Arc<dyn agentsessions_api::Runtime>,
                    Arc::new(support::TestDialer { runtime }),
                    DescriptorSource::Declared(descriptor),
                ),
            )
            .unwrap();
        Placer::new(Arc::clone(&journal), Arc::new(EchoModel::new()), registry)
    };
    for (models, want) in [
        (&["m-one"][..], "m-one"),
        (&[][..], ""),
        (&["m-one", "m-two"][..], ""),
    ] {
        let placer = route_declaring(models);
        let route = placer.registry().resolve("probe").unwrap();
        assert_eq!(placer.default_model(&route).await, want, "{models:?}");
        let governed =
            placer.with_policy(ModelPolicy::new("m-small", ["m-small", "m-one", "m-two"]));
        assert_eq!(governed.default_model(&route).await, "m-small");
    }
    // An attached harness is asked for its descriptor.
    let probe = attached(Arc::clone(&journal), Arc::new(Probe::new(false, 0)));
    let route = probe.registry().resolve("").unwrap();
    assert_eq!(route.name, "probe");
    assert_eq!(probe.default_model(&route).await, "");
}
