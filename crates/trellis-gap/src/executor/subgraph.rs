//! Subgraph calls: input binding, the nested scope (stack-safe at any legal depth), exit value,
//! bound outputs and checkpoints.

use super::scope::ScopeDef;
use super::{ExecError, Executor};
use crate::events::RunEvent;
use crate::model::{NodeDef, OBSERVATION_STREAM};
use crate::observation::stream_marker;
use crate::pyfmt::{py_list, py_str, py_type_name};
use crate::refs::{LocalOutputs, ScopeValue, resolve_input, resolve_ref};
use crate::validate::MAX_SUBGRAPH_NESTING;
use serde_json::{Map, Value};

/// Subgraph levels run on one thread's stack before the next level moves to a fresh thread.
const NESTING_LEVELS_PER_STACK: usize = 4;
/// Stack of a thread that continues a deep subgraph chain (reserved, committed only as used).
const NESTED_STACK_BYTES: usize = 16 * 1024 * 1024;

impl Executor<'_> {
    pub(crate) fn run_subgraph(
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
        if let Some(trace) = &self.run.trace {
            trace.count_visit(&call_site, visit);
        }
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
            depth: scope.depth + 1,
        };
        if inner.depth > MAX_SUBGRAPH_NESTING {
            return Err(ExecError::Pipeline(format!(
                "subgraph '{sg_name}' would nest {} levels deep; at most {MAX_SUBGRAPH_NESTING} levels run",
                inner.depth
            )));
        }
        let (outcome, inner_local) = self.run_nested_scope(&inner, bound);
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
        if !error_path {
            self.run_checkpoints(sg_name, &call_site, visit, &outputs)?;
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

    /// Runs a subgraph's scope; every few levels on a fresh thread with a large stack, so that
    /// nesting up to [`MAX_SUBGRAPH_NESTING`] never exhausts the stack of the calling thread.
    fn run_nested_scope(
        &self,
        inner: &ScopeDef<'_>,
        bound: Map<String, Value>,
    ) -> (Result<Option<String>, ExecError>, LocalOutputs) {
        let bound = ScopeValue::Value(Value::Object(bound));
        if !inner.depth.is_multiple_of(NESTING_LEVELS_PER_STACK) {
            return self.run_scope(inner, bound);
        }
        std::thread::scope(|threads| {
            let spawned = std::thread::Builder::new()
                .name(format!("gap-nest-{}", inner.depth))
                .stack_size(NESTED_STACK_BYTES)
                .spawn_scoped(threads, || self.run_scope(inner, bound.clone()));
            match spawned.map(|handle| handle.join()) {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => (
                    Err(ExecError::Pipeline(format!(
                        "subgraph scope '{}' panicked",
                        inner.name.unwrap_or_default()
                    ))),
                    LocalOutputs::new(),
                ),
                // No thread to be had: run here (the depth bound still holds).
                Err(_) => self.run_scope(inner, bound.clone()),
            }
        })
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
            if input == OBSERVATION_STREAM && self.run.observation.is_some() {
                bound.insert(input.clone(), stream_marker());
                continue;
            }
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
