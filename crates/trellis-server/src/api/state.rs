//! What every route handler of the run API shares ([`ApiState`]): the runtime, the bound on
//! open event streams, and how a resumed run is started.

use std::sync::Arc;

use trellis_runtime::{Runtime, StartMode};

use crate::streams::StreamSlots;

/// What every route handler shares: the runtime, the bound on open event streams, and how a
/// resumed run is started.
#[derive(Clone)]
pub struct ApiState {
    pub runtime: Arc<Runtime>,
    pub slots: StreamSlots,
    /// `Detached` (a controller process per run) in production; tests may drive runs on the
    /// request's blocking thread (`InProcess`).
    pub start: StartMode,
}

impl ApiState {
    /// Runs started through the API are driven by detached controller processes.
    pub fn new(runtime: Arc<Runtime>, slots: StreamSlots) -> Self {
        Self {
            runtime,
            slots,
            start: StartMode::Detached,
        }
    }

    /// The same state, starting runs with `start`.
    pub fn with_start(mut self, start: StartMode) -> Self {
        self.start = start;
        self
    }
}
