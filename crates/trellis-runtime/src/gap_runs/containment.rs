//! A GaP run placed in the host's sandbox (`--isolation sandbox`): its scripts, routers,
//! checkpoint judges and tools run with the directory they run in as the only writable tree
//! and the workflow's own files (its folder, skill bundles, tool manifests and modules)
//! read-only; nothing else of the user's home or the Trellis home.

use std::path::{Path, PathBuf};

use trellis_agents::{Isolation, Network};
use trellis_gap::GapContainment;

use super::admission::GapRun;
use crate::control::isolation::host_sandbox;
use crate::shared::error::RuntimeError;

/// Contains `run`'s bodies when `isolation` or the run's own record asks for the sandbox, in
/// `workspace` (the directory they run in). A workspace that holds the user's home or the Trellis home is refused (it
/// would be writable inside, and with it everything the sandbox hides), as is a workflow tree
/// that holds either (it would be readable).
pub(crate) fn contain(
    run: &mut GapRun,
    isolation: Isolation,
    workspace: &Path,
    trellis_home: &Path,
) -> Result<(), RuntimeError> {
    if isolation.max(run.isolation) == Isolation::None {
        return Ok(());
    }
    let real_home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from);
    let hidden: Vec<PathBuf> = real_home
        .iter()
        .map(PathBuf::as_path)
        .chain([trellis_home])
        .map(|tree| tree.canonicalize().unwrap_or_else(|_| tree.to_path_buf()))
        .collect();
    let holding = |tree: &Path| {
        let tree = tree.canonicalize().unwrap_or_else(|_| tree.to_path_buf());
        hidden
            .iter()
            .find(|hidden| hidden.starts_with(&tree))
            .cloned()
    };
    if let Some(held) = holding(workspace) {
        return Err(refusal(format!(
            "writes the directory it runs in ({}), which holds {}: run it from the directory \
             its scripts work in",
            workspace.display(),
            held.display()
        )));
    }
    let trees = workflow_trees(run);
    if let Some((tree, held)) = trees.iter().find_map(|tree| Some((tree, holding(tree)?))) {
        return Err(refusal(format!(
            "reads {}, which holds {}: keep the workflow, its skills and tools outside it",
            tree.display(),
            held.display()
        )));
    }
    // GaP workflows have no runtime plan: their bodies keep the network, as agents do.
    let sandbox = host_sandbox(Network::On, trellis_home)?;
    let containment =
        GapContainment::new(sandbox, workspace.to_path_buf(), real_home).reading(trees);
    run.options.python = run.options.python.clone().contained(containment);
    run.isolation = Isolation::Sandbox;
    Ok(())
}

fn refusal(what: String) -> RuntimeError {
    RuntimeError::NotSubmittable(format!("a GaP run under --isolation sandbox {what}"))
}

/// What the bridge reads of the workflow: its folder, skill bundles, the folders of tool
/// manifests (their programs may be named relative to them) and of Python tool modules.
fn workflow_trees(run: &GapRun) -> Vec<PathBuf> {
    let parent = |path: &Path| path.parent().map(Path::to_path_buf);
    let python_modules = run.python_tools.iter().filter_map(|spec| {
        let (_, target) = spec.split_once('=')?;
        let (module, _) = target.rsplit_once(':')?;
        parent(Path::new(module))
    });
    [run.workflow.workflow_dir.clone()]
        .into_iter()
        .chain(run.skills.iter().cloned())
        .chain(run.tool_manifests.iter().filter_map(|m| parent(m)))
        .chain(python_modules)
        .collect()
}
