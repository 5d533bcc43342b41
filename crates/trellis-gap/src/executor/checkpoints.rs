//! Evaluating a subgraph's checkpoint sidecar after a success-path exit (§3.6 step 7).

use super::{ExecError, Executor};
use crate::checkpoint::{CheckpointMode, CheckpointResult};
use crate::context::NodeContext;
use crate::events::RunEvent;
use serde_json::{Map, Value, json};
use std::sync::atomic::Ordering;

impl Executor<'_> {
    /// Judges `<workflow_dir>/checkpoints/<sg>.py` against a fresh world snapshot; in strict
    /// mode a failing checkpoint (or a sidecar or snapshot that cannot be read) fails the run.
    pub(crate) fn run_checkpoints(
        &self,
        sg_name: &str,
        call_site: &str,
        visit: u32,
        outputs: &Map<String, Value>,
    ) -> Result<(), ExecError> {
        let mode = self.options.checkpoints;
        let sidecar = self
            .workflow
            .workflow_dir
            .join("checkpoints")
            .join(format!("{sg_name}.py"));
        if mode == CheckpointMode::Off || !sidecar.is_file() {
            return Ok(());
        }
        let snapshot = match &self.options.connector {
            None => Ok(None),
            Some(connector) => connector.world_snapshot(),
        };
        let world = match snapshot {
            Ok(Some(world)) => world,
            Ok(None) => {
                if !self.snapshot_warned.swap(true, Ordering::SeqCst) {
                    self.warn(
                        call_site,
                        "checkpoints skipped: no connector provides a world snapshot".into(),
                    );
                }
                return Ok(());
            }
            Err(error) => {
                return self.checkpoint_problem(
                    sg_name,
                    call_site,
                    format!("world snapshot failed: {error}"),
                );
            }
        };
        let ctx = NodeContext::new(&self.run, format!("{sg_name}.checkpoints"), None, None);
        let mut payload = Map::new();
        payload.insert("path".into(), json!(sidecar.to_string_lossy()));
        payload.insert("subgraph".into(), json!(sg_name));
        payload.insert("world".into(), world);
        payload.insert("outputs".into(), Value::Object(outputs.clone()));
        let reply = match ctx.bridge_request("checkpoints", payload) {
            Ok(reply) => reply,
            Err(error) => return self.checkpoint_problem(sg_name, call_site, error.to_string()),
        };
        if reply.get("kind").and_then(Value::as_str) != Some("checkpoint_results") {
            let error = crate::tools::reply_to_result("checkpoints", &reply)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "unexpected reply".into());
            return self.checkpoint_problem(
                sg_name,
                call_site,
                format!("sidecar {}: {error}", sidecar.display()),
            );
        }
        let results: Vec<CheckpointResult> = reply
            .get("results")
            .and_then(Value::as_array)
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| CheckpointResult::from_reply(e, sg_name, visit))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(trace) = &self.run.trace {
            trace.record_checkpoints(call_site, visit, &results);
        }
        for result in &results {
            self.run.emit(RunEvent::CheckpointEvaluated {
                result: result.clone(),
            });
        }
        let failed: Vec<String> = results
            .iter()
            .filter(|r| !r.passed)
            .map(CheckpointResult::label)
            .collect();
        self.checkpoint_results
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(results);
        if failed.is_empty() {
            return Ok(());
        }
        let message = format!(
            "checkpoint(s) failed after subgraph '{sg_name}' (visit {}): {}",
            visit + 1,
            failed.join(", ")
        );
        match mode {
            CheckpointMode::Strict => Err(ExecError::Verification(message)),
            _ => {
                self.warn(call_site, message);
                Ok(())
            }
        }
    }

    fn checkpoint_problem(
        &self,
        sg_name: &str,
        call_site: &str,
        problem: String,
    ) -> Result<(), ExecError> {
        let message =
            format!("checkpoints of subgraph '{sg_name}' could not be evaluated: {problem}");
        if self.options.checkpoints == CheckpointMode::Strict {
            return Err(ExecError::Verification(message));
        }
        self.warn(call_site, message);
        Ok(())
    }

    fn warn(&self, node: &str, line: String) {
        self.run.emit(RunEvent::Log {
            node_id: Some(node.to_string()),
            stream: "warning".into(),
            line,
        });
    }
}
