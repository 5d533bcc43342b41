//! Files only their owner may read (targets, a caller's authorizations): written whole as
//! JSON to a temporary file created 0600, synced, then renamed over the old one.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use anyhow::Context as _;

/// Writes `value` as pretty JSON to `path` atomically, readable by its owner only (0600),
/// creating the parent directory when missing.
pub fn write_private_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let temporary = path.with_extension("json.tmp");
    let _ = std::fs::remove_file(&temporary);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    out.write_all(&serde_json::to_vec_pretty(value)?)
        .and_then(|()| out.sync_all())
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("cannot write {}", path.display()))
}
