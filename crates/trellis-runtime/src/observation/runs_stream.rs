//! Following every run at once: [`RunsStream`] yields a [`RunSummary`] for each run of a
//! listing window when it is first seen and again whenever it moves (a new event, a new
//! phase), so a live run list needs no reload.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use trellis_ledger::{Cursor, LedgerError, RunFilter, RunHead, RunId, RunStore};

use crate::control::recovery::reconcile;
use crate::observation::streams::{Polled, Polling, Subscription};
use crate::observation::views::{RunListFilter, RunSummary, template_of};
use crate::shared::error::RuntimeError;
use crate::shared::home::TrellisHome;

/// How often the listing window is read again.
const RUNS_POLL: Duration = Duration::from_millis(250);

/// Changes of the runs in a listing window (newest first, `filter.limit` of them), oldest
/// change first; it never ends by itself.
pub struct RunsStream {
    store: Arc<dyn RunStore>,
    home: TrellisHome,
    query: RunFilter,
    needle: Option<String>,
    /// The cursor each run was at when last reported.
    seen: HashMap<RunId, Cursor>,
    pending: VecDeque<RunSummary>,
    last_read: Option<Instant>,
}

impl RunsStream {
    pub(crate) fn new(store: Arc<dyn RunStore>, home: TrellisHome, filter: &RunListFilter) -> Self {
        Self {
            store,
            home,
            query: RunFilter {
                phase: filter.phase,
                kind: filter.kind,
                after_run: filter.after.clone(),
                limit: filter.limit.max(1),
            },
            needle: filter.title_contains.as_ref().map(|t| t.to_lowercase()),
            seen: HashMap::new(),
            pending: VecDeque::new(),
            last_read: None,
        }
    }

    /// Feeds the changes into a channel from a thread of their own, for async code.
    pub fn subscribe(self) -> Subscription<RunSummary> {
        Subscription::spawn(self)
    }

    /// Reads the window once and queues every run that is new or moved, oldest first. A run
    /// whose stored rows are damaged is left out, as `Runtime::list` leaves it out.
    fn read_window(&mut self) -> Result<(), RuntimeError> {
        let mut changed = Vec::new();
        for head in self.store.list_runs(&self.query)?.into_iter().flatten() {
            if self
                .needle
                .as_ref()
                .is_some_and(|n| !head.title.to_lowercase().contains(n))
            {
                continue;
            }
            match self.summary_if_moved(head) {
                Ok(Some(summary)) => changed.push(summary),
                Ok(None) | Err(RuntimeError::Ledger(LedgerError::Corrupt { .. })) => {}
                Err(other) => return Err(other),
            }
        }
        self.pending.extend(changed.into_iter().rev());
        Ok(())
    }

    /// The run's summary unless it is where it was when last reported. A run whose controller
    /// is gone is finalized first, so it never shows running.
    fn summary_if_moved(&mut self, mut head: RunHead) -> Result<Option<RunSummary>, RuntimeError> {
        if !head.is_finished() {
            reconcile(self.store.as_ref(), &self.home, &head.run_id)?;
            head = self.store.head(&head.run_id)?;
        }
        if self.seen.get(&head.run_id) == Some(&head.cursor) {
            return Ok(None);
        }
        let record = self.store.record(&head.run_id)?;
        self.seen.insert(head.run_id.clone(), head.cursor);
        Ok(Some(RunSummary::of(&head, template_of(&record))))
    }
}

impl Polling for RunsStream {
    type Item = RunSummary;

    fn poll_once(&mut self) -> Polled<RunSummary> {
        if let Some(summary) = self.pending.pop_front() {
            return Polled::Item(Ok(summary));
        }
        if let Some(last) = self.last_read {
            let due = last + RUNS_POLL;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        self.last_read = Some(Instant::now());
        if let Err(error) = self.read_window() {
            return Polled::Item(Err(error));
        }
        match self.pending.pop_front() {
            Some(summary) => Polled::Item(Ok(summary)),
            None => Polled::Nothing,
        }
    }
}

impl Iterator for RunsStream {
    type Item = Result<RunSummary, RuntimeError>;

    fn next(&mut self) -> Option<Self::Item> {
        crate::observation::streams::blocking_next(self)
    }
}
