//! Following a run's log lines: [`LogsStream`], filtered by node, execution and level, ending
//! when the run has finished or, for `attach`, once the one execution it follows has settled.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde::Serialize;
use trellis_ledger::observe::execution_ref;
use trellis_ledger::{
    Cursor, EventFilter, LogLevel, LogStream, RunEvent, RunId, RunStore, StoredEvent,
};

use super::streams::{Follow, Polled, Polling, Subscription, blocking_next};
use crate::shared::error::RuntimeError;
use crate::shared::home::TrellisHome;

/// Which log lines [`crate::Runtime::logs`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogFilter {
    /// Only lines of executions of this node.
    pub node: Option<String>,
    /// Only lines of this execution.
    pub execution: Option<u64>,
    /// Only lines at least this severe (`error` is the most severe).
    pub min_level: Option<LogLevel>,
    /// End once the execution named by `execution` has settled and all its lines were
    /// returned, instead of when the run finishes: what `attach` follows.
    pub until_settled: bool,
}

/// One log line of a run. `record` is the reference shape (`level`, `target`, `message`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    pub run_id: RunId,
    pub cursor: Cursor,
    /// The public reference of the execution that wrote it (none for run-wide notes).
    #[serde(rename = "execution", skip_serializing_if = "Option::is_none")]
    pub execution_reference: Option<String>,
    /// The execution id within the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub stream: LogStream,
    pub record: LogRecord,
    /// When the line was written, by the writer's clock.
    pub at_ms: u64,
}

/// Level, origin (`agent` for worker streams, `trellis` for its own notes) and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogRecord {
    pub level: LogLevel,
    pub target: &'static str,
    pub message: String,
}

/// A run's log lines, oldest first; see the module documentation.
pub struct LogsStream {
    follow: Follow,
    filter: LogFilter,
    /// Node per execution, read from the run's snapshot when an unknown execution shows up.
    nodes: HashMap<u64, String>,
    pending: VecDeque<LogEntry>,
}

impl LogsStream {
    pub(crate) fn new(
        store: Arc<dyn RunStore>,
        home: TrellisHome,
        run_id: RunId,
        after: Cursor,
        filter: LogFilter,
    ) -> Result<Self, RuntimeError> {
        let latest = store.latest_cursor(&run_id)?;
        if after > latest {
            return Err(trellis_ledger::LedgerError::CursorAhead {
                run_id: run_id.to_string(),
                cursor: after.to_string(),
                latest: latest.to_string(),
            }
            .into());
        }
        Ok(Self {
            follow: Follow {
                store,
                home,
                run_id,
                filter: EventFilter::LogsOnly,
                scanned: after,
                done: false,
            },
            filter,
            nodes: HashMap::new(),
            pending: VecDeque::new(),
        })
    }

    /// Feeds the lines into a channel from a thread of their own, for async code.
    pub fn subscribe(self) -> Subscription<LogEntry> {
        Subscription::spawn(self)
    }

    fn node_of(&mut self, execution: u64) -> Result<Option<String>, RuntimeError> {
        if !self.nodes.contains_key(&execution) {
            let snapshot = self.follow.store.snapshot(&self.follow.run_id)?;
            self.nodes.extend(
                snapshot
                    .executions
                    .iter()
                    .map(|(&id, e)| (id, e.node.to_string())),
            );
        }
        Ok(self.nodes.get(&execution).cloned())
    }

    /// Whether the stream follows one execution until it settles and it has.
    fn followed_execution_settled(&self) -> Result<bool, RuntimeError> {
        let (true, Some(execution)) = (self.filter.until_settled, self.filter.execution) else {
            return Ok(false);
        };
        let head = self.follow.store.head(&self.follow.run_id)?;
        Ok(head.is_finished() || !head.progress.active_executions.contains_key(&execution))
    }

    fn observe(&mut self, stored: &StoredEvent) -> Result<(), RuntimeError> {
        let RunEvent::Log {
            execution,
            stream,
            level,
            message,
            timestamp_ms,
        } = &stored.event
        else {
            return Ok(());
        };
        if self
            .filter
            .min_level
            .is_some_and(|min| !level.at_least(min))
            || self.filter.execution.is_some_and(|e| *execution != Some(e))
        {
            return Ok(());
        }
        let node = match execution {
            Some(id) => self.node_of(*id)?,
            None => None,
        };
        if self.filter.node.is_some() && node != self.filter.node {
            return Ok(());
        }
        let run_id = &self.follow.run_id;
        self.pending.push_back(LogEntry {
            run_id: run_id.clone(),
            cursor: stored.cursor,
            execution_reference: execution.map(|e| execution_ref(run_id, e)),
            execution_id: *execution,
            node,
            stream: *stream,
            record: LogRecord {
                level: *level,
                target: match stream {
                    LogStream::Output | LogStream::Error => "agent",
                    LogStream::System => "trellis",
                },
                message: message.clone(),
            },
            at_ms: *timestamp_ms,
        });
        Ok(())
    }
}

impl Polling for LogsStream {
    type Item = LogEntry;

    fn poll_once(&mut self) -> Polled<LogEntry> {
        if let Some(entry) = self.pending.pop_front() {
            return Polled::Item(Ok(entry));
        }
        if self.follow.done {
            return Polled::Ended;
        }
        // Looked at before reading: an execution settled by then has all its lines in the
        // ledger, so an empty page after it means none is left to return.
        let settled = match self.followed_execution_settled() {
            Ok(settled) => settled,
            Err(error) => {
                self.follow.done = true;
                return Polled::Item(Err(error));
            }
        };
        let observed = self.follow.next_page().and_then(|page| {
            page.iter().try_for_each(|stored| self.observe(stored))?;
            Ok(page.is_empty())
        });
        match observed {
            Ok(true) if settled => self.follow.done = true,
            Ok(_) => {}
            Err(error) => {
                self.follow.done = true;
                return Polled::Item(Err(error));
            }
        }
        match self.pending.pop_front() {
            Some(entry) => Polled::Item(Ok(entry)),
            None if self.follow.done => Polled::Ended,
            None => Polled::Nothing,
        }
    }
}

impl Iterator for LogsStream {
    type Item = Result<LogEntry, RuntimeError>;

    fn next(&mut self) -> Option<Self::Item> {
        blocking_next(self)
    }
}
