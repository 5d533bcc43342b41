//! Per-node dispatch: tool and script bodies, routers with Send fan-out, subgraph calls.

use super::scope::ScopeDef;
use super::{ExecError, Executor};
use crate::context::NodeContext;
use crate::events::RunEvent;
use crate::model::{InputValue, NodeDef, NodeType};
use crate::pyfmt::{py_list, py_repr, py_type_name};
use crate::refs::{LocalOutputs, resolve_inputs};
use serde_json::{Map, Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// What the bridge needs to install a bundle's synthetic packages and serve `load_prompt`.
fn bundle_package(bundle: &crate::skills::SkillBundle) -> Value {
    json!({
        "name": bundle.package(),
        "dir": bundle.dir.to_string_lossy(),
        "scripts_dir": bundle.dir.join("scripts").to_string_lossy(),
        "prompts": bundle.prompts,
    })
}

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

    pub(crate) fn next_visit(&self, key: &str) -> u32 {
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
        if let Some(output) = self.recall_body(full_id, visit) {
            if let Some(trace) = trace {
                trace.record_output(full_id, visit, &output);
                trace.finish_node(full_id, None);
            }
            return Ok(output);
        }
        self.run.emit(RunEvent::NodeStarted {
            node_id: full_id.to_string(),
            node_type: node.node_type.as_str().to_string(),
            visit,
        });
        let started = Instant::now();
        let outcome = (|| {
            self.announce_body(full_id, visit, node.node_type.as_str())?;
            let body = self.run_body(full_id, scope_name, node, local, visit);
            self.settle_body(full_id, visit, &body);
            body
        })();
        self.report_outcome(full_id, started, &outcome, true);
        if let Some(trace) = trace {
            trace.flush_if_due();
        }
        outcome
    }

    /// The body of a tool or script node: inputs resolved and traced, run, output traced.
    fn run_body(
        &self,
        full_id: &str,
        scope_name: Option<&str>,
        node: &NodeDef,
        local: &LocalOutputs,
        visit: u32,
    ) -> Result<Value, ExecError> {
        let trace = self.run.trace.as_ref();
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
        scope_name: Option<&str>,
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
        let mut path = self.workflow.workflow_dir.join(script);
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bundle = scope_name
            .and_then(|sg| self.workflow.subgraphs.get(sg))
            .and_then(|sg| self.options.skill_registry.get(&sg.skill));
        let mut payload = Map::new();
        let module_name = match bundle {
            // Scripts of a bundle's subgraph import under its synthetic package, so that
            // `load_prompt(__package__, …)` finds the bundle (see docs/decisions).
            Some(bundle) => {
                let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
                if !path.is_file()
                    && let Some(canonical) = file.and_then(|f| bundle.canonical_by_file(&f))
                {
                    path = bundle.dir.join(&canonical.path);
                }
                payload.insert("package".into(), bundle_package(bundle));
                format!("{}.scripts.{stem}", bundle.package())
            }
            None => format!(
                "_gap_script_{}_{}",
                full_id.replace(['.', '#', '<', '>'], "_"),
                stem
            ),
        };
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
        crate::tools::reply_to_result(script, &reply).map_err(|e| match e {
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
            // The body's own return is journaled; Send copies are journaled one by one.
            let returned = match self.recall_body(&full_id, visit) {
                Some(returned) => returned,
                None => {
                    self.announce_body(&full_id, visit, "router")?;
                    let body = (|| {
                        let inputs = resolve_inputs(
                            &node.inputs,
                            local,
                            self.options.stream_publish_timeout,
                        )
                        .map_err(|e| ExecError::Resolve {
                            node_id: full_id.clone(),
                            message: e.0,
                        })?;
                        let ctx = NodeContext::new(
                            &self.run,
                            full_id.clone(),
                            Some(full_id.clone()),
                            None,
                        );
                        self.run_script_body(&ctx, node, &full_id, scope.name, inputs, false)
                    })();
                    self.settle_body(&full_id, visit, &body);
                    body?
                }
            };
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
}
