//! Resume: the settled outcomes of the runs a resumed run descends from, matched to its
//! dispatches so settled work is reused instead of run again.

use std::collections::{BTreeSet, HashMap, VecDeque};

use serde_json::Value;
use trellis_engine::{Dispatch, Occurrence};
use trellis_graph::WorkerOutcome;
use trellis_ledger::{ExecutionState, ReusedOutcome, RunId, RunSnapshot};

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
    /// Indexes the settled outcomes of a lineage of runs, newest first (the predecessor, its
    /// predecessor, …): every outcome a worker reported, or that a run reused itself; outcomes
    /// Trellis synthesized (runtime lost, force-stop, budget) are left out, so those
    /// executions run again. Each
    /// occurrence takes the newest run's settled outcomes, continued by the later outcomes an
    /// older run had settled but no newer run got as far as re-settling: a resumed run that
    /// died while still reusing its predecessor's work must not lose the rest of it.
    #[cfg(any(test, feature = "testing"))]
    pub fn from_lineage(snapshots: &[RunSnapshot]) -> Self {
        Self::from_lineage_retrying(snapshots, &BTreeSet::new())
    }

    /// As [`ReuseIndex::from_lineage`], leaving out the executions in `retried` (run and
    /// execution): the failures that ended or routed a run of the lineage to its failure run
    /// again, so a resume can fix what failed (a forge that answered 502, a flaky tool).
    pub fn from_lineage_retrying(
        snapshots: &[RunSnapshot],
        retried: &BTreeSet<(RunId, u64)>,
    ) -> Self {
        let mut by_occurrence: HashMap<Occurrence, VecDeque<Reusable>> = HashMap::new();
        for snapshot in snapshots {
            for (occurrence, older) in settled_by_occurrence(snapshot, retried) {
                let known = by_occurrence.entry(occurrence).or_default();
                let already = known.len();
                known.extend(older.into_iter().skip(already));
            }
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

    /// Whether [`ReuseIndex::take`] would reuse an outcome for this dispatch.
    pub fn would_reuse(&self, dispatch: &Dispatch) -> bool {
        self.by_occurrence
            .get(&dispatch.occurrence)
            .and_then(|queue| queue.front())
            .is_some_and(|next| next.attempt == dispatch.attempt && next.input == dispatch.input)
    }

    /// How many settled outcomes are left to reuse.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_occurrence.values().map(VecDeque::len).sum()
    }
}

/// One run's genuinely settled executions per occurrence, in dispatch (execution id) order,
/// up to the first one `retried` names (nothing after it can be trusted either).
fn settled_by_occurrence(
    snapshot: &RunSnapshot,
    retried: &BTreeSet<(RunId, u64)>,
) -> HashMap<Occurrence, Vec<Reusable>> {
    let mut by_occurrence: HashMap<Occurrence, Vec<Reusable>> = HashMap::new();
    let mut cut: BTreeSet<Occurrence> = BTreeSet::new();
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
        if cut.contains(&occurrence) || retried.contains(&(snapshot.head.run_id.clone(), execution))
        {
            cut.insert(occurrence);
            continue;
        }
        by_occurrence.entry(occurrence).or_default().push(Reusable {
            outcome: (**outcome).clone(),
            source: ReusedOutcome {
                run_id: snapshot.head.run_id.clone(),
                execution,
            },
            attempt: e.attempt,
            input: e.input.clone(),
        });
    }
    by_occurrence
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use trellis_engine::{ExecutionId, NodeInstanceId};
    use trellis_graph::{JsonPath, NodeName, WorkerErrorCode, WorkerRef};
    use trellis_ledger::{
        NewRun, RunEvent, RunId, RunKind, RunStore, SettledBy, SqliteStore, TerminalResult,
    };

    use super::*;

    fn started(execution: u64, node: &str) -> RunEvent {
        RunEvent::NodeStarted {
            execution,
            node_instance: execution,
            node: NodeName::new(node).unwrap(),
            map_indices: vec![],
            attempt: 1,
            input: Value::Null,
            worker: format!("command.{node}@1"),
        }
    }

    fn outcome(value: u64) -> WorkerOutcome {
        WorkerOutcome::Verified {
            output: json!(value),
            artifacts: vec![],
        }
    }

    fn completed(execution: u64, value: u64, reused_from: Option<ReusedOutcome>) -> RunEvent {
        RunEvent::NodeCompleted {
            execution,
            outcome: outcome(value),
            reused_from,
            settled_by: None,
        }
    }

    fn lost(execution: u64) -> RunEvent {
        RunEvent::NodeCompleted {
            execution,
            outcome: WorkerOutcome::failure(WorkerErrorCode::Crash),
            reused_from: None,
            settled_by: Some(SettledBy::RuntimeLost),
        }
    }

    fn runtime_lost() -> RunEvent {
        RunEvent::Terminal {
            result: TerminalResult::Failed {
                reason: "runtime_lost".into(),
            },
        }
    }

    fn dispatch(execution: u64, node: &str) -> Dispatch {
        Dispatch {
            execution: ExecutionId(execution),
            node_instance: NodeInstanceId(execution),
            occurrence: Occurrence {
                node: NodeName::new(node).unwrap(),
                map_indices: vec![],
            },
            attempt: 1,
            worker: WorkerRef::parse(&json!(format!("command.{node}@1")), &JsonPath::root())
                .unwrap(),
            input: Value::Null,
        }
    }

    /// Run A settled a, b and c and died; its successor B re-settled a from A, then died while
    /// b ran. The lineage [B, A] still offers all three.
    #[test]
    fn a_successor_that_died_while_reusing_keeps_the_older_settled_work() {
        let store = SqliteStore::open_in_memory().unwrap();
        let first = RunId::new("run-a").unwrap();
        let second = RunId::new("run-b").unwrap();
        let new_run = |id: &RunId, key: &str| {
            NewRun::new(id.clone(), key, "t", RunKind::Graphspec, json!({}))
        };
        store.create_or_get(new_run(&first, "ka")).unwrap();
        let mut events = vec![RunEvent::RunStarted {}];
        for (execution, node) in [(1, "a"), (2, "b"), (3, "c")] {
            events.push(started(execution, node));
            events.push(completed(execution, execution, None));
        }
        events.extend([started(4, "d"), lost(4), runtime_lost()]);
        store.append(&first, &events).unwrap();
        store
            .create_or_get(new_run(&second, "kb").with_predecessor(first.clone()))
            .unwrap();
        let reused = ReusedOutcome {
            run_id: first.clone(),
            execution: 1,
        };
        store
            .append(
                &second,
                &[
                    RunEvent::RunStarted {},
                    started(1, "a"),
                    completed(1, 1, Some(reused)),
                    started(2, "b"),
                    lost(2),
                    runtime_lost(),
                ],
            )
            .unwrap();
        let lineage = [
            store.snapshot(&second).unwrap(),
            store.snapshot(&first).unwrap(),
        ];

        assert_eq!(ReuseIndex::from_lineage(&lineage[..1]).len(), 1);
        let mut index = ReuseIndex::from_lineage(&lineage);
        assert_eq!(index.len(), 3);
        let a = index.take(&dispatch(1, "a")).unwrap();
        assert_eq!((a.source.run_id, a.outcome), (second.clone(), outcome(1)));
        let b = index.take(&dispatch(2, "b")).unwrap();
        assert_eq!((b.source.run_id, b.outcome), (first.clone(), outcome(2)));
        let c = index.take(&dispatch(3, "c")).unwrap();
        assert_eq!((c.source.run_id, c.outcome), (first, outcome(3)));
        assert!(index.take(&dispatch(4, "d")).is_none(), "d never settled");
    }
}
