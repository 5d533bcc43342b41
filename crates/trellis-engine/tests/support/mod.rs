//! Test support: a small DSL for GraphSpec JSON, outcome builders, and a run driver that
//! records a ledger history and checks the full replay, the incremental reducer and a reducer
//! rebuilt from the history agree after every change.
#![allow(dead_code)]

use serde_json::{Value, json};
use trellis_engine::{
    Dispatch, ExecutionId, ExecutionRecord, ExecutionState, History, Reducer, Reduction,
    ReplayError, Void, reduce,
};
use trellis_graph::{GraphSpec, WorkerErrorCode, WorkerOutcome};
use trellis_run_model::Cursor;

// ---- graph DSL -------------------------------------------------------------------------------

pub fn open_record() -> Value {
    json!({"kind": "record", "fields": {}})
}

fn path(text: &str) -> Value {
    Value::Array(text.split('.').map(|s| json!(s)).collect())
}

fn selector(text: &str) -> Value {
    let (source, p) = text.split_once(':').expect("state:… or item:…");
    json!({"source": source, "path": path(p)})
}

pub fn step(name: &str) -> Value {
    json!({"kind": "step", "name": name, "worker": format!("test.{name}@1"),
           "input": {"kind": "null"}, "output": {"kind": "null"},
           "inputBindings": [], "writeBindings": [], "attempts": 1})
}

pub fn verifier(name: &str, signal: &str, labels: &[&str]) -> Value {
    let mut v = step(name);
    v["kind"] = json!("verifier");
    v["signals"] = json!({ signal: labels });
    v["diagnostic"] = json!({"kind": "null"});
    v
}

/// `("target.path", "state:a.b")` bindings into the node's input.
pub fn inputs(mut node: Value, bindings: &[(&str, &str)]) -> Value {
    node["inputBindings"] = bindings
        .iter()
        .map(|(t, s)| json!({"target": path(t), "value": selector(s)}))
        .collect();
    node
}

/// `("target.path", "node.channel.path")` write bindings.
pub fn writes(mut node: Value, bindings: &[(&str, &str)]) -> Value {
    node["writeBindings"] = bindings
        .iter()
        .map(|(t, s)| {
            let mut parts = s.splitn(3, '.');
            let (n, c, p) = (parts.next(), parts.next(), parts.next());
            json!({"target": path(t), "value": {"node": n, "channel": c, "path": path(p.expect("path"))}})
        })
        .collect();
    node
}

pub fn attempts(mut node: Value, n: u64) -> Value {
    node["attempts"] = json!(n);
    node
}

pub fn promote(mut node: Value, paths: &[&str]) -> Value {
    node["promotedStatePaths"] = paths.iter().map(|p| path(p)).collect();
    node
}

pub fn seq(name: &str, children: Vec<Value>) -> Value {
    json!({"kind": "seq", "name": name, "state": open_record(), "children": children,
           "promotedStatePaths": []})
}

pub fn choice(name: &str, branches: Vec<(Value, Value)>, otherwise: Option<Value>) -> Value {
    let branches: Vec<Value> = branches
        .into_iter()
        .map(|(when, node)| json!({"when": when, "node": node}))
        .collect();
    json!({"kind": "choice", "name": name, "state": open_record(), "branches": branches,
           "otherwise": otherwise, "promotedStatePaths": []})
}

pub fn par(name: &str, join: Value, branches: Vec<Value>) -> Value {
    json!({"kind": "par", "name": name, "state": open_record(), "branches": branches,
           "join": join, "promotedStatePaths": []})
}

pub fn looped(name: &str, max: u64, until: Option<Value>, body: Value) -> Value {
    let mut v = json!({"kind": "loop", "name": name, "state": open_record(), "body": body,
                       "maxIterations": max, "promotedStatePaths": []});
    if let Some(until) = until {
        v["until"] = until;
    }
    v
}

pub fn map(name: &str, over: &str, max_items: u64, body: Value) -> Value {
    json!({"kind": "map", "name": name, "state": open_record(), "body": body,
           "over": selector(over), "maxItems": max_items, "promotedStatePaths": []})
}

pub fn succeed(name: &str, bindings: &[(&str, &str)]) -> Value {
    let bindings: Vec<Value> = bindings
        .iter()
        .map(|(t, s)| json!({"target": path(t), "value": selector(s)}))
        .collect();
    json!({"kind": "succeed", "name": name, "output": {"kind": "null"}, "bindings": bindings})
}

pub fn fail(name: &str, reason: &str) -> Value {
    json!({"kind": "fail", "name": name, "reason": reason})
}

pub fn sel(name: &str, source: &str, field: Option<&str>) -> Value {
    json!({"name": name, "source": source, "field": field})
}

pub fn is_in(selector: Value, labels: &[&str]) -> Value {
    json!({"kind": "in", "value": selector, "labels": labels})
}

pub fn errored(name: &str) -> Value {
    is_in(
        sel(name, "error", None),
        &["crash", "malformed", "refusal", "timeout"],
    )
}

pub fn signal_is(name: &str, signal: &str, labels: &[&str]) -> Value {
    is_in(sel(name, "signal", Some(signal)), labels)
}

pub fn all(guards: Vec<Value>) -> Value {
    json!({"kind": "all", "guards": guards})
}

pub fn any(guards: Vec<Value>) -> Value {
    json!({"kind": "any", "guards": guards})
}

pub fn not(guard: Value) -> Value {
    json!({"kind": "not", "guard": guard})
}

pub fn k_of_n(count: u64, selectors: Vec<Value>, labels: &[&str]) -> Value {
    json!({"kind": "k_of_n", "count": count, "values": selectors, "labels": labels})
}

pub fn k_of_map(count: u64, selector: Value, labels: &[&str]) -> Value {
    json!({"kind": "k_of_map", "count": count, "value": selector, "labels": labels})
}

/// The engine runs only verified graphs; its tests also reduce shapes the verifier refuses.
pub fn runnable(graph: &GraphSpec) -> trellis_engine::RunnableGraph {
    trellis_engine::RunnableGraph::unverified(graph.clone())
}

pub fn graph(root: Value) -> GraphSpec {
    graph_with_input(open_record(), root)
}

pub fn graph_with_input(initial_input: Value, root: Value) -> GraphSpec {
    let doc = json!({"profile": "openengine.graph.full/v1", "initialInput": initial_input,
                     "policy": {"policy": "policy.test@1", "default": "deny"}, "root": root});
    GraphSpec::parse(&doc, &trellis_graph::JsonPath::root()).expect("test graph parses")
}

// ---- outcomes --------------------------------------------------------------------------------

pub fn ok(output: Value) -> WorkerOutcome {
    WorkerOutcome::Verified {
        output,
        artifacts: Vec::new(),
    }
}

pub fn verdict(signals: &[(&str, &str)], output: Value, diagnostic: Value) -> WorkerOutcome {
    let value = json!({"status": "verifier", "output": output, "diagnostic": diagnostic,
                       "signals": signals.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
                       "artifacts": []});
    WorkerOutcome::parse(&value, &trellis_graph::JsonPath::root()).expect("verifier outcome")
}

pub fn error(code: WorkerErrorCode) -> WorkerOutcome {
    WorkerOutcome::failure(code)
}

// ---- run driver ------------------------------------------------------------------------------

/// A run whose ledger the test writes; every decision is checked against all three reducers.
pub struct Run {
    pub graph: GraphSpec,
    pub input: Value,
    pub history: History,
    reducer: Reducer,
    position: u64,
}

impl Run {
    pub fn new(graph: GraphSpec, input: Value) -> Self {
        let reducer = Reducer::new(&runnable(&graph), &input);
        Self {
            graph,
            input,
            history: History::default(),
            reducer,
            position: 0,
        }
    }

    pub fn next_position(&mut self) -> u64 {
        self.position += 1;
        self.position
    }

    /// Decisions for the current history; panics unless the three reducers agree.
    pub fn try_decide(&self) -> Result<Reduction, ReplayError> {
        let full = reduce(&runnable(&self.graph), &self.input, &self.history);
        let incremental = self.reducer.decide();
        let rebuilt =
            Reducer::from_history(&runnable(&self.graph), &self.input, &self.history).decide();
        match (&full, &incremental, &rebuilt) {
            (Ok(a), Ok(b), Ok(c)) => {
                assert_eq!(a, b, "incremental reducer disagrees with the full replay");
                assert_eq!(a, c, "rebuilt reducer disagrees with the full replay");
            }
            (Err(_), Err(_), Err(_)) => {}
            _ => panic!("reducers disagree: {full:?} / {incremental:?} / {rebuilt:?}"),
        }
        full
    }

    pub fn decide(&self) -> Reduction {
        self.try_decide().expect("history replays")
    }

    fn record(&mut self, record: ExecutionRecord) {
        // A refused change poisons the reducer; the next decision compares the errors.
        let _ = self.reducer.apply(&record);
        self.history.executions.push(record);
    }

    /// Records every requested dispatch (reducing after each) and returns them.
    pub fn start(&mut self) -> Vec<Dispatch> {
        let requested = self.decide().dispatches;
        for dispatch in &requested {
            self.record_dispatch(dispatch);
            self.decide();
        }
        requested
    }

    /// Records one dispatch at the next ledger position.
    pub fn record_dispatch(&mut self, dispatch: &Dispatch) {
        let position = self.next_position();
        self.record(ExecutionRecord {
            execution: dispatch.execution,
            node_instance: dispatch.node_instance,
            occurrence: dispatch.occurrence.clone(),
            attempt: dispatch.attempt,
            input: dispatch.input.clone(),
            dispatched_at: position,
            state: ExecutionState::Active {},
        });
    }

    /// Leaves `gap` unused ledger positions (other events of the run).
    pub fn skip_positions(&mut self, gap: u64) {
        self.position += gap;
    }

    pub fn void_execution(&mut self, void: &Void) -> Reduction {
        let at = self.next_position();
        self.update(
            void.execution,
            ExecutionState::Voided {
                at: Cursor::at(at).expect("position"),
                at_ms: 0,
                reason: void.reason,
            },
        )
    }

    fn update(&mut self, execution: ExecutionId, state: ExecutionState) -> Reduction {
        self.change_state(execution, state);
        self.decide()
    }

    /// Moves a recorded execution to `state` without deciding.
    pub fn change_state(&mut self, execution: ExecutionId, state: ExecutionState) {
        let index = self
            .history
            .executions
            .iter()
            .position(|r| r.execution == execution)
            .expect("known execution");
        self.history.executions[index].state = state;
        let record = self.history.executions[index].clone();
        let _ = self.reducer.apply(&record);
    }

    pub fn settle_execution(
        &mut self,
        execution: ExecutionId,
        outcome: WorkerOutcome,
    ) -> Reduction {
        let at = self.next_position();
        self.update(
            execution,
            ExecutionState::completed(Cursor::at(at).expect("position"), 0, outcome),
        )
    }

    /// Settles the only active execution of `node` at map indices `indices`.
    pub fn settle_at(&mut self, node: &str, indices: &[u32], outcome: WorkerOutcome) -> Reduction {
        let matching: Vec<ExecutionId> = self
            .history
            .executions
            .iter()
            .filter(|r| {
                r.occurrence.node.as_str() == node
                    && r.occurrence.map_indices == indices
                    && r.state.is_active()
            })
            .map(|r| r.execution)
            .collect();
        assert_eq!(matching.len(), 1, "exactly one active {node}{indices:?}");
        self.settle_execution(matching[0], outcome)
    }

    pub fn settle(&mut self, node: &str, outcome: WorkerOutcome) -> Reduction {
        self.settle_at(node, &[], outcome)
    }

    /// Records every requested void and returns them.
    pub fn void_requested(&mut self) -> Vec<Void> {
        let voids = self.decide().voids;
        for void in &voids {
            self.void_execution(void);
        }
        voids
    }

    pub fn record_of(&self, execution: ExecutionId) -> &ExecutionRecord {
        self.history
            .executions
            .iter()
            .find(|r| r.execution == execution)
            .expect("known execution")
    }

    /// `node` or `node[i,j]` for every active execution, in dispatch order.
    pub fn active(&self) -> Vec<String> {
        self.history
            .executions
            .iter()
            .filter(|r| r.state.is_active())
            .map(|r| label(r.occurrence.node.as_str(), &r.occurrence.map_indices))
            .collect()
    }
}

pub fn label(node: &str, indices: &[u32]) -> String {
    if indices.is_empty() {
        node.to_owned()
    } else {
        let parts: Vec<String> = indices.iter().map(u32::to_string).collect();
        format!("{node}[{}]", parts.join(","))
    }
}

/// `node` / `node[i]` labels of dispatches, in order.
pub fn names(dispatches: &[Dispatch]) -> Vec<String> {
    dispatches
        .iter()
        .map(|d| label(d.occurrence.node.as_str(), &d.occurrence.map_indices))
        .collect()
}
