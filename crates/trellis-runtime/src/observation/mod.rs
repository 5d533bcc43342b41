//! Reading runs: status and listing views, why a run ended (cause, a GaP run's end), watch and log streams (and
//! `attach`'s follower of one execution),
//! the runs stream and the watch line's schema. Imports `shared`, `checkpoints` (a retained
//! workspace) and `control` (observers end runs whose controller is gone).

pub(crate) mod attach;
pub(crate) mod cause;
pub(crate) mod gap_bodies;
pub(crate) mod gap_end;
pub(crate) mod logs;
pub(crate) mod runs_stream;
pub(crate) mod streams;
pub(crate) mod views;
pub(crate) mod watch_schema;
