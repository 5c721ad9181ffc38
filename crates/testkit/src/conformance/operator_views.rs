//! Conformance cases for what an operator reads without scanning logs: pending approvals, usage
//! totals and each record's commit time, all kept in the append's commit.

use std::sync::Arc;

use agentsessions_api::{
    ApprovalRequest, ApprovalResult, CallerIdentity, Event, EventBody, EventKind, HarnessEnd,
    Lifecycle, LifecycleKind, Mediation, Timestamp, ToolCall, Usage,
};
use agentsessions_journal::{
    AppendRequest, ApprovalPage, ApprovalsQuery, FenceUse, Journal, JournalError, ListQuery,
    LogExt as _, LogRecord, UsageTotals,
};

use super::{caller, put_owned};
use crate::fixtures::{fork_with_marker, input};

fn gated_call(execution: &str, call: &str, tool: &str) -> Event {
    let args = serde_json::json!({"path": "/tmp/x", "force": true});
    Event::new(
        EventKind::ToolCall,
        EventBody::ToolCall(ToolCall {
            id: call.into(),
            tool: tool.into(),
            args: args.as_object().cloned(),
            mediation: Mediation::RequiresApproval,
            idempotency_key: format!("key-{call}"),
        }),
    )
    .with_execution(execution)
}

fn request(execution: &str, call: &str) -> Event {
    Event::new(
        EventKind::ApprovalRequest,
        EventBody::Approval(ApprovalRequest {
            tool_call_id: call.into(),
            reason: "writes a file".into(),
        }),
    )
    .with_execution(execution)
}

fn decision(execution: &str, call: &str, request_seq: i64) -> Event {
    Event::new(
        EventKind::ApprovalResult,
        EventBody::ApprovalResult(ApprovalResult {
            tool_call_id: call.into(),
            approved: true,
            reason: String::new(),
            request_seq,
        }),
    )
    .with_execution(execution)
}

fn end(execution: &str) -> Event {
    Event::new(
        EventKind::End,
        EventBody::End(HarnessEnd {
            state: "COMPLETED".into(),
            error: None,
        }),
    )
    .with_execution(execution)
}

fn usage(input_tokens: i64, output_tokens: i64, reasoning_tokens: i64) -> Event {
    Event::new(
        EventKind::Usage,
        EventBody::Usage(Usage {
            model: "m".into(),
            input_tokens,
            output_tokens,
            reasoning_tokens,
            // A tenth of the input came from a cache, so the cached total is checked too.
            cached_input_tokens: input_tokens / 10,
        }),
    )
    .with_execution("exec-1")
}

async fn append(j: &Arc<dyn Journal>, session: &str, events: Vec<Event>) -> i64 {
    let head = j.head(session).await.unwrap();
    let fence = j.session_info(session).await.map_or(0, |i| i.fence);
    let records = j
        .append_records(AppendRequest::new(
            session,
            head,
            FenceUse::Hold(fence),
            events,
        ))
        .await
        .unwrap();
    records.last().map_or(head, |r| r.seq)
}

async fn pending(j: &Arc<dyn Journal>, project: &str, owner: Option<&str>) -> ApprovalPage {
    j.list_pending_approvals(ApprovalsQuery {
        project: project.into(),
        owner: owner.map(caller),
        ..ApprovalsQuery::default()
    })
    .await
    .unwrap()
}

fn calls(page: &ApprovalPage) -> Vec<(&str, &str)> {
    page.approvals
        .iter()
        .map(|a| (a.session.as_str(), a.tool_call_id.as_str()))
        .collect()
}

// extensions §7 (pending approvals): a request is listed from its commit on, with its call's tool
// and arguments, until its decision or the end of its execution; owner filter and paging are exact.
pub async fn pending_approvals_follow_requests_and_decisions(j: Arc<dyn Journal>) {
    put_owned(&j, "a", "p", 1, "alice").await;
    put_owned(&j, "b", "p", 2, "bob").await;
    put_owned(&j, "c", "q", 3, "alice").await;
    append(
        &j,
        "a",
        vec![input("go"), gated_call("exec-a", "call-1", "rm")],
    )
    .await;
    let a_request = append(&j, "a", vec![request("exec-a", "call-1")]).await;
    // The call and its request in one batch.
    let b_request = append(
        &j,
        "b",
        vec![
            gated_call("exec-b", "call-9", "deploy"),
            request("exec-b", "call-9"),
        ],
    )
    .await;
    append(
        &j,
        "c",
        vec![
            gated_call("exec-c", "call-2", "rm"),
            request("exec-c", "call-2"),
        ],
    )
    .await;

    let all = pending(&j, "p", None).await;
    assert_eq!(calls(&all), [("a", "call-1"), ("b", "call-9")]);
    assert!(all.next_page_token.is_empty());
    let first = &all.approvals[0];
    assert_eq!(
        (
            first.execution_id.as_str(),
            first.request_seq,
            first.tool.as_str()
        ),
        ("exec-a", a_request, "rm")
    );
    assert_eq!(first.reason, "writes a file");
    assert_eq!(first.project, "p");
    assert_eq!(first.owner, caller("alice"));
    assert_eq!(
        first.args.as_ref().and_then(|a| a.get("path")),
        Some(&serde_json::json!("/tmp/x"))
    );
    let recorded = j.read("a", a_request, a_request).await.unwrap();
    assert_eq!(Some(first.requested_at), recorded[0].committed_at);
    assert_eq!(all.approvals[1].request_seq, b_request);

    assert_eq!(
        calls(&pending(&j, "p", Some("bob")).await),
        [("b", "call-9")]
    );
    assert_eq!(
        calls(&pending(&j, "q", Some("alice")).await),
        [("c", "call-2")]
    );
    assert!(pending(&j, "p", Some("carol")).await.approvals.is_empty());

    // Pages of one: the token of the first names it, the last page has none.
    let page = j
        .list_pending_approvals(ApprovalsQuery {
            project: "p".into(),
            page_size: 1,
            ..ApprovalsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(calls(&page), [("a", "call-1")]);
    assert!(!page.next_page_token.is_empty());
    let next = j
        .list_pending_approvals(ApprovalsQuery {
            project: "p".into(),
            page_size: 1,
            page_token: page.next_page_token,
            ..ApprovalsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(calls(&next), [("b", "call-9")]);
    assert!(next.next_page_token.is_empty());

    // A decision closes its request; the end of an execution closes what it left open.
    append(&j, "a", vec![decision("exec-a", "call-1", a_request)]).await;
    assert_eq!(calls(&pending(&j, "p", None).await), [("b", "call-9")]);
    append(&j, "b", vec![end("exec-b")]).await;
    assert!(pending(&j, "p", None).await.approvals.is_empty());
}

// extensions §7 (pending approvals): a fork child does not list its parent's request, a delete
// intent closes the session's requests, and bad tokens and incomplete owners are refused.
pub async fn pending_approvals_leave_with_delete_and_stay_with_the_parent(j: Arc<dyn Journal>) {
    put_owned(&j, "parent", "p", 1, "alice").await;
    let at = append(
        &j,
        "parent",
        vec![
            gated_call("exec-p", "call-1", "rm"),
            request("exec-p", "call-1"),
        ],
    )
    .await;
    fork_with_marker(j.as_ref(), "parent", at, "child").await;
    assert_eq!(calls(&pending(&j, "p", None).await), [("parent", "call-1")]);

    let delete = Event::new(
        EventKind::Lifecycle,
        EventBody::Lifecycle(Lifecycle {
            kind: LifecycleKind::Delete,
            ..Lifecycle::default()
        }),
    );
    append(&j, "parent", vec![delete]).await;
    assert!(pending(&j, "p", None).await.approvals.is_empty());

    let bad_token = j
        .list_pending_approvals(ApprovalsQuery {
            project: "p".into(),
            page_token: "not a token!".into(),
            ..ApprovalsQuery::default()
        })
        .await;
    assert!(
        matches!(bad_token, Err(JournalError::InvalidPageToken(_))),
        "{bad_token:?}"
    );
    let incomplete = j
        .list_pending_approvals(ApprovalsQuery {
            project: "p".into(),
            owner: Some(CallerIdentity::new("", "alice")),
            ..ApprovalsQuery::default()
        })
        .await;
    assert!(
        matches!(incomplete, Err(JournalError::InvalidArgument(_))),
        "{incomplete:?}"
    );
}

// extensions §7 (usage totals): USAGE records are summed in their append's commit; a fork child
// starts at zero; a listing shows the same totals.
pub async fn usage_totals_sum_in_the_append_commit(j: Arc<dyn Journal>) {
    put_owned(&j, "s", "p", 1, "").await;
    assert_eq!(
        j.session_info("s").await.unwrap().usage,
        UsageTotals::default()
    );
    append(&j, "s", vec![input("go"), usage(10, 5, 2)]).await;
    let at = append(&j, "s", vec![usage(1, 1, 0), usage(100, 0, 0)]).await;
    let want = UsageTotals {
        input_tokens: 111,
        output_tokens: 6,
        reasoning_tokens: 2,
        cached_input_tokens: 11,
    };
    assert_eq!(j.session_info("s").await.unwrap().usage, want);
    let listed = j
        .list_sessions(ListQuery {
            project: "p".into(),
            ..ListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.sessions[0].usage, want);

    fork_with_marker(j.as_ref(), "s", at, "child").await;
    assert_eq!(
        j.session_info("child").await.unwrap().usage,
        UsageTotals::default()
    );
    append(&j, "child", vec![usage(7, 0, 0)]).await;
    assert_eq!(j.session_info("child").await.unwrap().usage.input_tokens, 7);
    assert_eq!(j.session_info("s").await.unwrap().usage, want);
}

// extensions §1.2 (commit times): every record carries the time it was committed, returned by
// the append and by every read, outside the hashed event.
pub async fn records_carry_their_commit_time(j: Arc<dyn Journal>) {
    let before = Timestamp::now().unix_nanos();
    let appended = j
        .append_records(AppendRequest::new(
            "s",
            0,
            FenceUse::Hold(0),
            vec![input("a"), input("b")],
        ))
        .await
        .unwrap();
    let after = Timestamp::now().unix_nanos();
    for record in &appended {
        let at = record.committed_at.map(Timestamp::unix_nanos).unwrap();
        assert!(before <= at && at <= after, "{before} <= {at} <= {after}");
    }
    let times = |records: &[LogRecord]| -> Vec<Option<Timestamp>> {
        records.iter().map(|r| r.committed_at).collect()
    };
    let read = j.read("s", 1, 0).await.unwrap();
    assert_eq!(times(&read), times(&appended));
    fork_with_marker(j.as_ref(), "s", 2, "child").await;
    let child = j.read("child", 1, 2).await.unwrap();
    assert_eq!(
        times(&child),
        times(&appended),
        "a child reads its parent's times with its records"
    );
}
