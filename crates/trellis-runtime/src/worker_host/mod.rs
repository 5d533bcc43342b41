//! A worker host (`trellis worker`): claims executions queued in a PostgreSQL ledger, runs
//! them (in the run's workspace on a shared filesystem, or in a private copy fetched from the
//! serving host: `private_workspace`) and pushes their log lines while they run. Imports `shared`, `plan`, `dispatch` (the
//! queue's payloads) and `graphspec` (re-admission and node facts).

pub(crate) mod live_logs;
pub(crate) mod private_workspace;
pub(crate) mod work;
