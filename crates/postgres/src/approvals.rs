//! The pending-approvals projection (`agentsessions_journal::approvals`) in Postgres: the
//! changes a batch makes, written in its transaction, and the indexed listing.

use std::collections::HashMap;

use agentsessions_api::{CallerIdentity, Event, JsonObject, Timestamp};
use agentsessions_journal::approvals::{
    ApprovalPage, ApprovalsPlan, ApprovalsQuery, CALL_LOOKBACK, PendingApproval, PendingChange,
    decode_args, encode_args, gated_call,
};
use agentsessions_journal::chain::decode_event;

use crate::connection::Conn;
use crate::failure::DbError;

/// A request the batch opens.
#[derive(Debug)]
struct Opened {
    session: String,
    tool_call_id: String,
    execution_id: String,
    request_seq: i64,
    reason: String,
    /// The gated call's tool and arguments when the batch itself holds its TOOL_CALL.
    call: Option<(String, Option<JsonObject>)>,
    /// The session's first seq in this batch: an older TOOL_CALL is stored below it.
    stored_below: i64,
}

/// What a batch does to `pending_approvals`: entries it closes (by call, by execution, or the
/// whole session), then entries it opens that nothing later in the batch closed.
#[derive(Debug, Default)]
pub(crate) struct PendingMoves {
    /// Per session: its first seq in the batch and its last few events.
    recent: HashMap<String, (i64, Vec<Event>)>,
    close_session: Vec<String>,
    close_kind: Vec<&'static str>,
    close_key: Vec<String>,
    opened: Vec<Opened>,
}

impl PendingMoves {
    /// Takes the record at `seq` of `session` into account, in commit order, with the change
    /// the append rule found it makes to the pending approvals.
    pub(crate) fn record(
        &mut self,
        session: &str,
        seq: i64,
        event: &Event,
        change: Option<PendingChange>,
    ) {
        let (first, recent) = self
            .recent
            .entry(session.to_owned())
            .or_insert_with(|| (seq, Vec::new()));
        let stored_below = *first;
        if let Some(change) = change {
            match change {
                PendingChange::Request {
                    execution_id,
                    tool_call_id,
                    reason,
                } => {
                    let call = gated_call(recent.iter().rev(), &execution_id, &tool_call_id);
                    self.opened
                        .retain(|o| o.session != session || o.tool_call_id != tool_call_id);
                    self.opened.push(Opened {
                        session: session.to_owned(),
                        tool_call_id,
                        execution_id,
                        request_seq: seq,
                        reason,
                        call,
                        stored_below,
                    });
                }
                PendingChange::Decided { tool_call_id } => {
                    self.opened
                        .retain(|o| o.session != session || o.tool_call_id != tool_call_id);
                    self.close(session, "call", tool_call_id);
                }
                PendingChange::Ended { execution_id } => {
                    self.opened
                        .retain(|o| o.session != session || o.execution_id != execution_id);
                    self.close(session, "execution", execution_id);
                }
                PendingChange::Deleted => {
                    self.opened.retain(|o| o.session != session);
                    self.close(session, "session", String::new());
                }
            }
        }
        if let Some((_, recent)) = self.recent.get_mut(session) {
            recent.push(event.clone());
            if recent.len() > CALL_LOOKBACK {
                recent.remove(0);
            }
        }
    }

    fn close(&mut self, session: &str, kind: &'static str, key: String) {
        self.close_session.push(session.to_owned());
        self.close_kind.push(kind);
        self.close_key.push(key);
    }

    /// Writes the moves inside the batch's open transaction: closes first, then the opened
    /// entries, whose TOOL_CALL is read back when an earlier append stored it.
    pub(crate) async fn write(self, conn: &Conn, now: i64) -> Result<(), tokio_postgres::Error> {
        let (client, st) = (&conn.client, &conn.st);
        if !self.close_session.is_empty() {
            client
                .execute(
                    &st.pending_close,
                    &[&self.close_session, &self.close_kind, &self.close_key],
                )
                .await?;
        }
        if self.opened.is_empty() {
            return Ok(());
        }
        let mut columns = OpenedColumns::default();
        for opened in self.opened {
            let (tool, args) = match opened.call {
                Some(call) => call,
                None => stored_call(conn, &opened).await?.unwrap_or_default(),
            };
            columns.session.push(opened.session);
            columns.tool_call_id.push(opened.tool_call_id);
            columns.execution_id.push(opened.execution_id);
            columns.request_seq.push(opened.request_seq);
            columns.tool.push(tool);
            columns.args.push(encode_args(args.as_ref()));
            columns.reason.push(opened.reason);
        }
        client
            .execute(
                &st.pending_open,
                &[
                    &columns.session,
                    &columns.tool_call_id,
                    &columns.execution_id,
                    &columns.request_seq,
                    &columns.tool,
                    &columns.args,
                    &columns.reason,
                    &now,
                ],
            )
            .await?;
        Ok(())
    }
}

#[derive(Debug, Default)]
struct OpenedColumns {
    session: Vec<String>,
    tool_call_id: Vec<String>,
    execution_id: Vec<String>,
    request_seq: Vec<i64>,
    tool: Vec<String>,
    args: Vec<String>,
    reason: Vec<String>,
}

/// The gated call of `opened` among the stored records right below the batch; a record that
/// does not decode is skipped (the listing shows no tool rather than failing the append).
async fn stored_call(
    conn: &Conn,
    opened: &Opened,
) -> Result<Option<(String, Option<JsonObject>)>, tokio_postgres::Error> {
    let hi = opened.stored_below - 1;
    let lookback = i64::try_from(CALL_LOOKBACK).unwrap_or(1);
    let lo = (hi - lookback + 1).max(1);
    let rows = conn
        .client
        .query(
            &conn.st.records_back,
            &[&opened.session, &lo, &hi, &lookback],
        )
        .await?;
    let mut events = Vec::with_capacity(rows.len());
    for row in &rows {
        let seq: i64 = row.try_get(0)?;
        if let Ok(event) = decode_event(&opened.session, seq, row.try_get(2)?) {
            events.push(event);
        }
    }
    Ok(gated_call(
        &events,
        &opened.execution_id,
        &opened.tool_call_id,
    ))
}

/// One page of pending approvals through `pending_approvals_requested`.
pub(crate) async fn list(
    conn: &Conn,
    plan: &ApprovalsPlan,
    query: &ApprovalsQuery,
) -> Result<ApprovalPage, DbError> {
    let cursor = plan.cursor.clone().unwrap_or_default();
    let has_cursor = plan.cursor.is_some();
    let limit = i64::try_from(plan.size + 1).unwrap_or(i64::MAX);
    let rows = match &query.owner {
        Some(owner) => {
            conn.client
                .query(
                    &conn.st.list_owned_pending,
                    &[
                        &plan.project,
                        &has_cursor,
                        &cursor.requested_at_ns,
                        &cursor.session,
                        &cursor.tool_call_id,
                        &limit,
                        &owner.issuer,
                        &owner.subject,
                    ],
                )
                .await?
        }
        None => {
            conn.client
                .query(
                    &conn.st.list_pending,
                    &[
                        &plan.project,
                        &has_cursor,
                        &cursor.requested_at_ns,
                        &cursor.session,
                        &cursor.tool_call_id,
                        &limit,
                    ],
                )
                .await?
        }
    };
    let mut approvals = Vec::with_capacity(rows.len());
    for row in &rows {
        approvals.push(PendingApproval {
            session: row.try_get(0)?,
            project: row.try_get(1)?,
            owner: CallerIdentity::new(row.try_get::<_, String>(2)?, row.try_get::<_, String>(3)?),
            execution_id: row.try_get(4)?,
            tool_call_id: row.try_get(5)?,
            request_seq: row.try_get(6)?,
            tool: row.try_get(7)?,
            args: decode_args(row.try_get(8)?),
            reason: row.try_get(9)?,
            requested_at: Timestamp::from_unix_nanos(row.try_get(10)?),
        });
    }
    Ok(plan.page(approvals))
}
