#![allow(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::cast_possible_wrap,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
//! Placement against both journals, an in-memory test runtime (memory tier) and the stateless
//! path with harnesses dialed in process.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use agentsessions_api::{
    ApprovalDecision, ComputeState, EventBody, EventKind, LifecycleKind, Message, SnapshotRef,
};
use agentsessions_controller::ExecRequest;
use agentsessions_journal::LogExt as _;
use agentsessions_journal::LogRecord;
use agentsessions_placement::{ExecCall, ForkCall, PlacementError, Placer, ResumeCall, RuntimeOp};
use support::{InMemoryTestRuntime, SequentialIds, journals, placer, session};
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

fn lifecycles(records: &[LogRecord]) -> Vec<(i64, LifecycleKind, Option<SnapshotRef>, String)> {
    records
        .iter()
        .filter_map(|r| match &r.event.body {
            Some(EventBody::Lifecycle(l)) => Some((
                r.seq,
                l.kind,
                l.snapshot.clone(),
                l.compute_instance.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn fork(parent: &str, at_seq: i64, count: usize) -> ForkCall {
    ForkCall {
        parent: parent.to_owned(),
        at_seq,
        count,
        ..ForkCall::default()
    }
}

// semantics §4.4: a memory fork takes exactly one parent checkpoint, shared by all N children,
// and each child continues from the parent's memory.
#[tokio::test]
async fn memory_fork_takes_one_checkpoint_for_every_child() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(true, true));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "parent").await;
        placer.exec(turn("parent")).await.unwrap();
        placer.exec(turn("parent")).await.unwrap();
        let head = journal.head("parent").await.unwrap();
        let out = placer.fork(fork("parent", 0, 3)).await.unwrap();
        assert_eq!(out.at_seq, head);
        assert_eq!(out.children.len(), 3);
        assert!(out.source.memory && !out.source.external_uri.is_empty());
        let (_, snapshots, forks, _) = runtime.counts();
        assert_eq!((snapshots, forks), (1, 3));
        // The parent: one SUSPEND at at_seq + 1 carrying the shared ref.
        let parent = journal.read("parent", 1, 0).await.unwrap();
        let suspends: Vec<_> = lifecycles(&parent)
            .into_iter()
            .filter(|l| l.1 == LifecycleKind::Suspend)
            .collect();
        assert_eq!(suspends.len(), 1);
        assert_eq!(suspends[0].0, head + 1);
        assert_eq!(suspends[0].2.as_ref(), Some(&out.source));
        for child in &out.children {
            let records = journal.read(child, 1, 0).await.unwrap();
            // The prefix is the parent's up to at_seq (not its checkpoint), then FORK.
            assert_eq!(records.len() as i64, head + 1);
            assert_eq!(records[..head as usize], parent[..head as usize]);
            let marks = lifecycles(&records);
            let (seq, kind, _, instance) = marks.last().unwrap().clone();
            assert_eq!((seq, kind), (head + 1, LifecycleKind::Fork));
            assert!(!instance.is_empty(), "the FORK marker records the instance");
            let info = journal.session_info(child).await.unwrap();
            assert_eq!(info.row.parent_uid, "parent");
            assert_eq!(info.row.fork_seq, head);
            // The child's memory is the parent's at the checkpoint: 2 runs, then its own.
            placer.exec(turn(child)).await.unwrap();
            assert_eq!(
                runtime
                    .probe(child)
                    .unwrap()
                    .count
                    .load(std::sync::atomic::Ordering::SeqCst),
                3
            );
        }
    }
}

// I4 and semantics §4.2/§4.3: a memory harness never gets history, also after suspend and
// resume; its state lives on.
#[tokio::test]
async fn memory_harness_gets_empty_history_across_suspend_and_resume() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(true, true));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        placer.exec(turn("s")).await.unwrap();
        placer.exec(turn("s")).await.unwrap();
        let snapshot = placer.suspend("s").await.unwrap();
        assert!(snapshot.memory);
        let records = journal.read("s", 1, 0).await.unwrap();
        let last = lifecycles(&records).last().cloned().unwrap();
        assert_eq!(last.1, LifecycleKind::Suspend);
        assert_eq!(last.2, Some(snapshot));
        let outcome = placer
            .resume(ResumeCall {
                session: "s".into(),
                ..ResumeCall::default()
            })
            .await
            .unwrap();
        assert!(!outcome.resumed, "nothing was pending");
        let records = journal.read("s", 1, 0).await.unwrap();
        assert_eq!(
            lifecycles(&records).last().unwrap().1,
            LifecycleKind::Resume
        );
        placer.exec(turn("s")).await.unwrap();
        let probe = runtime.probe("s").unwrap();
        assert_eq!(probe.count.load(std::sync::atomic::Ordering::SeqCst), 3);
        assert_eq!(*probe.histories.lock().unwrap(), vec![0, 0, 0]);
    }
}

// extensions §5: compute that is not the recorded instance is refused before any write.
#[tokio::test]
async fn a_replaced_instance_is_refused_with_nothing_written() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(true, true));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        placer.exec(turn("s")).await.unwrap();
        runtime.replace("s");
        let head = journal.head("s").await.unwrap();
        let err = placer.exec(turn("s")).await.unwrap_err();
        assert!(
            matches!(err, PlacementError::InstanceMismatch { .. }),
            "{err}"
        );
        let err = placer.suspend("s").await.unwrap_err();
        assert!(
            matches!(
                err,
                PlacementError::Runtime {
                    op: RuntimeOp::Snapshot,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(journal.head("s").await.unwrap(), head);
        // Compute gone entirely: the runtime refuses to start fresh memory for a session
        // that already ran turns.
        runtime.stop_session_for_test("s");
        let err = placer.exec(turn("s")).await.unwrap_err();
        assert!(
            matches!(
                err,
                PlacementError::Runtime {
                    op: RuntimeOp::Create,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(journal.head("s").await.unwrap(), head);
    }
}

// semantics §4.1: a REQUIRES_MEMORY_SNAPSHOT harness on a runtime without memory snapshots is
// refused before any compute or journal write.
#[tokio::test]
async fn memory_harness_on_a_runtime_without_snapshots_is_refused_up_front() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, true));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        let err = placer.exec(turn("s")).await.unwrap_err();
        assert!(matches!(err, PlacementError::Unplaceable { .. }), "{err}");
        let err = placer.fork(fork("s", 0, 1)).await.unwrap_err();
        assert!(
            matches!(
                err,
                PlacementError::Unplaceable { .. } | PlacementError::ForkOutOfRange { .. }
            ),
            "{err}"
        );
        let err = placer
            .resume(ResumeCall {
                session: "s".into(),
                ..ResumeCall::default()
            })
            .await
            .unwrap_err();
        assert!(matches!(err, PlacementError::Unplaceable { .. }), "{err}");
        assert_eq!(runtime.counts(), (0, 0, 0, 0));
        let info = journal.session_info("s").await.unwrap();
        assert_eq!(
            (info.last_seq, info.fence),
            (0, 0),
            "nothing journaled, no fence"
        );
    }
}

// semantics §4.5: overlapping Exec/Suspend/Resume/Approve are refused with ABORTED, not queued.
#[tokio::test]
async fn overlapping_operations_are_refused_not_queued() {
    for (journal, _dir) in journals().await {
        let gate = Arc::new(Notify::new());
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false).gated(Arc::clone(&gate)));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        let running = {
            let placer = placer.clone();
            tokio::spawn(async move { placer.exec(turn("s")).await })
        };
        while runtime
            .probe("s")
            .is_none_or(|p| p.running.load(std::sync::atomic::Ordering::SeqCst) == 0)
        {
            tokio::task::yield_now().await;
        }
        assert!(placer.is_busy("s"));
        let busy = |r: Result<(), PlacementError>| matches!(r, Err(PlacementError::SessionBusy(_)));
        assert!(busy(placer.exec(turn("s")).await.map(|_| ())));
        assert!(busy(placer.suspend("s").await.map(|_| ())));
        assert!(busy(
            placer
                .resume(ResumeCall {
                    session: "s".into(),
                    ..ResumeCall::default()
                })
                .await
                .map(|_| ())
        ));
        let decision = ApprovalDecision::default();
        assert!(busy(placer.approve("s", &decision).await.map(|_| ())));
        gate.notify_one();
        running.await.unwrap().unwrap();
        assert!(!placer.is_busy("s"));
    }
}

// semantics §4.4: count 1..=128, child_names 0 or count, at_seq within the records, and a memory
// fork only at the head — refused with no side effects.
#[tokio::test]
async fn fork_count_and_at_seq_rules() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(true, true));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "p").await;
        placer.exec(turn("p")).await.unwrap();
        let head = journal.head("p").await.unwrap();
        for count in [0, 129] {
            let err = placer.fork(fork("p", 0, count)).await.unwrap_err();
            assert!(matches!(err, PlacementError::ForkCount { .. }), "{err}");
        }
        let mut named = fork("p", 0, 2);
        named.child_names = vec!["only-one".into()];
        let err = placer.fork(named).await.unwrap_err();
        assert!(matches!(err, PlacementError::ChildNames { .. }), "{err}");
        let err = placer.fork(fork("p", head + 1, 1)).await.unwrap_err();
        assert!(
            matches!(err, PlacementError::ForkOutOfRange { .. }),
            "{err}"
        );
        let err = placer.fork(fork("p", 1, 1)).await.unwrap_err();
        assert!(matches!(err, PlacementError::ForkNotAtHead { .. }), "{err}");
        assert_eq!(journal.head("p").await.unwrap(), head, "nothing journaled");
        let (_, snapshots, forks, _) = runtime.counts();
        assert_eq!((snapshots, forks), (0, 0), "no checkpoint taken");
        let max = placer.fork(fork("p", 0, 128)).await.unwrap();
        assert_eq!(max.children.len(), 128);
        assert_eq!(runtime.counts().1, 1, "one checkpoint for 128 children");
    }
}

// semantics §4.4 step 5: a stateless fork at a historical seq; the child's first Exec receives
// the copied prefix as history, and the child's metadata follows the rules.
#[tokio::test]
async fn stateless_fork_at_a_historical_seq_then_exec_sees_the_prefix() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "p").await;
        placer.exec(turn("p")).await.unwrap();
        let first_turn_end = journal.head("p").await.unwrap();
        placer.exec(turn("p")).await.unwrap();
        placer.exec(turn("p")).await.unwrap();
        let mut call = fork("p", first_turn_end, 2);
        call.child_names = vec!["a".into(), "b".into()];
        call.labels = BTreeMap::from([("k".to_owned(), "v".to_owned())]);
        let out = placer.fork(call).await.unwrap();
        assert_eq!(out.source.local, "p");
        assert_eq!(runtime.counts().1, 0, "a stateless fork takes no snapshot");
        let parent = journal.read("p", 1, 0).await.unwrap();
        assert!(lifecycles(&parent).is_empty(), "the parent is untouched");
        for (child, name) in out.children.iter().zip(["a", "b"]) {
            let info = journal.session_info(child).await.unwrap();
            assert_eq!(info.row.name, name);
            assert_eq!(info.row.labels.get("k").map(String::as_str), Some("v"));
            assert_eq!(info.row.project, "p");
            assert_eq!(info.row.harness, "probe");
            assert_eq!(info.row.fork_seq, first_turn_end);
            placer.exec(turn(child)).await.unwrap();
            let probe = runtime.probe(child).unwrap();
            // History = the parent's prefix plus the FORK marker.
            assert_eq!(probe.last_history(), Some(first_turn_end as usize + 1));
            let records = journal.read(child, 1, first_turn_end).await.unwrap();
            assert_eq!(records[..], parent[..first_turn_end as usize]);
        }
    }
}

// extensions §3: a session pending deletion refuses further effects; delete is idempotent.
#[tokio::test]
async fn a_deleted_session_refuses_effects() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let placer: Placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        placer.exec(turn("s")).await.unwrap();
        assert!(placer.delete("s").await.unwrap());
        assert!(!placer.delete("s").await.unwrap());
        let refused = |e: &PlacementError| matches!(e, PlacementError::DeletionPending(_));
        assert!(refused(&placer.exec(turn("s")).await.unwrap_err()));
        assert!(refused(&placer.suspend("s").await.unwrap_err()));
        assert!(refused(&placer.fork(fork("s", 0, 1)).await.unwrap_err()));
        let records = journal.read("s", 1, 0).await.unwrap();
        assert_eq!(
            lifecycles(&records).last().unwrap().1,
            LifecycleKind::Delete
        );
    }
}

// extensions §3: while the reclaimer holds a deleted session (its compute stopping), an operation
// with effects is refused as DeletionPending, not SessionBusy: retrying would not help.
#[tokio::test]
async fn a_deleted_session_being_reclaimed_refuses_effects_as_deleted() {
    for (journal, _dir) in journals().await {
        let stopping = Arc::new(Notify::new());
        let runtime =
            Arc::new(InMemoryTestRuntime::new(false, false).stopping_on(Arc::clone(&stopping)));
        let placer: Placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        placer.exec(turn("s")).await.unwrap();
        assert!(placer.delete("s").await.unwrap());
        let reclaimer = {
            let placer = placer.clone();
            tokio::spawn(async move { placer.reclaim("s").await })
        };
        while !placer.is_busy("s") {
            tokio::task::yield_now().await;
        }
        let refused = |e: PlacementError| {
            assert!(matches!(e, PlacementError::DeletionPending(_)), "{e:?}");
        };
        refused(placer.exec(turn("s")).await.unwrap_err());
        refused(placer.suspend("s").await.unwrap_err());
        refused(
            placer
                .resume(ResumeCall {
                    session: "s".to_owned(),
                    ..ResumeCall::default()
                })
                .await
                .unwrap_err(),
        );
        refused(
            placer
                .approve("s", &ApprovalDecision::default())
                .await
                .unwrap_err(),
        );
        assert!(placer.is_busy("s"), "the reclaimer still holds the session");
        stopping.notify_one();
        reclaimer.await.unwrap().unwrap();
    }
}

// extensions §3: the reclaimer stops a deleted session's compute, which frees the snapshots the
// runtime kept, then marks it reclaimed; the records stay readable. A session this host cannot
// reach stays queued; an active one is never reclaimed.
#[tokio::test]
async fn the_reclaimer_releases_deleted_sessions_only() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(true, true));
        let placer: Placer = placer(Arc::clone(&journal), &runtime);
        for uid in ["gone", "kept"] {
            session(&journal, uid).await;
            placer.exec(turn(uid)).await.unwrap();
            placer.suspend(uid).await.unwrap();
            placer
                .resume(ResumeCall {
                    session: uid.to_owned(),
                    ..ResumeCall::default()
                })
                .await
                .unwrap();
        }
        assert_eq!(runtime.checkpoints_of("gone"), 1);
        // An unreachable route: its session stays queued.
        journal
            .put_session(agentsessions_journal::SessionRow {
                uid: "elsewhere".into(),
                harness: "not-served-here".into(),
                ..agentsessions_journal::SessionRow::default()
            })
            .await
            .unwrap();
        let head = journal.head("elsewhere").await.unwrap();
        let fence = journal.new_fence("elsewhere").await.unwrap();
        journal
            .append_one(
                "elsewhere",
                head,
                fence,
                agentsessions_api::Event::new(
                    agentsessions_api::EventKind::Lifecycle,
                    EventBody::Lifecycle(agentsessions_api::Lifecycle {
                        kind: LifecycleKind::Delete,
                        ..agentsessions_api::Lifecycle::default()
                    }),
                ),
            )
            .await
            .unwrap();
        assert!(matches!(
            placer.reclaim("kept").await.unwrap_err(),
            PlacementError::Journal(agentsessions_journal::JournalError::InvalidArgument(_))
        ));
        assert!(placer.delete("gone").await.unwrap());
        let head_before = journal.head("gone").await.unwrap();
        let report = placer.reclaim_pending(100).await.unwrap();
        assert_eq!(report.reclaimed, ["gone"]);
        assert_eq!(report.failed.len(), 1);
        assert_eq!(report.failed[0].0, "elsewhere");
        assert!(runtime.probe("gone").is_none(), "compute stopped");
        assert_eq!(runtime.checkpoints_of("gone"), 0, "snapshots released");
        assert!(runtime.probe("kept").is_some(), "other sessions untouched");
        assert_eq!(runtime.checkpoints_of("kept"), 1);
        let info = journal.session_info("gone").await.unwrap();
        assert!(info.reclaimed_at.is_some());
        assert!(info.deletion.is_deleted());
        assert_eq!(
            journal.head("gone").await.unwrap(),
            head_before,
            "records stay"
        );
        // The next pass has only the unreachable one left; reclaiming again is a no-op.
        let report = placer.reclaim_pending(100).await.unwrap();
        assert!(report.reclaimed.is_empty());
        assert_eq!(report.failed.len(), 1);
        let stops = runtime.counts().3;
        placer.reclaim("gone").await.unwrap();
        assert_eq!(runtime.counts().3, stops);
    }
}

// semantics §2.3: a stale cursor is refused before a fence is minted.
#[tokio::test]
async fn a_stale_cursor_is_refused_before_any_fence() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        placer.exec(turn("s")).await.unwrap();
        let fence = journal.session_info("s").await.unwrap().fence;
        let mut stale = turn("s");
        stale.request.expected_last_seq = Some(0);
        let err = placer.exec(stale).await.unwrap_err();
        assert!(matches!(err, PlacementError::Journal(_)), "{err}");
        assert_eq!(journal.session_info("s").await.unwrap().fence, fence);
    }
}

// semantics §1.7: a session's compute state is the journal's, checked with its runtime while the
// journal says it holds compute: none before any turn, live after one, cold once suspended, live
// again on resume, none once the runtime no longer has the incarnation.
#[tokio::test]
async fn compute_state_reads_the_journal_and_the_runtime() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(true, false));
        let placer = placer(Arc::clone(&journal), &runtime);
        session(&journal, "s").await;
        let compute = |placer: Placer, journal: Arc<dyn agentsessions_journal::Journal>| async move {
            let info = journal.session_info("s").await.unwrap();
            (placer.session_compute(&info).await, info.fence)
        };

        let (never_ran, _) = compute(placer.clone(), Arc::clone(&journal)).await;
        assert_eq!(
            (never_ran.state, never_ran.compute),
            (ComputeState::None, None)
        );

        placer.exec(turn("s")).await.unwrap();
        let (live, fence) = compute(placer.clone(), Arc::clone(&journal)).await;
        assert_eq!(live.state, ComputeState::Live);
        let placed = live.compute.expect("a live session shows its incarnation");
        assert_eq!(placed.fence_token, fence);
        assert!(placed.capabilities.memory_snapshot);

        placer.suspend("s").await.unwrap();
        let (suspended, _) = compute(placer.clone(), Arc::clone(&journal)).await;
        assert_eq!(
            (suspended.state, suspended.compute),
            (ComputeState::Cold, None)
        );

        placer
            .resume(ResumeCall {
                session: "s".into(),
                ..ResumeCall::default()
            })
            .await
            .unwrap();
        let (resumed, _) = compute(placer.clone(), Arc::clone(&journal)).await;
        assert_eq!(resumed.state, ComputeState::Live);

        runtime.stop_session_for_test("s");
        let (stopped, _) = compute(placer.clone(), Arc::clone(&journal)).await;
        assert_eq!((stopped.state, stopped.compute), (ComputeState::None, None));
    }
}

// STYLE rule 3: ids are inputs. With a fixed id source the placer's turns and fork children get
// exactly the ids the test names.
#[tokio::test]
async fn a_fixed_id_source_makes_turn_and_fork_ids_deterministic() {
    for (journal, _dir) in journals().await {
        let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
        let placer =
            placer(Arc::clone(&journal), &runtime).with_ids(Arc::new(SequentialIds::default()));
        session(&journal, "p").await;
        placer.exec(turn("p")).await.unwrap();
        let records = journal.read("p", 1, 0).await.unwrap();
        let executions: Vec<&str> = records
            .iter()
            .filter(|r| r.event.kind == EventKind::ExecutionStart)
            .map(|r| r.event.execution_id.as_str())
            .collect();
        assert_eq!(executions, ["0000000000000001"]);
        let forked = placer.fork(fork("p", 0, 2)).await.unwrap();
        // The probe harness calls no model, so the turn took exactly one id.
        assert_eq!(forked.children, ["child-2", "child-3"]);
        assert_eq!(placer.new_session_uid(), "child-4");
    }
}

// extensions §4: under a model policy, a harness whose descriptor declares a model outside it is
// refused at admission, before any compute or journal write; one declaring only allowed models
// runs, and its turn journals the policy's default.
#[tokio::test]
async fn a_descriptor_outside_the_model_policy_is_refused_at_placement() {
    use agentsessions_api::{ModelPolicy, Runtime};
    use agentsessions_controller::ControllerError;
    use agentsessions_placement::{Backend, DescriptorSource, Registry};
    use support::{Probe, TestDialer};

    for (declared, allowed) in [("m-large", false), ("m-small", true)] {
        for (journal, _dir) in journals().await {
            let runtime = Arc::new(InMemoryTestRuntime::new(false, false));
            let registry = Registry::default();
            let mut descriptor = Probe::descriptor(false);
            descriptor.models = vec![declared.to_owned()];
            registry
                .add_static(
                    "probe",
                    Backend::new(
                        Arc::clone(&runtime) as Arc<dyn Runtime>,
                        Arc::new(TestDialer {
                            runtime: Arc::clone(&runtime),
                        }),
                        DescriptorSource::Declared(descriptor),
                    ),
                )
                .unwrap();
            let placer = Placer::new(
                Arc::clone(&journal),
                Arc::new(agentsessions_model::EchoModel::new()),
                registry,
            )
            .with_policy(ModelPolicy::new("m-small", ["m-small"]));
            session(&journal, "s").await;
            let outcome = placer.exec(turn("s")).await;
            if allowed {
                outcome.unwrap();
                let records = journal.read("s", 1, 0).await.unwrap();
                let Some(EventBody::ExecutionStart(start)) = &records[0].event.body else {
                    panic!("no EXECUTION_START")
                };
                assert_eq!(start.model, "m-small");
                continue;
            }
            let err = outcome.unwrap_err();
            assert!(
                matches!(
                    &err,
                    PlacementError::Controller(ControllerError::ModelNotAllowed { model })
                        if model == "m-large"
                ),
                "{err}"
            );
            assert_eq!(runtime.counts(), (0, 0, 0, 0));
            assert_eq!(journal.session_info("s").await.unwrap().last_seq, 0);
        }
    }
}
