//! GaP runs: admission of a GaP workflow, its ledger journal, launching it under a controller
//! and the runner that drives it. Imports `shared` and `control`.

pub(crate) mod admission;
pub(crate) mod containment;
pub(crate) mod journal;
pub(crate) mod launch;
pub(crate) mod runner;
