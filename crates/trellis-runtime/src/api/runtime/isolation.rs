//! Where this runtime's controllers run their steps: the host's isolation (`--isolation`),
//! checked when it is set, and a GaP run's bodies placed in it.

use std::path::Path;

use super::Runtime;
use crate::control::isolation::host_isolation;
use crate::gap_runs::admission::GapRun;
use crate::gap_runs::containment as gap_containment;
use crate::plan::Isolation;
use crate::shared::error::RuntimeError;

impl Runtime {
    /// Makes every controller this runtime starts run its steps at least as contained as
    /// `isolation` (a plan may ask for more, never less). `sandbox` is refused at once when
    /// this host cannot build one (`bwrap` missing or unusable), never silently dropped.
    pub fn with_isolation(mut self, isolation: Isolation) -> Result<Self, RuntimeError> {
        if isolation == Isolation::Sandbox {
            let path = std::env::var_os("PATH").unwrap_or_default();
            trellis_agents::Sandbox::detect(&path, true)?;
        }
        self.isolation = Some(isolation);
        Ok(self)
    }

    /// Places `run`'s bodies in this host's sandbox when it runs steps with `--isolation
    /// sandbox`, `workspace` (the directory they run in) their only writable tree.
    pub(super) fn contain_gap(
        &self,
        run: &mut GapRun,
        workspace: &Path,
    ) -> Result<(), RuntimeError> {
        let host = self.isolation.unwrap_or_else(host_isolation);
        gap_containment::contain(run, host, workspace, self.home.root())
    }
}
