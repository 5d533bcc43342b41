//! Repeated submissions whose run never started: a host that died between creating a run and
//! starting its controller left a run nobody drives; the client's retry (same submission key)
//! gets a run that runs instead of that dead one.

use trellis_ledger::{RunId, TerminalResult};

use super::Runtime;
use crate::api::options::{Receipt, ResumeOptions, StartMode};
use crate::control::recovery::TerminalReason;
use crate::plan::Connections;
use crate::shared::error::RuntimeError;

/// How many dead, never-started runs one retry follows or revives before answering.
const MAX_REVIVALS: usize = 4;

impl Runtime {
    /// Answers a submission that matched an existing run: when no controller ever attached to
    /// that run and none is starting it (its lease is free), the run is ended `runtime_lost`
    /// (if nobody has yet) and resumed, and its successor is the answer; a successor an
    /// earlier retry made is followed. Any other run is the answer as it is. A revived run's
    /// connection variables take their values from `connections`, as the retry's would have.
    pub(super) fn revive_unstarted(
        &self,
        receipt: Receipt,
        start: StartMode,
        connections: &Connections,
    ) -> Result<Receipt, RuntimeError> {
        let mut receipt = receipt;
        for _ in 0..MAX_REVIVALS {
            if receipt.created {
                return Ok(receipt);
            }
            let head = self.store.head(&receipt.run_id)?;
            if head.progress.controller.is_some() {
                return Ok(receipt);
            }
            if let Some(successor) = head.successor {
                receipt = Receipt {
                    run_id: successor,
                    created: false,
                };
                continue;
            }
            // Ends it `runtime_lost` when its lease is free; a starter holding the lease
            // (a concurrent identical submission) keeps it alive.
            self.known(&receipt.run_id)?;
            let head = self.store.head(&receipt.run_id)?;
            if head.progress.controller.is_some() || !never_started_and_lost(&head.progress) {
                return Ok(receipt);
            }
            let options = ResumeOptions {
                start,
                from_checkpoint: None,
                force: false,
            };
            receipt = match self.resume_with(&receipt.run_id, options, connections.clone()) {
                Ok(next) => next,
                Err(RuntimeError::AlreadyResumed { successor, .. }) => Receipt {
                    run_id: RunId::new(&successor)
                        .map_err(|e| RuntimeError::InvalidRunId(successor.clone(), e))?,
                    created: false,
                },
                Err(other) => return Err(other),
            };
        }
        Ok(receipt)
    }
}

/// A run that ended `runtime_lost` without a controller ever attaching: nothing of it ran.
fn never_started_and_lost(progress: &trellis_ledger::RunProgress) -> bool {
    progress.controller.is_none()
        && progress.executions_started == 0
        && matches!(
            &progress.terminal,
            Some(TerminalResult::Failed { reason }) if reason == TerminalReason::RuntimeLost.label()
        )
}
