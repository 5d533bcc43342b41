//! Where this runtime's controllers run their steps: the host's isolation (`--isolation`),
//! checked when it is set, and the runs that cannot honour a sandbox refused.

use super::Runtime;
use crate::control::isolation::host_isolation;
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

    /// GaP scripts run in the Python bridge, which is not contained yet: a host set to
    /// `--isolation sandbox` refuses GaP runs rather than run them uncontained.
    pub(super) fn refuse_contained_gap(&self) -> Result<(), RuntimeError> {
        let host = self.isolation.unwrap_or_else(host_isolation);
        if host == Isolation::Sandbox {
            return Err(RuntimeError::NotSubmittable(
                "GaP workflows cannot run in a sandbox yet (their scripts run in the Python \
                 bridge, which is not contained) and this host runs steps with --isolation \
                 sandbox: run the workflow with --isolation none"
                    .to_owned(),
            ));
        }
        Ok(())
    }
}
