//! The façade's caller connections: which variables an admitted run (or a run to resume)
//! requires, and admitting and resuming with the values a team server's caller sent.

use trellis_ledger::{RunId, RunKind};

use super::Runtime;
use crate::control::spawn::{DISPATCH_ENV, controller_owned};
use crate::graphspec::admission::{AdmissionError, AdmitRequest, Admitted, admit_where};
use crate::plan::Connections;
use crate::shared::error::RuntimeError;
use crate::shared::submission::Submission;

impl Runtime {
    /// Refuses values the run does not require or that belong to the runtime. Whether each
    /// variable has a value is judged where it is needed, as for a local run: a command's by
    /// admission, an agent lane's by the preflight, a forge token by delivery preparation.
    pub(super) fn check_connections(
        &self,
        connections: &Connections,
        required: &[String],
    ) -> Result<(), RuntimeError> {
        Ok(connections.check_against(required, &controller_owned)?)
    }

    /// The connection variables (names, sorted) the run `request` describes would require:
    /// admits it without judging whether they are set, so a caller can be told what to send.
    pub fn requirements(&self, request: AdmitRequest) -> Result<Vec<String>, AdmissionError> {
        Ok(admit_where(request, &|_| true)?.connection_names())
    }

    /// Admits as [`Runtime::admit`] does, a connection variable counting as set when
    /// `connections` gives it a value (the caller's, or this host's as its operator allows);
    /// `submit` then hands those values to the run's controller, in its environment only.
    pub fn admit_for(
        &self,
        request: AdmitRequest,
        connections: Connections,
    ) -> Result<Admitted, AdmissionError> {
        let mut admitted = admit_where(request, &|name| connections.value(name).is_some())?;
        admitted.connections = connections;
        Ok(admitted)
    }

    /// The connection variables (names, sorted) a resumption of `run_id` requires: those of
    /// its stored plan (none for a GaP run).
    pub fn resume_requirements(&self, run_id: &RunId) -> Result<Vec<String>, RuntimeError> {
        self.known(run_id)?;
        let record = self.store.record(run_id)?;
        if record.kind == RunKind::Gap {
            return Ok(Vec::new());
        }
        let submission: Submission = serde_json::from_value(record.submission).map_err(|e| {
            AdmissionError::StoredSubmission {
                run: run_id.to_string(),
                reason: e.to_string(),
            }
        })?;
        Ok(submission.plan.connection_names())
    }

    /// Whether controllers started with `env` hand their executions to worker hosts.
    pub(super) fn queues(&self, env: &[(String, String)]) -> bool {
        self.store.as_postgres().is_some()
            && env
                .iter()
                .any(|(name, value)| name == DISPATCH_ENV && value.trim() == "queue")
    }
}
