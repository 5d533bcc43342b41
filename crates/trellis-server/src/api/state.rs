//! What every route handler of the run API shares ([`ApiState`]): the runtime, the bound on
//! open event streams, and how a resumed run is started.

use std::sync::Arc;

use trellis_runtime::{Runtime, ServerConnections, StartMode};

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
    /// Whether callers may send their connection values (`trellis serve`: yes, over what
    /// this host's own environment may supply); `None` (`trellis ui`): runs use this
    /// process's environment, and a request carrying values is refused.
    pub caller_connections: Option<ServerConnections>,
}

impl ApiState {
    /// Runs started through the API are driven by detached controller processes.
    pub fn new(runtime: Arc<Runtime>, slots: StreamSlots) -> Self {
        Self {
            runtime,
            slots,
            start: StartMode::Detached,
            caller_connections: None,
        }
    }

    /// The same state, taking callers' connection values over what `server` allows.
    pub fn with_caller_connections(mut self, server: ServerConnections) -> Self {
        self.caller_connections = Some(server);
        self
    }

    /// The same state, starting runs with `start`.
    pub fn with_start(mut self, start: StartMode) -> Self {
        self.start = start;
        self
    }
}
