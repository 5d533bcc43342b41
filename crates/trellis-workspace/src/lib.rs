//! A run's workspace over git's own object store: checkpoints recorded as commits in a private
//! reference namespace (the user's index, `HEAD`, branches and stash are never written),
//! byte-exact restore of a checkpoint, a run's source fetched through a mirror and cloned at an
//! exact revision, fresh worktrees for runs that must leave the user's
//! checkout alone, and disposable copies for verifiers. Every git command goes through the
//! process runner (`trellis-process`).
#![forbid(unsafe_code)]

mod checkpoint;
mod copy;
mod error;
mod fast_commit;
mod git;
mod index_file;
mod packs;
mod references;
mod repo;
pub mod source;
mod staged;
mod stamp;
mod transfer;
mod worktree;

pub use checkpoint::{
    CHECKPOINT_NAMESPACE, Checkpoint, Previous, Restored, RunCheckpoints, run_namespace,
};
pub use copy::{DisposableCopy, force_remove_dir};
pub use error::WorkspaceError;
pub use git::{CHECKPOINT_AUTHOR, GIT_TIMEOUT, Git, MAX_GIT_OUTPUT_BYTES};
pub use references::{
    SAVED_NAMESPACE, TrellisReference, delete_references, references_with_messages,
    trellis_references,
};
pub use repo::{ObjectId, Repository};
pub use transfer::{
    REMOTE_NAMESPACE, RemoteEnd, apply_changes, bundle_head, commit_at, fetch_bundle,
    remote_reference, start_workspace, tree_of, write_bundle,
};
pub use worktree::{add_worktree, remove_worktree, worktree_base};
