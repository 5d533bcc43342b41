//! Subgraph-level rules (S1–S12 and unnumbered checks) and introspection warnings.

use super::graph::{adjacency, reachable_from};
use super::options::ValidateOptions;
use crate::issue::Issue;
use crate::model::*;
use crate::pyfmt::{py_list, py_str_repr};
use crate::schema::{is_known_type, known_type_names};
use indexmap::{IndexMap, IndexSet};
use std::collections::BTreeSet;
use std::path::Path;

fn declared_or_virtual(sg: &SubgraphDef, name: &str) -> bool {
    name == START || name == END || sg.nodes.contains_key(name)
}

fn is_streaming(sg: &SubgraphDef, name: &str) -> bool {
    sg.nodes.get(name).is_some_and(|n| n.streaming)
}

pub(super) fn subgraph_rules(
    sg_name: &str,
    sg: &SubgraphDef,
    options: &ValidateOptions<'_>,
    issues: &mut Vec<Issue>,
) {
    let at = |suffix: &str| format!("subgraphs.{sg_name}{suffix}");
    // S1
    if !sg.edges.iter().any(|(src, _)| src == START) {
        issues.push(Issue::error(
            at(".edges"),
            format!("subgraph '{sg_name}' has no edge from START (S1)"),
        ));
    }
    // S3
    for (src, dst) in &sg.edges {
        if is_streaming(sg, src) {
            issues.push(Issue::error(
                at(".edges"),
                format!("streaming node '{src}' has an outgoing edge to '{dst}'; streaming nodes must be pure sources (S3)"),
            ));
        }
    }
    for src in sg.conditional_edges.keys() {
        if is_streaming(sg, src) {
            issues.push(Issue::error(
                at(".conditional_edges"),
                format!("streaming node '{src}' has conditional dispatch; streaming nodes must be pure sources (S3)"),
            ));
        }
    }
    // S4
    if let Some(skills) = options.skill_registry {
        for (name, node) in &sg.nodes {
            let Some(tool) = node
                .tool_name()
                .filter(|_| node.node_type == NodeType::Tool)
            else {
                continue;
            };
            let Some(bundle) = skills.get(tool) else {
                continue;
            };
            let skill = py_str_repr(tool);
            if node.streaming && !bundle.streaming {
                issues.push(Issue::error(
                    at(&format!(".nodes.{name}")),
                    format!("node has streaming=true but skill {skill}'s contract has streaming=false (S4)"),
                ));
            }
            if bundle.streaming && !node.streaming {
                issues.push(Issue::error(
                    at(&format!(".nodes.{name}")),
                    format!("skill {skill}'s contract has streaming=true but the node does not declare streaming=true (S4)"),
                ));
            }
        }
    }
    // S5 (edges)
    for (src, dst) in &sg.edges {
        if !declared_or_virtual(sg, src) {
            issues.push(Issue::error(
                at(".edges"),
                format!("edge source '{src}' not declared (S5)"),
            ));
        }
        if !declared_or_virtual(sg, dst) {
            issues.push(Issue::error(
                at(".edges"),
                format!("edge target '{dst}' not declared (S5)"),
            ));
        }
    }
    // Conditional edges: source declared, S8, S5 on targets.
    for (src, ce) in &sg.conditional_edges {
        let loc = at(&format!(".conditional_edges.{src}"));
        match sg.nodes.get(src) {
            None => issues.push(Issue::error(
                &loc,
                format!("conditional_edges source '{src}' not declared"),
            )),
            Some(node) if node.node_type == NodeType::Router && ce.router_field.is_some() => {
                issues.push(Issue::error(
                    &loc,
                    format!("router node '{src}' must use router_field: null (its returned route selects the branch) (S8)"),
                ));
            }
            Some(node) if node.node_type != NodeType::Router && ce.router_field.is_none() => {
                issues.push(Issue::error(
                    &loc,
                    format!("non-router node '{src}' needs a router_field naming the output field to dispatch on (S8)"),
                ));
            }
            Some(_) => {}
        }
        for (key, target) in &ce.mapping {
            if !declared_or_virtual(sg, target) {
                issues.push(Issue::error(
                    format!("{loc}.mapping.{key}"),
                    format!("target '{target}' not declared (S5)"),
                ));
            }
        }
    }
    // S2
    let adj = adjacency(&sg.edges, &sg.conditional_edges);
    let reachable = reachable_from(&adj, START);
    for name in sg.nodes.keys() {
        if !reachable.contains(name.as_str()) {
            issues.push(Issue::error(
                at(&format!(".nodes.{name}")),
                format!("node '{name}' is unreachable from START (S2)"),
            ));
        }
    }
    // Dead ends (no rule id).
    let sources: std::collections::HashSet<&str> =
        sg.edges.iter().map(|(src, _)| src.as_str()).collect();
    for (name, node) in &sg.nodes {
        let has_edge = sources.contains(name.as_str());
        if node.node_type != NodeType::End
            && !node.streaming
            && !has_edge
            && !sg.conditional_edges.contains_key(name)
        {
            issues.push(Issue::error(
                at(&format!(".nodes.{name}")),
                format!("non-streaming node '{name}' has no outgoing edge or conditional dispatch"),
            ));
        }
    }
    // S6
    for (output, reference) in &sg.outputs {
        let head = reference.head();
        match sg.nodes.get(head) {
            None => issues.push(Issue::error(
                at(&format!(".outputs.{output}")),
                format!("output '{output}' references unknown node '{head}' (S6)"),
            )),
            Some(node) if node.node_type == NodeType::End => issues.push(Issue::error(
                at(&format!(".outputs.{output}")),
                format!(
                    "output '{output}' binds to end node '{head}', which produces no data (S6)"
                ),
            )),
            Some(_) => {}
        }
    }
    // S7
    if sg.exit.success_values.is_empty() {
        issues.push(Issue::error(
            at(".exit"),
            "exit.success_values is empty; declare at least one success exit value (S7)",
        ));
    }
    // Declared input types (no rule id).
    for (input, type_name) in &sg.inputs {
        if !type_name.ends_with("ObservationStream") && !is_known_type(type_name) {
            issues.push(Issue::error(
                at(&format!(".inputs.{input}")),
                format!(
                    "unknown type name '{type_name}' in graph declaration; known types: {}",
                    py_list(&known_type_names())
                ),
            ));
        }
    }
    on_error_and_exit_rules(sg_name, sg, issues);
    s12_ref_ordering(sg_name, sg, issues);
    if options.reconcile_exits
        && let Some(bundle) = options.skill_registry.and_then(|s| s.get(&sg.skill))
    {
        super::skill::reconcile_exits(sg_name, sg, bundle, issues);
    }
    s5_refs(sg_name, sg, issues);
}

fn on_error_and_exit_rules(sg_name: &str, sg: &SubgraphDef, issues: &mut Vec<Issue>) {
    let at = |suffix: &str| format!("subgraphs.{sg_name}{suffix}");
    if let Some(on_error) = &sg.on_error {
        // S9
        if sg.nodes.contains_key(on_error) {
            issues.push(Issue::error(
                at(".on_error"),
                format!(
                    "on_error '{on_error}' collides with a declared node of the same name (S9)"
                ),
            ));
        }
        // S10
        for (src, ce) in &sg.conditional_edges {
            for (key, target) in &ce.mapping {
                if target == on_error {
                    issues.push(Issue::error(
                        at(&format!(".conditional_edges.{src}.mapping.{key}")),
                        format!("on_error '{on_error}' is an exit value, not a node; it cannot be a conditional target (S10)"),
                    ));
                }
            }
        }
    }
    // S11
    let loc = at(".exit.success_values");
    for value in &sg.exit.success_values {
        match (&sg.exit.router_field, sg.nodes.get(value)) {
            (None, None) => issues.push(Issue::error(
                &loc,
                format!("success value '{value}' must be a declared noop node when exit.router_field is null (S11)"),
            )),
            (None, Some(node)) if node.node_type != NodeType::Noop => issues.push(Issue::error(
                &loc,
                format!(
                    "success value '{value}' names a node of type '{}', but it must be a noop (S11)",
                    node.node_type.as_str()
                ),
            )),
            (Some(_), Some(_)) => issues.push(Issue::error(
                &loc,
                format!("success value '{value}' collides with a declared node while exit.router_field is set (S11)"),
            )),
            _ => {}
        }
    }
}

/// S12: a node reading `$ref` from a producer must not be enterable before that producer ran.
fn s12_ref_ordering(sg_name: &str, sg: &SubgraphDef, issues: &mut Vec<Issue>) {
    let mut forward: IndexMap<&str, Vec<&str>> = IndexMap::new();
    let mut predecessors: IndexMap<&str, IndexSet<&str>> = IndexMap::new();
    for (src, targets) in adjacency(&sg.edges, &sg.conditional_edges) {
        for dst in targets {
            if src == START || dst == END {
                continue;
            }
            forward.entry(src).or_default().push(dst);
            predecessors.entry(dst).or_default().insert(src);
        }
    }
    for (name, node) in &sg.nodes {
        let producers: BTreeSet<&str> = node
            .inputs
            .values()
            .filter_map(|value| match value {
                InputValue::Ref(r) => Some(r.head()),
                _ => None,
            })
            .filter(|head| *head != name && sg.nodes.get(*head).is_some_and(|p| !p.streaming))
            .collect();
        if producers.is_empty() {
            continue;
        }
        let loc = format!("subgraphs.{sg_name}.nodes.{name}");
        let preds = predecessors.get(name.as_str());
        let Some(preds) = preds.filter(|p| !p.is_empty()) else {
            for producer in producers {
                issues.push(Issue::error(
                    &loc,
                    format!(
                        "node '{name}' reads $ref from '{producer}' but is a START-entry node — '{producer}' cannot have run before it (S12)"
                    ),
                ));
            }
            continue;
        };
        for producer in producers {
            let descendants = reachable_from(&forward, producer);
            let mut unordered: Vec<&str> = preds
                .iter()
                .copied()
                .filter(|q| *q != producer && !descendants.contains(q))
                .collect();
            if unordered.is_empty() {
                continue;
            }
            unordered.sort_unstable();
            issues.push(Issue::error(
                &loc,
                format!(
                    "node '{name}' reads $ref from '{producer}' but can be entered from {} without '{producer}' having run; \
                     the executor has no join barrier, so order the producer before every predecessor (S12)",
                    py_list(&unordered)
                ),
            ));
        }
    }
}

/// S5 (refs): every top-level `$ref` head names `in.<declared input>` or a declared node.
fn s5_refs(sg_name: &str, sg: &SubgraphDef, issues: &mut Vec<Issue>) {
    for (name, node) in &sg.nodes {
        for (input, value) in &node.inputs {
            let InputValue::Ref(reference) = value else {
                continue;
            };
            let loc = format!("subgraphs.{sg_name}.nodes.{name}.inputs.{input}");
            let parts = reference.parts();
            let head = parts[0];
            if head == IN {
                match parts.get(1) {
                    None => issues.push(Issue::error(
                        &loc,
                        format!(
                            "$ref '{}' must name a bound input as 'in.<input>' (S5)",
                            reference.path
                        ),
                    )),
                    Some(&OBSERVATION_STREAM) => {}
                    Some(field) if !sg.inputs.contains_key(*field) => issues.push(Issue::error(
                        &loc,
                        format!(
                            "$ref '{}' reads undeclared subgraph input '{field}' (S5)",
                            reference.path
                        ),
                    )),
                    Some(_) => {}
                }
            } else if !sg.nodes.contains_key(head) {
                issues.push(Issue::error(
                    &loc,
                    format!(
                        "$ref '{}' references unknown node '{head}' (S5)",
                        reference.path
                    ),
                ));
            }
        }
    }
}

/// Warnings for tool and script nodes whose implementation cannot be resolved.
pub(super) fn introspection_warnings(
    sg_name: &str,
    sg: &SubgraphDef,
    workflow_dir: &Path,
    options: &ValidateOptions<'_>,
    scripts: &super::options::Scripts<'_>,
    issues: &mut Vec<Issue>,
) {
    for (name, node) in &sg.nodes {
        let loc = format!("subgraphs.{sg_name}.nodes.{name}");
        match node.node_type {
            NodeType::Script => {
                if options.script_introspector.is_none() {
                    continue;
                }
                let reason = match node.script_path() {
                    None => Some("script field is not a string".to_string()),
                    Some(script) => scripts
                        .report(&workflow_dir.join(script))
                        .and_then(|r| r.schema_error),
                };
                if let Some(reason) = reason {
                    issues.push(Issue::warning(
                        &loc,
                        format!("could not introspect schema: {reason}"),
                    ));
                }
            }
            NodeType::Tool => {
                let Some(registry) = options.tool_registry else {
                    continue;
                };
                let tool = node.tool_name().unwrap_or_default();
                if !registry.contains(tool) {
                    let mut message =
                        format!("tool '{tool}' is not registered; skipping schema introspection.");
                    let available = registry.names().join(", ");
                    if !available.is_empty() {
                        let shown: String = available.chars().take(300).collect();
                        message.push_str(&format!(" Available tools: {shown}..."));
                    }
                    issues.push(Issue::warning(&loc, message));
                }
            }
            _ => {}
        }
    }
}
