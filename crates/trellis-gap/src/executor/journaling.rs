//! The executor's side of the node journal: recall before running, announce, settle.

use super::{ExecError, Executor};
use crate::events::RunEvent;
use crate::journal::SettledBody;
use serde_json::Value;

impl Executor<'_> {
    /// The output an earlier attempt settled for this body, reported as reused; `None` when
    /// there is no journal or it holds nothing for the body.
    pub(crate) fn recall_body(&self, full_id: &str, visit: u32) -> Option<Value> {
        let journal = self.options.journal.as_ref()?;
        let output = journal.recall(full_id, visit)?;
        journal.settled(full_id, visit, SettledBody::Succeeded(&output), true);
        self.run.emit(RunEvent::NodeReused {
            node_id: full_id.to_string(),
            visit,
        });
        Some(output)
    }

    /// Records the dispatch before the body runs; a dispatch the journal refuses does not run.
    pub(crate) fn announce_body(
        &self,
        full_id: &str,
        visit: u32,
        node_type: &str,
    ) -> Result<(), ExecError> {
        let Some(journal) = self.options.journal.as_ref() else {
            return Ok(());
        };
        journal
            .dispatched(full_id, visit, node_type)
            .map_err(|reason| {
                ExecError::Cancelled(format!("node '{full_id}' was not started: {reason}"))
            })
    }

    /// Reports how an announced body settled.
    pub(crate) fn settle_body(
        &self,
        full_id: &str,
        visit: u32,
        outcome: &Result<Value, ExecError>,
    ) {
        let Some(journal) = self.options.journal.as_ref() else {
            return;
        };
        let text;
        let settled = match outcome {
            Ok(output) => SettledBody::Succeeded(output),
            Err(ExecError::Cancelled(_)) => SettledBody::Cancelled,
            Err(error) => {
                text = error.to_string();
                SettledBody::Failed(&text)
            }
        };
        journal.settled(full_id, visit, settled, false);
    }
}
