//! Choosing a runtime plan when none is given (the first agent CLI found on `PATH`), and the
//! harnesses a controller runs its plan's bindings with.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use trellis_agents::lane::find_program;
use trellis_agents::{
    AgentLane, AgentOptions, Harness, HarnessKind, Sandbox, detect_installed_cli,
};
use trellis_graph::{GraphNode, GraphSpec};

use crate::plan::RuntimePlan;
use crate::shared::admission_error::AdmissionError;
use crate::shared::error::RuntimeError;

/// A plan for graphs run without one: nothing to bind for graphs without executables, else
/// the first installed agent CLI with its default model (said in `notices`).
pub(crate) fn default_plan(
    spec: &GraphSpec,
    notices: &mut Vec<String>,
) -> Result<RuntimePlan, AdmissionError> {
    let mut executables = 0;
    spec.root
        .walk(&mut |n: &GraphNode| executables += usize::from(n.executable().is_some()));
    if executables == 0 {
        return Ok(RuntimePlan::from_json(
            &json!({"nodes": BTreeMap::<String, ()>::new()}),
        )?);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let Some(kind) = detect_installed_cli(&path) else {
        return Err(AdmissionError::NoAgentCli);
    };
    let cli = kind.program_name();
    let found = find_program(cli, &path)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    notices.push(format!(
        "using {cli} ({found}) with its default model; pass --runtime-config to choose"
    ));
    let mut lane = json!({"harness": kind, "provider": kind.default_provider(), "model": ""});
    // A key the user exported for this CLI is declared (by name), so the agents get it.
    let (connection, variable) = match kind {
        HarnessKind::Claude => ("anthropic", "ANTHROPIC_API_KEY"),
        HarnessKind::Codex => ("openai", "OPENAI_API_KEY"),
        HarnessKind::Copilot => ("github", "COPILOT_GITHUB_TOKEN"),
        HarnessKind::Pi => ("anthropic", "ANTHROPIC_API_KEY"),
    };
    if std::env::var_os(variable).is_some_and(|value| !value.is_empty()) {
        lane["connections"] = json!({ connection: [variable] });
        notices.push(format!("{cli} gets the key in {variable}"));
    }
    Ok(RuntimePlan::uniform(&lane, spec)?)
}

/// The agent harness a controller uses for the plan's lane (none without agent bindings).
pub(crate) fn agent_harness(
    plan: &RuntimePlan,
    sandbox: Option<&Sandbox>,
) -> Result<Option<Arc<dyn Harness>>, RuntimeError> {
    if !plan.has_agents() {
        return Ok(None);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let lane = AgentLane::choose(plan.harness, plan.provider, &path)
        .map_err(|e| RuntimeError::ControllerStart(format!("cannot run the plan's agents: {e}")))?;
    let options = AgentOptions {
        sandbox: sandbox.cloned(),
        ..AgentOptions::default()
    };
    let harness = trellis_agents::agent_harness(lane, options);
    Ok(Some(Arc::from(harness)))
}
