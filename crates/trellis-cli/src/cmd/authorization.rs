//! The caller's per-run authorization of a remote run: which of its environment variables a
//! run sent to a team server may be given, kept in `$TRELLIS_HOME/authorizations/RUN.json`
//! (names only, never a value) so `resume` sends exactly those again and `discard-workspace`
//! revokes them.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::PathBuf;

use anyhow::{Context, anyhow};
use serde::{Deserialize, Serialize};

/// What the caller authorized for one run: the target it went to and the variables (names)
/// whose values it sends there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Authorization {
    pub run: String,
    pub target: String,
    pub server: String,
    pub variables: Vec<String>,
    /// Milliseconds since the Unix epoch.
    pub authorized_at: u64,
}

impl Authorization {
    pub fn new(run: &str, target: &str, server: &str, variables: Vec<String>) -> Self {
        let authorized_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| {
                u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
            });
        Self {
            run: run.to_owned(),
            target: target.to_owned(),
            server: server.to_owned(),
            variables,
            authorized_at,
        }
    }

    /// The variables of `required` this authorization does not cover.
    pub fn uncovered<'a>(&self, required: &'a [String]) -> Vec<&'a str> {
        required
            .iter()
            .filter(|name| !self.variables.contains(name))
            .map(String::as_str)
            .collect()
    }
}

/// `$TRELLIS_HOME/authorizations`, created (0700) when `create`.
fn directory(create: bool) -> anyhow::Result<PathBuf> {
    let home = trellis_runtime::default_home()
        .ok_or_else(|| anyhow!("cannot locate a state directory: set TRELLIS_HOME or HOME"))?;
    let dir = home.join("authorizations");
    if create {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(dir)
}

/// The record's file; the run id is the server's, checked to be one before it names a file.
fn path_of(run: &str, create: bool) -> anyhow::Result<PathBuf> {
    trellis_runtime::parse_run_id(run)?;
    Ok(directory(create)?.join(format!("{run}.json")))
}

/// Writes `authorization` atomically, readable by its owner only.
pub fn save(authorization: &Authorization) -> anyhow::Result<()> {
    let path = path_of(&authorization.run, true)?;
    crate::private_file::write_private_json(&path, authorization)
}

/// The authorization kept for `run`, if any.
pub fn load(run: &str) -> anyhow::Result<Option<Authorization>> {
    let path = path_of(run, false)?;
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{} is not an authorization record", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Deletes the authorization kept for `run`; whether there was one.
pub fn revoke(run: &str) -> anyhow::Result<bool> {
    let path = path_of(run, false)?;
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error).with_context(|| format!("cannot delete {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::Authorization;

    #[test]
    fn a_resumption_needing_more_than_was_authorized_is_uncovered() {
        let kept = Authorization::new("run", "team", "https://x", vec!["A".into(), "B".into()]);
        assert!(kept.uncovered(&["A".into()]).is_empty());
        assert!(kept.uncovered(&[]).is_empty());
        assert_eq!(kept.uncovered(&["A".into(), "C".into()]), vec!["C"]);
        let text = serde_json::to_string(&kept).unwrap();
        assert!(text.contains("\"variables\":[\"A\",\"B\"]"), "{text}");
    }
}
