//! The run vocabulary, defined once and used by the engine, the ledger, the harnesses and the
//! runtime: run ids and cursors, execution states and where outcomes came from, void reasons,
//! terminal results, token usage, log streams and levels, and the one log-bounding policy.
//!
//! The serde shapes here are the ledger's stored shapes: changing one changes what every
//! existing ledger holds, so the ledger's tests pin them.

mod cursor;
mod declared_level;
mod execution;
mod ids;
mod log;
mod result;
mod usage;

pub use cursor::{Cursor, CursorError, MAX_SEQUENCE};
pub use declared_level::declared_level;
pub use execution::{ExecutionState, ReusedOutcome, SettledBy, VoidReason};
pub use ids::{MAX_RUN_ID_BYTES, RunId};
pub use log::{
    LogLevel, LogStream, MAX_LOG_MESSAGE_BYTES, bound_log_message, sanitize_log_message,
};
pub use result::TerminalResult;
pub use usage::TokenUsage;
