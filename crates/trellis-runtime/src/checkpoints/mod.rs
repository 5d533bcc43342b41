//! Checkpoints of a run's workspace: when they are taken (the policy), how the controller
//! records them, listing and restoring them, and pruning what runs no longer need. Imports
//! `shared` only: what it needs from above (a run's liveness) comes in as a parameter.

pub(crate) mod copy_places;
pub(crate) mod operations;
pub(crate) mod policy;
pub(crate) mod prune;
pub(crate) mod workspace;
