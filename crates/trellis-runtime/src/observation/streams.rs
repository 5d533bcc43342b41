//! Following a run: [`WatchStream`] (one update per recorded event) and what every follower
//! shares (`logs.rs` holds the log-line follower). Followers are blocking iterators that end
//! once the run has finished and everything was returned; [`WatchStream::subscribe`] feeds one
//! from a thread into a channel for async code (an SSE handler awaits [`Subscription::next`]
//! or polls it as a `futures` stream).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use trellis_ledger::observe::{
    EventFollower, ExecutionCounts, StatusTracker, WatchStatus, execution_ref,
};
use trellis_ledger::{Cursor, EventFilter, RunEvent, RunId, RunStore, StoredEvent};

use crate::control::recovery::reconcile;
use crate::observation::views::{ExecutionPhase, ExecutionSummary, OutcomeSummary};
use crate::shared::error::RuntimeError;
use crate::shared::home::TrellisHome;

/// How long a follower waits for new events before checking the run's controller again.
const FOLLOW_POLL: Duration = Duration::from_millis(400);

/// What a follower needs: the ledger, the state directory (to notice a dead controller), the
/// run, and how far it has read.
pub(super) struct Follow {
    pub(super) store: Arc<dyn RunStore>,
    pub(super) home: TrellisHome,
    pub(super) run_id: RunId,
    pub(super) filter: EventFilter,
    pub(super) scanned: Cursor,
    pub(super) done: bool,
}

impl Follow {
    /// The next page of selected events; empty when none came within the poll interval (the
    /// run's controller is then checked, so a dead run still ends) or once done.
    pub(super) fn next_page(&mut self) -> Result<Vec<StoredEvent>, RuntimeError> {
        if self.done {
            return Ok(Vec::new());
        }
        let mut follower = EventFollower::new(
            self.store.as_ref(),
            self.run_id.clone(),
            self.scanned,
            self.filter,
        )?;
        let page = follower.next_batch(FOLLOW_POLL)?;
        self.scanned = follower.cursor();
        self.done = follower.is_done();
        if page.is_empty() && !self.done {
            reconcile(self.store.as_ref(), &self.home, &self.run_id)?;
        }
        Ok(page)
    }
}

/// One watch update: what the event at `cursor` changed — its kind, when the ledger recorded
/// it, the run's phase right after it (with the result once finished), how many executions
/// are active and settled, and the execution the event concerned as it stood right after it.
/// Its size does not depend on how many executions run (`status` gives the whole picture).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchUpdate {
    pub run_id: RunId,
    pub title: String,
    pub cursor: Cursor,
    /// The event's kind (`run_started`, `node_started`, `node_completed`, `execution_voided`,
    /// `token_usage`, `force_stop_requested`, `terminal`, `gap_event`, …).
    pub event: &'static str,
    /// When the ledger recorded the event (its clock, milliseconds since the epoch).
    pub at_ms: u64,
    pub status: WatchStatus,
    pub counts: ExecutionCounts,
    /// The execution the event is about, when it is about one: phase, outcome summary,
    /// timings and tokens as of this event, so a front end colours a node without asking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<WatchedExecution>,
}

/// The execution a watch update concerns: its summary as of that update.
pub type WatchedExecution = ExecutionSummary;

/// Every status change of one run, oldest first; see the module documentation.
pub struct WatchStream {
    follow: Follow,
    tracker: StatusTracker,
    /// Every execution seen so far, as it stands at the last event observed.
    executions: HashMap<u64, ExecutionSummary>,
    pending: VecDeque<WatchUpdate>,
    returned: Cursor,
}

impl WatchStream {
    pub(crate) fn new(
        store: Arc<dyn RunStore>,
        home: TrellisHome,
        run_id: RunId,
        after: Cursor,
    ) -> Result<Self, RuntimeError> {
        let tracker = StatusTracker::at(store.as_ref(), &run_id, after)?;
        // Executions started by `after`, as they stood then: one that settled later is still
        // active at `after` (its later events arrive as updates).
        let executions = store
            .snapshot(&run_id)?
            .executions
            .iter()
            .filter(|(_, e)| e.started_at <= after)
            .map(|(&id, e)| {
                let mut summary = ExecutionSummary::of(&run_id, id, e);
                if e.state.ended_at().is_some_and(|at| at > after.sequence()) {
                    summary.phase = ExecutionPhase::Active;
                    summary.outcome = None;
                    summary.ended_at_ms = None;
                    summary.reused_from = None;
                    summary.settled_by = None;
                    summary.void_reason = None;
                }
                (id, summary)
            })
            .collect();
        Ok(Self {
            follow: Follow {
                store,
                home,
                run_id,
                filter: EventFilter::ExceptLogs,
                scanned: after,
                done: false,
            },
            tracker,
            executions,
            pending: VecDeque::new(),
            returned: after,
        })
    }

    /// The cursor to resume from later: that of the last update returned.
    pub fn cursor(&self) -> Cursor {
        self.returned
    }

    /// Feeds the updates into a channel from a thread of their own, for async code.
    pub fn subscribe(self) -> Subscription<WatchUpdate> {
        Subscription::spawn(self)
    }

    /// Brings the execution `stored` concerns up to date (the same fields the ledger's fold
    /// sets, without the payloads).
    fn track_execution(&mut self, stored: &StoredEvent) {
        let at_ms = stored.recorded_at_ms;
        match &stored.event {
            RunEvent::NodeStarted {
                execution,
                node,
                map_indices,
                attempt,
                worker,
                ..
            } => {
                let summary = ExecutionSummary {
                    id: *execution,
                    reference: execution_ref(&self.follow.run_id, *execution),
                    node: node.to_string(),
                    map_indices: map_indices.clone(),
                    attempt: *attempt,
                    worker: worker.clone(),
                    phase: ExecutionPhase::Active,
                    outcome: None,
                    started_at_ms: at_ms,
                    ended_at_ms: None,
                    token_usage: None,
                    reused_from: None,
                    settled_by: None,
                    void_reason: None,
                };
                self.executions.insert(*execution, summary);
            }
            RunEvent::NodeCompleted {
                execution,
                outcome,
                reused_from,
                settled_by,
            } => {
                if let Some(summary) = self.executions.get_mut(execution) {
                    summary.phase = ExecutionPhase::Completed;
                    summary.outcome = Some(OutcomeSummary::of(outcome));
                    summary.ended_at_ms = Some(at_ms);
                    summary.reused_from = reused_from.as_ref().map(|r| r.run_id.clone());
                    summary.settled_by = *settled_by;
                }
            }
            RunEvent::ExecutionVoided { execution, reason } => {
                if let Some(summary) = self.executions.get_mut(execution) {
                    summary.phase = ExecutionPhase::Voided;
                    summary.ended_at_ms = Some(at_ms);
                    summary.void_reason = Some(*reason);
                }
            }
            RunEvent::TokenUsage { execution, usage } => {
                if let Some(summary) = self.executions.get_mut(execution) {
                    summary.token_usage.get_or_insert_default().add(usage);
                }
            }
            _ => {}
        }
    }

    fn observe(&mut self, stored: &StoredEvent) {
        self.track_execution(stored);
        let Some(line) = self.tracker.observe(stored) else {
            return;
        };
        let execution = stored
            .event
            .execution()
            .and_then(|id| self.executions.get(&id).cloned());
        self.pending.push_back(WatchUpdate {
            run_id: line.run_id,
            title: line.title,
            cursor: line.cursor,
            event: line.event,
            at_ms: stored.recorded_at_ms,
            status: line.status,
            counts: line.counts,
            execution,
        });
    }
}

impl Polling for WatchStream {
    type Item = WatchUpdate;

    fn poll_once(&mut self) -> Polled<WatchUpdate> {
        if let Some(update) = self.pending.pop_front() {
            self.returned = update.cursor;
            return Polled::Item(Ok(update));
        }
        if self.follow.done {
            return Polled::Ended;
        }
        match self.follow.next_page() {
            Ok(page) => page.iter().for_each(|stored| self.observe(stored)),
            Err(error) => {
                self.follow.done = true;
                return Polled::Item(Err(error));
            }
        }
        match self.pending.pop_front() {
            Some(update) => {
                self.returned = update.cursor;
                Polled::Item(Ok(update))
            }
            None if self.follow.done => Polled::Ended,
            None => Polled::Nothing,
        }
    }
}

impl Iterator for WatchStream {
    type Item = Result<WatchUpdate, RuntimeError>;

    fn next(&mut self) -> Option<Self::Item> {
        blocking_next(self)
    }
}

/// One step of a follower: an item, nothing within one poll interval, or the end.
pub(crate) enum Polled<T> {
    Item(Result<T, RuntimeError>),
    Nothing,
    Ended,
}

/// A follower that returns within one poll interval whatever happens.
pub(crate) trait Polling {
    type Item;
    fn poll_once(&mut self) -> Polled<Self::Item>;
}

/// Waits as long as it takes for the next item.
pub(crate) fn blocking_next<P: Polling>(stream: &mut P) -> Option<Result<P::Item, RuntimeError>> {
    loop {
        match stream.poll_once() {
            Polled::Item(item) => return Some(item),
            Polled::Nothing => continue,
            Polled::Ended => return None,
        }
    }
}

/// How many items a subscription buffers before its feeding thread waits.
const SUBSCRIPTION_BUFFER: usize = 256;

/// Items of a blocking stream delivered to async code: a thread iterates the stream and sends
/// each item; dropping the subscription stops the thread (at its next item or poll).
pub struct Subscription<T> {
    receiver: mpsc::Receiver<Result<T, RuntimeError>>,
}

impl<T: Send + 'static> Subscription<T> {
    pub(crate) fn spawn<S>(mut stream: S) -> Self
    where
        S: Polling<Item = T> + Send + 'static,
    {
        let (sender, receiver) = mpsc::channel(SUBSCRIPTION_BUFFER);
        let spawned = std::thread::Builder::new()
            .name("trellis-follow".to_owned())
            .spawn(move || {
                // Each poll returns within an interval even on a silent run, so a receiver
                // that went away is noticed.
                while !sender.is_closed() {
                    match stream.poll_once() {
                        Polled::Item(item) => {
                            if sender.blocking_send(item).is_err() {
                                return;
                            }
                        }
                        Polled::Nothing => {}
                        Polled::Ended => return,
                    }
                }
            });
        if let Err(error) = spawned {
            let (sender, receiver) = mpsc::channel(1);
            let _ = sender.try_send(Err(RuntimeError::io(
                "cannot start a follower thread",
                error,
            )));
            return Self { receiver };
        }
        Self { receiver }
    }

    /// The next item; `None` once the stream ended.
    pub async fn next(&mut self) -> Option<Result<T, RuntimeError>> {
        self.receiver.recv().await
    }

    /// The next item if one is waiting, without blocking (for a synchronous poller).
    pub fn try_next(&mut self) -> Option<Result<T, RuntimeError>> {
        self.receiver.try_recv().ok()
    }
}

impl<T> futures_util::Stream for Subscription<T> {
    type Item = Result<T, RuntimeError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(cx)
    }
}
