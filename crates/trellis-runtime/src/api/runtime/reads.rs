//! The read side of [`Runtime`]: a run's status, the run list, streams, graph and executions.

use std::path::PathBuf;

use serde_json::Value;
use trellis_ledger::{Cursor, LedgerError, RunFilter, RunHead, RunId, RunKind};

use super::Runtime;
use crate::checkpoints::operations::retained_workspace;
use crate::control::recovery::reconcile;
use crate::graphspec::admission::{Registry, verify};
use crate::observation::attach::resolve_execution;
use crate::observation::cause::run_cause;
use crate::observation::gap_bodies::{GapBody, gap_bodies};
use crate::observation::gap_end::gap_end;
use crate::observation::logs::{LogFilter, LogsStream};
use crate::observation::runs_stream::RunsStream;
use crate::observation::streams::WatchStream;
use crate::observation::views::{
    BindingView, ExecutionDetail, ExecutionSummary, GraphBounds, GraphLayout, RunGraph,
    RunListFilter, RunListing, RunStatus, RunSummary, SkippedRun, template_of,
};
use crate::shared::error::RuntimeError;
use crate::shared::submission::Submission;

impl Runtime {
    /// A run with every execution.
    pub fn status(&self, run_id: &RunId) -> Result<RunStatus, RuntimeError> {
        self.known(run_id)?;
        let record = self.store.record(run_id)?;
        let snapshot = self.store.snapshot(run_id)?;
        let mut status = RunStatus::of(&snapshot, template_of(&record));
        status.summary.worktree = retained_workspace(&record);
        if record.kind == RunKind::Graphspec {
            status.cause = run_cause(
                self.store.as_ref(),
                &snapshot,
                record.submission.get("graph"),
            )?;
        }
        if record.kind == RunKind::Gap && snapshot.head.is_finished() {
            status.gap_end = gap_end(self.store.as_ref(), run_id)?;
        }
        Ok(status)
    }

    /// Runs, newest first. A run whose stored rows are damaged is left out and named in
    /// `skipped`, so one bad run never hides the others.
    pub fn list(&self, filter: &RunListFilter) -> Result<RunListing, RuntimeError> {
        let query = RunFilter {
            phase: filter.phase,
            kind: filter.kind,
            after_run: filter.after.clone(),
            limit: filter.limit.max(1),
        };
        let needle = filter.title_contains.as_ref().map(|t| t.to_lowercase());
        let mut listing = RunListing::default();
        for listed in self.store.list_runs(&query)? {
            let head = match listed {
                Ok(head) => head,
                Err(unreadable) => {
                    listing.skipped.push(SkippedRun {
                        run: unreadable.name,
                        reason: unreadable.error.to_string(),
                    });
                    continue;
                }
            };
            if needle
                .as_ref()
                .is_some_and(|n| !head.title.to_lowercase().contains(n))
            {
                continue;
            }
            let run_id = head.run_id.clone();
            match self.summary_of(head) {
                Ok(summary) => listing.runs.push(summary),
                Err(RuntimeError::Ledger(error @ LedgerError::Corrupt { .. })) => {
                    listing.skipped.push(SkippedRun {
                        run: run_id.as_str().to_owned(),
                        reason: error.to_string(),
                    });
                }
                Err(other) => return Err(other),
            }
        }
        Ok(listing)
    }

    /// One listed run's summary, after finalizing it if its controller is gone (so the list
    /// never claims a lost run is running).
    fn summary_of(&self, mut head: RunHead) -> Result<RunSummary, RuntimeError> {
        if !head.is_finished() {
            reconcile(self.store.as_ref(), &self.home, &head.run_id)?;
            self.end_if_abandoned(&head.run_id)?;
            head = self.store.head(&head.run_id)?;
        }
        let record = self.store.record(&head.run_id)?;
        let mut summary = RunSummary::of(&head, template_of(&record));
        summary.worktree = retained_workspace(&record);
        Ok(summary)
    }

    /// Every run of a listing window as first seen, then again whenever it moves; see
    /// [`RunsStream`]. `filter.after` and `filter.limit` choose the window as for `list`.
    pub fn watch_runs(&self, filter: &RunListFilter) -> RunsStream {
        RunsStream::new(self.store.clone(), self.home.clone(), filter)
    }

    /// Every status change of a run after `after`, until it ends.
    pub fn watch(&self, run_id: &RunId, after: Cursor) -> Result<WatchStream, RuntimeError> {
        self.known(run_id)?;
        WatchStream::new(self.store.clone(), self.home.clone(), run_id.clone(), after)
    }

    /// The execution `reference` names in the run: an execution id, a public reference
    /// (`ex-…`), or a node (its one active execution, else its latest).
    pub fn resolve_execution(&self, run_id: &RunId, reference: &str) -> Result<u64, RuntimeError> {
        self.known(run_id)?;
        let snapshot = self.store.snapshot(run_id)?;
        resolve_execution(run_id, &snapshot, reference)
    }

    /// One execution's log lines after `after`, then live until the execution settles (or
    /// the run ends): what `trellis attach` prints. Returns the execution's id too.
    pub fn attach(
        &self,
        run_id: &RunId,
        reference: &str,
        after: Cursor,
    ) -> Result<(u64, LogsStream), RuntimeError> {
        let execution = self.resolve_execution(run_id, reference)?;
        let filter = LogFilter {
            execution: Some(execution),
            until_settled: true,
            ..LogFilter::default()
        };
        Ok((execution, self.logs(run_id, after, filter)?))
    }

    /// A run's log lines after `after` that `filter` selects, until it ends.
    pub fn logs(
        &self,
        run_id: &RunId,
        after: Cursor,
        filter: LogFilter,
    ) -> Result<LogsStream, RuntimeError> {
        self.known(run_id)?;
        LogsStream::new(
            self.store.clone(),
            self.home.clone(),
            run_id.clone(),
            after,
            filter,
        )
    }

    /// A run's graph with its identity, bounds and shape, for drawing.
    pub fn run_graph(&self, run_id: &RunId) -> Result<RunGraph, RuntimeError> {
        let record = self.store.record(run_id)?;
        match record.kind {
            RunKind::Graphspec => {
                let graph = record.submission.get("graph").cloned().unwrap_or_default();
                // A stored submission was admitted under its plan.
                let (runnable, verified) = verify(&graph, "graph", Registry::Declared)?;
                Ok(RunGraph {
                    run_id: record.run_id,
                    kind: record.kind,
                    graph,
                    input: record.submission.get("input").cloned(),
                    identity: Some(verified.identity.to_string()),
                    bounds: Some(GraphBounds::of(&verified)),
                    layout: Some(GraphLayout::of(runnable.spec())),
                })
            }
            RunKind::Gap => {
                // The document recorded at admission; runs admitted before it was recorded
                // fall back to the folder, while it exists.
                let graph = match record.submission.get("document") {
                    Some(document) if document.is_object() => document.clone(),
                    _ => {
                        let path = record
                            .submission
                            .get("workflow")
                            .and_then(Value::as_str)
                            .map(PathBuf::from)
                            .unwrap_or_default();
                        let file = trellis_gap::workflow_file_path(&path);
                        crate::shared::documents::read_json_file(&file, "workflow")?
                    }
                };
                Ok(RunGraph {
                    run_id: record.run_id,
                    kind: record.kind,
                    graph,
                    input: record.submission.get("inputs").cloned(),
                    identity: None,
                    bounds: None,
                    layout: None,
                })
            }
        }
    }

    /// A GaP run's node bodies, visit by visit, as its ledger recorded them (none for a
    /// GraphSpec run, whose executions `status` lists).
    pub fn gap_bodies(&self, run_id: &RunId) -> Result<Vec<GapBody>, RuntimeError> {
        self.known(run_id)?;
        gap_bodies(self.store.as_ref(), run_id)
    }

    /// One execution in full.
    pub fn execution(&self, run_id: &RunId, id: u64) -> Result<ExecutionDetail, RuntimeError> {
        let snapshot = self.store.snapshot(run_id)?;
        let unknown = || RuntimeError::UnknownExecution {
            run: run_id.to_string(),
            execution: id,
        };
        let execution = snapshot.executions.get(&id).ok_or_else(unknown)?;
        let record = self.store.record(run_id)?;
        let binding = serde_json::from_value::<Submission>(record.submission)
            .ok()
            .and_then(|submission| {
                let harness = submission.plan.harness.map(|h| h.as_str().to_owned());
                submission
                    .plan
                    .nodes
                    .get(&execution.node)
                    .map(|b| BindingView::of(b, harness))
            });
        let siblings = snapshot
            .executions
            .iter()
            .filter(|(_, e)| e.node == execution.node && e.map_indices == execution.map_indices)
            .map(|(&sibling, _)| sibling)
            .collect();
        Ok(ExecutionDetail {
            summary: ExecutionSummary::of(run_id, id, execution),
            node_instance: execution.node_instance,
            input: execution.input.clone(),
            result: match &execution.state {
                trellis_ledger::ExecutionState::Completed { outcome, .. } => {
                    Some((**outcome).clone())
                }
                _ => None,
            },
            binding,
            siblings,
        })
    }
}
