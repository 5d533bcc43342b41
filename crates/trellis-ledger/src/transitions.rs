//! The run's state machine, explicit: which phase each kind of event leads to from each phase,
//! or why it is refused there. [`crate::apply`] consults it before its other rules, and a test
//! walks every (phase, event) pair through a real store.
//!
//! | phase \ event | `run_started` | `controller_attached`, `log`, `gap_event` | `node_started` | `node_completed`, `execution_voided`, `worker_process`, `token_usage` | `force_stop_requested` | `terminal` |
//! |---|---|---|---|---|---|---|
//! | `admitted` | → `running` | stays | refused | refused | → `stopping` | → `finished` |
//! | `running` | refused | stays | stays | stays | → `stopping` | → `finished` |
//! | `stopping` | refused | stays | refused | stays | refused | → `finished` |
//! | `finished` | refused | refused | refused | refused | refused | refused |
//!
//! `checkpoint_taken` and `gap_node_started` go with `node_started` (a dispatch);
//! `gap_node_settled` goes with `node_completed`.

use crate::ids::Phase;

/// The kind of a run event, without its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    RunStarted,
    ControllerAttached,
    NodeStarted,
    NodeCompleted,
    ExecutionVoided,
    Log,
    WorkerProcess,
    TokenUsage,
    ForceStopRequested,
    Terminal,
    GapEvent,
    CheckpointTaken,
    GapNodeStarted,
    GapNodeSettled,
}

impl EventKind {
    /// Every kind, in the order events are documented.
    pub const ALL: [EventKind; 14] = [
        Self::RunStarted,
        Self::ControllerAttached,
        Self::NodeStarted,
        Self::NodeCompleted,
        Self::ExecutionVoided,
        Self::Log,
        Self::WorkerProcess,
        Self::TokenUsage,
        Self::ForceStopRequested,
        Self::Terminal,
        Self::GapEvent,
        Self::CheckpointTaken,
        Self::GapNodeStarted,
        Self::GapNodeSettled,
    ];

    /// The `kind` tag of events of this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RunStarted => "run_started",
            Self::ControllerAttached => "controller_attached",
            Self::NodeStarted => "node_started",
            Self::NodeCompleted => "node_completed",
            Self::ExecutionVoided => "execution_voided",
            Self::Log => "log",
            Self::WorkerProcess => "worker_process",
            Self::TokenUsage => "token_usage",
            Self::ForceStopRequested => "force_stop_requested",
            Self::Terminal => "terminal",
            Self::GapEvent => "gap_event",
            Self::CheckpointTaken => "checkpoint_taken",
            Self::GapNodeStarted => "gap_node_started",
            Self::GapNodeSettled => "gap_node_settled",
        }
    }
}

impl Phase {
    /// Every phase, in life order.
    pub const ALL: [Phase; 4] = [
        Phase::Admitted,
        Phase::Running,
        Phase::Stopping,
        Phase::Finished,
    ];
}

/// The phase an event of `kind` leads to from `phase`, or why it may not happen there.
pub fn transition(phase: Phase, kind: EventKind) -> Result<Phase, &'static str> {
    use EventKind as E;
    use Phase as P;
    match (phase, kind) {
        (P::Finished, _) => Err("the run is finished; nothing may follow its terminal event"),
        (P::Admitted, E::RunStarted) => Ok(P::Running),
        (_, E::RunStarted) => Err("run_started is only valid while the run is admitted"),
        (_, E::ControllerAttached | E::Log | E::GapEvent) => Ok(phase),
        (P::Running, E::NodeStarted | E::CheckpointTaken | E::GapNodeStarted) => Ok(P::Running),
        (P::Stopping, E::NodeStarted | E::CheckpointTaken | E::GapNodeStarted) => {
            Err("no node may start after a force-stop request")
        }
        (P::Admitted, E::NodeStarted | E::CheckpointTaken | E::GapNodeStarted) => {
            Err("node_started requires a running run")
        }
        (
            P::Running | P::Stopping,
            E::NodeCompleted
            | E::ExecutionVoided
            | E::WorkerProcess
            | E::TokenUsage
            | E::GapNodeSettled,
        ) => Ok(phase),
        (
            P::Admitted,
            E::NodeCompleted
            | E::ExecutionVoided
            | E::WorkerProcess
            | E::TokenUsage
            | E::GapNodeSettled,
        ) => Err("an admitted run has no executions yet"),
        (P::Stopping, E::ForceStopRequested) => Err("force stop was already requested"),
        (_, E::ForceStopRequested) => Ok(P::Stopping),
        (_, E::Terminal) => Ok(P::Finished),
    }
}
