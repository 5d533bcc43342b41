//! The user's own agent permission policy, probed from the configuration files the CLI will
//! read, so an uncontained run respects it instead of bypassing it: Claude Code's
//! `permissions` (managed, user and project settings) and Codex's `sandbox_mode` /
//! `approval_policy` (its `config.toml`). Inside a Trellis sandbox the probe is not asked:
//! Trellis is the boundary there.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::ExecutionRequest;
use crate::lane::HarnessKind;

/// Claude Code's system-wide settings on Linux.
const CLAUDE_MANAGED_SETTINGS: &str = "/etc/claude-code/managed-settings.json";

/// What the user authored for the CLI of one execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserPolicy {
    /// Where a permission rule or mode was found (Claude Code), else `None`.
    pub claude_permissions: Option<PathBuf>,
    /// Whether Claude Code's settings choose a default permission mode themselves.
    pub claude_default_mode: bool,
    /// Codex keys the user set (`sandbox_mode`, `approval_policy`); Trellis leaves them alone.
    pub codex_keys: Vec<&'static str>,
}

impl UserPolicy {
    /// Whether the user authored any policy for this CLI.
    pub fn is_authored(&self) -> bool {
        self.claude_permissions.is_some() || !self.codex_keys.is_empty()
    }
}

/// Probes the files `kind` reads for an execution of `request` whose CLI home is `home`
/// (`real_home`: the user's own, whose configuration then applies).
pub fn probe(
    kind: HarnessKind,
    request: &ExecutionRequest,
    home: &Path,
    real_home: bool,
) -> UserPolicy {
    match kind {
        HarnessKind::Claude => {
            let config_dir = real_home.then(|| {
                crate::access::base_value(request, "CLAUDE_CONFIG_DIR")
                    .map_or_else(|| home.join(".claude"), PathBuf::from)
            });
            let project = request.workspace.join(".claude");
            let files = [
                Some(PathBuf::from(CLAUDE_MANAGED_SETTINGS)),
                config_dir.map(|dir| dir.join("settings.json")),
                Some(project.join("settings.json")),
                Some(project.join("settings.local.json")),
            ];
            claude_policy(files.into_iter().flatten())
        }
        HarnessKind::Codex if real_home => {
            let codex_home = crate::access::base_value(request, "CODEX_HOME")
                .map_or_else(|| home.join(".codex"), PathBuf::from);
            UserPolicy {
                codex_keys: codex_config_keys(&codex_home),
                ..UserPolicy::default()
            }
        }
        // pi and Copilot (driven headless) have no approval policy a user authors here.
        HarnessKind::Codex | HarnessKind::Copilot | HarnessKind::Pi => UserPolicy::default(),
    }
}

/// The permission keys (`sandbox_mode`, `approval_policy`) the `config.toml` in `codex_home`
/// sets at its top level.
pub fn codex_config_keys(codex_home: &Path) -> Vec<&'static str> {
    let text = std::fs::read_to_string(codex_home.join("config.toml")).unwrap_or_default();
    top_level_keys(&text, &["sandbox_mode", "approval_policy"])
}

/// The first of Claude Code's settings `files` that holds permission rules or a default mode,
/// and whether any chooses a mode.
fn claude_policy(files: impl IntoIterator<Item = PathBuf>) -> UserPolicy {
    let mut policy = UserPolicy::default();
    for file in files {
        let Some(permissions) = read_json(&file).and_then(|v| v.get("permissions").cloned()) else {
            continue;
        };
        let has_rules = ["allow", "deny", "ask"].iter().any(|key| {
            permissions
                .get(key)
                .and_then(Value::as_array)
                .is_some_and(|rules| !rules.is_empty())
        });
        let has_mode = permissions.get("defaultMode").is_some_and(Value::is_string);
        if has_rules || has_mode {
            policy.claude_default_mode |= has_mode;
            policy.claude_permissions.get_or_insert(file);
        }
    }
    policy
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Which of `wanted` are set at the top level of a TOML document (before its first table).
fn top_level_keys(text: &str, wanted: &[&'static str]) -> Vec<&'static str> {
    let mut found = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            break;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().trim_matches('"');
        if let Some(known) = wanted.iter().find(|w| **w == key)
            && !found.contains(known)
        {
            found.push(*known);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_permissions_count_only_with_rules_or_a_mode() {
        let dir = std::env::temp_dir().join(format!("trellis-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let empty = write(
            "empty.json",
            r#"{"permissions": {"allow": []}, "model": "x"}"#,
        );
        let broken = write("broken.json", "{not json");
        let rules = write("rules.json", r#"{"permissions": {"deny": ["Bash(rm:*)"]}}"#);
        let mode = write("mode.json", r#"{"permissions": {"defaultMode": "plan"}}"#);
        let missing = dir.join("missing.json");

        let none = claude_policy([empty.clone(), broken.clone(), missing.clone()]);
        assert_eq!(none, UserPolicy::default());
        assert!(!none.is_authored());
        let found = claude_policy([empty.clone(), rules.clone(), mode.clone()]);
        assert_eq!(found.claude_permissions, Some(rules));
        assert!(
            found.claude_default_mode,
            "a later file's mode still counts"
        );
        assert!(found.is_authored());
        let only_mode = claude_policy([mode.clone()]);
        assert_eq!(only_mode.claude_permissions, Some(mode));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn only_top_level_keys_count() {
        let text = "model = \"o3\"\nsandbox_mode = \"read-only\"\n# approval_policy = \"x\"\n\
                    [profiles.fast]\napproval_policy = \"never\"\n";
        assert_eq!(
            top_level_keys(text, &["sandbox_mode", "approval_policy"]),
            ["sandbox_mode"]
        );
        assert!(top_level_keys("", &["sandbox_mode"]).is_empty());
    }
}
