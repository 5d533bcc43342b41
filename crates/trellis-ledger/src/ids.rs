//! The small closed vocabularies of a run: its kind and its phase.

use serde::{Deserialize, Serialize};

pub use trellis_run_model::RunId;

/// Which graph language a run executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// A GraphSpec `openengine.graph.full/v1` run.
    Graphspec,
    /// A GaP `workflow.json` v3 run.
    Gap,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Graphspec => "graphspec",
            Self::Gap => "gap",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "graphspec" => Some(Self::Graphspec),
            "gap" => Some(Self::Gap),
            _ => None,
        }
    }
}

/// Where a run is in its life: `admitted → running → (stopping) → finished`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Admitted,
    Running,
    Stopping,
    Finished,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admitted => "admitted",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Finished => "finished",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "admitted" => Some(Self::Admitted),
            "running" => Some(Self::Running),
            "stopping" => Some(Self::Stopping),
            "finished" => Some(Self::Finished),
            _ => None,
        }
    }
}
