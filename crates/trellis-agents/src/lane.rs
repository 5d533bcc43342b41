//! Agent lanes: which CLI a plan drives and where its model traffic goes.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The agent CLI a plan drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessKind {
    Claude,
    Codex,
    Copilot,
    /// Pi (`@mariozechner/pi-coding-agent`), whose executable is `pi`.
    Pi,
}

impl HarnessKind {
    /// Every CLI, in the order [`detect_installed_cli`] prefers them.
    pub const ALL: [HarnessKind; 4] = [Self::Claude, Self::Codex, Self::Copilot, Self::Pi];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Copilot => "copilot",
            Self::Pi => "pi",
        }
    }

    /// The executable name looked up on `PATH`.
    pub fn program_name(self) -> &'static str {
        self.as_str()
    }

    /// The provider lanes a RuntimePlan may pair with each CLI, as the reference names them
    /// (pi: anthropic, openai, openrouter, bedrock, gateway). Copilot through a gateway (its
    /// "bring your own key" mode) goes beyond the reference, which only pairs it with GitHub.
    pub fn accepts(self, provider: Provider) -> bool {
        use Provider::*;
        match self {
            Self::Claude => matches!(provider, Anthropic | Openrouter | Bedrock | Gateway),
            Self::Codex => matches!(provider, Openai | Openrouter | Bedrock | Gateway),
            Self::Copilot => matches!(provider, Github | Gateway),
            Self::Pi => matches!(
                provider,
                Anthropic | Openai | Openrouter | Bedrock | Gateway
            ),
        }
    }

    /// The CLI's natural provider when a plan does not name one.
    pub fn default_provider(self) -> Provider {
        match self {
            Self::Claude => Provider::Anthropic,
            Self::Codex => Provider::Openai,
            Self::Copilot => Provider::Github,
            Self::Pi => Provider::Anthropic,
        }
    }
}

/// Where an agent CLI sends its model traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    Anthropic,
    Openai,
    Openrouter,
    Bedrock,
    Gateway,
    Github,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::Openai => "openai",
            Self::Openrouter => "openrouter",
            Self::Bedrock => "bedrock",
            Self::Gateway => "gateway",
            Self::Github => "github",
        }
    }

    /// Native lanes reuse the user's own CLI login (the real `HOME`); the others get a private
    /// home per session and credentials only from declared connections.
    pub fn is_native(self) -> bool {
        matches!(self, Self::Anthropic | Self::Openai | Self::Github)
    }
}

/// One harness + provider pair: the run's agent lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AgentLane {
    pub harness: HarnessKind,
    pub provider: Provider,
}

/// A harness/provider pair no adapter drives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {harness} harness cannot use the {provider} provider")]
pub struct UnsupportedLane {
    pub harness: &'static str,
    pub provider: &'static str,
}

/// Why no lane could be chosen for a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaneChoiceError {
    #[error("the plan names no harness and none of claude, codex, copilot, pi is on PATH")]
    NoCliInstalled,
    #[error(transparent)]
    Unsupported(#[from] UnsupportedLane),
}

impl AgentLane {
    /// A lane the adapters can drive (see [`HarnessKind::supports`]).
    pub fn new(harness: HarnessKind, provider: Provider) -> Result<Self, UnsupportedLane> {
        if harness.accepts(provider) {
            Ok(Self { harness, provider })
        } else {
            Err(UnsupportedLane {
                harness: harness.as_str(),
                provider: provider.as_str(),
            })
        }
    }

    /// The lane a plan asks for: its harness, else the first CLI installed on `path_env`; its
    /// provider, else the harness's default.
    pub fn choose(
        harness: Option<HarnessKind>,
        provider: Option<Provider>,
        path_env: &OsStr,
    ) -> Result<Self, LaneChoiceError> {
        let harness = harness
            .or_else(|| detect_installed_cli(path_env))
            .ok_or(LaneChoiceError::NoCliInstalled)?;
        let provider = provider.unwrap_or_else(|| harness.default_provider());
        Ok(Self::new(harness, provider)?)
    }

    /// The CLI with its default provider.
    pub fn native(harness: HarnessKind) -> Self {
        Self {
            harness,
            provider: harness.default_provider(),
        }
    }
}

/// The first of `claude`, `codex`, `copilot`, `pi` (in that order of preference) that is an
/// executable file in some directory of `path_env`.
pub fn detect_installed_cli(path_env: &OsStr) -> Option<HarnessKind> {
    HarnessKind::ALL
        .into_iter()
        .find(|kind| find_program(kind.program_name(), path_env).is_some())
}

/// Looks `program` up in `path_env` the way a shell would: a name containing `/` is used as
/// is; otherwise the first executable file of that name in the listed directories.
pub fn find_program(program: &str, path_env: &OsStr) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    std::env::split_paths(path_env)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_pairs_and_the_copilot_gateway_extension() {
        assert!(HarnessKind::Claude.accepts(Provider::Gateway));
        assert!(!HarnessKind::Claude.accepts(Provider::Openai));
        assert!(!HarnessKind::Copilot.accepts(Provider::Anthropic));
        assert!(HarnessKind::Copilot.accepts(Provider::Gateway));
        assert!(HarnessKind::Pi.accepts(Provider::Bedrock));
        assert!(!HarnessKind::Pi.accepts(Provider::Github));
        assert!(AgentLane::new(HarnessKind::Codex, Provider::Anthropic).is_err());
        assert_eq!(
            serde_json::to_string(&AgentLane::native(HarnessKind::Codex)).unwrap(),
            r#"{"harness":"codex","provider":"openai"}"#
        );
    }

    #[test]
    fn detection_prefers_claude_then_codex_then_copilot() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        let make = |dir: &Path, name: &str, mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            let path = dir.join(name);
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let path = std::env::join_paths([first.path(), second.path()]).unwrap();
        assert_eq!(detect_installed_cli(&path), None);
        make(first.path(), "copilot", 0o755);
        assert_eq!(detect_installed_cli(&path), Some(HarnessKind::Copilot));
        make(second.path(), "claude", 0o644);
        assert_eq!(detect_installed_cli(&path), Some(HarnessKind::Copilot));
        make(second.path(), "codex", 0o755);
        assert_eq!(detect_installed_cli(&path), Some(HarnessKind::Codex));
        make(first.path(), "claude", 0o755);
        assert_eq!(detect_installed_cli(&path), Some(HarnessKind::Claude));
        assert_eq!(
            AgentLane::choose(None, None, &path),
            Ok(AgentLane::native(HarnessKind::Claude))
        );
        assert_eq!(
            AgentLane::choose(
                Some(HarnessKind::Codex),
                Some(Provider::Gateway),
                "".as_ref()
            ),
            AgentLane::new(HarnessKind::Codex, Provider::Gateway).map_err(Into::into)
        );
        assert_eq!(
            AgentLane::choose(None, None, "".as_ref()),
            Err(LaneChoiceError::NoCliInstalled)
        );
        assert!(matches!(
            AgentLane::choose(Some(HarnessKind::Claude), Some(Provider::Github), &path),
            Err(LaneChoiceError::Unsupported(_))
        ));
    }
}
