//! Runtime bindings: how one executable node is run (an agent CLI, a command, or git delivery).
//! Bindings name environment variables, never their values.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::lane::{HarnessKind, Provider};

/// How one executable node runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Binding {
    Agent(AgentBinding),
    Command(CommandBinding),
    GitDelivery(DeliveryBinding),
}

/// Effort passed through to the agent CLI untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

impl Effort {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Xhigh => "xhigh",
            Self::Max => "max",
        }
    }
}

/// Whether an agent session lives for one execution or for the node instance (loop rounds and
/// crash retries of the same occurrence reuse it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionScope {
    #[default]
    Execution,
    NodeInstance,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// An agent CLI binding; the plan's harness and provider choose the CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentBinding {
    /// Opaque model id handed to the CLI; empty means the CLI's default model.
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub session_scope: SessionScope,
    /// Connection key → environment variable names handed to the CLI.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub connections: BTreeMap<String, Vec<String>>,
    /// Cancel the agent (settling `timeout`) after this much silence on its event stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// Another harness and provider for this node, as reference plans may name one. Trellis
    /// runs every agent node on the plan's lane: admission accepts a lane and says it is
    /// ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<NodeLane>,
}

/// A per-node harness and provider pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeLane {
    pub harness: HarnessKind,
    pub provider: Provider,
}

/// The exec harness: run a program with the node input as JSON on stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandBinding {
    /// Program and arguments; the program is looked up on `PATH` unless it contains a `/`.
    pub command: Vec<String>,
    /// Working directory relative to the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Literal, non-secret environment values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Names of environment variables passed through from the submitting shell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
}

impl CommandBinding {
    /// The working directory inside `workspace`: the workspace itself without `cwd`, else
    /// `cwd` below it. An absolute `cwd` or one with `..` is refused: a plan never reaches
    /// outside the run's workspace.
    pub fn working_directory(&self, workspace: &Path) -> Result<PathBuf, String> {
        let Some(relative) = &self.cwd else {
            return Ok(workspace.to_path_buf());
        };
        let path = Path::new(relative);
        if path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!(
                "command cwd {relative:?} must be a relative path inside the workspace"
            ));
        }
        Ok(workspace.join(path))
    }
}

/// How a git delivery verifier treats pull-request feedback.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullRequestFeedback {
    #[default]
    Consider,
    Ignore,
}

/// A built-in git delivery verifier (push, pull request, merge).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeliveryBinding {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub connections: BTreeMap<String, Vec<String>>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub pull_request_feedback: PullRequestFeedback,
    /// The git remote pushed to (default `origin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

impl Binding {
    /// Every environment variable name this binding asks for.
    pub fn connection_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = match self {
            Self::Agent(b) => b
                .connections
                .values()
                .flatten()
                .map(String::as_str)
                .collect(),
            Self::Command(b) => b.connections.iter().map(String::as_str).collect(),
            Self::GitDelivery(b) => b
                .connections
                .values()
                .flatten()
                .map(String::as_str)
                .collect(),
        };
        names.sort_unstable();
        names.dedup();
        names
    }

    pub fn idle_timeout_ms(&self) -> Option<u64> {
        match self {
            Self::Agent(b) => b.idle_timeout_ms,
            Self::Command(b) => b.idle_timeout_ms,
            Self::GitDelivery(_) => None,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Agent(_) => "agent",
            Self::Command(_) => "command",
            Self::GitDelivery(_) => "git_delivery",
        }
    }
}

/// Checks an environment variable name: `[A-Za-z_][A-Za-z0-9_]*`, at most 128 bytes.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 128
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(cwd: Option<&str>) -> CommandBinding {
        CommandBinding {
            command: vec!["true".to_owned()],
            cwd: cwd.map(str::to_owned),
            env: BTreeMap::new(),
            connections: vec![],
            idle_timeout_ms: None,
        }
    }

    #[test]
    fn a_command_cwd_stays_inside_the_workspace() {
        let ws = Path::new("/w");
        assert_eq!(command(None).working_directory(ws).unwrap(), ws);
        assert_eq!(
            command(Some("a/b")).working_directory(ws).unwrap(),
            Path::new("/w/a/b")
        );
        assert!(command(Some("../x")).working_directory(ws).is_err());
        assert!(command(Some("/etc")).working_directory(ws).is_err());
    }
}
