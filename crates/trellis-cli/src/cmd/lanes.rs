//! Choosing a runtime plan when none is given: the first agent CLI found on `PATH`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::bail;
use serde_json::json;
use trellis_graph::{GraphNode, GraphSpec};
use trellis_runtime::plan::RuntimePlan;

const NO_AGENT_CLI: &str = "no runtime plan was given and no agent CLI is on PATH. Trellis runs \
agent steps through Claude Code, Codex or the GitHub Copilot CLI: install one and sign in \
(`npm install -g @anthropic-ai/claude-code` then `claude`, or `npm install -g @openai/codex` \
then `codex login`), and run again; Trellis uses the first of claude, codex, copilot it finds. \
To run without any model, bind every step to a command instead: \
--uniform-runtime-config FILE with {\"kind\":\"command\",\"command\":[\"./worker\"]}, or an \
exact plan with --runtime-config FILE (see README, \"Running without a model\").";

/// Where `program` is on `PATH`, if anywhere.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A plan for graphs run without `--runtime-config`: nothing to bind for graphs without
/// executables, else the first installed agent CLI with its default model.
pub fn default_plan(spec: &GraphSpec) -> anyhow::Result<RuntimePlan> {
    let mut executables = 0;
    spec.root
        .walk(&mut |n: &GraphNode| executables += usize::from(n.executable().is_some()));
    if executables == 0 {
        return Ok(RuntimePlan::from_json(
            &json!({"nodes": BTreeMap::<String, ()>::new()}),
        )?);
    }
    let lanes = [
        ("claude", "anthropic"),
        ("codex", "openai"),
        ("copilot", "github"),
    ];
    for (cli, provider) in lanes {
        if let Some(found) = find_on_path(cli) {
            eprintln!(
                "trellis: using {cli} ({}) with its default model; pass --runtime-config to choose",
                found.display()
            );
            let lane = json!({"harness": cli, "provider": provider, "model": ""});
            return Ok(RuntimePlan::uniform(&lane, spec)?);
        }
    }
    bail!(NO_AGENT_CLI)
}

/// The agent harness a controller uses for the plan's lane.
pub fn agent_harness(
    plan: &RuntimePlan,
) -> Result<Option<std::sync::Arc<dyn trellis_agents::Harness>>, trellis_runtime::RuntimeError> {
    if !plan.has_agents() {
        return Ok(None);
    }
    Err(trellis_runtime::RuntimeError::Invalid(
        "agent harnesses are not available in this build".into(),
    ))
}
