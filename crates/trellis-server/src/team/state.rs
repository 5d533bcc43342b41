//! What the team routes share ([`TeamState`]): the run API's state and the root under which
//! submitted runs get their workspaces.

use std::path::PathBuf;
use std::sync::Arc;

use trellis_runtime::{Runtime, StartMode};

use crate::api::state::ApiState;
use crate::streams::StreamSlots;
use crate::team::workspaces::{WorkspaceError, WorkspaceRoot};

/// What the team routes share: the run API's state and where submitted runs work.
#[derive(Clone)]
pub struct TeamState {
    pub(super) api: ApiState,
    pub(super) workspaces: Arc<WorkspaceRoot>,
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
            api: ApiState::new(runtime, StreamSlots::new(max_streams)).with_start(start),
            workspaces: Arc::new(WorkspaceRoot::open(workspaces)?),
        })
    }
}
