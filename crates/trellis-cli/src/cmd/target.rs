//! `trellis target add | list | remove`: named targets, kept in a small JSON file, each either
//! a team server (`http(s)://…`, with the name of the environment variable holding its token)
//! or a ledger (`postgres://…`, a SQLite path) used as `--ledger`.
//!
//! The file is `$TRELLIS_TARGETS` when set, else `$XDG_CONFIG_HOME/trellis/targets.json`, else
//! `~/.config/trellis/targets.json`, readable by its owner only. It never holds a token or a
//! password: only the names of the variables that hold them (a ledger URL with a password in it
//! is refused).

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
        /// For a `postgres://` ledger: the environment variable holding its password (read at
        /// each use; without it the driver's `PGPASSWORD` applies). The URL itself must not
        /// carry a password.
        #[arg(long, value_name = "VAR")]
        password_env: Option<String>,
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
    /// The variable holding a PostgreSQL ledger's password (the password is never stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
}

impl Target {
    /// The ledger location to open: the stored URL, with the password read from
    /// `password_env` (at this use, in memory only) added as its `password` parameter.
    pub fn ledger_location(&self, name: &str) -> anyhow::Result<Option<String>> {
        let Some(ledger) = &self.ledger else {
            return Ok(None);
        };
        if carries_password(ledger) {
            eprintln!(
                "trellis: warning: target {name:?} stores its ledger password in {}; remove \
                 it with `trellis target add {name} URL-WITHOUT-PASSWORD --password-env VAR`",
                targets_path()
                    .map(|path| path.display().to_string())
                    .unwrap_or_else(|_| "the targets file".into())
            );
        }
        let Some(variable) = &self.password_env else {
            return Ok(Some(ledger.clone()));
        };
        let password = std::env::var(variable)
            .ok()
            .filter(|value| !value.is_empty())
            .ok_or_else(|| {
                anyhow!(
                    "target {name:?} reads its ledger password from ${variable}, which is not set"
                )
            })?;
        Ok(Some(with_password_parameter(ledger, &password)))
    }
}

/// `url` with `password=PASSWORD` (percent-encoded) added to its query.
fn with_password_parameter(url: &str, password: &str) -> String {
    let mut encoded = String::with_capacity(password.len() * 3);
    for byte in password.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    let (base, fragment) = url
        .split_once('#')
        .map_or((url, None), |(b, f)| (b, Some(f)));
    let separator = if base.contains('?') { '&' } else { '?' };
    let mut joined = format!("{base}{separator}password={encoded}");
    if let Some(fragment) = fragment {
        joined.push('#');
        joined.push_str(fragment);
    }
    joined
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

/// Writes the file atomically, readable and writable by its owner only (0600).
fn save(path: &std::path::Path, file: &TargetsFile) -> anyhow::Result<()> {
    crate::private_file::write_private_json(path, file)
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
            password_env,
        } => {
            check_name(name)?;
            for variable in [token_env, password_env].into_iter().flatten() {
                let mut bytes = variable.bytes();
                let valid = bytes
                    .next()
                    .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                    && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
                if !valid {
                    bail!("{variable:?} is not an environment variable name");
                }
            }
            let target = if location.starts_with("http://") || location.starts_with("https://") {
                if token_env.is_none() {
                    bail!("a team server needs --token-env VAR (the variable holding its token)");
                }
                if password_env.is_some() {
                    bail!("--password-env is for postgres:// ledgers");
                }
                if trellis_runtime::url_has_credentials(location) {
                    bail!(
                        "the server URL carries credentials; targets never store one: drop \
                         them and give --token-env VAR"
                    );
                }
                Target {
                    url: Some(location.trim_end_matches('/').to_owned()),
                    token_env: token_env.clone(),
                    ledger: None,
                    password_env: None,
                }
            } else {
                if token_env.is_some() {
                    bail!("--token-env is for team servers (http:// or https:// URLs)");
                }
                // Refuse a malformed ledger location now rather than at first use.
                let parsed = trellis_runtime::LedgerLocation::parse(location)?;
                let postgres = matches!(parsed, trellis_runtime::LedgerLocation::Postgres(_));
                if postgres && carries_password(location) {
                    bail!(
                        "the ledger URL carries a password, and targets never store one \
                         (the file is plain text): remove it from the URL, then either export \
                         PGPASSWORD where trellis runs or name the variable that holds it with \
                         --password-env VAR"
                    );
                }
                if password_env.is_some() && !postgres {
                    bail!("--password-env is for postgres:// ledgers");
                }
                Target {
                    url: None,
                    token_env: None,
                    ledger: Some(location.clone()),
                    password_env: password_env.clone(),
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
                let mut shown = serde_json::json!({
                    "name": name,
                    "url": target.url,
                    "tokenEnv": target.token_env,
                    // A ledger URL may carry a password: shown redacted.
                    "ledger": target.ledger.as_deref().map(redacted_ledger),
                });
                if let Some(variable) = &target.password_env {
                    shown["passwordEnv"] = serde_json::json!(variable);
                }
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

/// Whether a ledger location holds a password (in its user part or a `password` parameter):
/// the shown form masks it, so the two differ.
fn carries_password(location: &str) -> bool {
    match trellis_runtime::LedgerLocation::parse(location) {
        Ok(shown @ trellis_runtime::LedgerLocation::Postgres(_)) => {
            shown.to_string() != location.trim()
        }
        _ => false,
    }
}

fn redacted_ledger(location: &str) -> String {
    trellis_runtime::LedgerLocation::parse(location)
        .map(|location| location.to_string())
        .unwrap_or_else(|_| "(invalid)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_parameter_is_encoded_and_never_shown() {
        assert_eq!(
            with_password_parameter("postgres://alice@db/trellis", "p@ss w&rd"),
            "postgres://alice@db/trellis?password=p%40ss%20w%26rd"
        );
        let joined = with_password_parameter("postgres://db/t?sslmode=require", "s3cr3t");
        assert_eq!(joined, "postgres://db/t?sslmode=require&password=s3cr3t");
        assert!(carries_password(&joined));
        assert!(!redacted_ledger(&joined).contains("s3cr3t"));
        assert!(carries_password("postgres://alice:s3cr3t@db/t"));
        assert!(!carries_password("postgres://alice@db/t?sslmode=require"));
        assert!(!carries_password("/var/lib/trellis/ledger.sqlite3"));
    }
}
