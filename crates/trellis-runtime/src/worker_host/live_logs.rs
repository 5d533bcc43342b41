//! A worker host's log lines of one execution: kept within a bound, pushed to the ledger in
//! batches while the execution runs (so `trellis logs` and the web UI see them live), and
//! whatever could not be pushed reported with the outcome.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use trellis_agents::HarnessEvent;
use trellis_ledger::postgres::leases::Claim;
use trellis_ledger::postgres::logs::DispatchLog;
use trellis_ledger::{LedgerError, LogLevel, LogStream, RunStore, TokenUsage};

use crate::shared::log_budget::LogBudget;

/// Lines are pushed this often while an execution runs …
pub(super) const PUSH_EVERY: Duration = Duration::from_millis(200);
/// … or as soon as this many wait, whichever comes first.
const PUSH_LINES: usize = 64;

/// What became of a push.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pushed {
    /// Stored, or kept to be tried again (a ledger hiccup).
    Fine,
    /// The claim is gone: the execution is no longer ours to run.
    Fenced,
}

type Push = JoinHandle<(Vec<DispatchLog>, Option<Result<(), LedgerError>>)>;

/// One execution's output on its way to the ledger, and its token usage.
pub(super) struct LiveLogs {
    store: Arc<dyn RunStore>,
    claim: Claim,
    /// Kept, not pushed yet, oldest first.
    unsent: Vec<DispatchLog>,
    /// The execution's log budget, as a local controller counts it: lines no longer wait in
    /// memory for the outcome, so a remote execution keeps as much as a local one.
    budget: LogBudget,
    /// Lines lost with a pushing thread that died.
    lost: usize,
    pub(super) usage: TokenUsage,
    /// The push in flight, if any: one at a time, so lines are stored in order.
    pushing: Option<Push>,
    /// How many lines it carries.
    in_flight: usize,
}

impl LiveLogs {
    pub(super) fn new(store: Arc<dyn RunStore>, claim: Claim) -> Self {
        Self {
            store,
            claim,
            unsent: Vec::new(),
            budget: LogBudget::default(),
            lost: 0,
            usage: TokenUsage::default(),
            pushing: None,
            in_flight: 0,
        }
    }

    /// Keeps one harness event (within the bound) and starts a push when enough lines wait.
    pub(super) fn take(&mut self, event: HarnessEvent) {
        match event {
            HarnessEvent::Log {
                stream,
                level,
                message,
            } => {
                if self.budget.admit(message.len()) {
                    self.unsent.push(DispatchLog {
                        stream,
                        level,
                        message,
                    });
                }
            }
            HarnessEvent::Usage(usage) => self.usage.add(&usage),
            // Process groups are this host's business; the controller cannot signal them.
            HarnessEvent::Started { .. } => {}
        }
        if self.unsent.len() >= PUSH_LINES {
            self.start_push();
        }
    }

    /// At a tick: pushes whatever waits, unless a push is still in flight.
    pub(super) fn tick(&mut self) {
        self.start_push();
    }

    pub(super) fn is_pushing(&self) -> bool {
        self.pushing.is_some()
    }

    fn start_push(&mut self) {
        if self.pushing.is_some() || self.unsent.is_empty() {
            return;
        }
        let lines = std::mem::take(&mut self.unsent);
        self.in_flight = lines.len();
        let (store, claim) = (self.store.clone(), self.claim.clone());
        self.pushing = Some(tokio::task::spawn_blocking(move || {
            let pushed = store
                .as_postgres()
                .map(|postgres| postgres.push_logs(&claim, &lines));
            (lines, pushed)
        }));
    }

    /// Waits for the push in flight (pending for ever when there is none: guard with
    /// [`Self::is_pushing`]) and settles it.
    pub(super) async fn pushed(&mut self) -> Pushed {
        let Some(push) = self.pushing.as_mut() else {
            return std::future::pending().await;
        };
        let joined = push.await;
        self.pushing = None;
        match joined {
            Ok((_, Some(Ok(())))) => Pushed::Fine,
            Ok((_, Some(Err(LedgerError::Fenced { .. })))) => Pushed::Fenced,
            // Not stored: they go again, ahead of what came meanwhile (at the latest with
            // the outcome).
            Ok((mut lines, _)) => {
                lines.append(&mut self.unsent);
                self.unsent = lines;
                Pushed::Fine
            }
            // The pushing thread died with its lines: they count as not sent.
            Err(_) => {
                self.lost += self.in_flight;
                Pushed::Fine
            }
        }
    }

    /// Once the execution ended: waits for the push in flight, then pushes what is left once.
    pub(super) async fn flush(&mut self) -> Pushed {
        if self.is_pushing() && self.pushed().await == Pushed::Fenced {
            return Pushed::Fenced;
        }
        self.start_push();
        if self.is_pushing() {
            return self.pushed().await;
        }
        Pushed::Fine
    }

    /// The lines still unsent, for the outcome, with the notes of what was dropped or lost.
    pub(super) fn finish(mut self) -> Vec<DispatchLog> {
        let lost = (self.lost > 0).then(|| {
            format!(
                "{} log line(s) were lost on the worker host before they were sent",
                self.lost
            )
        });
        for message in [self.budget.dropped_note(), lost].into_iter().flatten() {
            self.unsent.push(DispatchLog {
                stream: LogStream::System,
                level: LogLevel::Warn,
                message,
            });
        }
        self.unsent
    }
}

#[cfg(test)]
mod tests {
    use trellis_ledger::{RunId, SqliteStore};

    use super::*;
    use crate::shared::log_budget::MAX_EXECUTION_LOG_LINES;

    fn line(n: usize) -> HarnessEvent {
        HarnessEvent::Log {
            stream: LogStream::Error,
            level: LogLevel::Error,
            message: format!("line {n}"),
        }
    }

    /// A claim on a ledger that cannot take pushes (SQLite): every push fails and its lines
    /// must come back, in order, for the outcome.
    fn unpushable() -> LiveLogs {
        let store: Arc<dyn RunStore> = Arc::new(SqliteStore::open_in_memory().unwrap());
        let claim = Claim {
            run_id: RunId::new("run-1").unwrap(),
            execution: 1,
            node: "node".into(),
            harness: "command".into(),
            payload_json: "{}".into(),
            claims: 1,
            fencing_token: 1,
            expires_at_ms: 0,
        };
        LiveLogs::new(store, claim)
    }

    #[tokio::test]
    async fn lines_a_push_did_not_store_go_with_the_outcome_in_order_within_the_bound() {
        let mut logs = unpushable();
        for n in 0..PUSH_LINES {
            logs.take(line(n));
        }
        assert!(logs.is_pushing(), "{PUSH_LINES} waiting lines start a push");
        let budget = MAX_EXECUTION_LOG_LINES as usize;
        for n in PUSH_LINES..budget + 44 {
            logs.take(line(n));
        }
        assert_eq!(logs.flush().await, Pushed::Fine);
        let sent = logs.finish();
        assert_eq!(sent.len(), budget + 1);
        for (n, kept) in sent.iter().take(budget).enumerate() {
            assert_eq!(kept.message, format!("line {n}"));
        }
        let note = &sent[budget];
        assert_eq!(note.stream, LogStream::System);
        assert!(
            note.message.starts_with("44 lines / ") && note.message.contains("log budget"),
            "{}",
            note.message
        );
    }
}
