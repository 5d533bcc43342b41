//! Resume: the settled outcomes of a predecessor run, matched to the successor's dispatches so
//! settled work is reused instead of run again.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;
use trellis_engine::{Dispatch, Occurrence};
use trellis_graph::WorkerOutcome;
use trellis_ledger::{ExecutionState, ReusedOutcome, RunSnapshot};

/// One genuinely settled execution of the predecessor.
#[derive(Debug, Clone)]
pub struct Reusable {
    pub outcome: WorkerOutcome,
    pub source: ReusedOutcome,
    attempt: u32,
    input: Value,
}

/// Predecessor outcomes per occurrence, in dispatch order.
#[derive(Debug, Clone, Default)]
pub struct ReuseIndex {
    by_occurrence: HashMap<Occurrence, VecDeque<Reusable>>,
}

impl ReuseIndex {
    /// Nothing to reuse (a fresh run).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Indexes every outcome the predecessor's workers reported (or that it reused itself).
    /// Outcomes Trellis synthesized (runtime lost, force-stop, budget) are left out, so those
    /// executions run again.
    pub fn from_predecessor(snapshot: &RunSnapshot) -> Self {
        let mut by_occurrence: HashMap<Occurrence, VecDeque<Reusable>> = HashMap::new();
        for (&execution, e) in &snapshot.executions {
            let ExecutionState::Completed {
                outcome,
                settled_by: None,
                ..
            } = &e.state
            else {
                continue;
            };
            let occurrence = Occurrence {
                node: e.node.clone(),
                map_indices: e.map_indices.clone(),
            };
            by_occurrence
                .entry(occurrence)
                .or_default()
                .push_back(Reusable {
                    outcome: (**outcome).clone(),
                    source: ReusedOutcome {
                        run_id: snapshot.head.run_id.clone(),
                        execution,
                    },
                    attempt: e.attempt,
                    input: e.input.clone(),
                });
        }
        Self { by_occurrence }
    }

    /// The predecessor's outcome for this dispatch: the next unused settled execution of the
    /// same occurrence, if it had the same attempt and input (reduction is deterministic, so
    /// the successor dispatches in the predecessor's order until the first unsettled one).
    pub fn take(&mut self, dispatch: &Dispatch) -> Option<Reusable> {
        let queue = self.by_occurrence.get_mut(&dispatch.occurrence)?;
        let next = queue.front()?;
        if next.attempt != dispatch.attempt || next.input != dispatch.input {
            // Diverged: nothing later of this occurrence can be trusted either.
            queue.clear();
            return None;
        }
        queue.pop_front()
    }

    pub fn len(&self) -> usize {
        self.by_occurrence.values().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
