//! A graph's admission under a runtime plan, before it is verified, in the order and words of
//! the reference (Zeroshot 10.19.1; graph-contract §13.9, runtime.md §2.4): the graph profile,
//! then each executable in document order against its binding (agent nodes carry
//! instructions; git delivery bindings sit on delivery verifiers without instructions that
//! declare their worker's contract), then where a comment delivery sits, then worker reuse.
//! After verification the initial input's loop iteration counts are checked.
//!
//! Trellis keeps three differences (`docs/decisions/reference-differences.md`): executables
//! may retry (`attempts` up to the contract's 100), command bindings run a command with no
//! instructions, and a git delivery may not run beside a writer or another delivery.

use serde_json::Value;
use trellis_agents::Binding;
use trellis_graph::{GraphNode, GraphProfile, GraphSpec, NodeName, WorkerRef};
use trellis_verify::delivery_overlap::{DeliveryOverlap, overlapping_git_delivery};
use trellis_verify::plan_rules::{
    comment_destinations, declares_delivery_contract, executables, inconsistent_reuse,
    is_comment_delivery, is_delivery, misplaced_comment_delivery,
};

use super::error::PlanError;
use super::runtime_plan::RuntimePlan;

/// The largest integer a JSON number carries exactly (2^53 − 1).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Why a graph cannot run under its plan, worded as the reference words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphAdmissionError {
    #[error("Trellis requires graph profile {}", GraphProfile::FULL)]
    Profile,
    #[error("agent-backed node {0} requires authored instructions")]
    MissingInstructions(NodeName),
    #[error("Git delivery binding {0} must be attached to a verifier node")]
    DeliveryOnStep(NodeName),
    #[error(
        "graph-visible Git delivery worker {worker} at node {node} requires a Git delivery binding"
    )]
    DeliveryWorkerNeedsDeliveryBinding { worker: WorkerRef, node: NodeName },
    #[error("Git delivery binding {node} uses unsupported worker {worker}")]
    DeliveryWorkerUnsupported { node: NodeName, worker: WorkerRef },
    #[error("Git delivery node {0} rejects authored instructions")]
    DeliveryWithInstructions(NodeName),
    #[error("Git delivery node {node} declares an invalid contract for worker {worker}")]
    DeliveryContract { node: NodeName, worker: WorkerRef },
    #[error("invalid comment delivery: {0}")]
    CommentDelivery(&'static str),
    #[error("worker {worker} is reused with inconsistent executable declarations ({})", nodes.join(", "))]
    InconsistentReuse {
        worker: WorkerRef,
        nodes: Vec<String>,
    },
    #[error("loop iteration count at {0} must be a positive safe integer")]
    IterationCount(String),
    /// A Trellis rule the reference does not have (`docs/decisions/reference-differences.md`).
    #[error("{}", overlap_message(.0))]
    DeliveryOverlap(DeliveryOverlap),
}

fn overlap_message(overlap: &DeliveryOverlap) -> String {
    let beside = if overlap.other == overlap.delivery {
        format!("runs for several items of map {} at once", overlap.group)
    } else {
        format!(
            "can run at the same time as {} (parallel branches of {})",
            overlap.other, overlap.group
        )
    };
    format!(
        "Git delivery node {} {beside}: a delivery commits and pushes the whole workspace, so it \
         must not overlap a writer or another delivery",
        overlap.delivery
    )
}

/// A git delivery must not run beside a writer or another delivery (checked once the graph
/// verified, so every graph the reference refuses is refused for the reference's reason first).
pub(crate) fn check_delivery_overlap(spec: &GraphSpec) -> Result<(), GraphAdmissionError> {
    overlapping_git_delivery(spec).map_or(Ok(()), |overlap| {
        Err(GraphAdmissionError::DeliveryOverlap(overlap))
    })
}

/// Checks the graph profile, then every executable against its binding, comment delivery
/// placement and worker reuse; the plan's coverage (one binding per executable) is checked
/// before the first executable it concerns.
pub(crate) fn admit_graph(spec: &GraphSpec, plan: &RuntimePlan) -> Result<(), AdmissionRefusal> {
    if spec.profile != GraphProfile::Full {
        return Err(GraphAdmissionError::Profile.into());
    }
    for (node, _) in executables(spec) {
        let Some(exec) = node.executable() else {
            continue;
        };
        let name = node.name();
        let binding = plan
            .nodes
            .get(name)
            .ok_or_else(|| PlanError::MissingBinding(name.clone()))?;
        let is_step = matches!(node, GraphNode::Step(_));
        let delivery = is_delivery(&exec.worker);
        match binding {
            // The reference binds a comment worker on a step as an agent.
            Binding::GitDelivery(_) | Binding::Agent(_)
                if delivery && is_step && is_comment_delivery(&exec.worker) =>
            {
                return Err(GraphAdmissionError::DeliveryWorkerNeedsDeliveryBinding {
                    worker: exec.worker.clone(),
                    node: name.clone(),
                }
                .into());
            }
            Binding::GitDelivery(_) if is_step => {
                return Err(GraphAdmissionError::DeliveryOnStep(name.clone()).into());
            }
            // Only on a verifier does the reference look at the binding's worker.
            Binding::GitDelivery(_) if !delivery => {
                return Err(GraphAdmissionError::DeliveryWorkerUnsupported {
                    node: name.clone(),
                    worker: exec.worker.clone(),
                }
                .into());
            }
            // The contract is checked before the instructions, as the reference does.
            Binding::GitDelivery(_) if !declares_delivery_contract(node) => {
                return Err(GraphAdmissionError::DeliveryContract {
                    node: name.clone(),
                    worker: exec.worker.clone(),
                }
                .into());
            }
            Binding::GitDelivery(_) if exec.instructions.is_some() => {
                return Err(GraphAdmissionError::DeliveryWithInstructions(name.clone()).into());
            }
            Binding::Agent(_) if delivery => {
                return Err(GraphAdmissionError::DeliveryWorkerNeedsDeliveryBinding {
                    worker: exec.worker.clone(),
                    node: name.clone(),
                }
                .into());
            }
            Binding::Agent(_) if exec.instructions.is_none() => {
                return Err(GraphAdmissionError::MissingInstructions(name.clone()).into());
            }
            _ => {}
        }
    }
    if let Some(problem) = misplaced_comment_delivery(spec) {
        return Err(GraphAdmissionError::CommentDelivery(problem).into());
    }
    if let Some((worker, users)) = inconsistent_reuse(spec) {
        return Err(GraphAdmissionError::InconsistentReuse {
            worker,
            nodes: users.iter().map(|n| n.to_string()).collect(),
        }
        .into());
    }
    Ok(())
}

/// Either rule set's refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionRefusal {
    #[error(transparent)]
    Graph(#[from] GraphAdmissionError),
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// The kind of a GitHub issue or pull-request URL: `Some(true)` for a pull request,
/// `Some(false)` for an issue, `None` for anything the reference recognizes no forge in
/// (exactly `https://github.com/OWNER/REPO/issues|pull/N`, N ≥ 1).
fn github_item_kind(url: &str) -> Option<bool> {
    let rest = url.strip_prefix("https://github.com/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let [owner, repo, kind, number] = parts.as_slice() else {
        return None;
    };
    let number_ok = !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
        && number.parse::<u64>().is_ok_and(|n| n >= 1);
    if owner.is_empty() || repo.is_empty() || !number_ok {
        return None;
    }
    match *kind {
        "issues" => Some(false),
        "pull" => Some(true),
        _ => None,
    }
}

/// A comment delivery posts to the URL its input gives: a GitHub issue, or a pull request with
/// a review scope (checked once the input fits the graph, as the reference does).
pub(crate) fn check_comment_destinations(
    spec: &GraphSpec,
    input: &Value,
) -> Result<(), GraphAdmissionError> {
    for (url, scope) in comment_destinations(spec, input) {
        let Some(url) = url.and_then(Value::as_str) else {
            continue;
        };
        match github_item_kind(url) {
            None => {
                return Err(GraphAdmissionError::CommentDelivery(
                    "no registered source provider recognizes this comment URL",
                ));
            }
            Some(true)
                if scope
                    .and_then(Value::as_object)
                    .is_none_or(|s| s.is_empty()) =>
            {
                return Err(GraphAdmissionError::CommentDelivery(
                    "source delivery identity mismatch: PR review scope is empty",
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Every loop iteration count the initial input sets must be a positive safe integer (the
/// input's own check has already made it an integer where present).
pub(crate) fn check_iteration_counts(
    spec: &GraphSpec,
    input: &Value,
) -> Result<(), GraphAdmissionError> {
    let mut refusal = None;
    spec.root.walk(&mut |node| {
        let GraphNode::Loop(l) = node else {
            return;
        };
        let Some(path) = &l.max_iterations_input else {
            return;
        };
        let value = path
            .segments()
            .iter()
            .try_fold(input, |at, field| at.get(field.as_str()));
        let positive_safe = |v: &Value| {
            v.as_u64()
                .is_some_and(|n| (1..=MAX_SAFE_INTEGER).contains(&n))
        };
        if refusal.is_none() && value.is_some_and(|v| !v.is_null() && !positive_safe(v)) {
            let dotted: Vec<&str> = path.segments().iter().map(|f| f.as_str()).collect();
            refusal = Some(GraphAdmissionError::IterationCount(dotted.join(".")));
        }
    });
    refusal.map_or(Ok(()), Err)
}

/// The graph document with each loop's `maxIterations` set to the count the initial input
/// gives it through `maxIterationsInput` (the count a run uses), or `None` when the input sets
/// none. Admission verifies the bounds of this graph.
pub(crate) fn with_input_iteration_counts(graph: &Value, input: &Value) -> Option<Value> {
    fn count_at(input: &Value, path: &Value) -> Option<u64> {
        let mut at = input;
        for field in path.as_array()? {
            at = at.get(field.as_str()?)?;
        }
        at.as_u64().filter(|n| (1..=MAX_SAFE_INTEGER).contains(n))
    }
    fn walk(node: &mut Value, input: &Value, changed: &mut bool) {
        match node {
            Value::Object(map) => {
                if map.get("kind").and_then(Value::as_str) == Some("loop")
                    && let Some(n) = map
                        .get("maxIterationsInput")
                        .and_then(|path| count_at(input, path))
                {
                    map.insert("maxIterations".to_owned(), n.into());
                    *changed = true;
                }
                map.values_mut().for_each(|v| walk(v, input, changed));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, input, changed)),
            _ => {}
        }
    }
    let mut counted = graph.get("root")?.clone();
    let mut changed = false;
    walk(&mut counted, input, &mut changed);
    changed.then(|| {
        let mut whole = graph.clone();
        whole["root"] = counted;
        whole
    })
}
