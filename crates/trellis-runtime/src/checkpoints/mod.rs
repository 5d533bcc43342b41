//! Checkpoints of a run's workspace: when they are taken (the policy) and how the controller
//! records them.

pub mod api;
pub mod copy_places;
pub mod policy;
pub mod workspace;
