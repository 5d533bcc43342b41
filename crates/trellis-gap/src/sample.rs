//! One observation of the observation stream and when it was taken: what a reader of the
//! stream (a node body, or Python through the bridge) receives.

use serde_json::Value;

/// One observation and when it was taken.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub value: Value,
    /// Wall-clock time of the poll, seconds since the epoch.
    pub sampled_at: f64,
    /// Seconds between the poll and this read.
    pub age_s: f64,
}
