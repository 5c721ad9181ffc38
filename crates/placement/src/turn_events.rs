//! One turn's events on their way to whoever watches it (the Exec stream): its committed
//! records, its streaming deltas and its opening, through one bounded channel the turn never
//! waits on.
//!
//! Records stream at commit (extensions §11): the controller shows the records it waited for
//! as they become durable, but an OUTPUT, a TOOL_RESULT or USAGE is appended without a wait and
//! shown only with the turn's next durable append, which for a harness that only writes output
//! is its END. So the reader also follows the session's commits ([`Log::follow`]) and reads
//! what the turn committed past what it handed out from the journal, whose reads hand records
//! out once durable: each record reaches the stream within a WAL sync of its commit. A record
//! that then also comes through the channel is skipped by its seq.
//!
//! The turn cannot wait for its reader (the controller's [`Observer`] is synchronous, and a
//! reader that stops must not hold the session), so a channel that fills up falls *behind*:
//! records stop being queued, and [`TurnEvents::next`] reads the ones it missed from the
//! journal, which already holds them, once the reader has taken what was queued. Deltas and
//! the opening are transport only (semantics §2.7): one that finds the channel full, or behind,
//! is dropped; the records still follow. The same feed notes the running execution on the
//! session's guard when the turn opens, so Cancel finds it.
//!
//! ```text
//!  Controller ──opened/record/delta──► TurnFeed ──► [ TURN_EVENT_CAPACITY ] ──► TurnEvents::next
//!                                       │ opened: guard notes the execution       ▲
//!                                       │ full: behind from seq n                 │
//!                                       └────────────────────── journal.read(n..) ┘
//!  journal commit ──► Log::follow ──► head past what was handed out ──► journal.read(next..) ┘
//! ```
//!
//! [`Log::follow`]: agentsessions_journal::Log::follow

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use agentsessions_api::Delta;
use agentsessions_controller::Observer;
use agentsessions_journal::{HeadFollow, Journal, LogRecord};
use tokio::sync::Notify;

use crate::error::Result;
use crate::guard::Held;

/// Events a turn queues for a reader that has not taken them yet; past it, records are read
/// again from the journal and deltas are dropped.
pub const TURN_EVENT_CAPACITY: usize = 64;
/// Records per journal read when a reader catches up.
const PAGE: i64 = 1_000;

/// What a running turn reports, in the order it happens.
#[derive(Debug, Clone)]
pub enum TurnEvent {
    /// The turn committed its opening (EXECUTION_START and its INPUTs): it runs and can be
    /// cancelled. Its records follow once durable.
    Opened {
        /// The execution the turn runs.
        execution_id: String,
    },
    /// A record the journal committed for the turn, once durable.
    Record(Box<LogRecord>),
    /// A transport-only streaming chunk (never journaled).
    Delta(Delta),
}

/// The channel between one turn's [`TurnFeed`] and its [`TurnEvents`].
struct Channel {
    journal: Arc<dyn Journal>,
    session: String,
    state: Mutex<State>,
    wake: Notify,
}

#[derive(Default)]
struct State {
    queue: VecDeque<TurnEvent>,
    /// The first record that found the queue full; set while the reader is behind.
    behind_from: Option<i64>,
    /// The newest record the turn committed.
    last_seq: i64,
    /// The turn returned: no more events will come.
    ended: bool,
    /// The first seq the turn can append: its records are read from the journal as they commit
    /// from here on (`None` until the turn's starting head is known).
    first_seq: Option<i64>,
    /// The reader went away: nothing more is queued.
    closed: bool,
}

impl Channel {
    fn state(&self) -> MutexGuard<'_, State> {
        // Plain pushes and flags: a panic elsewhere cannot leave the state inconsistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A channel for one turn on `session`: the feed the turn reports through, and the events its
/// reader takes.
pub(crate) fn channel(journal: Arc<dyn Journal>, session: &str) -> (TurnFeed, TurnEvents) {
    let channel = Arc::new(Channel {
        journal,
        session: session.to_owned(),
        state: Mutex::new(State::default()),
        wake: Notify::new(),
    });
    let feed = TurnFeed {
        channel: Some(Arc::clone(&channel)),
        held: Weak::new(),
    };
    // Subscribed before the turn can append anything, so no commit of it goes unannounced.
    let follow = channel.journal.follow(session);
    let events = TurnEvents {
        channel,
        follow: Some(follow),
        next_seq: None,
        committed: 0,
        caught: VecDeque::new(),
        catch_up: None,
    };
    (feed, events)
}

/// The controller's [`Observer`] for one turn: notes the running execution on the session's
/// guard and queues the turn's events for its reader, never waiting for it.
pub(crate) struct TurnFeed {
    /// `None` when nobody reads the turn's events.
    channel: Option<Arc<Channel>>,
    /// The guard of the operation running the turn; it stays with that operation.
    held: Weak<Held>,
}

impl TurnFeed {
    /// A feed nobody reads: it only notes the running execution.
    pub(crate) fn unread() -> Self {
        Self {
            channel: None,
            held: Weak::new(),
        }
    }

    /// This feed, noting the running execution on `held`.
    pub(crate) fn noting(&self, held: &Arc<Held>) -> Arc<Self> {
        Arc::new(Self {
            channel: self.channel.clone(),
            held: Arc::downgrade(held),
        })
    }

    /// The turn appends after `head`: from there on its records are read from the journal as
    /// they commit, not only as the controller shows them.
    pub(crate) fn starting_after(&self, head: i64) {
        if let Some(channel) = &self.channel {
            let mut state = channel.state();
            state.first_seq = Some(head.saturating_add(1));
            drop(state);
            channel.wake.notify_one();
        }
    }

    /// Ends the events once this value is dropped: the turn returned, whichever way.
    pub(crate) fn ending(&self) -> Ending {
        Ending(self.channel.clone())
    }

    /// Queues `event` when there is room and the reader is neither behind nor gone.
    fn offer(&self, event: impl FnOnce() -> TurnEvent) {
        let Some(channel) = &self.channel else {
            return;
        };
        let mut state = channel.state();
        if state.closed || state.behind_from.is_some() || state.queue.len() >= TURN_EVENT_CAPACITY {
            return;
        }
        state.queue.push_back(event());
        drop(state);
        channel.wake.notify_one();
    }
}

impl Observer for TurnFeed {
    fn opened(&self, execution_id: &str) {
        if let Some(held) = self.held.upgrade() {
            held.set_execution(execution_id);
        }
        self.offer(|| TurnEvent::Opened {
            execution_id: execution_id.to_owned(),
        });
    }

    fn record(&self, record: &LogRecord) {
        let Some(channel) = &self.channel else {
            return;
        };
        let mut state = channel.state();
        state.last_seq = state.last_seq.max(record.seq);
        if state.closed || state.behind_from.is_some() {
            return;
        }
        if state.queue.len() >= TURN_EVENT_CAPACITY {
            state.behind_from = Some(record.seq);
        } else {
            state
                .queue
                .push_back(TurnEvent::Record(Box::new(record.clone())));
        }
        drop(state);
        channel.wake.notify_one();
    }

    fn delta(&self, delta: &Delta) {
        self.offer(|| TurnEvent::Delta(delta.clone()));
    }
}

/// Marks the turn's events ended when dropped (see [`TurnFeed::ending`]).
pub(crate) struct Ending(Option<Arc<Channel>>);

impl Drop for Ending {
    fn drop(&mut self) {
        if let Some(channel) = &self.0 {
            channel.state().ended = true;
            channel.wake.notify_one();
        }
    }
}

/// The reading end of one turn's events ([`crate::Placer::run_turn`]): every record the turn
/// commits, in seq order, with the deltas and the opening that found room between them.
/// Dropping it stops the queueing; the turn runs on.
pub struct TurnEvents {
    channel: Arc<Channel>,
    /// The session's commits, announced by the journal (`None` once the journal is gone).
    follow: Option<HeadFollow>,
    /// The next record to hand out, once known: earlier ones are skipped.
    next_seq: Option<i64>,
    /// The head the journal announced while the turn ran: the turn's own records up to it are
    /// committed.
    committed: i64,
    /// Records read again from the journal, not handed out yet.
    caught: VecDeque<LogRecord>,
    /// While catching up: the next seq to read again, the last, and whether the reader is
    /// behind (the channel dropped records) rather than ahead of the controller.
    catch_up: Option<CatchUp>,
}

/// Records to read from the journal.
#[derive(Debug, Clone, Copy)]
struct CatchUp {
    from: i64,
    to: i64,
    /// The channel fell behind: once `to` is read, it is behind on what came since.
    behind: bool,
}

impl std::fmt::Debug for TurnEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnEvents")
            .field("session", &self.channel.session)
            .field("catch_up", &self.catch_up)
            .finish_non_exhaustive()
    }
}

impl TurnEvents {
    /// The next event, waiting for the turn when it has none; `None` once the turn returned
    /// and every record it committed was handed out.
    ///
    /// # Errors
    /// Reading missed records again from the journal failed; nothing more comes after it.
    pub async fn next(&mut self) -> Option<Result<TurnEvent>> {
        loop {
            if let Some(record) = self.caught.pop_front() {
                if self.next_seq.is_some_and(|next| record.seq < next) {
                    continue;
                }
                self.next_seq = Some(record.seq.saturating_add(1));
                return Some(Ok(TurnEvent::Record(Box::new(record))));
            }
            if let Some(catch_up) = self.catch_up {
                if let Err(err) = self.read_again(catch_up).await {
                    self.catch_up = None;
                    self.close();
                    return Some(Err(err));
                }
                continue;
            }
            {
                let mut state = self.channel.state();
                if let Some(event) = state.queue.pop_front() {
                    if let TurnEvent::Record(record) = &event {
                        if self.next_seq.is_some_and(|next| record.seq < next) {
                            // Already read from the journal as it committed.
                            continue;
                        }
                        self.next_seq = Some(record.seq.saturating_add(1));
                    }
                    return Some(Ok(event));
                }
                if state.closed {
                    return None;
                }
                if let Some(from) = state.behind_from {
                    let from = self.next_seq.map_or(from, |next| next.max(from));
                    if from > state.last_seq {
                        state.behind_from = None;
                    } else {
                        self.catch_up = Some(CatchUp {
                            from,
                            to: state.last_seq,
                            behind: true,
                        });
                    }
                    continue;
                }
                if state.ended {
                    return None;
                }
                // Live: the turn committed records the controller has not shown yet.
                let next = self.next_seq.or(state.first_seq);
                if let Some(next) = next
                    && self.committed >= next
                {
                    self.next_seq = Some(next);
                    self.catch_up = Some(CatchUp {
                        from: next,
                        to: self.committed,
                        behind: false,
                    });
                    continue;
                }
            }
            // A wake made before this wait left a permit: it returns at once.
            let announced = async {
                match self.follow.as_mut() {
                    Some(follow) => Some(follow.changed().await),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.channel.wake.notified() => {}
                head = announced => match head {
                    // Announced while the turn still runs, so the records up to it are the
                    // turn's own (a later turn only starts once this one returned).
                    Some(Ok(head)) if !self.channel.state().ended => {
                        self.committed = self.committed.max(head);
                    }
                    Some(Ok(_)) | None => {}
                    // The journal is gone: the channel still says what the turn did.
                    Some(Err(_)) => self.follow = None,
                },
            }
        }
    }

    /// Reads one page of records `from..=to` again; once `to` is read, a reader that was
    /// behind is behind only on what the turn committed since.
    async fn read_again(&mut self, CatchUp { from, to, behind }: CatchUp) -> Result<()> {
        let last = from.saturating_add(PAGE - 1).min(to);
        let records = self
            .channel
            .journal
            .read(&self.channel.session, from, last)
            .await?;
        let done = records.is_empty();
        if done && !behind {
            // Nothing committed there after all (a head announced by another host is a hint):
            // wait for the next announcement.
            self.committed = from.saturating_sub(1);
        }
        self.caught.extend(records);
        // `to` may be i64::MAX: stop there, never past it.
        match last.checked_add(1) {
            Some(next) if !done && next <= to => {
                self.catch_up = Some(CatchUp {
                    from: next,
                    to,
                    behind,
                });
            }
            _ => {
                self.catch_up = None;
                if behind {
                    let mut state = self.channel.state();
                    state.behind_from = (state.last_seq > to).then(|| to.saturating_add(1));
                }
            }
        }
        Ok(())
    }

    fn close(&self) {
        let mut state = self.channel.state();
        state.closed = true;
        state.queue.clear();
    }
}

impl Drop for TurnEvents {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use agentsessions_api::{Event, EventBody, EventKind, Message};
    use agentsessions_journal::{LogExt as _, MemoryJournal, SessionRow};

    use super::*;
    use crate::guard::SessionGuards;

    fn input() -> Event {
        Event::new(
            EventKind::Input,
            EventBody::Message(Message::text_message("user", "x")),
        )
    }

    async fn journal_of(records: usize) -> (Arc<dyn Journal>, Vec<LogRecord>) {
        let journal: Arc<dyn Journal> = Arc::new(MemoryJournal::new());
        journal
            .put_session(SessionRow {
                uid: "s".into(),
                ..SessionRow::default()
            })
            .await
            .unwrap();
        let fence = journal.new_fence("s").await.unwrap();
        let mut appended = Vec::new();
        for seq in 0..records {
            let head = i64::try_from(seq).unwrap();
            appended.push(journal.append_one("s", head, fence, input()).await.unwrap());
        }
        (journal, appended)
    }

    fn seqs(events: &[TurnEvent]) -> Vec<i64> {
        events
            .iter()
            .filter_map(|event| match event {
                TurnEvent::Record(record) => Some(record.seq),
                _ => None,
            })
            .collect()
    }

    async fn drain(events: &mut TurnEvents) -> Vec<TurnEvent> {
        let mut taken = Vec::new();
        while let Some(event) = events.next().await {
            taken.push(event.unwrap());
        }
        taken
    }

    // STYLE rule 8: a reader that lags holds at most the channel's capacity, and still gets
    // every record, in order, the missed ones read again from the journal.
    #[tokio::test]
    async fn a_lagging_reader_gets_every_record_in_order_from_a_bounded_queue() {
        let total = TURN_EVENT_CAPACITY * 3;
        let (journal, records) = journal_of(total).await;
        let (feed, mut events) = channel(journal, "s");
        {
            let _ends = feed.ending();
            for record in &records {
                feed.record(record);
                // Deltas past the capacity are dropped, never queued.
                feed.delta(&Delta::default());
            }
            assert!(events.channel.state().queue.len() <= TURN_EVENT_CAPACITY);
        }
        let taken = drain(&mut events).await;
        let want: Vec<i64> = (1..=i64::try_from(total).unwrap()).collect();
        assert_eq!(seqs(&taken), want);
    }

    // A reader that keeps up takes every event as it was offered, deltas included.
    #[tokio::test]
    async fn a_reader_that_keeps_up_gets_records_and_deltas_in_order() {
        let (journal, records) = journal_of(3).await;
        let (feed, mut events) = channel(journal, "s");
        let ends = feed.ending();
        feed.opened("e1");
        for record in &records {
            feed.record(record);
            feed.delta(&Delta {
                chunk: format!("after {}", record.seq),
                ..Delta::default()
            });
        }
        drop(ends);
        let taken = drain(&mut events).await;
        assert!(matches!(&taken[0], TurnEvent::Opened { execution_id } if execution_id == "e1"));
        assert_eq!(seqs(&taken), [1, 2, 3]);
        assert!(matches!(&taken[2], TurnEvent::Delta(d) if d.chunk == "after 1"));
        assert_eq!(taken.len(), 7);
    }

    // extensions §1: Cancel finds the running execution through the guard the turn's feed
    // notes it on, whether or not anyone reads the events.
    #[test]
    fn the_opening_is_noted_on_the_guard_of_the_operation() {
        let guards = SessionGuards::default();
        let held = Arc::new(guards.try_take("s").unwrap());
        let feed = TurnFeed::unread().noting(&held);
        feed.opened("e1");
        assert_eq!(guards.running_execution("s").as_deref(), Some("e1"));
        drop(held);
        // The feed does not keep the session held.
        assert!(!guards.is_busy("s"));
        feed.opened("e2");
        assert!(!guards.is_busy("s"));
    }

    // A reader that went away stops the queueing; the turn goes on unhindered.
    #[tokio::test]
    async fn a_dropped_reader_stops_the_queueing() {
        let (journal, records) = journal_of(2).await;
        let (feed, events) = channel(journal, "s");
        let shared = Arc::clone(&events.channel);
        drop(events);
        for record in &records {
            feed.record(record);
        }
        assert!(shared.state().queue.is_empty());
    }
}
