//! A run's environment file (`--environment FILE`, runs on a team server only): the setup and
//! startup hooks that prepare the host before the run dispatches, checked when the run is
//! submitted and stored with its submission, and the limits they run under.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most hooks of one phase.
pub const MAX_HOOKS_PER_PHASE: usize = 32;
/// Longest hook script.
pub const MAX_HOOK_SCRIPT_BYTES: usize = 64 * 1024;
/// Longest hook name.
pub const MAX_HOOK_NAME_BYTES: usize = 64;
/// The longest one hook may run (15 minutes), unless the host lowers it.
pub const DEFAULT_HOOK_LIMIT: Duration = Duration::from_secs(15 * 60);
/// The longest all of a run's hooks may run together (30 minutes), unless the host lowers it.
pub const DEFAULT_HOOKS_BUDGET: Duration = Duration::from_secs(30 * 60);
/// The file in a run's directory listing the process groups of the services its environment's
/// startup hooks left running (one id a line), while they run: what ends a run whose
/// controller died stops them.
pub const SERVICES_FILE: &str = "environment-services";
/// The run's environment directory, in its run directory.
pub const ENVIRONMENT_DIR: &str = "environment";
/// The terminal reasons of a run whose environment could not be prepared: a hook failed, a hook
/// ran over its limit, the hooks together ran over the budget.
pub const HOOK_FAILED: &str = "environment_hook_failed";
pub const HOOK_TIMED_OUT: &str = "environment_hook_timeout";
pub const BUDGET_EXHAUSTED: &str = "environment_budget_exhausted";
pub const ENVIRONMENT_REASONS: [&str; 3] = [HOOK_FAILED, HOOK_TIMED_OUT, BUDGET_EXHAUSTED];
/// The host's own limit on one hook, in milliseconds (tests lower it).
pub const HOOK_LIMIT_ENV: &str = "TRELLIS_ENVIRONMENT_HOOK_LIMIT_MS";
/// The host's own limit on all hooks of a run, in milliseconds (tests lower it).
pub const HOOKS_BUDGET_ENV: &str = "TRELLIS_ENVIRONMENT_BUDGET_MS";

/// Why an environment file is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvironmentError {
    #[error("the environment file is not valid: {0}")]
    Invalid(String),
    #[error(
        "--environment is for runs sent to a team server (--target NAME): a local run uses the \
         environment it is started from"
    )]
    LocalRun,
}

impl EnvironmentError {
    pub fn code(&self) -> &'static str {
        "runtime.invalid_environment"
    }
}

/// The environment file: hooks run by the run's controller before it dispatches anything,
/// again by every resumed successor.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvironmentSpec {
    /// Run first, in the run's environment directory (never the workspace): install tools
    /// into `$TRELLIS_TOOLS_BIN`, which every step finds first on its `PATH`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<Hook>,
    /// Run next, in the workspace: start services (background processes, stopped when the
    /// run ends), warm caches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup: Vec<Hook>,
}

/// One hook: a shell script (`/bin/sh -c`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hook {
    /// Names the hook in the run's log: 1–64 letters, digits, `.`, `_` or `-`.
    pub name: String,
    /// The script.
    pub run: String,
    /// A lower limit than the host's for this hook, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

impl EnvironmentSpec {
    /// Reads and checks an environment document.
    pub fn from_value(value: Value) -> Result<Self, EnvironmentError> {
        let spec: Self = serde_json::from_value(value)
            .map_err(|error| EnvironmentError::Invalid(error.to_string()))?;
        spec.check()?;
        Ok(spec)
    }

    /// Reads and checks an environment document's text.
    pub fn from_text(text: &str) -> Result<Self, EnvironmentError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|error| EnvironmentError::Invalid(format!("not JSON: {error}")))?;
        Self::from_value(value)
    }

    /// Whether it declares no hook at all.
    pub fn is_empty(&self) -> bool {
        self.setup.is_empty() && self.startup.is_empty()
    }

    fn check(&self) -> Result<(), EnvironmentError> {
        let invalid = |message: String| Err(EnvironmentError::Invalid(message));
        let mut names = std::collections::BTreeSet::new();
        for (phase, hooks) in [("setup", &self.setup), ("startup", &self.startup)] {
            if hooks.len() > MAX_HOOKS_PER_PHASE {
                return invalid(format!(
                    "`{phase}` holds {} hooks; at most {MAX_HOOKS_PER_PHASE}",
                    hooks.len()
                ));
            }
            for hook in hooks {
                if !valid_name(&hook.name) {
                    return invalid(format!(
                        "a hook name is 1–{MAX_HOOK_NAME_BYTES} letters, digits, `.`, `_` or \
                         `-`; {:?} in `{phase}` is not",
                        hook.name
                    ));
                }
                if !names.insert(hook.name.as_str()) {
                    return invalid(format!("two hooks are named {:?}", hook.name));
                }
                if hook.run.trim().is_empty() || hook.run.len() > MAX_HOOK_SCRIPT_BYTES {
                    return invalid(format!(
                        "hook {:?}: `run` is a script of 1 to {MAX_HOOK_SCRIPT_BYTES} bytes",
                        hook.name
                    ));
                }
                if hook.run.contains('\0') {
                    return invalid(format!("hook {:?}: `run` holds a NUL byte", hook.name));
                }
                let most = DEFAULT_HOOK_LIMIT.as_secs();
                if hook
                    .timeout_seconds
                    .is_some_and(|seconds| seconds == 0 || seconds > most)
                {
                    return invalid(format!(
                        "hook {:?}: `timeoutSeconds` is 1 to {most}",
                        hook.name
                    ));
                }
            }
        }
        Ok(())
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_HOOK_NAME_BYTES
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

/// The limits hooks run under on this host: the defaults, lowered (never raised) by
/// [`HOOK_LIMIT_ENV`] and [`HOOKS_BUDGET_ENV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookLimits {
    pub per_hook: Duration,
    pub budget: Duration,
}

impl HookLimits {
    pub fn from_env() -> Self {
        let read = |name: &str, default: Duration| {
            std::env::var(name)
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .filter(|&ms| ms > 0)
                .map_or(default, |ms| Duration::from_millis(ms).min(default))
        };
        Self {
            per_hook: read(HOOK_LIMIT_ENV, DEFAULT_HOOK_LIMIT),
            budget: read(HOOKS_BUDGET_ENV, DEFAULT_HOOKS_BUDGET),
        }
    }

    /// The limit of `hook` alone: the host's, or the lower one the hook asks for.
    pub fn of(&self, hook: &Hook) -> Duration {
        hook.timeout_seconds.map_or(self.per_hook, |seconds| {
            Duration::from_secs(seconds).min(self.per_hook)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_well_formed_file_reads_and_every_malformed_one_is_refused_with_its_reason() {
        let spec = EnvironmentSpec::from_value(json!({
            "setup": [{"name": "tools", "run": "true", "timeoutSeconds": 60}],
            "startup": [{"name": "db", "run": "sleep 1 &"}]
        }))
        .expect("valid");
        assert_eq!(spec.setup[0].timeout_seconds, Some(60));
        assert!(!spec.is_empty());
        for (document, says) in [
            (
                json!({"setup": [{"name": "a", "run": "x", "extra": 1}]}),
                "unknown field",
            ),
            (json!({"prepare": []}), "unknown field"),
            (json!({"setup": [{"name": "a b", "run": "x"}]}), "hook name"),
            (
                json!({"setup": [{"name": "a", "run": "  "}]}),
                "`run` is a script",
            ),
            (
                json!({"setup": [{"name": "a", "run": "x"}], "startup": [{"name": "a", "run": "y"}]}),
                "two hooks",
            ),
            (
                json!({"setup": [{"name": "a", "run": "x", "timeoutSeconds": 901}]}),
                "1 to 900",
            ),
            (
                json!({"setup": [{"name": "a", "run": "x", "timeoutSeconds": 0}]}),
                "1 to 900",
            ),
            (json!({"setup": [{"name": "a", "run": "x\u{0}"}]}), "NUL"),
        ] {
            let error = EnvironmentSpec::from_value(document.clone()).expect_err("refused");
            assert_eq!(error.code(), "runtime.invalid_environment");
            assert!(error.to_string().contains(says), "{document}: {error}");
        }
        assert!(EnvironmentSpec::from_text("{").is_err());
    }

    #[test]
    fn the_example_environment_file_is_valid() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/environment/environment.json");
        let text = std::fs::read_to_string(&path).expect("the example exists");
        let spec = EnvironmentSpec::from_text(&text).expect("the example is valid");
        assert_eq!(spec.setup.len(), 1);
        assert_eq!(spec.startup.len(), 2);
    }

    #[test]
    fn a_hook_may_lower_its_limit_but_never_raise_it() {
        let limits = HookLimits {
            per_hook: Duration::from_secs(100),
            budget: Duration::from_secs(200),
        };
        let hook = |timeout_seconds| Hook {
            name: "h".into(),
            run: "true".into(),
            timeout_seconds,
        };
        assert_eq!(limits.of(&hook(None)), Duration::from_secs(100));
        assert_eq!(limits.of(&hook(Some(5))), Duration::from_secs(5));
        assert_eq!(limits.of(&hook(Some(500))), Duration::from_secs(100));
    }
}
