//! Small helpers the supervisor's files share: a log event of the run, and the kill-point
//! tests' hook that aborts the controller after a given step commit.

use trellis_ledger::{LogStream, RunEvent};

/// A log line of the run (or of one execution) in `stream`, at its default level.
pub(super) fn log_event(execution: Option<u64>, stream: LogStream, message: String) -> RunEvent {
    RunEvent::Log {
        execution,
        stream,
        level: stream.default_level(),
        message,
        timestamp_ms: trellis_ledger::store::now_ms(),
    }
}

/// Test hook, read by the controller: with `N`, it aborts right after its `N`-th step commit
/// (outcomes together with the dispatches they lead to), before starting any of those workers.
/// The kill-point tests use it to pin that a death between that commit and the spawn neither
/// loses nor repeats a dispatch. Unset (always, outside those tests), it costs nothing.
pub(crate) const DIE_AFTER_STEP_COMMIT_ENV: &str = "TRELLIS_TEST_DIE_AFTER_STEP_COMMIT";

pub(super) fn step_commits_until_death() -> Option<u64> {
    std::env::var(DIE_AFTER_STEP_COMMIT_ENV)
        .ok()
        .and_then(|text| text.parse().ok())
}
