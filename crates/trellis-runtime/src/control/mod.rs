//! Detached controllers, for either kind of run: the leases a controller holds and inherits,
//! how its process is spawned and awaited, where its steps run (`isolation`), and recovery of
//! runs whose controller is gone.
//! Imports `shared` and `checkpoints` (the copies a dead controller left).

pub(crate) mod isolation;
pub(crate) mod lease;
pub(crate) mod recovery;
pub(crate) mod spawn;
