//! Where a run's steps run: the host's isolation (`--isolation`, handed to each controller in
//! [`ISOLATION_ENV`]) combined with the plan's to the stricter of the two, and the sandbox
//! that follows from it — found and proven to work before any step starts, never skipped.

use std::path::Path;

use trellis_agents::{Isolation, Network, Sandbox};

use crate::plan::RuntimePlan;
use crate::shared::error::RuntimeError;

/// Says where a controller's steps run: `sandbox` contains each one; unset or `none`, as the
/// plan says.
pub const ISOLATION_ENV: &str = "TRELLIS_ISOLATION";

/// The isolation this process was handed. A value it cannot read counts as `sandbox`: a
/// misspelt setting must not loosen containment.
pub(crate) fn host_isolation() -> Isolation {
    match std::env::var(ISOLATION_ENV) {
        Ok(text) if text.trim().is_empty() => Isolation::None,
        Ok(text) => Isolation::parse(&text).unwrap_or(Isolation::Sandbox),
        Err(_) => Isolation::None,
    }
}

/// Sets a controller's [`ISOLATION_ENV`] to the host's setting, when the host has one.
pub(crate) fn apply_isolation(env: &mut Vec<(String, String)>, isolation: Option<Isolation>) {
    if let Some(isolation) = isolation {
        env.retain(|(name, _)| name != ISOLATION_ENV);
        env.push((ISOLATION_ENV.to_owned(), isolation.as_str().to_owned()));
    }
}

/// The sandbox `plan`'s steps run in on a host set to `host`, or `None` when neither asks for
/// one; it hides `trellis_home` from every step. A host that cannot build the sandbox refuses
/// with what to install.
pub(crate) fn plan_sandbox(
    plan: &RuntimePlan,
    host: Isolation,
    trellis_home: &Path,
) -> Result<Option<Sandbox>, RuntimeError> {
    if plan.isolation.unwrap_or_default().max(host) == Isolation::None {
        return Ok(None);
    }
    let network = plan.network.unwrap_or_default();
    host_sandbox(network, trellis_home).map(Some)
}

/// This host's sandbox with `network`, hiding `trellis_home` from every step; a host that
/// cannot build it refuses with what to install.
pub(crate) fn host_sandbox(network: Network, trellis_home: &Path) -> Result<Sandbox, RuntimeError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let sandbox = Sandbox::detect(&path, network == Network::On)?;
    Ok(sandbox.hiding([trellis_home.to_path_buf()]))
}
