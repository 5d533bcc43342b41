//! Why a failed run failed: the node(s) whose outcome routed the graph to the `fail` node that
//! ended it, with their error channel, classified reason, and the last error line of their
//! logs (or, for a verifier, its diagnostic). Read from the stored graph and the ledger only.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;
use trellis_graph::{FailureReason, WorkerOutcome};
use trellis_ledger::observe::execution_ref;
use trellis_ledger::{
    Cursor, EventFilter, ExecutionState, LogLevel, LogStream, RunEvent, RunId, RunSnapshot,
    RunStore, TerminalResult,
};

use crate::shared::environment::ENVIRONMENT_REASONS;
use crate::shared::error::RuntimeError;

/// Terminal reasons Trellis itself gives; the graph's routing did not lead there.
const RUNTIME_REASONS: [&str; 3] = ["force_stopped", "runtime_lost", "budget_exhausted"];

/// Longest diagnostic or log excerpt a cause carries.
const MAX_DETAIL_CHARS: usize = 400;

/// Why a finished run failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCause {
    /// The terminal reason (the graph's `fail` node reason).
    pub reason: String,
    /// The executions whose outcomes led there, in execution order.
    pub nodes: Vec<CauseNode>,
    /// For a run whose environment could not be prepared (no step ran): Trellis's note of
    /// which hook failed and how (`environment: setup NAME was stopped: …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
}

impl RunCause {
    /// One line per causing node: `worker: refusal (authentication_required) — …`, or the
    /// environment's note.
    pub fn lines(&self) -> Vec<String> {
        self.environment
            .iter()
            .cloned()
            .chain(self.nodes.iter().map(CauseNode::line))
            .collect()
    }
}

/// One execution whose outcome led to the failure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CauseNode {
    pub node: String,
    pub execution: String,
    pub execution_id: u64,
    /// `error` or `verifier`.
    pub status: &'static str,
    /// The error channel (`crash`, `refusal`, `malformed`, `timeout`) of an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<&'static str>,
    /// The failure reason, when it says more than `declared_failure`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// A verifier's signals.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub signals: BTreeMap<String, String>,
    /// A verifier's diagnostic, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<String>,
    /// The last error line of the execution's logs (else its last system note).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl CauseNode {
    /// `node: channel (reason) — message`, or `node: verdict=rejected — diagnostic`.
    pub fn line(&self) -> String {
        let mut head = format!("{}: ", self.node);
        match self.channel {
            Some(channel) => head.push_str(channel),
            None if self.signals.is_empty() => head.push_str(self.status),
            None => {
                let signals: Vec<String> = self
                    .signals
                    .iter()
                    .map(|(field, label)| format!("{field}={label}"))
                    .collect();
                head.push_str(&signals.join(", "));
            }
        }
        if let Some(reason) = self.reason {
            head.push_str(&format!(" ({reason})"));
        }
        match self.diagnostic.as_deref().or(self.message.as_deref()) {
            Some(detail) => format!("{head} — {detail}"),
            None => head,
        }
    }
}

/// The cause of a finished, failed GraphSpec run, or `None` (running, succeeded, stopped or
/// lost by Trellis, or nothing in the graph leads to its reason).
pub(crate) fn run_cause(
    store: &dyn RunStore,
    snapshot: &RunSnapshot,
    graph: Option<&Value>,
) -> Result<Option<RunCause>, RuntimeError> {
    let Some(TerminalResult::Failed { reason }) = snapshot.head.progress.terminal.as_ref() else {
        return Ok(None);
    };
    if RUNTIME_REASONS.contains(&reason.as_str()) {
        return Ok(None);
    }
    if ENVIRONMENT_REASONS.contains(&reason.as_str()) {
        return Ok(Some(RunCause {
            reason: reason.clone(),
            nodes: Vec::new(),
            environment: last_environment_note(store, &snapshot.head.run_id)?,
        }));
    }
    let names = graph
        .and_then(|g| g.get("root"))
        .map(|root| routed_from(root, reason))
        .unwrap_or_default();
    let chosen = choose_executions(snapshot, &names);
    if chosen.is_empty() {
        return Ok(None);
    }
    let messages = last_lines(store, &snapshot.head.run_id, &chosen)?;
    let nodes = chosen
        .into_iter()
        .filter_map(|id| {
            let execution = snapshot.executions.get(&id)?;
            let ExecutionState::Completed { outcome, .. } = &execution.state else {
                return None;
            };
            let mut node = CauseNode {
                node: execution.node.to_string(),
                execution: execution_ref(&snapshot.head.run_id, id),
                execution_id: id,
                status: "error",
                channel: None,
                reason: None,
                signals: BTreeMap::new(),
                diagnostic: None,
                message: messages.get(&id).cloned(),
            };
            match outcome.as_ref() {
                WorkerOutcome::Error { code, reason } => {
                    node.channel = Some(code.as_str());
                    node.reason = reason_name(*reason);
                }
                WorkerOutcome::Verifier {
                    signals,
                    diagnostic,
                    ..
                } => {
                    node.status = "verifier";
                    node.signals = signals
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    node.diagnostic = diagnostic_text(diagnostic);
                }
                WorkerOutcome::Verified { .. } => node.status = "verified",
            }
            Some(node)
        })
        .collect();
    Ok(Some(RunCause {
        reason: reason.clone(),
        nodes,
        environment: None,
    }))
}

fn reason_name(reason: FailureReason) -> Option<&'static str> {
    match reason {
        FailureReason::DeclaredFailure => None,
        FailureReason::PolicyDenied => Some("policy_denied"),
        FailureReason::InteractiveInputRequired => Some("interactive_input_required"),
        FailureReason::AuthenticationRequired => Some("authentication_required"),
        FailureReason::MalformedResult => Some("malformed_result"),
    }
}

/// The executable nodes whose outcomes route to a `fail` node with `reason`: the nodes a
/// choice's guard reads when the branch (or `otherwise`) holding that fail node is taken, and
/// every executable of a loop (or other node) a fail node directly follows in a sequence —
/// a repair loop that ran out of rounds.
fn routed_from(node: &Value, reason: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    match kind(node) {
        "choice" => {
            let branches = list(node, "branches");
            let mut otherwise_reads = BTreeSet::new();
            for branch in branches {
                let target = branch.get("node").unwrap_or(&Value::Null);
                let guard = branch.get("when").unwrap_or(&Value::Null);
                guard_reads(guard, &mut otherwise_reads);
                route_into(target, reason, guard, &mut names);
            }
            if let Some(otherwise) = node.get("otherwise").filter(|o| !o.is_null()) {
                let nested = routed_from(otherwise, reason);
                if !nested.is_empty() {
                    names.extend(nested);
                } else if holds_fail(otherwise, reason) {
                    names.extend(otherwise_reads);
                }
            }
        }
        "seq" => {
            let children = list(node, "children");
            for (index, child) in children.iter().enumerate() {
                if is_fail(child, reason) && index > 0 {
                    executables(&children[index - 1], &mut names);
                } else {
                    names.extend(routed_from(child, reason));
                }
            }
        }
        "loop" | "map" => {
            if let Some(body) = node.get("body") {
                names.extend(routed_from(body, reason));
            }
        }
        "par" => {
            for branch in list(node, "branches") {
                names.extend(routed_from(branch, reason));
            }
        }
        _ => {}
    }
    names
}

/// A choice branch leading to `target`: the nodes a nested route names, else what the guard
/// reads when the target holds the fail node.
fn route_into(target: &Value, reason: &str, guard: &Value, names: &mut BTreeSet<String>) {
    let nested = routed_from(target, reason);
    if !nested.is_empty() {
        names.extend(nested);
    } else if holds_fail(target, reason) {
        guard_reads(guard, names);
    }
}

fn kind(node: &Value) -> &str {
    node.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn list<'a>(node: &'a Value, field: &str) -> &'a [Value] {
    node.get(field)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn is_fail(node: &Value, reason: &str) -> bool {
    kind(node) == "fail" && node.get("reason").and_then(Value::as_str) == Some(reason)
}

/// Whether `node` is, or a sequence starting there begins with, the fail node.
fn holds_fail(node: &Value, reason: &str) -> bool {
    is_fail(node, reason)
        || (kind(node) == "seq" && list(node, "children").iter().any(|c| is_fail(c, reason)))
}

/// Every node name a guard reads an outcome of (`{"name", "source"}` references).
fn guard_reads(guard: &Value, names: &mut BTreeSet<String>) {
    match guard {
        Value::Object(fields) => {
            if let (Some(Value::String(name)), Some(_)) = (fields.get("name"), fields.get("source"))
            {
                names.insert(name.clone());
            }
            for value in fields.values() {
                guard_reads(value, names);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| guard_reads(item, names)),
        _ => {}
    }
}

/// Every step and verifier inside `node`.
fn executables(node: &Value, names: &mut BTreeSet<String>) {
    match kind(node) {
        "step" | "verifier" => {
            if let Some(name) = node.get("name").and_then(Value::as_str) {
                names.insert(name.to_owned());
            }
        }
        _ => {
            for field in ["children", "branches"] {
                for child in list(node, field) {
                    executables(child.get("node").unwrap_or(child), names);
                }
            }
            for field in ["body", "otherwise"] {
                if let Some(child) = node.get(field).filter(|c| !c.is_null()) {
                    executables(child, names);
                }
            }
        }
    }
}

/// The last settled execution of each named node, keeping the errors when there are any,
/// else the verifiers (a rejection), else all of them. Without names (an unusual graph), the
/// last settled error of the run.
fn choose_executions(snapshot: &RunSnapshot, names: &BTreeSet<String>) -> Vec<u64> {
    let mut last: BTreeMap<&str, (u64, &WorkerOutcome)> = BTreeMap::new();
    for (&id, execution) in &snapshot.executions {
        let ExecutionState::Completed { outcome, .. } = &execution.state else {
            continue;
        };
        let node = execution.node.as_str();
        if names.is_empty() || names.contains(node) {
            last.insert(node, (id, outcome.as_ref()));
        }
    }
    let errors: Vec<u64> = last
        .values()
        .filter(|(_, o)| matches!(o, WorkerOutcome::Error { .. }))
        .map(|(id, _)| *id)
        .collect();
    let mut chosen = if !errors.is_empty() {
        errors
    } else if names.is_empty() {
        Vec::new()
    } else {
        let verifiers: Vec<u64> = last
            .values()
            .filter(|(_, o)| matches!(o, WorkerOutcome::Verifier { .. }))
            .map(|(id, _)| *id)
            .collect();
        if verifiers.is_empty() {
            last.values().map(|(id, _)| *id).collect()
        } else {
            verifiers
        }
    };
    if names.is_empty() {
        // Only the latest error when nothing in the graph narrows it down.
        chosen = chosen.into_iter().max().into_iter().collect();
    }
    chosen.sort_unstable();
    chosen
}

/// The last error line of each chosen execution, else its last system note.
fn last_lines(
    store: &dyn RunStore,
    run_id: &RunId,
    chosen: &[u64],
) -> Result<BTreeMap<u64, String>, RuntimeError> {
    let mut errors: BTreeMap<u64, String> = BTreeMap::new();
    let mut notes: BTreeMap<u64, String> = BTreeMap::new();
    let mut after = Cursor::START;
    loop {
        let page = store.events_after(run_id, after, usize::MAX, EventFilter::LogsOnly)?;
        let Some(last) = page.last() else { break };
        after = last.cursor;
        for stored in &page {
            let RunEvent::Log {
                execution: Some(execution),
                stream,
                level,
                message,
                ..
            } = &stored.event
            else {
                continue;
            };
            if !chosen.contains(execution) {
                continue;
            }
            if *level == LogLevel::Error {
                errors.insert(*execution, excerpt(message));
            } else if *stream == LogStream::System {
                notes.insert(*execution, excerpt(message));
            }
        }
    }
    for (execution, note) in notes {
        errors.entry(execution).or_insert(note);
    }
    Ok(errors)
}

/// The last run-wide error note of Trellis's own: what the environment hook that ended the run
/// did.
fn last_environment_note(
    store: &dyn RunStore,
    run_id: &RunId,
) -> Result<Option<String>, RuntimeError> {
    let mut note = None;
    let mut after = Cursor::START;
    loop {
        let page = store.events_after(run_id, after, usize::MAX, EventFilter::LogsOnly)?;
        let Some(last) = page.last() else { break };
        after = last.cursor;
        for stored in &page {
            if let RunEvent::Log {
                execution: None,
                stream: LogStream::System,
                level: LogLevel::Error,
                message,
                ..
            } = &stored.event
            {
                note = Some(excerpt(message));
            }
        }
    }
    Ok(note)
}

fn diagnostic_text(diagnostic: &Value) -> Option<String> {
    let text = match diagnostic {
        Value::Null => return None,
        Value::String(text) => text.clone(),
        Value::Object(fields) => match ["summary", "message", "reason"]
            .iter()
            .find_map(|key| fields.get(*key).and_then(Value::as_str))
        {
            Some(text) => text.to_owned(),
            None => diagnostic.to_string(),
        },
        other => other.to_string(),
    };
    Some(excerpt(&text))
}

fn excerpt(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= MAX_DETAIL_CHARS {
        flat
    } else {
        let cut: String = flat.chars().take(MAX_DETAIL_CHARS).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(name: &str) -> Value {
        let path = format!("{}/../../templates/{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).expect("template")).expect("json")
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn routing_leads_back_from_each_fail_node() {
        let change = template("software-change");
        let root = &change["root"];
        assert_eq!(routed_from(root, "worker_failed"), names(&["worker"]));
        assert_eq!(
            routed_from(root, "review_failed"),
            names(&["acceptance", "code"])
        );
        // The repair loop ran out: every executable of its rounds.
        assert_eq!(
            routed_from(root, "change_attempts_exhausted"),
            names(&["acceptance", "code", "worker"])
        );
        assert!(routed_from(root, "no_such_reason").is_empty());
        let single = template("single-worker");
        assert_eq!(
            routed_from(&single["root"], "worker_failed"),
            names(&["worker"])
        );
    }

    #[test]
    fn a_cause_line_reads_like_a_sentence() {
        let node = CauseNode {
            node: "worker".into(),
            execution: "ex-1".into(),
            execution_id: 1,
            status: "error",
            channel: Some("refusal"),
            reason: Some("authentication_required"),
            signals: BTreeMap::new(),
            diagnostic: None,
            message: Some("Claude Code is not signed in: run \"claude\" once".into()),
        };
        assert_eq!(
            node.line(),
            "worker: refusal (authentication_required) — Claude Code is not signed in: run \
             \"claude\" once"
        );
        let rejection = CauseNode {
            node: "code".into(),
            status: "verifier",
            channel: None,
            reason: None,
            signals: BTreeMap::from([("verdict".into(), "rejected".into())]),
            diagnostic: diagnostic_text(&serde_json::json!({"message": "tests fail:\n  3 of 9"})),
            message: None,
            ..node
        };
        assert_eq!(
            rejection.line(),
            "code: verdict=rejected — tests fail: 3 of 9"
        );
        let long = excerpt(&"x".repeat(MAX_DETAIL_CHARS + 10));
        assert_eq!(long.chars().count(), MAX_DETAIL_CHARS + 1);
    }
}
