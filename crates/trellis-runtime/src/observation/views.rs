//! What front ends see of a run: summaries, statuses, executions and the graph's shape. Built
//! from the ledger only; never a secret value (plans name variables, not values).

use std::collections::BTreeMap;

use crate::checkpoints::operations::RetainedWorkspace;
use crate::observation::cause::RunCause;
use crate::observation::gap_end::GapEnd;
use serde::Serialize;
use serde_json::Value;
use trellis_agents::Binding;
use trellis_graph::{GraphNode, GraphSpec, TerminationWitness, WorkerOutcome};
use trellis_ledger::observe::{PhaseStatus, execution_ref, status_view};
use trellis_ledger::{
    Cursor, ExecutionSnapshot, ExecutionState, Phase, RunHead, RunId, RunKind, RunRecord,
    RunSnapshot, SettledBy, TokenUsage, VoidReason,
};
use trellis_verify::VerifiedGraph;

/// One run as a list shows it. Serialized with camelCase fields; `status` is the reference
/// observation object (`{"phase": …}` plus `activeExecutions` or `terminalResult`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub run_id: RunId,
    pub title: String,
    pub kind: RunKind,
    /// The built-in template the graph came from, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_identity: Option<String>,
    /// The cursor of the run's last event.
    pub at_cursor: Cursor,
    pub status: PhaseStatus,
    pub created_at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<u64>,
    pub token_usage: TokenUsage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predecessor: Option<RunId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successor: Option<RunId>,
    /// The worktree a worktree-mode run works in (a failed run keeps it for its successor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<RetainedWorkspace>,
}

impl RunSummary {
    pub(crate) fn of(head: &RunHead, template: Option<String>) -> Self {
        let view = status_view(head);
        Self {
            run_id: view.run_id,
            title: view.title,
            kind: view.kind,
            template,
            graph_identity: head.graph_identity.clone(),
            at_cursor: view.at_cursor,
            status: view.status,
            created_at_ms: view.created_at_ms,
            started_at_ms: head.progress.started_at_ms,
            finished_at_ms: head.progress.finished_at_ms,
            token_usage: view.token_usage,
            predecessor: view.predecessor,
            successor: view.successor,
            worktree: None,
        }
    }

    /// The run's phase.
    pub fn phase(&self) -> Phase {
        match self.status {
            PhaseStatus::Admitted => Phase::Admitted,
            PhaseStatus::Running { .. } => Phase::Running,
            PhaseStatus::Stopping { .. } => Phase::Stopping,
            PhaseStatus::Finished { .. } => Phase::Finished,
        }
    }

    /// How the run ended, once it has.
    pub fn terminal(&self) -> Option<&trellis_ledger::TerminalResult> {
        match &self.status {
            PhaseStatus::Finished { terminal_result } => Some(terminal_result),
            _ => None,
        }
    }

    /// Whether the run ended successfully.
    pub fn succeeded(&self) -> bool {
        matches!(
            self.terminal(),
            Some(trellis_ledger::TerminalResult::Succeeded { .. })
        )
    }
}

/// One run in full: its summary plus every execution.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    #[serde(flatten)]
    pub summary: RunSummary,
    pub force_stop_requested: bool,
    /// How many executions the run has started (active, settled or voided).
    pub executions_started: u64,
    /// The controller process that last attached to the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerView>,
    pub executions: Vec<ExecutionSummary>,
    /// Why a failed run failed: the nodes whose outcomes led to its `fail` node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<RunCause>,
    /// Where a finished GaP run ended: the end node it reached, or the node whose failure
    /// ended it (absent for runs recorded before this was kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_end: Option<GapEnd>,
}

/// A run's controller process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerView {
    pub pid: u32,
    pub host: String,
    pub started_at_ms: u64,
}

impl RunStatus {
    pub(crate) fn of(snapshot: &RunSnapshot, template: Option<String>) -> Self {
        let run_id = &snapshot.head.run_id;
        Self {
            summary: RunSummary::of(&snapshot.head, template),
            force_stop_requested: snapshot.head.progress.force_stop_requested,
            executions_started: snapshot.head.progress.executions_started,
            controller: snapshot
                .head
                .progress
                .controller
                .as_ref()
                .map(|c| ControllerView {
                    pid: c.pid,
                    host: c.host.clone(),
                    started_at_ms: c.started_at_ms,
                }),
            executions: snapshot
                .executions
                .iter()
                .map(|(&id, e)| ExecutionSummary::of(run_id, id, e))
                .collect(),
            cause: None,
            gap_end: None,
        }
    }
}

/// Where an execution stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionPhase {
    Active,
    Completed,
    Voided,
}

/// The gist of a settled outcome: enough to colour a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutcomeSummary {
    /// `verified`, `verifier` or `error`.
    pub status: &'static str,
    /// The error channel (`timeout`, `crash`, `malformed`, `refusal`) of an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// A verifier's signals, field → label.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub signals: BTreeMap<String, String>,
}

impl OutcomeSummary {
    pub(crate) fn of(outcome: &WorkerOutcome) -> Self {
        match outcome {
            WorkerOutcome::Verified { .. } => Self {
                status: "verified",
                code: None,
                signals: BTreeMap::new(),
            },
            WorkerOutcome::Verifier { signals, .. } => Self {
                status: "verifier",
                code: None,
                signals: signals
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
            WorkerOutcome::Error { code, .. } => Self {
                status: "error",
                code: Some(code.as_str()),
                signals: BTreeMap::new(),
            },
        }
    }
}

/// One execution of a node, without its payloads.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionSummary {
    /// The execution id within the run (1, 2, … in dispatch order).
    pub id: u64,
    /// The public, opaque reference logs and statuses use for it.
    pub reference: String,
    pub node: String,
    pub map_indices: Vec<u32>,
    pub attempt: u32,
    pub worker: String,
    pub phase: ExecutionPhase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeSummary>,
    pub started_at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<TokenUsage>,
    /// The predecessor run whose settled outcome this execution reused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<RunId>,
    /// Set when Trellis settled it (runtime lost, force-stop, budget), not the worker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled_by: Option<SettledBy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub void_reason: Option<VoidReason>,
}

impl ExecutionSummary {
    pub(crate) fn of(run_id: &RunId, id: u64, execution: &ExecutionSnapshot) -> Self {
        let mut summary = Self {
            id,
            reference: execution_ref(run_id, id),
            node: execution.node.to_string(),
            map_indices: execution.map_indices.clone(),
            attempt: execution.attempt,
            worker: execution.worker.clone(),
            phase: ExecutionPhase::Active,
            outcome: None,
            started_at_ms: execution.started_at_ms,
            ended_at_ms: None,
            token_usage: execution.token_usage,
            reused_from: None,
            settled_by: None,
            void_reason: None,
        };
        match &execution.state {
            ExecutionState::Active {} => {}
            ExecutionState::Completed {
                at_ms,
                outcome,
                reused_from,
                settled_by,
                ..
            } => {
                summary.phase = ExecutionPhase::Completed;
                summary.outcome = Some(OutcomeSummary::of(outcome));
                summary.ended_at_ms = Some(*at_ms);
                summary.reused_from = reused_from.as_ref().map(|r| r.run_id.clone());
                summary.settled_by = *settled_by;
            }
            ExecutionState::Voided { at_ms, reason, .. } => {
                summary.phase = ExecutionPhase::Voided;
                summary.ended_at_ms = Some(*at_ms);
                summary.void_reason = Some(*reason);
            }
        }
        summary
    }
}

/// One execution in full: its input and settled outcome (output, signals, diagnostic), and
/// how its node is bound (kinds, programs, models and variable *names* — never values).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionDetail {
    #[serde(flatten)]
    pub summary: ExecutionSummary,
    pub node_instance: u64,
    pub input: Value,
    /// The whole settled outcome, as the graph saw it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<WorkerOutcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding: Option<BindingView>,
    /// Every execution of the same node occurrence (attempts and rounds), by id.
    pub siblings: Vec<u64>,
}

/// How a node is bound, without anything secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingView {
    /// `agent`, `command` or `git_delivery`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Environment variable names the binding hands the worker.
    pub connections: Vec<String>,
}

impl BindingView {
    pub(crate) fn of(binding: &Binding, harness: Option<String>) -> Self {
        let connections = binding
            .connection_names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        match binding {
            Binding::Agent(agent) => Self {
                kind: binding.kind_name(),
                harness,
                model: Some(agent.model.clone()).filter(|m| !m.is_empty()),
                command: None,
                connections,
            },
            Binding::Command(command) => Self {
                kind: binding.kind_name(),
                harness: Some("exec".to_owned()),
                model: None,
                command: Some(command.command.clone()),
                connections,
            },
            Binding::GitDelivery(_) => Self {
                kind: binding.kind_name(),
                harness: Some("git-delivery".to_owned()),
                model: None,
                command: None,
                connections,
            },
        }
    }
}

/// A graph's structure for drawing: every node in authored pre-order with its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphLayout {
    pub nodes: Vec<LayoutNode>,
}

/// One node of a [`GraphLayout`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LayoutNode {
    pub name: String,
    /// `step`, `verifier`, `seq`, `choice`, `par`, `loop`, `map`, `succeed` or `fail`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// 0 for the root.
    pub depth: u32,
    /// Steps and verifiers: the only nodes that execute.
    pub executable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
}

impl GraphLayout {
    pub(crate) fn of(spec: &GraphSpec) -> Self {
        fn visit(node: &GraphNode, parent: Option<&str>, depth: u32, out: &mut Vec<LayoutNode>) {
            let executable = node.executable();
            out.push(LayoutNode {
                name: node.name().to_string(),
                kind: node.kind_name(),
                parent: parent.map(str::to_owned),
                depth,
                executable: executable.is_some(),
                worker: executable.map(|e| e.worker.to_string()),
                max_iterations: match node {
                    GraphNode::Loop(l) => Some(l.max_iterations.get()),
                    _ => None,
                },
                max_items: match node {
                    GraphNode::Map(m) => Some(m.max_items.get()),
                    _ => None,
                },
            });
            for child in node.children() {
                visit(child, Some(node.name().as_str()), depth + 1, out);
            }
        }
        let mut nodes = Vec::new();
        visit(&spec.root, None, 0, &mut nodes);
        Self { nodes }
    }
}

/// A verified graph's static bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphBounds {
    pub max_executions: u64,
    pub peak_concurrency: u64,
    pub termination: Termination,
}

/// Why a verified graph terminates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Termination {
    Acyclic,
    /// Bounded loops (dotted paths, in ranking order) entered at most `max_iterations` times.
    BoundedLoops {
        loops: Vec<String>,
        max_iterations: u64,
    },
}

impl GraphBounds {
    pub(crate) fn of(verified: &VerifiedGraph) -> Self {
        let bounds = &verified.ir.bounds;
        Self {
            max_executions: bounds.max_node_executions.get(),
            peak_concurrency: bounds.peak_concurrency.get(),
            termination: match &bounds.termination {
                TerminationWitness::Acyclic { .. } => Termination::Acyclic,
                TerminationWitness::Bounded {
                    ranking,
                    max_iterations,
                } => Termination::BoundedLoops {
                    loops: ranking.iter().map(|p| p.dotted()).collect(),
                    max_iterations: max_iterations.get(),
                },
            },
        }
    }
}

/// A run's graph, for drawing it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunGraph {
    pub run_id: RunId,
    pub kind: RunKind,
    /// The graph document: GraphSpec JSON, or the GaP `workflow.json` as recorded at admission.
    pub graph: Value,
    /// The run's input as submitted (a GaP run's `inputs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds: Option<GraphBounds>,
    /// The compiled shape of a GraphSpec graph (none for GaP workflows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout: Option<GraphLayout>,
}

/// What [`crate::Runtime::list`] found: the runs it could read, newest first, and the runs it
/// had to leave out because their stored rows are damaged.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunListing {
    pub runs: Vec<RunSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedRun>,
}

/// A run left out of a listing: its id as stored (or its ledger row) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedRun {
    pub run: String,
    pub reason: String,
}

/// Which runs [`crate::Runtime::list`] returns, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunListFilter {
    pub phase: Option<Phase>,
    pub kind: Option<RunKind>,
    /// Keyset paging: only runs listed after this one.
    pub after: Option<RunId>,
    /// Only runs whose title contains this text (case-insensitive).
    pub title_contains: Option<String>,
    /// At most this many runs (capped by the ledger at 1,000).
    pub limit: usize,
}

impl Default for RunListFilter {
    fn default() -> Self {
        Self {
            phase: None,
            kind: None,
            after: None,
            title_contains: None,
            limit: 50,
        }
    }
}

/// The built-in template a GraphSpec run's graph came from.
pub(crate) fn template_of(record: &RunRecord) -> Option<String> {
    record
        .submission
        .get("template")
        .and_then(Value::as_str)
        .map(str::to_owned)
}
