//! The supervisor's use of the run's workspace: a checkpoint recorded with the wave it
//! precedes, a disposable copy for each read-only verifier, and the workspace's end of run.
//! Workspace trouble never stops a run: a checkpoint that cannot be taken is logged and
//! skipped; only a verifier whose copy cannot be made settles `crash`.

use std::path::PathBuf;

use trellis_engine::Dispatch;
use trellis_graph::NodeName;
use trellis_ledger::{CheckpointBefore, CheckpointBeforeKind, LogStream, RunEvent};

use super::Supervisor;
use super::events::log_event;
use crate::checkpoints::policy::Before;
use crate::checkpoints::workspace::{RunWorkspace, TakenCheckpoint};

impl Supervisor {
    /// Hands the supervisor the run's workspace (checkpoints and verifier copies).
    pub fn with_workspace(mut self, workspace: RunWorkspace) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// The checkpoint (or the note that it failed) to record before `dispatches`, when the
    /// policy wants one. Dispatches that will reuse a predecessor's outcome do not count: the
    /// files they would have produced are not this run's.
    pub(super) fn checkpoint_before(&mut self, dispatches: &[Dispatch]) -> Option<RunEvent> {
        let first = dispatches.first()?.execution.0;
        let quiet = self.active.is_empty();
        let fresh: Vec<&NodeName> = dispatches
            .iter()
            .filter(|d| !self.ctx.reuse.would_reuse(d))
            .map(|d| &d.occurrence.node)
            .collect();
        let workspace = self.workspace.as_mut()?;
        match workspace.before_wave(fresh, quiet) {
            Ok(Some(taken)) => Some(checkpoint_event(taken, first)),
            Ok(None) => None,
            Err(error) => Some(log_event(
                None,
                LogStream::System,
                format!("no checkpoint before execution {first}: {error}"),
            )),
        }
    }

    /// The directory execution `execution` of `node` works in.
    pub(super) fn execution_workspace(
        &mut self,
        node: &NodeName,
        execution: u64,
    ) -> Result<PathBuf, String> {
        match self.workspace.as_mut() {
            Some(workspace) => workspace.workspace_for(node, execution).map_err(|e| {
                format!("cannot make a disposable copy of the workspace for {node}: {e}")
            }),
            None => Ok(self.ctx.workspace.clone()),
        }
    }

    /// Removes the copy a settled execution worked in, if any. A copy that cannot be removed
    /// now is removed with the others at the run's end.
    pub(super) fn release_copy(&mut self, execution: u64) {
        if let Some(workspace) = self.workspace.as_mut() {
            let _ = workspace.settled(execution);
        }
    }

    /// At the run's end, with every worker gone: copies removed, the end state recorded (or
    /// a succeeded run's checkpoints pruned). A failure is logged, not fatal.
    pub(super) fn finish_workspace(&mut self, succeeded: bool) -> Result<(), crate::RuntimeError> {
        let Some(workspace) = self.workspace.as_mut() else {
            return Ok(());
        };
        if let Err(error) = workspace.finish(succeeded) {
            let note = format!("the workspace's end of run was not recorded: {error}");
            self.append(&[log_event(None, LogStream::System, note)])?;
        }
        Ok(())
    }
}

fn checkpoint_event(taken: TakenCheckpoint, next_execution: u64) -> RunEvent {
    let (kind, name) = match taken.before {
        Before::Node(name) => (CheckpointBeforeKind::Node, name),
        Before::Group(name) => (CheckpointBeforeKind::Group, name),
    };
    let checkpoint = taken.checkpoint;
    RunEvent::CheckpointTaken {
        number: checkpoint.number,
        commit: checkpoint.commit.to_string(),
        tree: checkpoint.tree.to_string(),
        before: CheckpointBefore { kind, name },
        next_execution,
        files_changed: checkpoint.files_changed,
        bytes_changed: checkpoint.bytes_changed,
        timestamp_ms: trellis_ledger::store::now_ms(),
    }
}
