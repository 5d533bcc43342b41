//! Naming one execution of a run the way people do — its id, its public reference (`ex-…`)
//! or its node — for `logs --execution` and `attach`.

use trellis_ledger::observe::resolve_execution_ref;
use trellis_ledger::{ExecutionState, RunId, RunSnapshot};

use crate::shared::error::RuntimeError;

/// The execution `reference` names in `snapshot`: a number is an execution id, `ex-…` a public
/// reference, anything else a node, which names its one active execution, else its latest.
pub(crate) fn resolve_execution(
    run_id: &RunId,
    snapshot: &RunSnapshot,
    reference: &str,
) -> Result<u64, RuntimeError> {
    let unresolved = |why: String| RuntimeError::UnresolvedExecution {
        run: run_id.to_string(),
        why,
    };
    if let Ok(id) = reference.parse::<u64>() {
        return if snapshot.executions.contains_key(&id) {
            Ok(id)
        } else {
            Err(RuntimeError::UnknownExecution {
                run: run_id.to_string(),
                execution: id,
            })
        };
    }
    if reference.starts_with("ex-") {
        return resolve_execution_ref(snapshot, reference)
            .ok_or_else(|| unresolved(format!("no execution has the reference {reference}")));
    }
    let of_node: Vec<(u64, bool)> = snapshot
        .executions
        .iter()
        .filter(|(_, execution)| execution.node.as_str() == reference)
        .map(|(&id, execution)| (id, matches!(execution.state, ExecutionState::Active { .. })))
        .collect();
    let active: Vec<u64> = of_node
        .iter()
        .filter(|(_, active)| *active)
        .map(|(id, _)| *id)
        .collect();
    match (active.as_slice(), of_node.iter().map(|(id, _)| *id).max()) {
        ([one], _) => Ok(*one),
        ([], Some(latest)) => Ok(latest),
        ([], None) => Err(unresolved(format!(
            "no execution of a node named {reference:?} (name an execution by its id, its \
             reference ex-…, or its node)"
        ))),
        (many, _) => Err(unresolved(format!(
            "node {reference:?} has {} active executions ({}); name one by its id",
            many.len(),
            many.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}
