//! `trellis target add | list | remove`: named targets, kept in a small JSON file, each either
//! a team server (`http(s)://…`, with the name of the environment variable holding its token)
//! or a ledger (`postgres://…`, a SQLite path) used as `--ledger`.
//!
//! The file is `$TRELLIS_TARGETS` when set, else `$XDG_CONFIG_HOME/trellis/targets.json`, else
//! `~/.config/trellis/targets.json`. It never holds a token: only the variable's name.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, anyhow, bail};
use clap::Subcommand;
use serde::{Deserialize, Serialize};

/// The variable naming the targets file (tests, several configurations side by side).
pub const TARGETS_ENV: &str = "TRELLIS_TARGETS";

#[derive(Debug, Subcommand)]
pub enum TargetCommand {
    /// Name a team server (`http(s)://HOST:PORT`) or a ledger (`postgres://…`, a SQLite path).
    Add {
        name: String,
        location: String,
        /// The environment variable holding the server's bearer token.
        #[arg(long, value_name = "VAR")]
        token_env: Option<String>,
    },
    /// Print every target as JSON lines.
    List,
    /// Forget a target.
    Remove { name: String },
}

/// Where a named target points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// A team server's base URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The variable holding the server's token (the token itself is never stored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// A ledger location, used as `--ledger`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetsFile {
    targets: BTreeMap<String, Target>,
}

fn targets_path() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(TARGETS_ENV) {
        return Ok(PathBuf::from(path));
    }
    let config = match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(
            std::env::var_os("HOME").ok_or_else(|| anyhow!("set HOME or {TARGETS_ENV}"))?,
        )
        .join(".config"),
    };
    Ok(config.join("trellis").join("targets.json"))
}

fn load() -> anyhow::Result<(PathBuf, TargetsFile)> {
    let path = targets_path()?;
    let file = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a targets file", path.display()))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => TargetsFile::default(),
        Err(error) => {
            return Err(error).with_context(|| format!("cannot read {}", path.display()));
        }
    };
    Ok((path, file))
}

fn save(path: &PathBuf, file: &TargetsFile) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, serde_json::to_vec_pretty(file)?)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("cannot write {}", path.display()))
}

fn check_name(name: &str) -> anyhow::Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !valid {
        bail!("a target name is 1–64 letters, digits, `.`, `_` or `-`; {name:?} is not");
    }
    Ok(())
}

/// The target named `name`.
pub fn resolve(name: &str) -> anyhow::Result<Target> {
    let (path, mut file) = load()?;
    file.targets.remove(name).ok_or_else(|| {
        anyhow!(
            "no target named {name:?} in {} (see `trellis target add`)",
            path.display()
        )
    })
}

pub fn run(command: &TargetCommand) -> anyhow::Result<u8> {
    match command {
        TargetCommand::Add {
            name,
            location,
            token_env,
        } => {
            check_name(name)?;
            let target = if location.starts_with("http://") || location.starts_with("https://") {
                if token_env.is_none() {
                    bail!("a team server needs --token-env VAR (the variable holding its token)");
                }
                Target {
                    url: Some(location.trim_end_matches('/').to_owned()),
                    token_env: token_env.clone(),
                    ledger: None,
                }
            } else {
                if token_env.is_some() {
                    bail!("--token-env is for team servers (http:// or https:// URLs)");
                }
                // Refuse a malformed ledger location now rather than at first use.
                trellis_runtime::LedgerLocation::parse(location)?;
                Target {
                    url: None,
                    token_env: None,
                    ledger: Some(location.clone()),
                }
            };
            let (path, mut file) = load()?;
            file.targets.insert(name.clone(), target);
            save(&path, &file)?;
            Ok(0)
        }
        TargetCommand::List => {
            let (_, file) = load()?;
            for (name, target) in &file.targets {
                let shown = serde_json::json!({
                    "name": name,
                    "url": target.url,
                    "tokenEnv": target.token_env,
                    // A ledger URL may carry a password: shown redacted.
                    "ledger": target.ledger.as_deref().map(redacted_ledger),
                });
                outln!("{shown}");
            }
            Ok(0)
        }
        TargetCommand::Remove { name } => {
            let (path, mut file) = load()?;
            if file.targets.remove(name).is_none() {
                bail!("no target named {name:?}");
            }
            save(&path, &file)?;
            Ok(0)
        }
    }
}

fn redacted_ledger(location: &str) -> String {
    trellis_runtime::LedgerLocation::parse(location)
        .map(|location| location.to_string())
        .unwrap_or_else(|_| "(invalid)".to_owned())
}
