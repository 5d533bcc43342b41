//! The top-level scope of a run: its `in` value, the end node it reaches, that node's
//! recovery calls, and the run's result and failure message.

use super::scope::ScopeDef;
use super::{Executor, empty_result};
use crate::context::NodeContext;
use crate::events::{ExecutionResult, ExitStatus, RunEvent};
use crate::model::{EndStatus, NodeType, OBSERVATION_STREAM};
use crate::observation::stream_marker;
use crate::refs::ScopeValue;
use indexmap::IndexMap;
use serde_json::{Map, Value};

impl Executor<'_> {
    fn lock_cross(&self) -> std::sync::MutexGuard<'_, IndexMap<String, Map<String, Value>>> {
        self.cross_outputs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn run_top_level(&self) -> ExecutionResult {
        let mut in_value = Map::new();
        let stream = match self.run.observation {
            Some(_) => stream_marker(),
            None => Value::Null,
        };
        in_value.insert(OBSERVATION_STREAM.to_string(), stream);
        in_value.extend(self.options.inputs.clone());
        let wf = self.workflow;
        let top = ScopeDef {
            name: None,
            nodes: &wf.nodes,
            edges: &wf.edges,
            conditional: &wf.conditional_edges,
            depth: 0,
        };
        let (outcome, _) = self.run_scope(&top, ScopeValue::Value(Value::Object(in_value)));
        let outputs = self.lock_cross().clone();
        let mut result = empty_result(String::new());
        result.outputs = outputs;
        result.error = None;
        let terminal = match outcome {
            Ok(terminal) => terminal,
            Err(error) => {
                result.traceback = error.traceback();
                result.failed_node = error.failed_node();
                result.error = Some(error.to_string());
                return result;
            }
        };
        let Some(end_name) = terminal else {
            result.error = Some("workflow exited without reaching an end node".to_string());
            return result;
        };
        let Some(end) = wf
            .nodes
            .get(&end_name)
            .filter(|n| n.node_type == NodeType::End)
        else {
            result.error = Some(format!(
                "workflow terminated at node '{end_name}', which is not an end node"
            ));
            return result;
        };
        let status = end.status.unwrap_or(EndStatus::Failure);
        result.end_node = Some(end_name.clone());
        result.exit_status = Some(match status {
            EndStatus::Success => ExitStatus::Success,
            EndStatus::Failure => ExitStatus::Failure,
        });
        if !end.recovery.is_empty() {
            let ctx = NodeContext::new(
                &self.run,
                format!("{end_name}.recovery"),
                Some(format!("{end_name}.recovery")),
                None,
            );
            for call in &end.recovery {
                let outcome = ctx.call_tool(&call.tool, call.inputs.clone());
                self.run.emit(RunEvent::RecoveryCall {
                    node_id: end_name.clone(),
                    tool: call.tool.clone(),
                    error: outcome.err().map(|e| e.to_string()),
                });
            }
        }
        if status == EndStatus::Failure {
            let mut text = format!("workflow terminated at end node '{end_name}' (failure)");
            if let Some(first) = self
                .first_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
            {
                text.push_str(&format!("; first node error -- {first}"));
            }
            result.error = Some(text);
        }
        result
    }

    /// Keeps the first node failure of the run for the failure-end message.
    pub(crate) fn note_node_error(&self, full_id: &str, text: &str) {
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some(format!("{full_id}: {text}"));
        }
    }
}
