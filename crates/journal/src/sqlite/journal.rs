//! The [`Journal`] trait over the SQLite file: writes go to the writer thread as commands,
//! reads run on the pooled read connections.

use agentsessions_api::{CallerIdentity, ComputeState, Timestamp};
use async_trait::async_trait;
use rusqlite::{OptionalExtension as _, params};

use super::readers::QUICK_ROWS;
use super::writer::{self, Command};
use super::{SqliteJournal, codec, prefix};
use crate::append::{AppendRequest, Appended, FenceUse, Wait};
use crate::approvals::{ApprovalPage, ApprovalsPlan, ApprovalsQuery, PendingApproval, decode_args};
use crate::chain::decode_event;
use crate::error::{JournalError, Result};
use crate::follow::HeadFollow;
use crate::journal::{Catalog, Log};
use crate::record::LogRecord;
use crate::rows::{HarnessRow, ListQuery, RegisterOutcome, SessionInfo, SessionPage, SessionRow};
use crate::rules;
use crate::writer_queue;

#[async_trait]
impl Log for SqliteJournal {
    async fn append(&self, request: AppendRequest) -> Result<Appended> {
        let AppendRequest {
            session,
            expected_last_seq,
            fence,
            wait,
            events,
        } = request;
        let fence = match fence {
            FenceUse::Hold(fence) => Some(fence),
            FenceUse::Mint => None,
        };
        let durable = match wait {
            Wait::Durable => true,
            Wait::Committed => false,
            Wait::Queued => {
                // Followers are woken by the durable append that follows: they are handed
                // records only once durable.
                return writer_queue::queue_append(
                    &self.writer,
                    Command::Append,
                    &session,
                    expected_last_seq,
                    fence,
                    events,
                )
                .await;
            }
        };
        Ok(Appended::answered(
            self.append_with(&session, expected_last_seq, fence, events, durable)
                .await,
        ))
    }

    fn follow(&self, session: &str) -> HeadFollow {
        self.follow_head(session)
    }

    async fn new_fence(&self, session: &str) -> Result<i64> {
        rules::check_session_uid(session)?;
        self.send(|ack| Command::NewFence {
            session: session.to_owned(),
            ack,
        })
        .await
    }

    async fn head(&self, session: &str) -> Result<i64> {
        let session = session.to_owned();
        self.with_quick_reader(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT COALESCE((SELECT MAX(seq) FROM events WHERE session = ?1),
                                     (SELECT fork_seq FROM session_prefix WHERE session = ?1), 0)",
                )?
                .query_row([&session], |r| r.get(0))?)
        })
        .await
    }

    async fn read(&self, session: &str, from: i64, to: i64) -> Result<Vec<LogRecord>> {
        let (from, to) = rules::read_window(from, to)?;
        let owned = session.to_owned();
        // The first records on this worker (an operation's tail read ends there), the rest of a
        // longer range on the blocking pool.
        let mut out = self
            .with_quick_reader(move |conn| read_range(conn, &owned, from, to, QUICK_ROWS))
            .await?;
        let rest_from = match out.last() {
            Some(last) if out.len() == QUICK_ROWS && last.seq < to => last.seq + 1,
            _ => return Ok(out),
        };
        let owned = session.to_owned();
        let rest = self
            .with_reader(move |conn| read_range(conn, &owned, rest_from, to, usize::MAX))
            .await?;
        out.extend(rest);
        Ok(out)
    }

    async fn fork_session(&self, parent: &str, at_seq: i64, child: &str) -> Result<i64> {
        rules::check_session_uid(parent)?;
        rules::check_session_uid(child)?;
        self.send(|ack| Command::Fork {
            parent: parent.to_owned(),
            at_seq,
            child: child.to_owned(),
            ack,
        })
        .await
    }
}

#[async_trait]
impl Catalog for SqliteJournal {
    async fn put_session(&self, row: SessionRow) -> Result<()> {
        rules::check_session_uid(&row.uid)?;
        let row = Box::new(row);
        self.send(|ack| Command::PutSession { row, ack }).await
    }

    async fn session_info(&self, uid: &str) -> Result<SessionInfo> {
        let uid = uid.to_owned();
        self.with_quick_reader(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {} FROM sessions s WHERE s.session = ?1",
                codec::SESSION_COLUMNS
            ))?;
            let mut rows = stmt.query([&uid])?;
            match rows.next()? {
                Some(row) => codec::session_info_from_row(row),
                None => Err(JournalError::SessionNotFound(uid.clone())),
            }
        })
        .await
    }

    async fn list_sessions(&self, query: ListQuery) -> Result<SessionPage> {
        let plan = rules::ListPlan::new(&query, &self.default_project)?;
        self.with_reader(move |conn| {
            let (after_time, after_uid, has_cursor) = match &plan.cursor {
                Some(c) => (c.created_at_ns, c.uid.clone(), 1),
                None => (0, String::new(), 0),
            };
            // Two statements rather than one with an optional predicate, so that each one's plan
            // is a range scan of its own index (`sessions_owner_created` or
            // `sessions_project_created`) in the listing's order.
            let owner_clause = if query.owner.is_some() {
                "s.owner_issuer = ?6 AND s.owner_subject = ?7 AND"
            } else {
                "?6 = ?7 AND"
            };
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {} FROM sessions s
                 WHERE {owner_clause} s.project = ?1
                   AND (?2 = 0 OR s.created_at < ?3 OR (s.created_at = ?3 AND s.session > ?4))
                 ORDER BY s.created_at DESC, s.session ASC
                 LIMIT ?5",
                codec::SESSION_COLUMNS
            ))?;
            let owner = query.owner.unwrap_or_default();
            let mut rows = stmt.query(params![
                plan.project,
                has_cursor,
                after_time,
                after_uid,
                plan.fetch_limit(),
                owner.issuer,
                owner.subject
            ])?;
            let mut sessions = Vec::new();
            while let Some(row) = rows.next()? {
                sessions.push(codec::session_info_from_row(row)?);
            }
            Ok(plan.page(sessions))
        })
        .await
    }

    async fn list_pending_approvals(&self, query: ApprovalsQuery) -> Result<ApprovalPage> {
        let plan = ApprovalsPlan::new(&query, &self.default_project)?;
        self.with_reader(move |conn| {
            let cursor = plan.cursor.clone().unwrap_or_default();
            let has_cursor = i64::from(plan.cursor.is_some());
            let owner_clause = if query.owner.is_some() {
                "s.owner_issuer = ?7 AND s.owner_subject = ?8 AND"
            } else {
                "?7 = ?8 AND"
            };
            // Walks `pending_approvals_requested` in listing order; the join only reads each
            // entry's session row by its key.
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT a.session, s.project, s.owner_issuer, s.owner_subject, a.execution_id,
                        a.tool_call_id, a.request_seq, a.tool, a.args, a.reason, a.requested_at
                 FROM pending_approvals a JOIN sessions s ON s.session = a.session
                 WHERE {owner_clause} s.project = ?1
                   AND (?2 = 0 OR (a.requested_at, a.session, a.tool_call_id) > (?3, ?4, ?5))
                 ORDER BY a.requested_at, a.session, a.tool_call_id
                 LIMIT ?6"
            ))?;
            let owner = query.owner.unwrap_or_default();
            let mut rows = stmt.query(params![
                plan.project,
                has_cursor,
                cursor.requested_at_ns,
                cursor.session,
                cursor.tool_call_id,
                i64::try_from(plan.size + 1).unwrap_or(i64::MAX),
                owner.issuer,
                owner.subject
            ])?;
            let mut approvals = Vec::new();
            while let Some(row) = rows.next()? {
                approvals.push(PendingApproval {
                    session: row.get(0)?,
                    project: row.get(1)?,
                    owner: CallerIdentity::new(row.get::<_, String>(2)?, row.get::<_, String>(3)?),
                    execution_id: row.get(4)?,
                    tool_call_id: row.get(5)?,
                    request_seq: row.get(6)?,
                    tool: row.get(7)?,
                    args: decode_args(&row.get::<_, String>(8)?),
                    reason: row.get(9)?,
                    requested_at: Timestamp::from_unix_nanos(row.get(10)?),
                });
            }
            Ok(plan.page(approvals))
        })
        .await
    }

    async fn pending_deletions(&self, limit: usize) -> Result<Vec<String>> {
        self.with_reader(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT session FROM sessions
                 WHERE deletion_state NOT IN ('', 'ACTIVE') AND reclaimed_at = 0
                 ORDER BY updated_at, session LIMIT ?1",
            )?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map([limit], |r| r.get::<_, String>(0))?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    async fn mark_reclaimed(&self, uid: &str) -> Result<()> {
        let uid = uid.to_owned();
        self.send(|ack| Command::MarkReclaimed { uid, ack }).await
    }

    async fn settle_compute_state(
        &self,
        session: &str,
        at_seq: i64,
        state: ComputeState,
    ) -> Result<bool> {
        rules::check_settled_state(session, state)?;
        let session = session.to_owned();
        self.send(|ack| Command::SettleCompute {
            session,
            at_seq,
            state,
            ack,
        })
        .await
    }

    async fn register_harness(
        &self,
        name: &str,
        spec: &str,
        spec_digest: &str,
    ) -> Result<(HarnessRow, RegisterOutcome)> {
        self.send(|ack| Command::Register {
            name: name.to_owned(),
            spec: spec.to_owned(),
            spec_digest: spec_digest.to_owned(),
            ack,
        })
        .await
    }

    async fn get_harness(&self, name: &str) -> Result<Option<HarnessRow>> {
        let name = name.to_owned();
        self.with_quick_reader(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "SELECT {} FROM harnesses WHERE name = ?1",
                    codec::HARNESS_COLUMNS
                ))?
                .query_row([&name], codec::harness_from_row)
                .optional()?)
        })
        .await
    }

    async fn list_harnesses(
        &self,
        after: &str,
        limit: usize,
        include_retired: bool,
    ) -> Result<Vec<HarnessRow>> {
        let after = after.to_owned();
        self.with_reader(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {} FROM harnesses WHERE name > ?1 AND (?2 OR state = 'active')
                 ORDER BY name LIMIT ?3",
                codec::HARNESS_COLUMNS
            ))?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map(
                params![after, include_retired, limit],
                codec::harness_from_row,
            )?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    async fn retire_harness(&self, name: &str, reason: &str) -> Result<HarnessRow> {
        self.send(|ack| Command::Retire {
            name: name.to_owned(),
            reason: reason.to_owned(),
            ack,
        })
        .await
    }

    async fn reserve_harness_names(&self, names: &[String]) -> Result<()> {
        let names = names.to_vec();
        self.send(|ack| Command::Reserve { names, ack }).await
    }

    async fn is_harness_name_reserved(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.with_quick_reader(move |conn| writer::is_reserved(conn, &name))
            .await
    }
}

/// Records `from..=to` of `session` (through its fork prefix), at most `limit` of them.
fn read_range(
    conn: &rusqlite::Connection,
    session: &str,
    from: i64,
    to: i64,
    limit: usize,
) -> Result<Vec<LogRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, prev_hash, hash, fence, event, committed_at FROM events
         WHERE session = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq",
    )?;
    let mut out = Vec::new();
    for run in prefix::segments(conn, session)? {
        let Some(run) = run.clip(from, to) else {
            continue;
        };
        let mut rows = stmt.query(params![run.session, run.lo, run.hi])?;
        while let Some(row) = rows.next()? {
            if out.len() == limit {
                return Ok(out);
            }
            let seq: i64 = row.get(0)?;
            let blob: Vec<u8> = row.get(4)?;
            let committed_at: i64 = row.get(5)?;
            out.push(LogRecord {
                seq,
                prev_hash: row.get(1)?,
                hash: row.get(2)?,
                fence: row.get(3)?,
                event: decode_event(&run.session, seq, &blob)?,
                committed_at: (committed_at != 0).then(|| Timestamp::from_unix_nanos(committed_at)),
            });
        }
    }
    Ok(out)
}
