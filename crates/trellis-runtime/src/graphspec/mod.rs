//! GraphSpec runs: admission of a graph, its input and plan; preparation of a task; the
//! source a run starts from; launching a run and the controller that drives it through the
//! supervisor, reusing settled work, after preparing its environment (`environment`). Imports `shared`, `plan`, `delivery`, `checkpoints`,
//! `control`, `observation` (graph layout and bounds) and `dispatch` (queued executions).

pub(crate) mod admission;
pub(crate) mod controller;
pub(crate) mod environment;
pub(crate) mod harnesses;
pub(crate) mod launch;
pub(crate) mod preparation;
pub(crate) mod reuse;
pub(crate) mod source;
pub(crate) mod supervisor;
