//! Checkpoints of a run's workspace: when they are taken (the policy), how the controller
//! records them, and pruning what runs no longer need.

pub mod api;
pub mod copy_places;
pub mod policy;
pub mod prune;
pub mod workspace;
