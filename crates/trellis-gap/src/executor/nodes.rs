//! Per-node dispatch: tool and script bodies, routers with Send fan-out, subgraph calls.

use super::scope::ScopeDef;
use super::{ExecError, Executor};
use crate::context::NodeContext;
use crate::events::RunEvent;
use crate::model::{InputValue, NodeDef, NodeType};
use crate::pyfmt::{py_list, py_repr, py_str, py_type_name};
use crate::refs::{LocalOutputs, ScopeValue, resolve_input, resolve_inputs, resolve_ref};
use serde_json::{Map, Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

impl Executor<'_> {
    /// Runs one node of `scope` and returns its output.
    pub(crate) fn dispatch_node(
        &self,
        scope: &ScopeDef<'_>,
        name: &str,
        node: &NodeDef,
        local: &LocalOutputs,
    ) -> Result<Value, ExecError> {
        match node.node_type {
            NodeType::Subgraph => self.run_subgraph(scope, name, node, local),
            NodeType::Router => self.run_router(scope, name, node, local),
            NodeType::End => Ok(json!({"_end": true, "status": node.status.map(|s| s.as_str())})),
            NodeType::Noop => Ok(json!({})),
            NodeType::Tool | NodeType::Script => {
                self.run_traced(&scope.full_id(name), scope.name, node, local)
            }
        }
    }

    fn next_visit(&self, key: &str) -> u32 {
        let mut visits = self.visits.lock().unwrap_or_else(|p| p.into_inner());
        let counter = visits.entry(key.to_string()).or_insert(0);
        *counter += 1;
        *counter - 1
    }

    /// A tool or script node with trace start/end, input and output records.
    fn run_traced(
        &self,
        full_id: &str,
        scope_name: Option<&str>,
        node: &NodeDef,
        local: &LocalOutputs,
    ) -> Result<Value, ExecError> {
        let trace = self.run.trace.as_ref();
        let visit = match trace {
            Some(trace) => trace.start_node(full_id),
            None => self.next_visit(full_id),
        };
        self.run.emit(RunEvent::NodeStarted {
            node_id: full_id.to_string(),
            node_type: node.node_type.as_str().to_string(),
            visit,
        });
        let started = Instant::now();
        let outcome = (|| {
            let inputs = resolve_inputs(&node.inputs, local, self.options.stream_publish_timeout)
                .map_err(|e| ExecError::Resolve {
                node_id: full_id.to_string(),
                message: e.0,
            })?;
            if let Some(trace) = trace {
                trace.record_inputs(full_id, visit, &inputs);
            }
            let output = if node.node_type == NodeType::Tool {
                let ctx = NodeContext::new(&self.run, full_id, None, None);
                let tool = node.tool_name().ok_or_else(|| ExecError::Resolve {
                    node_id: full_id.to_string(),
                    message: format!(
                        "tool field must be a string, got {}",
                        node.tool.as_ref().map(py_repr).unwrap_or_default()
                    ),
                })?;
                ctx.call_tool(tool, inputs)
                    .map_err(|e| ExecError::from_tool(full_id, e))?
            } else {
                let ctx = NodeContext::new(&self.run, full_id, Some(full_id.to_string()), None);
                self.run_script_body(&ctx, node, full_id, scope_name, inputs, false)?
            };
            if let Some(trace) = trace {
                trace.record_output(full_id, visit, &output);
            }
            Ok(output)
        })();
        self.report_outcome(full_id, started, &outcome, true);
        if let Some(trace) = trace {
            trace.flush_if_due();
        }
        outcome
    }

    fn report_outcome(
        &self,
        full_id: &str,
        started: Instant,
        outcome: &Result<Value, ExecError>,
        traced: bool,
    ) {
        let trace = self.run.trace.as_ref().filter(|_| traced);
        match outcome {
            Ok(_) => {
                if let Some(trace) = trace {
                    trace.finish_node(full_id, None);
                }
                self.run.emit(RunEvent::NodeFinished {
                    node_id: full_id.to_string(),
                    duration_ms: started.elapsed().as_secs_f64() * 1000.0,
                });
            }
            Err(error) => {
                let text = error.to_string();
                if let Some(trace) = trace {
                    trace.finish_node(full_id, Some(&text));
                }
                self.note_node_error(full_id, &text);
                if matches!(error, ExecError::Cancelled(_)) {
                    self.run.emit(RunEvent::NodeCancelled {
                        node_id: full_id.to_string(),
                    });
                } else {
                    self.run.emit(RunEvent::NodeFailed {
                        node_id: full_id.to_string(),
                        error: text,
                        traceback: match error {
                            ExecError::Node { traceback, .. } => traceback.clone(),
                            _ => None,
                        },
                    });
                }
            }
        }
    }

    /// Runs a script (or router) file's `run(ctx, **inputs)` in the bridge.
    pub(crate) fn run_script_body(
        &self,
        ctx: &NodeContext<'_>,
        node: &NodeDef,
        full_id: &str,
        _scope_name: Option<&str>,
        inputs: Map<String, Value>,
        streaming: bool,
    ) -> Result<Value, ExecError> {
        let script = node.script_path().ok_or_else(|| ExecError::Resolve {
            node_id: full_id.to_string(),
            message: format!(
                "script field must be a string, got {}",
                node.script.as_ref().map(py_repr).unwrap_or_default()
            ),
        })?;
        let path = self.workflow.workflow_dir.join(script);
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let module_name = format!(
            "_gap_script_{}_{}",
            full_id.replace(['.', '#', '<', '>'], "_"),
            stem
        );
        let mut payload = Map::new();
        payload.insert("script_path".into(), json!(path.to_string_lossy()));
        payload.insert("script_rel".into(), json!(script));
        payload.insert("module_name".into(), json!(module_name));
        payload.insert("node_id".into(), json!(full_id));
        payload.insert("inputs".into(), Value::Object(inputs));
        payload.insert("streaming".into(), json!(streaming));
        let reply = ctx.bridge_request("run", payload).map_err(|e| match e {
            crate::bridge::BridgeError::Abandoned => ExecError::Cancelled(format!(
                "node '{full_id}' did not stop within the grace period after cancellation"
            )),
            crate::bridge::BridgeError::TimedOut { seconds } => ExecError::Node {
                node_id: full_id.to_string(),
                message: format!(
                    "Node '{full_id}' failed: TimeoutError: script '{script}' did not finish \
                     within {seconds}s"
                ),
                traceback: None,
                terminal: false,
            },
            other => ExecError::Node {
                node_id: full_id.to_string(),
                message: format!("Node '{full_id}' failed: BridgeError: {other}"),
                traceback: None,
                terminal: false,
            },
        })?;
        if let Some(dropped) = reply
            .get("dropped")
            .and_then(Value::as_array)
            .filter(|d| !d.is_empty())
        {
            let names: Vec<&str> = dropped.iter().filter_map(Value::as_str).collect();
            ctx.log(
                "warning",
                &format!(
                    "inputs not accepted by run() were dropped: {}",
                    py_list(&names)
                ),
            );
        }
        if reply.get("kind").and_then(Value::as_str) == Some("run_error") && ctx.is_cancelled() {
            return Err(ExecError::Cancelled(format!("node '{full_id}' cancelled")));
        }
        crate::context::reply_to_result(script, &reply).map_err(|e| match e {
            crate::tools::ToolError::Failed {
                error_type,
                message,
                traceback,
                terminal,
                ..
            } => ExecError::Node {
                node_id: full_id.to_string(),
                message: if message.is_empty() {
                    format!("Node '{full_id}' failed: {error_type}")
                } else {
                    format!("Node '{full_id}' failed: {error_type}: {message}")
                },
                traceback,
                terminal,
            },
            other => ExecError::from_tool(full_id, other),
        })
    }

    fn run_router(
        &self,
        scope: &ScopeDef<'_>,
        name: &str,
        node: &NodeDef,
        local: &LocalOutputs,
    ) -> Result<Value, ExecError> {
        let full_id = scope.full_id(name);
        let visit = self.next_visit(&full_id);
        self.run.emit(RunEvent::NodeStarted {
            node_id: full_id.clone(),
            node_type: "router".to_string(),
            visit,
        });
        let started = Instant::now();
        let outcome = (|| {
            let inputs = resolve_inputs(&node.inputs, local, self.options.stream_publish_timeout)
                .map_err(|e| ExecError::Resolve {
                node_id: full_id.clone(),
                message: e.0,
            })?;
            let ctx = NodeContext::new(&self.run, full_id.clone(), Some(full_id.clone()), None);
            let returned = self.run_script_body(&ctx, node, &full_id, scope.name, inputs, false)?;
            match returned.as_object().and_then(|o| o.get("route")) {
                Some(Value::String(route)) => Ok(Value::String(route.clone())),
                Some(Value::Array(items)) => self.run_send(&full_id, items, local),
                Some(other) => Err(ExecError::Pipeline(format!(
                    "router '{name}' returned route of type {}; expected a string or a list of Send items",
                    py_type_name(other)
                ))),
                None => Err(ExecError::Pipeline(format!(
                    "router '{name}' must return a dict with a 'route' key, got {}",
                    py_repr(&returned)
                ))),
            }
        })();
        // Routers are not traced as nodes (their sub-calls are), as in the reference.
        self.report_outcome(&full_id, started, &outcome, false);
        outcome
    }

    /// Send fan-out: runs each `{to, inputs}` copy concurrently; results in list order.
    fn run_send(
        &self,
        router_id: &str,
        items: &[Value],
        local: &LocalOutputs,
    ) -> Result<Value, ExecError> {
        let mut copies: Vec<(String, NodeDef)> = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let target = item.get("to").and_then(Value::as_str).ok_or_else(|| {
                ExecError::Pipeline(format!(
                    "router '{router_id}' route[{index}] must be {{'to', 'inputs'}}"
                ))
            })?;
            let overlay = match item.get("inputs") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m.clone(),
                Some(_) => {
                    return Err(ExecError::Pipeline(format!(
                        "router '{router_id}' route[{index}] must be {{'to', 'inputs'}}"
                    )));
                }
            };
            let declared = self
                .workflow
                .nodes
                .get(target)
                .or_else(|| {
                    self.workflow
                        .subgraphs
                        .values()
                        .find_map(|sg| sg.nodes.get(target))
                })
                .ok_or_else(|| {
                    ExecError::Pipeline(format!("Send target '{target}' is not a declared node"))
                })?;
            if !matches!(
                declared.node_type,
                NodeType::Tool | NodeType::Script | NodeType::Noop
            ) {
                return Err(ExecError::Pipeline(format!(
                    "Send target '{target}' has type '{}'; only tool, script and noop nodes can be sent to",
                    declared.node_type.as_str()
                )));
            }
            let mut copy = declared.clone();
            for (key, value) in overlay {
                copy.inputs.insert(key, InputValue::Literal(value));
            }
            copies.push((format!("<send>.{target}#{index}"), copy));
        }
        let slots: Vec<Mutex<Option<Result<Value, ExecError>>>> =
            copies.iter().map(|_| Mutex::new(None)).collect();
        let next_index = AtomicUsize::new(0);
        let workers = self.options.max_workers.clamp(1, copies.len().max(1));
        std::thread::scope(|threads| {
            for _ in 0..workers {
                threads.spawn(|| {
                    loop {
                        let index = next_index.fetch_add(1, Ordering::SeqCst);
                        let (Some((id, copy)), Some(slot)) = (copies.get(index), slots.get(index))
                        else {
                            break;
                        };
                        let outcome = if copy.node_type == NodeType::Noop {
                            Ok(json!({}))
                        } else {
                            self.run_traced(id, None, copy, local)
                        };
                        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
                    }
                });
            }
        });
        let mut results = Vec::with_capacity(copies.len());
        for slot in slots {
            let outcome = slot.into_inner().unwrap_or_else(|p| p.into_inner());
            results.push(
                outcome
                    .unwrap_or_else(|| Err(ExecError::Pipeline("Send copy did not run".into())))?,
            );
        }
        Ok(Value::Array(results))
    }

    fn run_subgraph(
        &self,
        scope: &ScopeDef<'_>,
        name: &str,
        node: &NodeDef,
        local: &LocalOutputs,
    ) -> Result<Value, ExecError> {
        let reference = node.subgraph_ref.as_deref().unwrap_or_default();
        let (sg_name, sg) = self
            .workflow
            .subgraphs
            .get_key_value(reference)
            .ok_or_else(|| {
                ExecError::Pipeline(format!(
                    "subgraph node '{name}' references unknown subgraph '{reference}'"
                ))
            })?;
        let call_site = scope.full_id(name);
        let visit = self.next_visit(&format!("subgraph:{sg_name}"));
        self.run.emit(RunEvent::SubgraphEntered {
            node_id: call_site.clone(),
            subgraph: sg_name.clone(),
            visit,
        });
        let bound = self.bind_subgraph_inputs(sg_name, &sg.inputs, node, &call_site, local)?;
        let inner = ScopeDef {
            name: Some(sg_name),
            nodes: &sg.nodes,
            edges: &sg.edges,
            conditional: &sg.conditional_edges,
        };
        let (outcome, inner_local) =
            self.run_scope(&inner, ScopeValue::Value(Value::Object(bound)));
        let (terminal, error_path) = match outcome {
            Ok(terminal) => (terminal, false),
            Err(error) if sg.on_error.is_some() && !error.is_terminal() => {
                self.run.emit(RunEvent::Log {
                    node_id: Some(call_site.clone()),
                    stream: "warning".to_string(),
                    line: format!("subgraph '{sg_name}' failed, routing to on_error: {error}"),
                });
                (None, true)
            }
            Err(error) => return Err(error),
        };
        let exit_value = match (error_path, &sg.exit.router_field) {
            (true, _) => sg.on_error.clone().unwrap_or_default(),
            (false, None) => terminal.clone().unwrap_or_default(),
            (false, Some(field)) => {
                let output = terminal.as_ref().and_then(|t| match inner_local.get(t) {
                    Some(ScopeValue::Value(v)) => Some(v.clone()),
                    _ => None,
                });
                let Some(output) = output else {
                    return Err(ExecError::Pipeline(format!(
                        "subgraph '{sg_name}': cannot resolve exit (no terminal node output)"
                    )));
                };
                let value = output.as_object().and_then(|o| o.get(field)).ok_or_else(|| {
                    ExecError::Pipeline(format!(
                        "subgraph '{sg_name}': cannot read exit field '{field}' from output of type {}",
                        py_type_name(&output)
                    ))
                })?;
                py_str(value)
            }
        };
        let mut allowed: Vec<&str> = sg.exit.success_values.iter().map(String::as_str).collect();
        allowed.extend(sg.on_error.as_deref());
        if !allowed.is_empty() && !allowed.contains(&exit_value.as_str()) {
            let success: Vec<&str> = sg.exit.success_values.iter().map(String::as_str).collect();
            return Err(ExecError::Pipeline(format!(
                "subgraph '{sg_name}' exit value '{exit_value}' is not one of success_values {} or on_error {}",
                py_list(&success),
                sg.on_error
                    .as_deref()
                    .map(|e| format!("'{e}'"))
                    .unwrap_or_else(|| "None".to_string())
            )));
        }
        let mut outputs = Map::new();
        for (output, reference) in &sg.outputs {
            // Outputs of nodes that did not run are left unbound, as in the reference.
            if let Ok(value) =
                resolve_ref(reference, &inner_local, self.options.stream_publish_timeout)
            {
                outputs.insert(output.clone(), value);
            }
        }
        {
            let mut cross = self.cross_outputs.lock().unwrap_or_else(|p| p.into_inner());
            // Most recent run wins: move the subgraph to the end (see docs/decisions).
            cross.shift_remove(sg_name);
            cross.insert(sg_name.clone(), outputs.clone());
        }
        self.run.emit(RunEvent::SubgraphExited {
            subgraph: sg_name.clone(),
            exit_value: exit_value.clone(),
            error_path,
            outputs: outputs.clone(),
        });
        let mut node_output = outputs;
        node_output.insert("_exit".to_string(), Value::String(exit_value));
        Ok(Value::Object(node_output))
    }

    /// Binds declared inputs: run inputs, then the most recent producer subgraph, then call-site inputs.
    fn bind_subgraph_inputs(
        &self,
        sg_name: &str,
        declared: &indexmap::IndexMap<String, String>,
        node: &NodeDef,
        call_site: &str,
        local: &LocalOutputs,
    ) -> Result<Map<String, Value>, ExecError> {
        let mut bound = Map::new();
        for input in declared.keys() {
            let mut value = self.options.inputs.get(input).cloned();
            {
                let cross = self.cross_outputs.lock().unwrap_or_else(|p| p.into_inner());
                for outputs in cross.values() {
                    if let Some(produced) = outputs.get(input) {
                        value = Some(produced.clone());
                    }
                }
            }
            if let Some(site_value) = node.inputs.get(input) {
                let resolved =
                    resolve_input(site_value, local, self.options.stream_publish_timeout).map_err(
                        |e| ExecError::Resolve {
                            node_id: call_site.to_string(),
                            message: e.0,
                        },
                    )?;
                value = Some(resolved);
            }
            match value {
                Some(v) if !v.is_null() => {
                    bound.insert(input.clone(), v);
                }
                _ => {
                    return Err(ExecError::Pipeline(format!(
                        "subgraph '{sg_name}' input '{input}' has no upstream producer"
                    )));
                }
            }
        }
        Ok(bound)
    }
}
