//! How a harness contains its steps (`--isolation sandbox`): the placement one execution gets
//! — its workspace (or verifier copy) with the git metadata that workspace borrows, and a
//! private home (an agent's kept for its session, a command's made inside the sandbox) — and
//! the spec rewritten to run in the sandbox.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use trellis_process::{Placement, ProcessSpec, Sandbox};

use crate::access::base_value;
use crate::harness::ExecutionRequest;

/// Where a run's steps run: as the invoking user with the machine in reach, or each in a
/// sandbox of its own. Ordered: a host's setting and a plan's combine to the stricter one.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    #[default]
    None,
    Sandbox,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Sandbox => "sandbox",
        }
    }

    /// Reads `none` or `sandbox`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "none" => Some(Self::None),
            "sandbox" => Some(Self::Sandbox),
            _ => None,
        }
    }
}

/// Whether contained steps reach the network (agents need their model endpoint).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    #[default]
    On,
    None,
}

/// The placement of one execution: its workspace (with the git metadata outside it that it
/// uses: a worktree's git directory writable, a verifier copy's borrowed objects read-only)
/// and the directories of `bound` (created here) writable; `fresh` made inside.
pub(crate) fn placement(
    request: &ExecutionRequest,
    bound: &[&Path],
    fresh: &[&Path],
) -> std::io::Result<Placement> {
    let workspace = &request.workspace;
    let mut writable = vec![workspace.clone()];
    for dir in bound {
        std::fs::create_dir_all(dir)?;
        if !writable.iter().any(|known| dir.starts_with(known)) {
            writable.push(dir.to_path_buf());
        }
    }
    let mut read_only = Vec::new();
    let dot_git = workspace.join(".git");
    if let Some(git_dir) = linked_git_dir(&dot_git) {
        if let Some(common) = common_dir(&git_dir) {
            writable.push(common);
        }
        writable.push(git_dir);
    }
    read_only.extend(borrowed_objects(&dot_git.join("objects/info/alternates")));
    Ok(Placement {
        writable,
        read_only,
        real_home: base_value(request, "HOME").map(PathBuf::from),
        fresh: fresh.iter().map(|dir| dir.to_path_buf()).collect(),
    })
}

/// `spec` in the sandbox, placed for `request` with `bound` and `fresh` as [`placement`] says.
pub(crate) fn contain(
    sandbox: &Sandbox,
    spec: ProcessSpec,
    request: &ExecutionRequest,
    bound: &[&Path],
    fresh: &[&Path],
) -> Result<ProcessSpec, String> {
    let placement = placement(request, bound, fresh)
        .map_err(|e| format!("cannot prepare the sandbox of this step: {e}"))?;
    Ok(sandbox.contain(spec, &placement))
}

/// The git directory a `.git` file points to (a worktree), when it is one.
fn linked_git_dir(dot_git: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dot_git).ok()?;
    let target = text.strip_prefix("gitdir:")?.trim();
    let path = dot_git.parent()?.join(target);
    path.is_dir().then_some(path)
}

/// A worktree's common git directory (the main repository's `.git`).
fn common_dir(git_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(git_dir.join("commondir")).ok()?;
    let path = git_dir.join(text.trim());
    path.canonicalize().ok()
}

/// Object directories an `alternates` file lends.
fn borrowed_objects(alternates: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string(alternates)
        .map(|text| {
            text.lines()
                .map(str::trim)
                .filter(|line| !line.is_empty() && !line.starts_with('#'))
                .map(PathBuf::from)
                .filter(|path| path.is_absolute())
                .collect()
        })
        .unwrap_or_default()
}
