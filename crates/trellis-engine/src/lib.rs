//! The reducer: a pure function from (verified graph, initial input, execution history) to
//! decisions. No I/O, no clock, no async. It runs only a [`RunnableGraph`]: one the verifier
//! accepted.
//!
//! [`reduce`] replays a whole history and is the reference semantics; [`Reducer`] reaches the
//! same decisions incrementally, one recorded change at a time, for the runtime's hot loop.
//! A property test keeps the two identical.
//!
//! # Identities
//!
//! * [`ExecutionId`]: new dispatches take the history's largest id + 1, + 2, … in dispatch
//!   order.
//! * [`NodeInstanceId`]: one per *occurrence* (executable node + map indices) for the whole
//!   run. The first dispatch of an occurrence takes the largest instance id + 1; crash retries,
//!   revisits in later loop rounds and revisits of a branch that lost a join all reuse it.
//! * `attempt`: every visit starts at 1. A settled `crash` with `attempt < attempts` is
//!   dispatched again at `attempt + 1` with the same instance and input; any other error, or a
//!   crash on the last attempt, is final and sets the node's `error` control.
//!
//! # Ledger positions
//!
//! Positions (`dispatchedAt`, `at`) are positive and distinct; every record is dispatched
//! after its node was reached (after the crash it retries). [`Reducer::apply`] takes changes
//! in ledger order. [`Reduction::trace`] lists the completions made at the latest position.
//!
//! # Decisions
//!
//! Dispatches come in authored pre-order (par branches in order, map items in index order).
//! Voids name running executions of a par branch that lost its join or of map items beside an
//! item that reached a terminal; while any void is pending no terminal is reported. A root that
//! completes without a terminal node fails with [`UNHANDLED_REASON`].

mod decision;
mod error;
mod history;
mod incremental;
mod outcome;
mod paths;
mod replay;
mod runnable;
mod shape;

pub use decision::{
    Dispatch, PromotedValue, Reduction, TerminalResult, TraceDecision, UNHANDLED_REASON, Void,
};
pub use error::ReplayError;
pub use history::{
    ExecutionId, ExecutionRecord, ExecutionState, History, NodeInstanceId, Occurrence, VoidReason,
};
pub use incremental::Reducer;
pub use replay::reduce;
pub use runnable::{Refusal, RunnableGraph};
