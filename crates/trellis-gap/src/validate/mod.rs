//! Structural validator: rules W1–W8, S1–S12, the skill contract (S4, SK1–SK4), the unnumbered
//! checks in the reference's order, and Trellis's subgraph nesting rules (W9, W10) last.

mod graph;
mod nesting;
mod options;
mod skill;
mod subgraph;

pub(crate) use graph::{adjacency, reachable_from};
pub use nesting::MAX_SUBGRAPH_NESTING;
pub use options::{RunSignature, ScriptIntrospector, ScriptReport, ValidateOptions};

use options::Scripts;

use crate::issue::Issue;
use crate::model::*;
use indexmap::IndexMap;
use std::collections::{BTreeMap, BTreeSet};

/// Validates a loaded workflow; never fails, returns every issue in reference order.
pub fn validate(workflow: &Workflow, options: &ValidateOptions<'_>) -> Vec<Issue> {
    let mut issues = Vec::new();
    let scripts = Scripts {
        introspector: options.script_introspector,
        reports: Default::default(),
    };
    workflow_rules(workflow, &mut issues);
    for (name, sg) in &workflow.subgraphs {
        subgraph::subgraph_rules(name, sg, options, &mut issues);
        subgraph::introspection_warnings(
            name,
            sg,
            &workflow.workflow_dir,
            options,
            &scripts,
            &mut issues,
        );
    }
    if let Some(skills) = options.skill_registry {
        for (name, sg) in &workflow.subgraphs {
            if let Some(bundle) = skills.get(&sg.skill) {
                skill::contract_rules(
                    name,
                    sg,
                    bundle,
                    &workflow.workflow_dir,
                    &scripts,
                    &mut issues,
                );
            }
        }
    }
    w8_inputs_bound(workflow, &mut issues);
    nesting::nesting_rules(workflow, &mut issues);
    crate::timeouts::timeout_rules(workflow, &mut issues);
    issues
}

fn declared_or_virtual<T>(nodes: &IndexMap<String, T>, name: &str) -> bool {
    name == START || name == END || nodes.contains_key(name)
}

fn workflow_rules(wf: &Workflow, issues: &mut Vec<Issue>) {
    let nodes = &wf.nodes;
    if !(wf.version.as_f64() == Some(3.0)) {
        issues.push(Issue::error(
            "workflow.version",
            format!("workflow version must be 3, got {} (W1)", wf.version),
        ));
    }
    if !wf.edges.iter().any(|(src, _)| src == START) {
        issues.push(Issue::error("workflow.edges", "no edge from START (W2)"));
    }
    for (src, dst) in &wf.edges {
        if !declared_or_virtual(nodes, src) {
            issues.push(Issue::error(
                "workflow.edges",
                format!("edge source '{src}' is not a declared node (W3)"),
            ));
        }
        if !declared_or_virtual(nodes, dst) {
            issues.push(Issue::error(
                "workflow.edges",
                format!("edge target '{dst}' is not a declared node (W3)"),
            ));
        }
    }
    for (name, node) in nodes {
        if let Some(reference) = &node.subgraph_ref
            && node.node_type == NodeType::Subgraph
            && !wf.subgraphs.contains_key(reference)
        {
            issues.push(Issue::error(
                format!("workflow.nodes.{name}"),
                format!("subgraph node '{name}' references undeclared subgraph '{reference}' (W7)"),
            ));
        }
    }
    for (src, ce) in &wf.conditional_edges {
        if !nodes.contains_key(src) {
            issues.push(Issue::error(
                format!("workflow.conditional_edges.{src}"),
                format!("conditional_edges source '{src}' is not a declared node (W6)"),
            ));
        }
        for (key, target) in &ce.mapping {
            if !declared_or_virtual(nodes, target) {
                issues.push(Issue::error(
                    format!("workflow.conditional_edges.{src}.mapping.{key}"),
                    format!("conditional target '{target}' is not a declared node (W6)"),
                ));
            }
        }
    }
    let adj = adjacency(&wf.edges, &wf.conditional_edges);
    let reachable = reachable_from(&adj, START);
    for (name, node) in nodes {
        if node.node_type != NodeType::End && !reachable.contains(name.as_str()) {
            issues.push(Issue::error(
                format!("workflow.nodes.{name}"),
                format!("node '{name}' is unreachable from START (W4)"),
            ));
        }
    }
    let sources: std::collections::HashSet<&str> =
        wf.edges.iter().map(|(src, _)| src.as_str()).collect();
    for (name, node) in nodes {
        let has_edge = sources.contains(name.as_str());
        if node.node_type != NodeType::End && !has_edge && !wf.conditional_edges.contains_key(name)
        {
            issues.push(Issue::error(
                format!("workflow.nodes.{name}"),
                format!("node '{name}' has no outgoing edge or conditional dispatch (W5)"),
            ));
        }
    }
    if !nodes.values().any(|n| n.node_type == NodeType::End) {
        issues.push(Issue::error("workflow.nodes", "workflow has no end node"));
    }
}

/// W8: every declared subgraph input is passed at the call site or produced by an ancestor subgraph.
fn w8_inputs_bound(wf: &Workflow, issues: &mut Vec<Issue>) {
    let adj = adjacency(&wf.edges, &wf.conditional_edges);
    let mut reverse: IndexMap<&str, Vec<&str>> = IndexMap::new();
    for (src, targets) in &adj {
        for &dst in targets {
            reverse.entry(dst).or_default().push(src);
        }
    }
    // subgraph name -> call-site node names, both sorted.
    let mut sites: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for name in reachable_from(&adj, START) {
        let Some(node) = wf.nodes.get(name) else {
            continue;
        };
        if node.node_type != NodeType::Subgraph {
            continue;
        }
        if let Some(reference) = node.subgraph_ref.as_deref()
            && wf.subgraphs.contains_key(reference)
        {
            sites.entry(reference).or_default().insert(name);
        }
    }
    for (sg_name, call_sites) in sites {
        let Some(sg) = wf.subgraphs.get(sg_name) else {
            continue;
        };
        for site in call_sites {
            let passed = wf.nodes.get(site).map(|n| &n.inputs);
            let mut upstream: BTreeSet<&str> = BTreeSet::new();
            for ancestor in reachable_from(&reverse, site) {
                if ancestor == site {
                    continue;
                }
                let Some(node) = wf.nodes.get(ancestor) else {
                    continue;
                };
                let Some(reference) = node.subgraph_ref.as_deref() else {
                    continue;
                };
                if node.node_type != NodeType::Subgraph || reference == sg_name {
                    continue;
                }
                if let Some(producer) = wf.subgraphs.get(reference) {
                    upstream.extend(producer.outputs.keys().map(String::as_str));
                }
            }
            for (input, type_name) in &sg.inputs {
                let satisfied = passed.is_some_and(|p| p.contains_key(input))
                    || upstream.contains(input.as_str())
                    || (input == OBSERVATION_STREAM && type_name.ends_with("ObservationStream"));
                if !satisfied {
                    issues.push(Issue::error(
                        format!("subgraphs.{sg_name}.inputs.{input}"),
                        format!(
                            "input '{input}' (type '{type_name}') is unbound at call site '{site}': \
                             no upstream subgraph declares an output named '{input}' and the call site \
                             passes no such input; add an upstream producer or set it in the call site's inputs (W8)"
                        ),
                    ));
                }
            }
        }
    }
}
