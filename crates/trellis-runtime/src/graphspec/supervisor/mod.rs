//! The supervisor loop a controller runs: reduce, record dispatches before starting workers,
//! record outcomes before reducing again, void losers, honour force-stop and budgets.

mod cleanup;
mod events;
mod record;
mod stall;
mod worker;
mod workspace;

use events::log_event;
use worker::{WorkerFuture, worker_future};

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::{Binding, ExecutionRequest, Harness, HarnessEvent, NodeContract, SecretEnv};
use trellis_engine::{
    Dispatch, ExecutionId, ExecutionRecord, History, NodeInstanceId, Occurrence, Reducer,
    Reduction, RunnableGraph,
};
use trellis_graph::{GraphNode, GraphSpec, NodeName};
use trellis_ledger::{
    Cursor, ExecutionState, LogStream, RunEvent, RunHead, RunId, RunSnapshot, RunStore,
    TerminalResult, TokenUsage, VoidReason,
};

use crate::checkpoints::workspace::RunWorkspace;
use crate::control::recovery::{TerminalReason, finalize};
use crate::graphspec::reuse::ReuseIndex;
use crate::plan::{Budget, RuntimePlan};
use crate::shared::error::RuntimeError;
use crate::shared::log_budget::{LogBudget, RunLogBudget};

/// How often the loop re-reads the ledger for a force-stop request when nothing else happens.
const STOP_POLL: Duration = Duration::from_millis(200);

/// While the supervisor is busy recording, it looks for another process's appends at most this
/// often; the ledger itself refuses new dispatches once a force-stop is requested.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// Which harness runs each binding kind.
#[derive(Clone)]
pub struct Harnesses {
    pub command: Arc<dyn Harness>,
    pub agent: Option<Arc<dyn Harness>>,
    pub delivery: Arc<dyn Harness>,
}

impl Harnesses {
    fn for_binding(&self, binding: &Binding) -> Option<Arc<dyn Harness>> {
        match binding {
            Binding::Command(_) => Some(self.command.clone()),
            Binding::Agent(_) => self.agent.clone(),
            Binding::GitDelivery(_) => Some(self.delivery.clone()),
        }
    }
}

/// Static facts about one executable node.
pub(crate) struct NodeFacts {
    pub(crate) contract: NodeContract,
    pub(crate) instructions: Option<String>,
    pub(crate) timeout_ms: Option<u64>,
}

/// Everything the supervisor needs to drive one run.
pub struct RunContext {
    pub store: Arc<dyn RunStore>,
    pub run_id: RunId,
    pub graph: RunnableGraph,
    pub input: Value,
    pub plan: RuntimePlan,
    pub harnesses: Harnesses,
    pub workspace: PathBuf,
    pub scratch: PathBuf,
    pub secrets: SecretEnv,
    pub base_env: Vec<(String, String)>,
    pub reuse: ReuseIndex,
    /// Notified when the process is asked to stop (SIGTERM): re-check the ledger at once.
    pub wake: Arc<tokio::sync::Notify>,
}

struct Active {
    cancel: CancellationToken,
}

/// Drives a run to its terminal state.
pub struct Supervisor {
    ctx: RunContext,
    nodes: HashMap<NodeName, NodeFacts>,
    reducer: Reducer,
    records: BTreeMap<u64, ExecutionRecord>,
    active: HashMap<u64, Active>,
    /// The running workers' futures, polled by the supervisor itself: on the controller's
    /// single-threaded runtime a spawned task bought nothing but a trip through the
    /// scheduler (and a poll of the I/O driver) per step. A panic settles its own execution.
    tasks: FuturesUnordered<WorkerFuture>,
    events_tx: mpsc::Sender<(u64, HarnessEvent)>,
    events_rx: mpsc::Receiver<(u64, HarnessEvent)>,
    usage: TokenUsage,
    /// The run's ledger sequence as of this supervisor's last append or read; only another
    /// process's append (a force-stop request) moves the run past it.
    known_sequence: u64,
    /// Another process appended before one of ours: its events are not read yet.
    external_unread: bool,
    /// When the run's cursor was last read for another process's appends.
    last_stop_check: Option<Instant>,
    /// An execution settled or was voided since the reducer last decided.
    undecided: bool,
    /// Whether a force-stop was requested, as of `known_sequence`.
    force_stop_requested: bool,
    /// The run's head as `new` read it, for `run` to start from without reading it again.
    initial_head: Option<RunHead>,
    /// How much of each execution's output was recorded (and dropped).
    log_budgets: HashMap<u64, LogBudget>,
    /// What the run as a whole has kept of its executions' output.
    run_log_budget: RunLogBudget,
    /// Checkpoints and verifier copies, when the run has a git workspace.
    workspace: Option<RunWorkspace>,
    /// Step commits left before the test hook [`events::DIE_AFTER_STEP_COMMIT_ENV`] aborts.
    step_commits_until_death: Option<u64>,
    /// Called once just before the terminal record (`cleanup.rs`).
    before_terminal: Option<Box<dyn FnOnce() + Send>>,
}

pub(crate) fn node_facts(graph: &GraphSpec) -> HashMap<NodeName, NodeFacts> {
    let mut facts = HashMap::new();
    graph.root.walk(&mut |node: &GraphNode| {
        if let (Some(exec), Some(contract)) = (node.executable(), NodeContract::of(node)) {
            facts.insert(
                exec.name.clone(),
                NodeFacts {
                    contract,
                    instructions: exec.instructions.as_ref().map(|i| i.as_str().to_owned()),
                    timeout_ms: exec.timeout_ms.map(|t| t.get()),
                },
            );
        }
    });
    facts
}

/// The reducer's history of a run: its recorded executions, in dispatch order.
pub fn history_of(snapshot: &RunSnapshot) -> History {
    let executions = snapshot
        .executions
        .iter()
        .map(|(&id, e)| ExecutionRecord {
            execution: ExecutionId(id),
            node_instance: NodeInstanceId(e.node_instance),
            occurrence: Occurrence {
                node: e.node.clone(),
                map_indices: e.map_indices.clone(),
            },
            attempt: e.attempt,
            input: e.input.clone(),
            dispatched_at: e.started_at.sequence(),
            state: e.state.clone(),
        })
        .collect();
    History { executions }
}

/// The position a ledger sequence number names (every sequence the ledger returned is one).
fn position(sequence: u64) -> Result<Cursor, RuntimeError> {
    Ok(Cursor::at(sequence).map_err(trellis_ledger::LedgerError::from)?)
}

fn over_budget(budget: &Budget, usage: &TokenUsage) -> bool {
    budget
        .input_tokens
        .is_some_and(|max| usage.input_tokens > max)
        || budget
            .output_tokens
            .is_some_and(|max| usage.output_tokens > max)
        || budget
            .cost_usd
            .is_some_and(|max| usage.cost_usd.unwrap_or(0.0) > max)
}

impl Supervisor {
    /// Prepares the loop from the run's recorded state.
    pub fn new(ctx: RunContext) -> Result<Self, RuntimeError> {
        let snapshot = ctx.store.snapshot(&ctx.run_id)?;
        let history = history_of(&snapshot);
        let reducer = Reducer::from_history(&ctx.graph, &ctx.input, &history);
        let records = history
            .executions
            .into_iter()
            .map(|r| (r.execution.0, r))
            .collect();
        let (events_tx, events_rx) = mpsc::channel(4096);
        Ok(Self {
            nodes: node_facts(ctx.graph.spec()),
            usage: snapshot.head.progress.token_usage,
            known_sequence: snapshot.head.cursor.sequence(),
            force_stop_requested: snapshot.head.progress.force_stop_requested,
            external_unread: false,
            // The snapshot just read is as fresh as a stop check.
            last_stop_check: Some(Instant::now()),
            initial_head: Some(snapshot.head),
            undecided: true,
            ctx,
            reducer,
            records,
            active: HashMap::new(),
            tasks: FuturesUnordered::new(),
            events_tx,
            events_rx,
            log_budgets: HashMap::new(),
            run_log_budget: RunLogBudget::default(),
            workspace: None,
            before_terminal: None,
            step_commits_until_death: events::step_commits_until_death(),
        })
    }

    /// Runs until the run is terminal.
    pub async fn run(mut self) -> Result<(), RuntimeError> {
        let head = match self.initial_head.take() {
            Some(head) => head,
            None => self.ctx.store.head(&self.ctx.run_id)?,
        };
        if head.is_finished() {
            return Ok(());
        }
        if !head.progress.active_executions.is_empty() {
            if !self.ctx.harnesses.command.adopts_active() {
                // Executions left active by a controller that died cannot be trusted or
                // re-attached when they ran as its own children.
                finalize(
                    self.ctx.store.as_ref(),
                    &self.ctx.run_id,
                    TerminalReason::RuntimeLost,
                )?;
                return Ok(());
            }
            // Queued on worker hosts, they outlive their controller: wait for them again.
            for execution in head.progress.active_executions.keys().copied() {
                self.adopt(execution)?;
            }
        }
        loop {
            if let Some(reason) = self.stop_reason()? {
                return self.stop(reason).await;
            }
            // Recording dispatches decides nothing new; only a settled or voided execution can.
            if !self.undecided && !self.active.is_empty() {
                self.wait_for_progress().await?;
                continue;
            }
            self.undecided = false;
            let reduction = self.reduce()?;
            if !reduction.voids.is_empty() {
                self.void(&reduction)?;
                continue;
            }
            if let Some(terminal) = reduction.terminal {
                return self.finish(terminal).await;
            }
            if !reduction.dispatches.is_empty() {
                // A force-stop recorded meanwhile makes the ledger refuse new dispatches.
                if let Err(error) = self.dispatch(reduction.dispatches) {
                    self.last_stop_check = None;
                    if self.stop_reason()?.is_some() {
                        continue;
                    }
                    return Err(error);
                }
                continue;
            }
            if self.active.is_empty() {
                return Err(RuntimeError::Internal(
                    "the reducer neither dispatched nor finished while nothing runs".into(),
                ));
            }
            self.wait_for_progress().await?;
        }
    }

    /// A force-stop request in the ledger, or an exhausted budget.
    fn stop_reason(&mut self) -> Result<Option<TerminalReason>, RuntimeError> {
        // The cursor is read when due; the head (its progress grows with the active
        // executions) only when another process appended since we last looked.
        let due = self
            .last_stop_check
            .is_none_or(|checked| checked.elapsed() >= STOP_CHECK);
        if due || self.external_unread {
            self.last_stop_check = Some(Instant::now());
            let latest = self.ctx.store.latest_cursor(&self.ctx.run_id)?.sequence();
            if latest != self.known_sequence || self.external_unread {
                let head = self.ctx.store.head(&self.ctx.run_id)?;
                self.force_stop_requested = head.progress.force_stop_requested;
                self.known_sequence = head.cursor.sequence();
                self.external_unread = false;
            }
        }
        if self.force_stop_requested {
            return Ok(Some(TerminalReason::ForceStopped));
        }
        Ok(self
            .budget_exhausted()
            .then_some(TerminalReason::BudgetExhausted))
    }

    fn budget_exhausted(&self) -> bool {
        self.ctx
            .plan
            .budget
            .is_some_and(|b| over_budget(&b, &self.usage))
    }

    /// The reducer's decisions for everything applied so far.
    fn reduce(&self) -> Result<Reduction, RuntimeError> {
        self.reducer
            .decide()
            .map_err(|e| RuntimeError::Internal(format!("the run's history does not replay: {e}")))
    }

    /// Cancels everything running, waits for the workers to go, and ends the run.
    async fn stop(mut self, reason: TerminalReason) -> Result<(), RuntimeError> {
        for active in self.active.values() {
            active.cancel.cancel();
        }
        self.drain_workers().await?;
        self.finish_workspace(false)?;
        self.clean_up_before_terminal();
        finalize(self.ctx.store.as_ref(), &self.ctx.run_id, reason)?;
        Ok(())
    }

    async fn finish(mut self, result: TerminalResult) -> Result<(), RuntimeError> {
        // A verified graph settles everything before its terminal; anything still running
        // here is cancelled and voided rather than left behind.
        if !self.active.is_empty() {
            let stray: Vec<u64> = self.active.keys().copied().collect();
            for active in self.active.values() {
                active.cancel.cancel();
            }
            let events: Vec<RunEvent> = stray
                .iter()
                .map(|&execution| RunEvent::ExecutionVoided {
                    execution,
                    reason: VoidReason::MapTerminal,
                })
                .collect();
            self.append(&events)?;
        }
        // Executions voided earlier (join losers) were only cancelled; their workers may still
        // be stopping. The run is not finished until every worker group is gone.
        self.drain_workers().await?;
        self.finish_workspace(matches!(result, TerminalResult::Succeeded { .. }))?;
        self.clean_up_before_terminal();
        self.append(&[RunEvent::Terminal { result }])?;
        Ok(())
    }

    fn void(&mut self, reduction: &Reduction) -> Result<(), RuntimeError> {
        let events: Vec<RunEvent> = reduction
            .voids
            .iter()
            .map(|v| RunEvent::ExecutionVoided {
                execution: v.execution.0,
                reason: v.reason,
            })
            .collect();
        let last = self.append(&events)?;
        let first = last + 1 - events.len() as u64;
        let now = trellis_ledger::store::now_ms();
        for (i, v) in reduction.voids.iter().enumerate() {
            if let Some(active) = self.active.remove(&v.execution.0) {
                active.cancel.cancel();
            }
            let state = ExecutionState::Voided {
                at: position(first + i as u64)?,
                at_ms: now,
                reason: v.reason,
            };
            self.update(v.execution.0, state)?;
        }
        Ok(())
    }

    fn update(&mut self, execution: u64, state: ExecutionState) -> Result<(), RuntimeError> {
        let record = self.records.get_mut(&execution).ok_or_else(|| {
            RuntimeError::Internal(format!(
                "execution {execution} is unknown to the supervisor"
            ))
        })?;
        record.state = state;
        self.undecided = true;
        self.reducer.apply(record).map_err(|e| {
            RuntimeError::Internal(format!("reducer rejected execution {execution}: {e}"))
        })
    }

    /// Records the dispatches (before anything starts), then reuses or starts each.
    fn dispatch(&mut self, dispatches: Vec<Dispatch>) -> Result<(), RuntimeError> {
        self.record_dispatches(&mut Vec::new(), &dispatches)?;
        self.launch(dispatches)
    }

    /// Records `events` (outcomes already applied to the reducer) and the dispatches in one
    /// commit, and hands the dispatches to the reducer. Starts nothing. If the commit fails,
    /// `events` is left as it was given.
    fn record_dispatches(
        &mut self,
        events: &mut Vec<RunEvent>,
        dispatches: &[Dispatch],
    ) -> Result<(), RuntimeError> {
        let given = events.len();
        events.extend(self.checkpoint_before(dispatches));
        let prefix = events.len() as u64;
        events.extend(dispatches.iter().map(|d| RunEvent::NodeStarted {
            execution: d.execution.0,
            node_instance: d.node_instance.0,
            node: d.occurrence.node.clone(),
            map_indices: d.occurrence.map_indices.clone(),
            attempt: d.attempt,
            input: d.input.clone(),
            worker: d.worker.to_string(),
        }));
        let last = match self.append(events) {
            Ok(last) => last,
            Err(error) => {
                events.truncate(given);
                return Err(error);
            }
        };
        let first = last + 1 - events.len() as u64 + prefix;
        for (i, d) in dispatches.iter().enumerate() {
            let record = ExecutionRecord {
                execution: d.execution,
                node_instance: d.node_instance,
                occurrence: d.occurrence.clone(),
                attempt: d.attempt,
                input: d.input.clone(),
                dispatched_at: first + i as u64,
                state: ExecutionState::Active {},
            };
            let record = self
                .records
                .entry(d.execution.0)
                .insert_entry(record)
                .into_mut();
            self.reducer
                .apply(record)
                .map_err(|e| RuntimeError::Internal(format!("reducer rejected a dispatch: {e}")))?;
        }
        Ok(())
    }

    /// Reuses a predecessor's outcome for each recorded dispatch, or starts its worker.
    fn launch(&mut self, dispatches: Vec<Dispatch>) -> Result<(), RuntimeError> {
        for d in dispatches {
            if let Some(reused) = self.ctx.reuse.take(&d) {
                let at = self.append(&[RunEvent::NodeCompleted {
                    execution: d.execution.0,
                    outcome: reused.outcome.clone(),
                    reused_from: Some(reused.source.clone()),
                    settled_by: None,
                }])?;
                let state = ExecutionState::Completed {
                    at: position(at)?,
                    at_ms: trellis_ledger::store::now_ms(),
                    outcome: Box::new(reused.outcome),
                    reused_from: Some(reused.source),
                    settled_by: None,
                };
                self.update(d.execution.0, state)?;
            } else {
                self.start(d)?;
            }
        }
        Ok(())
    }

    fn start(&mut self, d: Dispatch) -> Result<(), RuntimeError> {
        self.start_execution(
            d.execution.0,
            d.node_instance.0,
            d.occurrence.node,
            d.attempt,
            d.input,
        )
    }

    /// Waits again for an execution a previous controller of the run started.
    fn adopt(&mut self, execution: u64) -> Result<(), RuntimeError> {
        let record = self.records.get(&execution).ok_or_else(|| {
            RuntimeError::Internal(format!(
                "active execution {execution} is not in the history"
            ))
        })?;
        let (instance, node, attempt, input) = (
            record.node_instance.0,
            record.occurrence.node.clone(),
            record.attempt,
            record.input.clone(),
        );
        self.start_execution(execution, instance, node, attempt, input)
    }

    fn start_execution(
        &mut self,
        execution: u64,
        node_instance: u64,
        node: NodeName,
        attempt: u32,
        input: Value,
    ) -> Result<(), RuntimeError> {
        let facts = self.nodes.get(&node);
        let binding = self.ctx.plan.nodes.get(&node).cloned();
        let (Some(facts), Some(binding)) = (facts, binding) else {
            return self.settle_now(execution, format!("node {node} has no binding or contract"));
        };
        let Some(harness) = self.ctx.harnesses.for_binding(&binding) else {
            return self.settle_now(
                execution,
                format!("no harness is available for node {node}"),
            );
        };
        // Only agent harnesses keep files there (homes, schema files); commands and delivery
        // use none, and a directory per execution costs a wide map more than the ledger does.
        let scratch = self.ctx.scratch.join(execution.to_string());
        let uses_scratch = matches!(binding, Binding::Agent(_));
        if uses_scratch && let Err(e) = std::fs::create_dir_all(&scratch) {
            return self.settle_now(execution, format!("cannot create scratch space: {e}"));
        }
        let instructions = facts.instructions.clone();
        let contract = facts.contract.clone();
        let deadline = facts.timeout_ms.map(Duration::from_millis);
        let workspace = match self.execution_workspace(&node, execution) {
            Ok(workspace) => workspace,
            Err(why) => return self.settle_now(execution, why),
        };
        let request = ExecutionRequest {
            run_id: self.ctx.run_id.as_str().to_owned(),
            node,
            execution,
            node_instance,
            attempt,
            input,
            instructions,
            contract,
            idle_timeout: binding.idle_timeout_ms().map(Duration::from_millis),
            binding,
            workspace,
            scratch: scratch.clone(),
            deadline,
            environment: self.ctx.secrets.clone(),
            base_env: self.ctx.base_env.clone(),
        };
        let cancel = CancellationToken::new();
        self.active.insert(
            execution,
            Active {
                cancel: cancel.clone(),
            },
        );
        self.tasks.push(worker_future(
            harness,
            request,
            cancel,
            self.events_tx.clone(),
            uses_scratch.then_some(scratch),
        ));
        Ok(())
    }

    /// Settles an execution that could not even start as a `crash`, with the reason logged.
    fn settle_now(&mut self, execution: u64, why: String) -> Result<(), RuntimeError> {
        let outcome = trellis_graph::WorkerOutcome::failure(trellis_graph::WorkerErrorCode::Crash);
        let at = self.append(&[
            log_event(Some(execution), LogStream::System, why),
            RunEvent::NodeCompleted {
                execution,
                outcome: outcome.clone(),
                reused_from: None,
                settled_by: None,
            },
        ])?;
        let state =
            ExecutionState::completed(position(at)?, trellis_ledger::store::now_ms(), outcome);
        self.update(execution, state)
    }
}
