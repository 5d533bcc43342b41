//! Trellis's own subgraph nesting rules: a subgraph may not contain itself (W9) and nesting is
//! bounded (W10), so a verified workflow can never recurse without end at run time.

use crate::issue::Issue;
use crate::model::{NodeType, Workflow};
use indexmap::IndexMap;

/// Deepest chain of subgraph calls a verified workflow may hold (a top-level subgraph node is
/// depth 1). The executor checks the same bound at run time.
pub const MAX_SUBGRAPH_NESTING: usize = 64;

/// Longest cycle path printed in full; longer ones are elided in the middle.
const CYCLE_PATH_SHOWN: usize = 12;

/// `subgraph -> [(node, referenced subgraph)]` for subgraph nodes inside subgraphs.
fn inner_references(wf: &Workflow) -> IndexMap<&str, Vec<(&str, &str)>> {
    wf.subgraphs
        .iter()
        .map(|(name, sg)| {
            let refs = sg
                .nodes
                .iter()
                .filter(|(_, n)| n.node_type == NodeType::Subgraph)
                .filter_map(|(node, n)| {
                    let target = n.subgraph_ref.as_deref()?;
                    let (key, _) = wf.subgraphs.get_key_value(target)?;
                    Some((node.as_str(), key.as_str()))
                })
                .collect();
            (name.as_str(), refs)
        })
        .collect()
}

fn render_path(path: &[&str]) -> String {
    if path.len() <= CYCLE_PATH_SHOWN {
        return path.join(" → ");
    }
    let head = path[..CYCLE_PATH_SHOWN / 2].join(" → ");
    let tail = path[path.len() - CYCLE_PATH_SHOWN / 2..].join(" → ");
    format!(
        "{head} → … ({} more) → {tail}",
        path.len() - CYCLE_PATH_SHOWN
    )
}

/// W9 for every reference closing a cycle, then (only without cycles) W10 for the deepest chain.
pub(super) fn nesting_rules(wf: &Workflow, issues: &mut Vec<Issue>) {
    let graph = inner_references(wf);
    let before = issues.len();
    find_cycles(&graph, issues);
    if issues.len() == before {
        check_depth(wf, &graph, issues);
    }
}

/// Iterative depth-first search (no recursion: chains may be thousands long).
fn find_cycles<'a>(graph: &IndexMap<&'a str, Vec<(&'a str, &'a str)>>, issues: &mut Vec<Issue>) {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnStack,
        Done,
    }
    let mut marks: IndexMap<&str, Mark> = graph.keys().map(|k| (*k, Mark::New)).collect();
    for &root in graph.keys() {
        if marks.get(root) != Some(&Mark::New) {
            continue;
        }
        // (subgraph, index of its next reference to follow)
        let mut stack: Vec<(&str, usize)> = vec![(root, 0)];
        marks.insert(root, Mark::OnStack);
        while let Some(top) = stack.last_mut() {
            let (current, index) = *top;
            top.1 += 1;
            let refs = graph.get(current).map(Vec::as_slice).unwrap_or(&[]);
            let Some(&(node, target)) = refs.get(index) else {
                marks.insert(current, Mark::Done);
                stack.pop();
                continue;
            };
            match marks.get(target).copied().unwrap_or(Mark::Done) {
                Mark::New => {
                    marks.insert(target, Mark::OnStack);
                    stack.push((target, 0));
                }
                Mark::OnStack => {
                    let start = stack.iter().position(|(s, _)| *s == target).unwrap_or(0);
                    let mut path: Vec<&str> = stack[start..].iter().map(|(s, _)| *s).collect();
                    path.push(target);
                    issues.push(Issue::error(
                        format!("subgraphs.{current}.nodes.{node}"),
                        format!(
                            "subgraph node '{node}' references '{target}', closing the subgraph cycle {}; \
                             a subgraph cannot contain itself (W9)",
                            render_path(&path)
                        ),
                    ));
                }
                Mark::Done => {}
            }
        }
    }
}

/// Longest call chain, computed bottom-up over the (acyclic) reference graph.
fn check_depth<'a>(
    wf: &'a Workflow,
    graph: &IndexMap<&'a str, Vec<(&'a str, &'a str)>>,
    issues: &mut Vec<Issue>,
) {
    // Post-order without recursion: a subgraph's depth is 1 + its deepest reference.
    let mut depth: IndexMap<&str, usize> = IndexMap::new();
    for &root in graph.keys() {
        let mut stack: Vec<(&str, bool)> = vec![(root, false)];
        while let Some((current, expanded)) = stack.pop() {
            if depth.contains_key(current) {
                continue;
            }
            let refs = graph.get(current).map(Vec::as_slice).unwrap_or(&[]);
            if expanded {
                let deepest = refs
                    .iter()
                    .filter_map(|(_, t)| depth.get(t))
                    .max()
                    .copied()
                    .unwrap_or(0);
                depth.insert(current, deepest + 1);
            } else {
                stack.push((current, true));
                for (_, target) in refs {
                    if !depth.contains_key(target) {
                        stack.push((target, false));
                    }
                }
            }
        }
    }
    let deepest_call = wf
        .nodes
        .values()
        .filter(|n| n.node_type == NodeType::Subgraph)
        .filter_map(|n| n.subgraph_ref.as_deref())
        .filter_map(|r| depth.get_key_value(r))
        .max_by_key(|(_, d)| **d);
    if let Some((root, &levels)) = deepest_call
        && levels > MAX_SUBGRAPH_NESTING
    {
        issues.push(Issue::error(
            format!("subgraphs.{root}"),
            format!(
                "subgraph '{root}' nests subgraph calls {levels} levels deep; \
                 at most {MAX_SUBGRAPH_NESTING} levels can run (W10)"
            ),
        ));
    }
}
