//! The graph rules a run's admission applies under a runtime plan, before the graph is verified
//! (graph-contract §13.9, as the reference Zeroshot 10.19.1 admits): which worker contracts
//! delivery nodes declare, where a comment delivery sits, that a reused worker reference keeps
//! one contract, and the registry a plan-bound run verifies against, synthesized from the
//! graph's own declarations so that any well-formed worker reference resolves.

use std::collections::{BTreeMap, HashMap};

use trellis_graph::{
    DataSelector, FieldPath, GraphNode, GraphSpec, NodeName, PayloadType, WorkerRef,
};

use crate::Verification;
use crate::builtin::{BuiltinKind, BuiltinRegistry, builtin_kind, declaration, descriptor};

/// The comment delivery worker (it posts a run's report; the others deliver by git).
const COMMENT_DELIVERY: &str = "builtin.comment-delivery.post@1";

/// Whether `worker` is the comment delivery worker.
pub fn is_comment_delivery(worker: &WorkerRef) -> bool {
    worker.as_str() == COMMENT_DELIVERY
}

/// Whether `worker` is a built-in delivery worker (git or comment).
pub fn is_delivery(worker: &WorkerRef) -> bool {
    builtin_kind(worker) == Some(BuiltinKind::Delivery)
}

/// Whether a delivery node declares one of its worker's fixed contracts (`false` for a node
/// that is not an executable with a built-in delivery worker).
pub fn declares_delivery_contract(node: &GraphNode) -> bool {
    match (node.executable(), declaration(node)) {
        (Some(exec), Some(decl)) => decl.is_verifier && decl.is_delivery_contract_of(&exec.worker),
        _ => false,
    }
}

/// Every executable in document order, each with whether a loop or map encloses it.
pub fn executables(spec: &GraphSpec) -> Vec<(&GraphNode, bool)> {
    fn walk<'g>(node: &'g GraphNode, repeated: bool, out: &mut Vec<(&'g GraphNode, bool)>) {
        if node.executable().is_some() {
            out.push((node, repeated));
        }
        let inner = repeated || matches!(node, GraphNode::Loop(_) | GraphNode::Map(_));
        for child in node.children() {
            walk(child, inner, out);
        }
    }
    let mut out = Vec::new();
    walk(&spec.root, false, &mut out);
    out
}

/// Why a comment delivery node cannot deliver as declared: inside a loop or map, followed by
/// another executable, or its destination (`url`) and scope (`reviewScope`) not bound straight
/// from required initial input. `None` when every comment delivery is well declared.
pub fn misplaced_comment_delivery(spec: &GraphSpec) -> Option<&'static str> {
    let all = executables(spec);
    for (i, (node, repeated)) in all.iter().enumerate() {
        let Some(exec) = node.executable() else {
            continue;
        };
        if !is_comment_delivery(&exec.worker) {
            continue;
        }
        if *repeated {
            return Some("comment delivery cannot execute inside a loop or map");
        }
        if i + 1 < all.len() {
            return Some("comment delivery must be the final executable node");
        }
        let input_path = |target: &str| {
            exec.input_bindings
                .iter()
                .find(|b| {
                    b.target.segments().len() == 1 && b.target.segments()[0].as_str() == target
                })
                .map(|b| match &b.value {
                    DataSelector::State { path } => Some(path),
                    DataSelector::Item { .. } => None,
                })
        };
        let in_input = |path: &FieldPath| spec.initial_input.lookup(path);
        match input_path("url") {
            None => return Some("comment URL requires a caller input binding"),
            Some(None) => {
                return Some("comment destination and scope must bind directly from caller input");
            }
            Some(Some(path)) => {
                if !matches!(in_input(path), Some((PayloadType::String, true))) {
                    return Some("comment URL must select a required string in initial input");
                }
            }
        }
        match input_path("reviewScope") {
            Some(None) => {
                return Some("comment destination and scope must bind directly from caller input");
            }
            Some(Some(path)) if !in_input(path).is_some_and(|(_, required)| required) => {
                return Some("comment reviewScope must select a required initial input value");
            }
            _ => {}
        }
    }
    None
}

/// The input value at a comment delivery's `url` and `reviewScope` bindings, for each comment
/// delivery of the graph.
pub fn comment_destinations<'v>(
    spec: &GraphSpec,
    input: &'v serde_json::Value,
) -> Vec<(Option<&'v serde_json::Value>, Option<&'v serde_json::Value>)> {
    let select = |path: &FieldPath| {
        path.segments()
            .iter()
            .try_fold(input, |at, field| at.get(field.as_str()))
    };
    let mut out = Vec::new();
    for (node, _) in executables(spec) {
        let Some(exec) = node.executable().filter(|e| is_comment_delivery(&e.worker)) else {
            continue;
        };
        let bound = |target: &str| {
            exec.input_bindings.iter().find_map(|b| match &b.value {
                DataSelector::State { path }
                    if b.target.segments().len() == 1
                        && b.target.segments()[0].as_str() == target =>
                {
                    select(path)
                }
                _ => None,
            })
        };
        out.push((bound("url"), bound("reviewScope")));
    }
    out
}

/// The first worker reference (in document order of first use) whose users declare different
/// contracts, with every user's name.
pub fn inconsistent_reuse(spec: &GraphSpec) -> Option<(WorkerRef, Vec<NodeName>)> {
    let mut uses: Vec<(&WorkerRef, Vec<&GraphNode>)> = Vec::new();
    // Where each worker's users are in `uses`: a scan per node would be quadratic in graphs
    // whose executables each have their own worker.
    let mut position: HashMap<&WorkerRef, usize> = HashMap::new();
    for (node, _) in executables(spec) {
        let Some(exec) = node.executable() else {
            continue;
        };
        match position.get(&exec.worker) {
            Some(&at) => uses[at].1.push(node),
            None => {
                position.insert(&exec.worker, uses.len());
                uses.push((&exec.worker, vec![node]));
            }
        }
    }
    uses.into_iter().find_map(|(worker, users)| {
        let first = declaration(users[0]);
        let consistent = users.iter().all(|u| declaration(u) == first);
        (!consistent).then(|| {
            (
                worker.clone(),
                users.iter().map(|u| u.name().clone()).collect(),
            )
        })
    })
}

impl BuiltinRegistry {
    /// The registry of a plan-bound run: every worker reference the graph uses resolves to the
    /// contract its first user declares (the plan, not the reference, says how it runs). Its
    /// descriptors are not validated: like the reference under a plan, it admits even the
    /// reserved `legacy.zeroshot.ship@1` in a full graph (differential seed 1234).
    pub fn declared(spec: &GraphSpec) -> Self {
        let mut descriptors = BTreeMap::new();
        for (node, _) in executables(spec) {
            if let (Some(exec), Some(decl)) = (node.executable(), declaration(node)) {
                descriptors
                    .entry(exec.worker.clone())
                    .or_insert_with(|| descriptor(spec, &exec.worker, &decl));
            }
        }
        BuiltinRegistry {
            descriptors,
            declared: true,
        }
    }
}

/// Verifies a graph whose admission under a runtime plan already passed, against the registry
/// synthesized from its declarations.
pub fn verify_declared(spec: &GraphSpec) -> Verification {
    crate::admission::verify_with(spec, &BuiltinRegistry::declared(spec), Vec::new())
}
