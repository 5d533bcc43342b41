//! The runtime plan: which harness runs each executable node, its reference-only fields, its
//! admission against a graph and the credential preflight of its lanes. Imports no other room.

pub(crate) mod admission;
pub(crate) mod connections;
pub(crate) mod error;
pub(crate) mod preflight;
pub(crate) mod reference;
pub(crate) mod runtime_plan;

pub use connections::{Connections, ConnectionsError, ServerConnections};
pub use error::PlanError;
pub use runtime_plan::{Budget, Isolation, Network, RuntimePlan};
