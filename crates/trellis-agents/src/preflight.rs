//! Checks an agent lane can work before a run exists: the CLI is installed, signed in (asked
//! the cheapest way each CLI offers, never with a model call) or given its declared key, and
//! every connection variable the plan declares is set. Each problem comes with its fix.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use trellis_process::{ProcessEnd, ProcessLimits, ProcessSpec, Redactor, run_blocking};

use crate::access::{GATEWAY_API_KEY_ENV, GATEWAY_BASE_URL_ENV, declared_names, is_wire_api_name};
use crate::binding::AgentBinding;
use crate::failure::sign_in_advice;
use crate::lane::{AgentLane, HarnessKind, Provider, find_program};

/// Longest a status command (`claude auth status`, `codex login status`, `--version`) may take.
const STATUS_DEADLINE: Duration = Duration::from_secs(20);

/// One thing that would make the run fail, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightProblem {
    pub problem: String,
    pub fix: String,
}

impl std::fmt::Display for PreflightProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} — {}", self.problem, self.fix)
    }
}

/// Whether a CLI can reach its provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignIn {
    /// Signed in, or given a key; how (`api_key`, `claude.ai`, `ChatGPT`, …).
    Yes(String),
    No,
    /// The CLI offers no way to ask without a model call, or asking failed; why.
    Unknown(String),
}

/// What the submitting process's environment holds, read through a lookup so tests (and the
/// controller's own environment) can supply it.
pub struct PreflightEnv<'a> {
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl PreflightEnv<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(name).filter(|value| !value.is_empty())
    }

    fn path(&self) -> String {
        self.get("PATH").unwrap_or_default()
    }
}

/// The lane's CLI on `PATH`, when installed.
pub fn installed_cli(harness: HarnessKind, env: &PreflightEnv<'_>) -> Option<PathBuf> {
    find_program(harness.program_name(), OsStr::new(&env.path()))
}

/// The CLI's `--version` line.
pub fn cli_version(program: &Path, env: &PreflightEnv<'_>) -> Result<String, String> {
    let (end, stdout) = run_status(program, &["--version"], base_env(env, Vec::new()))?;
    match end {
        ProcessEnd::Exited { code: 0 } => Ok(stdout.lines().next().unwrap_or("").to_owned()),
        other => Err(other.describe()),
    }
}

/// Asks a native lane's CLI whether it is signed in, with the key the plan would hand it.
pub fn native_sign_in(
    harness: HarnessKind,
    program: &Path,
    key: Option<(&str, String)>,
    env: &PreflightEnv<'_>,
) -> SignIn {
    let extra: Vec<(String, String)> = key
        .as_ref()
        .map(|(name, value)| vec![((*name).to_owned(), value.clone())])
        .unwrap_or_default();
    match harness {
        HarnessKind::Claude => {
            // The user's configuration directory holds their sign-in.
            let mut extra = extra;
            if let Some(config) = env.get("CLAUDE_CONFIG_DIR") {
                extra.push(("CLAUDE_CONFIG_DIR".to_owned(), config));
            }
            let reply = run_status(program, &["auth", "status", "--json"], base_env(env, extra));
            match reply {
                Ok((_, stdout)) => match serde_json::from_str::<Value>(&stdout) {
                    Ok(status) if status.get("loggedIn") == Some(&Value::Bool(true)) => {
                        SignIn::Yes(
                            status
                                .get("authMethod")
                                .and_then(Value::as_str)
                                .unwrap_or("signed in")
                                .to_owned(),
                        )
                    }
                    Ok(status) if status.get("loggedIn") == Some(&Value::Bool(false)) => SignIn::No,
                    _ => SignIn::Unknown("`claude auth status` printed no status".to_owned()),
                },
                Err(why) => SignIn::Unknown(why),
            }
        }
        HarnessKind::Codex => {
            if let Some((name, _)) = key {
                return SignIn::Yes(format!("key in {name}"));
            }
            let mut extra = Vec::new();
            if let Some(codex_home) = env.get("CODEX_HOME") {
                extra.push(("CODEX_HOME".to_owned(), codex_home));
            }
            match run_status(program, &["login", "status"], base_env(env, extra)) {
                Ok((ProcessEnd::Exited { code: 0 }, stdout)) => {
                    SignIn::Yes(stdout.lines().next().unwrap_or("signed in").to_owned())
                }
                Ok((ProcessEnd::Exited { .. }, _)) => SignIn::No,
                Ok((other, _)) => SignIn::Unknown(other.describe()),
                Err(why) => SignIn::Unknown(why),
            }
        }
        HarnessKind::Pi => match key {
            Some((name, _)) => SignIn::Yes(format!("key in {name}")),
            None => SignIn::Unknown(
                "pi offers no sign-in status command; a stored login is only seen when a run \
                 starts"
                    .to_owned(),
            ),
        },
        HarnessKind::Copilot => match key {
            Some((name, _)) => SignIn::Yes(format!("token in {name}")),
            None => SignIn::Unknown(
                "the Copilot CLI offers no sign-in status command; a stored login is only \
                 seen when a run starts"
                    .to_owned(),
            ),
        },
    }
}

/// Every problem that would stop the lane's agents, for the nodes bound to it.
pub fn preflight_lane(
    lane: AgentLane,
    bindings: &[(&str, &AgentBinding)],
    env: &PreflightEnv<'_>,
) -> Vec<PreflightProblem> {
    let mut problems = Vec::new();
    let cli = lane.harness.program_name();
    let Some(program) = installed_cli(lane.harness, env) else {
        problems.push(PreflightProblem {
            problem: format!("{cli} is not installed (not found on PATH)"),
            fix: format!("install it ({}) and sign in", install_hint(lane.harness)),
        });
        return problems;
    };
    let mut missing = BTreeSet::new();
    for (node, binding) in bindings {
        for name in declared_names(binding)
            .into_iter()
            .chain(lane_variables(lane.provider, binding))
        {
            if env.get(&name).is_none() && missing.insert(name.clone()) {
                problems.push(PreflightProblem {
                    problem: format!("{name} is not set (node {node} declares it)"),
                    fix: format!("export {name} before running"),
                });
            }
        }
    }
    if lane.provider.is_native() {
        let key = bindings
            .iter()
            .find_map(|(_, binding)| native_key_name(lane.provider, binding))
            .and_then(|name| env.get(&name).map(|value| (name, value)));
        let key = key
            .as_ref()
            .map(|(name, value)| (name.as_str(), value.clone()));
        if native_sign_in(lane.harness, &program, key, env) == SignIn::No {
            problems.push(PreflightProblem {
                problem: format!("{cli} is not signed in"),
                fix: sign_in_advice(lane.harness).to_owned(),
            });
        }
    }
    problems
}

/// The key variable a native lane hands its CLI, when the binding declares one.
pub fn native_key_name(provider: Provider, binding: &AgentBinding) -> Option<String> {
    let (key, default) = match provider {
        Provider::Anthropic => ("anthropic", "ANTHROPIC_API_KEY"),
        Provider::Openai => ("openai", "OPENAI_API_KEY"),
        Provider::Github => ("github", "COPILOT_GITHUB_TOKEN"),
        _ => return None,
    };
    binding
        .connections
        .get(key)
        .and_then(|names| names.first().cloned())
        .or_else(|| {
            declared_names(binding)
                .contains(default)
                .then(|| default.to_owned())
        })
}

/// The variables a non-native lane needs even when the binding names none (its defaults).
pub fn lane_variables(provider: Provider, binding: &AgentBinding) -> Vec<String> {
    let named = |key: &str| binding.connections.get(key).cloned().unwrap_or_default();
    let pick = |names: &[String], test: &dyn Fn(&str) -> bool, default: &str| {
        names
            .iter()
            .find(|n| test(n))
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    };
    match provider {
        Provider::Gateway => {
            let names = named("gateway");
            vec![
                pick(&names, &|n| n.ends_with("URL"), GATEWAY_BASE_URL_ENV),
                pick(
                    &names,
                    &|n| !n.ends_with("URL") && !is_wire_api_name(n),
                    GATEWAY_API_KEY_ENV,
                ),
            ]
        }
        Provider::Openrouter => {
            vec![pick(&named("openrouter"), &|_| true, "OPENROUTER_API_KEY")]
        }
        Provider::Bedrock => {
            let names = named("bedrock");
            vec![
                pick(&names, &|n| n.contains("REGION"), "AWS_REGION"),
                pick(
                    &names,
                    &|n| !n.contains("REGION"),
                    "AWS_BEARER_TOKEN_BEDROCK",
                ),
            ]
        }
        Provider::Anthropic | Provider::Openai | Provider::Github => Vec::new(),
    }
}

fn install_hint(harness: HarnessKind) -> &'static str {
    match harness {
        HarnessKind::Claude => "npm install -g @anthropic-ai/claude-code",
        HarnessKind::Codex => "npm install -g @openai/codex",
        HarnessKind::Copilot => "npm install -g @github/copilot",
        HarnessKind::Pi => "npm install -g @mariozechner/pi-coding-agent",
    }
}

/// `PATH`, `HOME` and `LANG` from the environment, plus `extra`: what a native lane's CLI sees.
fn base_env(env: &PreflightEnv<'_>, extra: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut vars = vec![("PATH".to_owned(), env.path())];
    if let Some(home) = env.get("HOME") {
        vars.push(("HOME".to_owned(), home));
    }
    vars.push((
        "LANG".to_owned(),
        env.get("LANG").unwrap_or_else(|| "C.UTF-8".to_owned()),
    ));
    // Neither status command needs to reach the network; keep Copilot from updating itself.
    vars.push(("COPILOT_AUTO_UPDATE".to_owned(), "false".to_owned()));
    vars.extend(extra);
    vars
}

/// Runs a status command; its end and stdout (secrets masked).
fn run_status(
    program: &Path,
    args: &[&str],
    env: Vec<(String, String)>,
) -> Result<(ProcessEnd, String), String> {
    let secrets: Vec<String> = env
        .iter()
        .filter(|(name, _)| {
            !matches!(
                name.as_str(),
                "PATH" | "HOME" | "LANG" | "CODEX_HOME" | "COPILOT_AUTO_UPDATE"
            )
        })
        .map(|(_, value)| value.clone())
        .collect();
    let spec = ProcessSpec {
        program: program.display().to_string(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        cwd: std::env::temp_dir(),
        env,
        stdin: Vec::new(),
        redactor: Redactor::new(secrets.iter().map(String::as_str)),
    };
    let limits = ProcessLimits {
        deadline: Some(STATUS_DEADLINE),
        ..ProcessLimits::default()
    };
    let report = run_blocking(&spec, &limits, &|| false, &mut |_, _| {});
    match report.end {
        ProcessEnd::SpawnFailed(why) => Err(why),
        end => Ok((end, String::from_utf8_lossy(&report.stdout).into_owned())),
    }
}
