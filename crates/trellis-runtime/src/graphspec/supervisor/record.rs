//! What the supervisor records while workers run: their log lines, processes and token usage
//! as they come, and their outcomes — with the dispatches those lead to, in one commit.

use trellis_agents::{ExecutionResult, HarnessEvent};
use trellis_engine::Dispatch;
use trellis_ledger::{Cursor, ExecutionState, LogLevel, LogStream, RunEvent, SettledBy};

use futures_util::{FutureExt, StreamExt};

use super::events::{DIE_AFTER_STEP_COMMIT_ENV, log_event};
use super::{STOP_POLL, Supervisor};
use crate::shared::error::RuntimeError;
use crate::shared::log_budget::LogBudget;

/// The warning that part of an execution's output was dropped, if any was.
fn dropped_record(execution: u64, budget: &LogBudget) -> Option<RunEvent> {
    let note = budget.dropped_note()?;
    let mut event = log_event(Some(execution), LogStream::System, note);
    if let RunEvent::Log { level, .. } = &mut event {
        *level = LogLevel::Warn;
    }
    Some(event)
}

impl Supervisor {
    /// Appends events whose commit waits for the disk (dispatches, outcomes, voids, the end).
    pub(super) fn append(&mut self, events: &[RunEvent]) -> Result<u64, RuntimeError> {
        let last = self.ctx.store.append(&self.ctx.run_id, events)?.sequence();
        Ok(self.appended(events, last))
    }

    /// Appends what running executions report about themselves (processes, log lines, token
    /// usage), which the ledger may commit without waiting for the disk: the next dispatch or
    /// outcome commit waits for it along with its own events.
    pub(super) fn append_progress(&mut self, events: &[RunEvent]) -> Result<u64, RuntimeError> {
        let last = self
            .ctx
            .store
            .append_progress(&self.ctx.run_id, events)?
            .sequence();
        Ok(self.appended(events, last))
    }

    /// Notes the run's sequence after one of our appends.
    fn appended(&mut self, events: &[RunEvent], last: u64) -> u64 {
        // When something else was appended in between, its events still need reading.
        if last != self.known_sequence + events.len() as u64 {
            self.external_unread = true;
        }
        self.known_sequence = last;
        last
    }

    /// Waits for an outcome, harness events, a stop signal, or the poll interval.
    pub(super) async fn wait_for_progress(&mut self) -> Result<(), RuntimeError> {
        tokio::select! {
            Some(joined) = self.tasks.next() => {
                // Every outcome that is already in is recorded in one transaction, then the
                // run is reduced once: a burst of completions costs one commit, not one each.
                let mut finished = vec![joined];
                while let Some(Some(more)) = self.tasks.next().now_or_never() {
                    finished.push(more);
                }
                // What the workers said before they ended rides in the same commit.
                let progress = self.pending_progress();
                self.complete(finished, progress)?;
            }
            Some((execution, event)) = self.events_rx.recv() => {
                let mut batch = vec![(execution, event)];
                while let Ok(more) = self.events_rx.try_recv() {
                    batch.push(more);
                }
                self.record_events(batch)?;
            }
            // Both mean: look at the ledger now.
            _ = self.ctx.wake.notified() => self.last_stop_check = None,
            _ = tokio::time::sleep(STOP_POLL) => self.last_stop_check = None,
        }
        Ok(())
    }

    /// Waits for every worker to end while still recording what they say (a worker whose
    /// lines wait for room would otherwise never see its cancellation), then records what
    /// was dropped of each execution's output.
    pub(super) async fn drain_workers(&mut self) -> Result<(), RuntimeError> {
        loop {
            tokio::select! {
                joined = self.tasks.next() => {
                    if joined.is_none() {
                        break;
                    }
                }
                Some(first) = self.events_rx.recv() => {
                    let mut batch = vec![first];
                    while let Ok(more) = self.events_rx.try_recv() {
                        batch.push(more);
                    }
                    self.record_events(batch)?;
                }
            }
        }
        self.flush_events()?;
        let notes: Vec<RunEvent> = std::mem::take(&mut self.log_budgets)
            .into_iter()
            .filter_map(|(execution, budget)| dropped_record(execution, &budget))
            .collect();
        if !notes.is_empty() {
            self.append(&notes)?;
        }
        Ok(())
    }

    fn flush_events(&mut self) -> Result<(), RuntimeError> {
        let events = self.pending_progress();
        if !events.is_empty() {
            self.append_progress(&events)?;
        }
        Ok(())
    }

    /// The ledger events for every harness event already queued.
    fn pending_progress(&mut self) -> Vec<RunEvent> {
        let mut batch = Vec::new();
        while let Ok(event) = self.events_rx.try_recv() {
            batch.push(event);
        }
        self.progress_events(batch)
    }

    fn record_events(&mut self, batch: Vec<(u64, HarnessEvent)>) -> Result<(), RuntimeError> {
        let events = self.progress_events(batch);
        if !events.is_empty() {
            self.append_progress(&events)?;
        }
        Ok(())
    }

    /// The ledger events for harness events: processes of active executions, log lines within
    /// each execution's budget, token usage (counted against the run's budget here).
    fn progress_events(&mut self, batch: Vec<(u64, HarnessEvent)>) -> Vec<RunEvent> {
        let mut events = Vec::with_capacity(batch.len());
        for (execution, event) in batch {
            // Events of voided or finished executions still go to the log while it is known.
            if !self.records.contains_key(&execution) {
                continue;
            }
            events.push(match event {
                HarnessEvent::Started { process_group } => {
                    // Only an active execution may record its process.
                    if !self.active.contains_key(&execution) {
                        continue;
                    }
                    RunEvent::WorkerProcess {
                        execution,
                        process_group,
                    }
                }
                HarnessEvent::Log {
                    stream,
                    level,
                    message,
                } => {
                    // Trellis's own notes are few and say why an execution ended: never dropped.
                    if stream != LogStream::System
                        && !self
                            .log_budgets
                            .entry(execution)
                            .or_default()
                            .admit_within(&mut self.run_log_budget, message.len())
                    {
                        continue;
                    }
                    RunEvent::Log {
                        execution: Some(execution),
                        stream,
                        level,
                        message,
                        timestamp_ms: trellis_ledger::store::now_ms(),
                    }
                }
                HarnessEvent::Usage(usage) => {
                    self.usage.add(&usage);
                    RunEvent::TokenUsage { execution, usage }
                }
            });
        }
        events
    }

    /// Records the results of finished workers, after `progress` (what running executions
    /// reported meanwhile), and the dispatches they lead to: all of it in one commit.
    fn complete(
        &mut self,
        finished: Vec<(u64, ExecutionResult)>,
        mut progress: Vec<RunEvent>,
    ) -> Result<(), RuntimeError> {
        // A verifier's copy goes as soon as its worker is done, settled or voided.
        for (execution, _) in &finished {
            self.release_copy(*execution);
        }
        // Voided executions were already recorded; their late results are ignored.
        let settled: Vec<(u64, ExecutionResult)> = finished
            .into_iter()
            .filter(|(execution, _)| self.active.remove(execution).is_some())
            .collect();
        if settled.is_empty() {
            if !progress.is_empty() {
                self.append_progress(&progress)?;
            }
            return Ok(());
        }
        // What was dropped of an execution's output is said just before its outcome.
        progress.extend(settled.iter().filter_map(|(execution, _)| {
            let budget = self.log_budgets.remove(execution)?;
            dropped_record(*execution, &budget)
        }));
        let mut events = progress;
        let notes = events.len() as u64;
        events.extend(
            settled
                .iter()
                .map(|(execution, result)| RunEvent::NodeCompleted {
                    execution: *execution,
                    outcome: result.outcome.clone(),
                    reused_from: None,
                    settled_by: settled_by(result),
                }),
        );
        // The outcomes are applied at the positions they will take, so that the next decision
        // can ride in the same commit: a sequential step then costs one commit, not two. Nothing
        // acts on that decision before the commit that makes both durable. Should another
        // process append first, the batch lands later than planned; the reducer compares
        // positions only for order, which a uniform shift of the newest batch preserves.
        let tentative_first = self.known_sequence + 1 + notes;
        let now = trellis_ledger::store::now_ms();
        for (i, (execution, result)) in settled.into_iter().enumerate() {
            let at = Cursor::at(tentative_first + i as u64)
                .map_err(trellis_ledger::LedgerError::from)?;
            let settled_by = settled_by(&result);
            self.update(
                execution,
                ExecutionState::Completed {
                    at,
                    at_ms: now,
                    outcome: Box::new(result.outcome),
                    reused_from: None,
                    settled_by,
                },
            )?;
        }
        if let Some(dispatches) = self.dispatches_only()? {
            match self.record_dispatches(&mut events, &dispatches) {
                Ok(()) => {
                    self.die_if_the_test_hook_says_so();
                    return self.launch(dispatches);
                }
                // The ledger refuses new dispatches once a force-stop is requested; the
                // outcomes alone are still recorded below, and the loop then stops the run.
                Err(RuntimeError::Ledger(_)) => {
                    self.last_stop_check = None;
                    self.undecided = true;
                }
                Err(other) => return Err(other),
            }
        }
        self.append(&events)?;
        Ok(())
    }

    fn die_if_the_test_hook_says_so(&mut self) {
        if let Some(left) = &mut self.step_commits_until_death {
            *left = left.saturating_sub(1);
            if *left == 0 {
                eprintln!("{DIE_AFTER_STEP_COMMIT_ENV}: aborting after the step commit");
                std::process::abort();
            }
        }
    }

    /// The next decision when it is nothing but dispatches and the budget allows them; voids,
    /// a terminal or an exhausted budget go through the main loop instead.
    fn dispatches_only(&mut self) -> Result<Option<Vec<Dispatch>>, RuntimeError> {
        if self.budget_exhausted() {
            return Ok(None);
        }
        let reduction = self.reduce()?;
        let only_dispatches = reduction.voids.is_empty()
            && reduction.terminal.is_none()
            && !reduction.dispatches.is_empty();
        // Any other decision is left for the main loop to take.
        if only_dispatches {
            self.undecided = false;
        }
        Ok(only_dispatches.then_some(reduction.dispatches))
    }
}

/// Trellis's reason for an outcome that is not the work's own: a signal from outside, or a
/// worker host that was lost.
fn settled_by(result: &ExecutionResult) -> Option<SettledBy> {
    if result.worker_lost {
        return Some(SettledBy::WorkerLost);
    }
    result
        .killed_from_outside
        .map(|_| SettledBy::KilledFromOutside)
}
