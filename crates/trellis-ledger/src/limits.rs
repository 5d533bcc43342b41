//! Every bound the ledger enforces, named once.

use trellis_graph::limits::ceilings;

/// Largest serialized event (its JSON text) in bytes.
pub const MAX_EVENT_JSON_BYTES: usize = 1024 * 1024;
pub use trellis_run_model::{MAX_LOG_MESSAGE_BYTES, MAX_RUN_ID_BYTES, MAX_SEQUENCE};
/// Largest serialized submission (its JSON text) in bytes.
pub const MAX_SUBMISSION_JSON_BYTES: usize = 4 * 1024 * 1024;
/// Longest run title in Unicode scalar values.
pub const MAX_TITLE_CHARS: usize = 256;
/// Longest submission key in UTF-8 bytes.
pub const MAX_SUBMISSION_KEY_BYTES: usize = 256;
/// Longest graph identity in bytes (a SHA-256 hex digest with a short prefix fits).
pub const MAX_GRAPH_IDENTITY_BYTES: usize = 128;
/// Longest worker reference recorded on `node_started`, in bytes.
pub const MAX_WORKER_BYTES: usize = 256;
/// Longest GaP node id (`subgraph.node`, `<send>.target#i`) on a GaP node event, in bytes.
pub const MAX_GAP_NODE_ID_BYTES: usize = 512;
/// Longest controller host name, in bytes.
pub const MAX_HOST_BYTES: usize = 255;
/// Longest boot identity of a controller host, in bytes.
pub const MAX_BOOT_ID_BYTES: usize = 128;
/// Longest failure reason of a terminal result, in bytes.
pub const MAX_FAIL_REASON_BYTES: usize = 128;
/// Most map indices of one node occurrence (one per enclosing map; nesting is bounded by depth).
pub const MAX_MAP_INDICES: usize = trellis_graph::limits::ceilings::GRAPH_DEPTH;
/// Most node executions one run may start.
pub const MAX_EXECUTIONS_PER_RUN: u64 = ceilings::NODE_EXECUTIONS;
/// Most executions active at once in one run.
pub const MAX_ACTIVE_EXECUTIONS: usize = ceilings::PEAK_CONCURRENCY as usize;
/// Most auxiliary events (logs, token usage, GaP progress, controller attachments) per run.
/// Settling events are not counted, so a run at this bound can still finish.
pub const MAX_AUXILIARY_EVENTS_PER_RUN: u64 = 1_000_000;
/// Most events one `append` call may carry.
pub const MAX_EVENTS_PER_APPEND: usize = 4096;
/// Most events one `events_after` page may return.
pub const MAX_EVENTS_PER_PAGE: usize = 10_000;
/// Most runs one `list_runs` call may return.
pub const MAX_LISTED_RUNS: usize = 1000;
