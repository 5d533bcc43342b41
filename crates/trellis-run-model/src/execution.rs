//! Where one execution stands — active, completed with an outcome, or voided — and where a
//! completed outcome came from. The ledger stores these shapes; the reducer reads them.

use serde::{Deserialize, Serialize};
use trellis_graph::WorkerOutcome;

use crate::cursor::Cursor;
use crate::ids::RunId;

/// Whether an execution is still running, settled, or voided. `at` is the position of the
/// change in the run's event sequence, `at_ms` the time the ledger recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "status",
    rename_all = "snake_case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum ExecutionState {
    Active {},
    Completed {
        at: Cursor,
        at_ms: u64,
        outcome: Box<WorkerOutcome>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reused_from: Option<ReusedOutcome>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        settled_by: Option<SettledBy>,
    },
    Voided {
        at: Cursor,
        at_ms: u64,
        reason: VoidReason,
    },
}

impl ExecutionState {
    /// A completed execution whose worker reported `outcome` (neither reused nor settled by
    /// Trellis).
    pub fn completed(at: Cursor, at_ms: u64, outcome: WorkerOutcome) -> Self {
        Self::Completed {
            at,
            at_ms,
            outcome: Box::new(outcome),
            reused_from: None,
            settled_by: None,
        }
    }

    pub fn is_active(&self) -> bool {
        matches!(self, Self::Active {})
    }

    /// The sequence number at which it settled or was voided.
    pub fn ended_at(&self) -> Option<u64> {
        match self {
            Self::Active {} => None,
            Self::Completed { at, .. } | Self::Voided { at, .. } => Some(at.sequence()),
        }
    }

    /// Its outcome and the sequence number it settled at, once completed.
    pub fn settlement(&self) -> Option<(u64, &WorkerOutcome)> {
        match self {
            Self::Completed { at, outcome, .. } => Some((at.sequence(), outcome)),
            _ => None,
        }
    }

    /// Why and when it was voided, if it was.
    pub fn void(&self) -> Option<(u64, VoidReason)> {
        match self {
            Self::Voided { at, reason, .. } => Some((at.sequence(), *reason)),
            _ => None,
        }
    }
}

/// Where a reused outcome came from: an execution of a predecessor run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReusedOutcome {
    pub run_id: RunId,
    pub execution: u64,
}

/// Why Trellis, not the worker, settled an execution (or why its outcome is not the work's
/// own). Such outcomes are never reused by a resumed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettledBy {
    /// The controller died while the execution was active.
    RuntimeLost,
    /// A force-stop cancelled it.
    ForceStop,
    /// The run's budget was exhausted and it was cancelled.
    BudgetExhausted,
    /// A signal Trellis did not send killed the worker: the run went on by its graph with a
    /// `crash`, and a resumed run runs the execution again.
    KilledFromOutside,
    /// The worker host running it stopped renewing its claim (it died, or lost the ledger).
    WorkerLost,
}

/// Why an active execution was voided (cancelled because its result can no longer matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoidReason {
    /// It belongs to a par branch that lost the join.
    ParallelJoin,
    /// It belongs to a map item whose sibling reached a terminal first.
    MapTerminal,
}
