//! The super-step scheduler of one scope: frontier, concurrent ready nodes, fold, loops, streaming.

use super::{ExecError, Executor, in_key};
use crate::context::NodeContext;
use crate::events::RunEvent;
use crate::model::{ConditionalEdge, END, NodeDef, NodeType, START};
use crate::pyfmt::{py_repr, py_str, py_type_name};
use crate::refs::{LocalOutputs, ScopeValue, resolve_inputs};
use crate::stream::StreamSlot;
use crate::validate::{adjacency, reachable_from};
use indexmap::{IndexMap, IndexSet};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

const STRAGGLER_POLL: Duration = Duration::from_millis(2);

/// The graph of one scope: the top level or one subgraph.
pub(crate) struct ScopeDef<'w> {
    /// Subgraph name, `None` at top level.
    pub name: Option<&'w str>,
    pub nodes: &'w IndexMap<String, NodeDef>,
    pub edges: &'w [(String, String)],
    pub conditional: &'w IndexMap<String, ConditionalEdge>,
    /// Subgraph nesting depth: 0 at top level, 1 inside a top-level subgraph call, …
    pub depth: usize,
}

impl ScopeDef<'_> {
    /// `<scope>.<node>` inside subgraphs, the bare name at top level.
    pub(crate) fn full_id(&self, node: &str) -> String {
        match self.name {
            Some(scope) => format!("{scope}.{node}"),
            None => node.to_string(),
        }
    }
}

struct StreamingNode<'scope> {
    name: String,
    slot: Arc<StreamSlot>,
    handle: ScopedJoinHandle<'scope, ()>,
}

impl Executor<'_> {
    /// Runs one scope to completion; returns the terminal node and the scope's outputs.
    pub(crate) fn run_scope(
        &self,
        scope: &ScopeDef<'_>,
        bound_in: ScopeValue,
    ) -> (Result<Option<String>, ExecError>, LocalOutputs) {
        let mut local: LocalOutputs = IndexMap::new();
        local.insert(in_key(), bound_in);
        let outcome = std::thread::scope(|threads| {
            let mut streaming: Vec<StreamingNode<'_>> = Vec::new();
            let outcome = self.super_steps(scope, &mut local, threads, &mut streaming);
            self.teardown_streaming(streaming);
            outcome
        });
        (outcome, local)
    }

    fn super_steps<'scope, 'env>(
        &'env self,
        scope: &ScopeDef<'_>,
        local: &mut LocalOutputs,
        threads: &'scope Scope<'scope, 'env>,
        streaming: &mut Vec<StreamingNode<'scope>>,
    ) -> Result<Option<String>, ExecError> {
        let mut frontier: Vec<String> = Vec::new();
        for (src, dst) in scope.edges {
            if src == START && !frontier.contains(dst) {
                frontier.push(dst.clone());
            }
        }
        // Static out-edges per source, in edge order (avoids rescanning every edge per node).
        let mut out_edges: IndexMap<&str, Vec<&str>> = IndexMap::new();
        for (src, dst) in scope.edges {
            out_edges
                .entry(src.as_str())
                .or_default()
                .push(dst.as_str());
        }
        let mut completed: IndexSet<String> = IndexSet::new();
        let mut terminal: Option<String> = None;
        let mut step = 0usize;
        while !frontier.is_empty() {
            if self.run.cancel.is_set() {
                return Err(ExecError::Cancelled(
                    "run cancelled by the caller".to_string(),
                ));
            }
            step += 1;
            if step > self.options.node_visit_cap {
                return Err(ExecError::Pipeline(format!(
                    "scope '{}' exceeded super-step cap of {} (node_visit_cap / GAP_ITERATION_CAP)",
                    scope.name.unwrap_or("<top>"),
                    self.options.node_visit_cap
                )));
            }
            let mut ready: Vec<&str> = Vec::new();
            let mut end_hit = false;
            for name in &frontier {
                if name == END {
                    end_hit = true;
                    continue;
                }
                let Some(node) = scope.nodes.get(name) else {
                    return Err(ExecError::Pipeline(format!(
                        "edge target '{name}' is not a declared node"
                    )));
                };
                if node.streaming {
                    if !streaming.iter().any(|s| &s.name == name) {
                        streaming.push(self.spawn_streaming(scope, name, node, local, threads)?);
                    }
                } else if !completed.contains(name) {
                    ready.push(name.as_str());
                }
            }
            if end_hit && ready.is_empty() {
                return Ok(terminal);
            }
            let results = self.run_ready(scope, &ready, local)?;
            let mut next: Vec<String> = Vec::new();
            for (name, output) in results {
                let node_type = scope.nodes.get(&name).map(|n| n.node_type);
                local.insert(name.clone(), ScopeValue::Value(output));
                completed.insert(name.clone());
                if node_type == Some(NodeType::End) {
                    return Ok(Some(name));
                }
                for &dst in out_edges
                    .get(name.as_str())
                    .map(Vec::as_slice)
                    .unwrap_or(&[])
                {
                    if dst == END {
                        terminal = Some(name.clone());
                    } else if !next.iter().any(|n| n == dst) {
                        next.push(dst.to_string());
                    }
                }
                let conditional_target = match (scope.conditional.get(&name), local.get(&name)) {
                    (Some(ce), Some(ScopeValue::Value(output))) => {
                        Some(self.resolve_conditional(scope, &name, ce, output)?)
                    }
                    _ => None,
                };
                if let Some(target) = conditional_target {
                    if target == END {
                        terminal = Some(name.clone());
                    } else if completed.contains(&target) {
                        // A conditional back-edge re-opens the loop body reachable from its target.
                        let adj = adjacency(scope.edges, scope.conditional);
                        for reopened in reachable_from(&adj, target.as_str()) {
                            if reopened != START && reopened != END {
                                completed.shift_remove(reopened);
                            }
                        }
                        if !next.contains(&target) {
                            next.push(target);
                        }
                    } else if !next.contains(&target) {
                        next.push(target);
                    }
                }
            }
            if end_hit && next.is_empty() {
                return Ok(terminal);
            }
            frontier = next;
        }
        Ok(terminal)
    }

    /// Runs the ready nodes (inline when one, else on up to `max_workers` threads), in ready order.
    fn run_ready(
        &self,
        scope: &ScopeDef<'_>,
        ready: &[&str],
        local: &LocalOutputs,
    ) -> Result<Vec<(String, Value)>, ExecError> {
        let run_one = |name: &str| -> Result<Value, ExecError> {
            let node = scope.nodes.get(name).ok_or_else(|| {
                ExecError::Pipeline(format!("edge target '{name}' is not a declared node"))
            })?;
            self.dispatch_node(scope, name, node, local)
        };
        if ready.len() == 1 {
            let output = run_one(ready[0])?;
            return Ok(vec![(ready[0].to_string(), output)]);
        }
        let slots: Vec<Mutex<Option<Result<Value, ExecError>>>> =
            ready.iter().map(|_| Mutex::new(None)).collect();
        let next_index = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        let workers = self.options.max_workers.clamp(1, ready.len());
        std::thread::scope(|threads| {
            for _ in 0..workers {
                threads.spawn(|| {
                    loop {
                        let index = next_index.fetch_add(1, Ordering::SeqCst);
                        let Some(name) = ready.get(index) else { break };
                        let outcome = if abort.load(Ordering::SeqCst) || self.run.cancel.is_set() {
                            // Siblings not yet started are cancelled once one failed.
                            self.run.emit(RunEvent::NodeCancelled {
                                node_id: scope.full_id(name),
                            });
                            Err(ExecError::Cancelled(format!(
                                "node '{}' not started",
                                scope.full_id(name)
                            )))
                        } else {
                            let outcome = run_one(name);
                            if outcome.is_err() {
                                abort.store(true, Ordering::SeqCst);
                            }
                            outcome
                        };
                        if let Some(slot) = slots.get(index) {
                            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
                        }
                    }
                });
            }
        });
        let mut outcomes: Vec<Result<Value, ExecError>> = slots
            .into_iter()
            .map(|slot| {
                slot.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .unwrap_or_else(|| Err(ExecError::Pipeline("node result missing".to_string())))
            })
            .collect();
        // The first real failure in ready order wins over the cancellations it caused.
        if let Some(position) = outcomes
            .iter()
            .position(|o| matches!(o, Err(e) if !matches!(e, ExecError::Cancelled(m) if m.ends_with("not started"))))
        {
            return Err(outcomes.swap_remove(position).err().unwrap_or_else(|| ExecError::Pipeline(String::new())));
        }
        let mut results = Vec::with_capacity(ready.len());
        for (name, outcome) in ready.iter().zip(outcomes) {
            results.push((name.to_string(), outcome?));
        }
        Ok(results)
    }

    /// Chooses the conditional target of `name` from its output.
    fn resolve_conditional(
        &self,
        scope: &ScopeDef<'_>,
        name: &str,
        edge: &ConditionalEdge,
        output: &Value,
    ) -> Result<String, ExecError> {
        let node = scope.nodes.get(name);
        let key = if node.is_some_and(|n| n.node_type == NodeType::Router) {
            match output.as_str() {
                Some(key) if edge.mapping.contains_key(key) => key.to_string(),
                _ => {
                    return Err(ExecError::Pipeline(format!(
                        "router '{name}' produced {}, not a valid mapping key",
                        py_repr(output)
                    )));
                }
            }
        } else {
            if output.is_null() {
                return Err(ExecError::Pipeline(format!(
                    "conditional_edges source '{name}' has no output"
                )));
            }
            let field = edge.router_field.as_deref().unwrap_or("None");
            let field =
                if field == "exit" && node.is_some_and(|n| n.node_type == NodeType::Subgraph) {
                    "_exit"
                } else {
                    field
                };
            let value = output
                .as_object()
                .and_then(|o| o.get(field))
                .ok_or_else(|| {
                    ExecError::Pipeline(format!(
                        "cannot read field '{field}' from output of type {}",
                        py_type_name(output)
                    ))
                })?;
            py_str(value)
        };
        edge.mapping.get(&key).cloned().ok_or_else(|| {
            let keys: Vec<&str> = edge.mapping.keys().map(String::as_str).collect();
            ExecError::Pipeline(format!(
                "conditional_edges from '{name}': value '{key}' not in mapping {}",
                crate::pyfmt::py_list(&keys)
            ))
        })
    }

    /// Starts a streaming node's body on its own thread; its slot is visible to `$ref` at once.
    fn spawn_streaming<'scope, 'env>(
        &'env self,
        scope: &ScopeDef<'_>,
        name: &str,
        node: &NodeDef,
        local: &mut LocalOutputs,
        threads: &'scope Scope<'scope, 'env>,
    ) -> Result<StreamingNode<'scope>, ExecError> {
        let full_id = scope.full_id(name);
        let inputs = resolve_inputs(&node.inputs, local, self.options.stream_publish_timeout)
            .map_err(|e| ExecError::Resolve {
                node_id: full_id.clone(),
                message: e.0,
            })?;
        let slot = Arc::new(StreamSlot::new(full_id.clone()));
        local.insert(name.to_string(), ScopeValue::Stream(Arc::clone(&slot)));
        let body_slot = Arc::clone(&slot);
        let scope_name = scope.name.map(str::to_string);
        let node = node.clone();
        let handle = threads.spawn(move || {
            self.run.emit(RunEvent::NodeStarted {
                node_id: full_id.clone(),
                node_type: node.node_type.as_str().to_string(),
                visit: 0,
            });
            let started = Instant::now();
            let ctx = NodeContext::new(
                &self.run,
                full_id.clone(),
                None,
                Some(Arc::clone(&body_slot)),
            );
            let outcome = match node.node_type {
                NodeType::Tool => {
                    let tool = node.tool_name().unwrap_or_default();
                    ctx.call_tool(tool, inputs)
                        .map_err(|e| ExecError::from_tool(&full_id, e))
                }
                _ => {
                    self.run_script_body(&ctx, &node, &full_id, scope_name.as_deref(), inputs, true)
                }
            };
            match outcome {
                Ok(_) => self.run.emit(RunEvent::NodeFinished {
                    node_id: full_id,
                    duration_ms: started.elapsed().as_secs_f64() * 1000.0,
                }),
                Err(_) if body_slot.cancel_token().is_set() => {
                    self.run.emit(RunEvent::NodeCancelled { node_id: full_id })
                }
                Err(error) => self.run.emit(RunEvent::NodeFailed {
                    node_id: full_id,
                    error: error.to_string(),
                    traceback: None,
                }),
            }
        });
        Ok(StreamingNode {
            name: name.to_string(),
            slot,
            handle,
        })
    }

    /// Cancels every streaming body and waits up to the grace period for each to stop.
    fn teardown_streaming(&self, streaming: Vec<StreamingNode<'_>>) {
        for node in &streaming {
            node.slot.cancel();
        }
        let deadline = Instant::now() + self.options.cancel_grace;
        for node in &streaming {
            while !node.handle.is_finished() && Instant::now() < deadline {
                std::thread::sleep(STRAGGLER_POLL);
            }
            if !node.handle.is_finished() {
                self.run.emit(RunEvent::Log {
                    node_id: Some(node.slot.node().to_string()),
                    stream: "warning".to_string(),
                    line: "streaming body ignored cancellation past the grace period".to_string(),
                });
            }
        }
    }
}
