//! The reducer: a pure function from (graph, initial input, execution history) to decisions.
//! No I/O, no clock, no async.
//!
//! [`reduce`] replays a whole history and is the reference semantics; [`Reducer`] reaches the
//! same decisions incrementally, one recorded change at a time, for the runtime's hot loop.

mod decision;
mod error;
mod history;
mod incremental;
mod paths;
mod replay;
mod shape;

pub use decision::{Dispatch, PromotedValue, Reduction, TerminalResult, TraceDecision, Void};
pub use error::ReplayError;
pub use history::{
    ExecutionId, ExecutionRecord, ExecutionState, History, NodeInstanceId, Occurrence, VoidReason,
};
pub use incremental::Reducer;
pub use replay::reduce;

/// The failure reason of a run whose root completes without reaching a terminal node (the
/// reserved implicit sink; a verified graph never falls through).
pub const UNHANDLED_REASON: &str = "unhandled";
