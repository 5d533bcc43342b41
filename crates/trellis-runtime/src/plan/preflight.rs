//! The submission's preflight: before a run exists, check that its plan's agent lane can work
//! (the CLI installed and signed in, declared variables set) and that a gateway accepts the
//! declared key — asked with a model listing, never a model call.

use std::time::Duration;

use trellis_agents::harness_sandbox::codex_sandbox_problem;
use trellis_agents::policy::codex_config_keys;
use trellis_agents::preflight::{
    PreflightEnv, PreflightProblem, installed_cli, lane_variables, preflight_lane,
};
use trellis_agents::{AgentBinding, AgentLane, Binding, HarnessKind, Provider};

use super::runtime_plan::RuntimePlan;

/// Longest the gateway's key check may take; a gateway that does not answer is not judged.
const GATEWAY_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Every problem that would stop the plan's agents, with its fix; empty when all is well
/// (and always for plans without agent bindings). `lookup` reads the environment the run
/// will have (a caller's connection values over this host's).
/// `contained`: the run's steps run in a Trellis sandbox, so the CLI's own is not used.
pub(crate) fn preflight(
    plan: &RuntimePlan,
    lookup: &dyn Fn(&str) -> Option<String>,
    contained: bool,
) -> Vec<PreflightProblem> {
    if !plan.has_agents() {
        return Vec::new();
    }
    let path = lookup("PATH").unwrap_or_default();
    let lane = match AgentLane::choose(plan.harness, plan.provider, std::ffi::OsStr::new(&path)) {
        Ok(lane) => lane,
        Err(error) => {
            return vec![PreflightProblem {
                problem: format!("the plan's agents cannot run: {error}"),
                fix: "install the plan's agent CLI, or name one that is installed".to_owned(),
            }];
        }
    };
    let bindings: Vec<(&str, &AgentBinding)> = plan
        .nodes
        .iter()
        .filter_map(|(node, binding)| match binding {
            Binding::Agent(agent) => Some((node.as_str(), agent)),
            _ => None,
        })
        .collect();
    let env = PreflightEnv { lookup };
    let mut problems = preflight_lane(lane, &bindings, &env);
    // Uncontained Codex relies on its own sandbox, unless the user's configuration chose
    // the mode (then it is theirs to keep working).
    if problems.is_empty()
        && !contained
        && lane.harness == HarnessKind::Codex
        && !user_chose_codex_sandbox(lane.provider, lookup)
        && let Some(program) = installed_cli(lane.harness, &env)
        && let Some(problem) = codex_sandbox_problem(&program, &path)
    {
        problems.push(problem);
    }
    if problems.is_empty()
        && lane.provider == Provider::Gateway
        && let Some((_, binding)) = bindings.first()
        && let Some(problem) = probe_gateway(lane.harness, binding, lookup)
    {
        problems.push(problem);
    }
    problems
}

/// Lists the gateway's models with the declared key: a 401 or 403 means the key is wrong.
fn probe_gateway(
    harness: HarnessKind,
    binding: &AgentBinding,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Option<PreflightProblem> {
    let names = lane_variables(Provider::Gateway, binding);
    let [url_name, key_name] = names.as_slice() else {
        return None;
    };
    let base = lookup(url_name)?;
    let key = lookup(key_name)?;
    // Claude's gateway URL is the Anthropic root; Codex's, Copilot's and pi's (on its default
    // Responses wire) the OpenAI `/v1` root.
    let base = base.trim_end_matches('/');
    let url = match harness {
        HarnessKind::Claude => format!("{base}/v1/models"),
        HarnessKind::Codex | HarnessKind::Copilot | HarnessKind::Pi => format!("{base}/models"),
    };
    let status = models_status(&url, &key)?;
    matches!(status, 401 | 403).then(|| PreflightProblem {
        problem: format!("the gateway at {url_name} refused the key in {key_name} (HTTP {status})"),
        fix: format!("export a valid key in {key_name}"),
    })
}

/// The HTTP status of `GET url` with the key sent as both providers send it; `None` when the
/// gateway cannot be asked (unreachable, timed out), which the run itself will report.
fn models_status(url: &str, key: &str) -> Option<u16> {
    let url = url.to_owned();
    let key = key.to_owned();
    // A thread of its own: submit may be called inside an async runtime (the servers).
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            let client = reqwest::Client::builder()
                .timeout(GATEWAY_PROBE_TIMEOUT)
                .build()
                .ok()?;
            let response = client
                .get(&url)
                .header("x-api-key", &key)
                .header("anthropic-version", "2023-06-01")
                .bearer_auth(&key)
                .send()
                .await
                .ok()?;
            Some(response.status().as_u16())
        })
    })
    .join()
    .ok()
    .flatten()
}

/// Whether a native Codex lane's own configuration sets `sandbox_mode` (which the harness then
/// leaves alone).
fn user_chose_codex_sandbox(provider: Provider, lookup: &dyn Fn(&str) -> Option<String>) -> bool {
    if provider != Provider::Openai {
        return false;
    }
    let codex_home = lookup("CODEX_HOME")
        .filter(|dir| !dir.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| lookup("HOME").map(|home| std::path::Path::new(&home).join(".codex")));
    codex_home.is_some_and(|dir| codex_config_keys(&dir).contains(&"sandbox_mode"))
}
