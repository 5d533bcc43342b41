//! The skill contract (SK1–SK4) of a subgraph whose `skill` names a registered bundle, and the
//! generation-time exit reconciliation, with the reference's wording, severities and order.

use super::options::Scripts;
use crate::issue::{Issue, Severity};
use crate::model::{NodeType, SubgraphDef};
use crate::pyfmt::{py_list, py_str_repr};
use crate::skills::{CanonicalScript, SkillBundle};
use std::collections::BTreeSet;
use std::path::Path;

fn sorted_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let set: BTreeSet<&str> = names.into_iter().collect();
    py_list(&set.into_iter().collect::<Vec<_>>())
}

/// The last path component, as Python's `Path(text).name`.
fn file_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

/// SK1–SK4 for subgraph `sg_name` labelled with `bundle`.
pub(super) fn contract_rules(
    sg_name: &str,
    sg: &SubgraphDef,
    bundle: &SkillBundle,
    workflow_dir: &Path,
    scripts: &Scripts<'_>,
    issues: &mut Vec<Issue>,
) {
    let loc = format!("subgraphs.{sg_name}");
    let skill = py_str_repr(&bundle.name);
    sk1_exits(&loc, sg, bundle, &skill, issues);
    if bundle.canonical_scripts.is_empty() {
        return;
    }
    // SK2: which script nodes run one of the bundle's canonical scripts (matched by file name).
    let named: Vec<(&str, &CanonicalScript)> = sg
        .nodes
        .iter()
        .filter(|(_, node)| node.node_type == NodeType::Script)
        .filter_map(|(name, node)| {
            let script = node.script_path().filter(|s| !s.is_empty())?;
            Some((name.as_str(), bundle.canonical_by_file(file_name(script))?))
        })
        .collect();
    if named.is_empty() {
        issues.push(Issue::error(
            &loc,
            format!(
                "subgraph names skill {skill} but no script node runs one of its canonical scripts ({}) (SK2)",
                sorted_list(bundle.canonical_scripts.iter().map(|c| c.file_name()))
            ),
        ));
        return;
    }
    // SK3: the node binds what `run()` requires and nothing it rejects. A script beside the
    // workflow is the one that runs, so its signature binds; otherwise the bundle's.
    for (name, canonical) in &named {
        let Some(node) = sg.nodes.get(*name) else {
            continue;
        };
        let script = node.script_path().unwrap_or_default();
        let local = workflow_dir.join(script);
        let source = if local.is_file() {
            local
        } else {
            bundle.dir.join(&canonical.path)
        };
        let Some(signature) = scripts.report(&source).and_then(|r| r.signature) else {
            continue;
        };
        let script_name = py_str_repr(file_name(script));
        let at = format!("{loc}.nodes.{name}.inputs");
        let missing: Vec<&str> = signature
            .required
            .iter()
            .map(String::as_str)
            .filter(|p| !node.inputs.contains_key(*p))
            .collect();
        if !missing.is_empty() {
            issues.push(Issue::error(
                &at,
                format!(
                    "node runs {skill}'s canonical script {script_name} but does not bind its required input(s) {} (run() requires {}) (SK3)",
                    sorted_list(missing),
                    sorted_list(signature.required.iter().map(String::as_str))
                ),
            ));
        }
        if !signature.var_kw {
            let unknown: Vec<&str> = node
                .inputs
                .keys()
                .map(String::as_str)
                .filter(|k| !signature.accepted.iter().any(|a| a == k))
                .collect();
            if !unknown.is_empty() {
                issues.push(Issue::error(
                    &at,
                    format!(
                        "node binds {}, which {skill}'s canonical script {script_name} does not accept (run() accepts {}) (SK3)",
                        sorted_list(unknown),
                        sorted_list(signature.accepted.iter().map(String::as_str))
                    ),
                ));
            }
        }
    }
    // SK4: an output bound to `<node>.<field>` of such a node names a returned field.
    for (output, reference) in &sg.outputs {
        let parts = reference.parts();
        let Some((_, canonical)) = named.iter().find(|(n, _)| parts.first() == Some(n)) else {
            continue;
        };
        let (Some(head), Some(field)) = (parts.first(), parts.get(1)) else {
            continue;
        };
        let script = sg
            .nodes
            .get(*head)
            .and_then(|n| n.script_path())
            .unwrap_or_default();
        let local = workflow_dir.join(script);
        let returned: Vec<String> = if local.is_file() {
            // Beside the workflow only a fully typed schema declares outputs.
            scripts
                .report(&local)
                .filter(|r| r.schema_error.is_none())
                .and_then(|r| r.returned)
                .unwrap_or_default()
        } else {
            scripts
                .report(&bundle.dir.join(&canonical.path))
                .and_then(|r| r.returned)
                .unwrap_or_default()
        };
        if !returned.is_empty() && !returned.iter().any(|r| r == field) {
            issues.push(Issue::error(
                format!("{loc}.outputs.{output}"),
                format!(
                    "output binding {} names {}, which {skill}'s canonical script {} does not return (returns {}) (SK4)",
                    py_str_repr(&reference.path),
                    py_str_repr(field),
                    py_str_repr(file_name(script)),
                    sorted_list(returned.iter().map(String::as_str))
                ),
            ));
        }
    }
}

/// SK1: success values returned under `router_field` must be declared exits (error); terminal
/// node names and `on_error` outside the vocabulary are warnings. Covering a subset is fine.
fn sk1_exits(
    loc: &str,
    sg: &SubgraphDef,
    bundle: &SkillBundle,
    skill: &str,
    issues: &mut Vec<Issue>,
) {
    if bundle.exit_conditions.is_empty() {
        return;
    }
    let declared = sorted_list(bundle.exit_conditions.keys().map(String::as_str));
    let by_field = sg.exit.router_field.is_some();
    for value in &sg.exit.success_values {
        if bundle.exit_conditions.contains_key(value) {
            continue;
        }
        let tail = if by_field {
            ""
        } else {
            "; a terminal node named outside the bundle's vocabulary, which the parent's mapping must route"
        };
        issues.push(Issue {
            severity: if by_field {
                Severity::Error
            } else {
                Severity::Warning
            },
            node_id: format!("{loc}.exit.success_values"),
            field: None,
            message: format!(
                "success value {} is not an exit skill {skill} declares (exit_conditions: {declared}){tail} (SK1)",
                py_str_repr(value)
            ),
        });
    }
    if let Some(on_error) = sg
        .on_error
        .as_ref()
        .filter(|e| !bundle.exit_conditions.contains_key(*e))
    {
        issues.push(Issue::warning(
            format!("{loc}.on_error"),
            format!(
                "on_error={} is not an exit skill {skill} declares (exit_conditions: {declared}); the parent's mapping must route it (SK1)",
                py_str_repr(on_error)
            ),
        ));
    }
}

/// Generation-time reconciliation: `success_values ∪ {on_error}` equals the declared exits.
pub(super) fn reconcile_exits(
    sg_name: &str,
    sg: &SubgraphDef,
    bundle: &SkillBundle,
    issues: &mut Vec<Issue>,
) {
    let declared: BTreeSet<&str> = bundle.exit_conditions.keys().map(String::as_str).collect();
    let mut actual: BTreeSet<&str> = sg.exit.success_values.iter().map(String::as_str).collect();
    actual.extend(sg.on_error.as_deref());
    let at = format!("subgraphs.{sg_name}.exit");
    for missing in declared.difference(&actual) {
        issues.push(Issue::error(
            &at,
            format!(
                "missing exit condition {} declared in {}.exit_conditions",
                py_str_repr(missing),
                sg.skill
            ),
        ));
    }
    for extra in actual.difference(&declared) {
        issues.push(Issue::error(
            &at,
            format!(
                "unexpected exit condition {} not in {}.exit_conditions",
                py_str_repr(extra),
                sg.skill
            ),
        ));
    }
}
