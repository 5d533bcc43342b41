//! What the team routes share ([`TeamState`]): the run API's state and the root under which
//! submitted runs get their workspaces.

use std::path::PathBuf;
use std::sync::Arc;

use trellis_runtime::{EnvironmentSpec, Runtime, ServerConnections, StartMode};

use crate::api::state::ApiState;
use crate::streams::StreamSlots;
use crate::team::workspaces::{WorkspaceError, WorkspaceRoot};

/// What the team routes share: the run API's state and where submitted runs work.
#[derive(Clone)]
pub struct TeamState {
    pub(super) api: ApiState,
    pub(super) workspaces: Arc<WorkspaceRoot>,
    /// The environment a run gets when its submission names none (`serve --environment`).
    pub(super) default_environment: Option<Arc<EnvironmentSpec>>,
}

impl TeamState {
    /// Runs are driven by detached controller processes (`start` = `Detached`) in production;
    /// tests may drive them on the request's blocking thread (`InProcess`). Workspaces of
    /// submitted runs are directories under `workspaces`.
    pub fn new(
        runtime: Arc<Runtime>,
        workspaces: PathBuf,
        start: StartMode,
        max_streams: usize,
    ) -> Result<Self, WorkspaceError> {
        Ok(Self {
            api: ApiState::new(runtime, StreamSlots::new(max_streams))
                .with_start(start)
                .with_caller_connections(ServerConnections::All),
            workspaces: Arc::new(WorkspaceRoot::open(workspaces)?),
            default_environment: None,
        })
    }

    /// The same state, runs that name no environment (and do not refuse one) getting
    /// `environment`.
    pub fn with_default_environment(mut self, environment: Option<EnvironmentSpec>) -> Self {
        self.default_environment = environment.map(Arc::new);
        self
    }

    /// The same state, this host's environment supplying only the connection variables
    /// `server` allows (default: every one a caller did not send).
    pub fn with_server_connections(mut self, server: ServerConnections) -> Self {
        self.api = self.api.with_caller_connections(server);
        self
    }

    /// What this host's environment may supply to callers' runs.
    pub(super) fn server_connections(&self) -> ServerConnections {
        self.api.caller_connections.clone().unwrap_or_default()
    }
}
