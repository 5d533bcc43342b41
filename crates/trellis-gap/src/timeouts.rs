//! How long script, router and Python-tool bodies may run: a workflow sets it in its `meta`
//! (`script_timeout_s` for every body, `script_timeouts_s` per node), else the run's default.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::issue::Issue;
use crate::model::{NodeType, Workflow};

/// `meta` key: seconds every body of the workflow may run.
pub const META_SCRIPT_TIMEOUT: &str = "script_timeout_s";
/// `meta` key: `{"<node>" | "<subgraph>.<node>": seconds}`, overriding the workflow's limit.
pub const META_SCRIPT_TIMEOUTS: &str = "script_timeouts_s";
/// The longest limit a workflow may set: a week (a `Duration` beyond any sane run).
const MAX_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;

/// The body time limits of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScriptTimeouts {
    default: Duration,
    per_node: HashMap<String, Duration>,
}

impl ScriptTimeouts {
    /// The limits `meta` sets, with `fallback` where it sets none. Values the validator
    /// refuses are ignored here (an unvalidated workflow still runs within the fallback).
    pub(crate) fn from_meta(meta: &Map<String, Value>, fallback: Duration) -> Self {
        let default = meta
            .get(META_SCRIPT_TIMEOUT)
            .and_then(seconds)
            .unwrap_or(fallback);
        let per_node = meta
            .get(META_SCRIPT_TIMEOUTS)
            .and_then(Value::as_object)
            .map(|nodes| {
                nodes
                    .iter()
                    .filter_map(|(node, value)| Some((node.clone(), seconds(value)?)))
                    .collect()
            })
            .unwrap_or_default();
        Self { default, per_node }
    }

    /// The limit of the body of `node_id` (`node` at top level, `subgraph.node` inside one).
    pub(crate) fn of(&self, node_id: &str) -> Duration {
        self.per_node.get(node_id).copied().unwrap_or(self.default)
    }
}

/// A positive, finite number of seconds no longer than [`MAX_TIMEOUT_S`].
fn seconds(value: &Value) -> Option<Duration> {
    value
        .as_f64()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= MAX_TIMEOUT_S)
        .map(Duration::from_secs_f64)
}

/// Trellis's checks of the two `meta` keys: numbers in range, and per-node keys naming a
/// script, router or tool node of the workflow (a typo would silently keep the default).
pub(crate) fn timeout_rules(workflow: &Workflow, issues: &mut Vec<Issue>) {
    let bad_value = |location: String| {
        Issue::error(
            location,
            format!("must be a number of seconds above 0 and at most {MAX_TIMEOUT_S}"),
        )
    };
    if let Some(value) = workflow.meta.get(META_SCRIPT_TIMEOUT)
        && seconds(value).is_none()
    {
        issues.push(bad_value(format!("workflow.meta.{META_SCRIPT_TIMEOUT}")));
    }
    let Some(per_node) = workflow.meta.get(META_SCRIPT_TIMEOUTS) else {
        return;
    };
    let Some(per_node) = per_node.as_object() else {
        issues.push(Issue::error(
            format!("workflow.meta.{META_SCRIPT_TIMEOUTS}"),
            "must be an object of node ids (`node` or `subgraph.node`) to seconds",
        ));
        return;
    };
    for (node_id, value) in per_node {
        let location = format!("workflow.meta.{META_SCRIPT_TIMEOUTS}.{node_id}");
        if !names_a_body(workflow, node_id) {
            issues.push(Issue::error(
                location,
                "names no script, router or tool node (use `node` for a top-level node, \
                 `subgraph.node` for one inside a subgraph)",
            ));
        } else if seconds(value).is_none() {
            issues.push(bad_value(location));
        }
    }
}

fn names_a_body(workflow: &Workflow, node_id: &str) -> bool {
    let has_body =
        |kind: NodeType| matches!(kind, NodeType::Script | NodeType::Router | NodeType::Tool);
    if let Some(node) = workflow.nodes.get(node_id) {
        return has_body(node.node_type);
    }
    node_id.split_once('.').is_some_and(|(subgraph, node)| {
        workflow
            .subgraphs
            .get(subgraph)
            .and_then(|sg| sg.nodes.get(node))
            .is_some_and(|node| has_body(node.node_type))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn per_node_limits_win_over_the_workflow_limit_which_wins_over_the_fallback() {
        let fallback = Duration::from_secs(300);
        let none = ScriptTimeouts::from_meta(&meta(json!({})), fallback);
        assert_eq!(none.of("a"), fallback);
        let set = ScriptTimeouts::from_meta(
            &meta(json!({"script_timeout_s": 20, "script_timeouts_s": {"sg.slow": 0.5}})),
            fallback,
        );
        assert_eq!(set.of("a"), Duration::from_secs(20));
        assert_eq!(set.of("sg.slow"), Duration::from_millis(500));
        let bad = ScriptTimeouts::from_meta(&meta(json!({"script_timeout_s": "soon"})), fallback);
        assert_eq!(bad.of("a"), fallback);
    }
}
