//! A worker host (`trellis worker`): claims executions queued in a PostgreSQL ledger, runs
//! them and pushes their log lines while they run. Imports `shared`, `plan`, `dispatch` (the
//! queue's payloads) and `graphspec` (re-admission and node facts).

pub(crate) mod live_logs;
pub(crate) mod work;
